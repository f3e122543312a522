"""RapidOCR's speed settings (issue 36): they reach OpenVINO or ONNX Runtime, and int8 and
OpenVINO fall back cleanly.

The int8 copies are made from the models the rapidocr wheel ships, into a temporary cache dir; a
quantiser that is missing or fails, or a cached copy that does not load, must leave the engine
reading with the float models, never failing the worker. Likewise a model OpenVINO cannot compile
leaves the engine on ONNX Runtime.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from pagesight.core.settings import RapidOcrOptions, Settings
from pagesight.ingestion.ocr import quantise
from pagesight.ingestion.ocr import rapid as rapid_module
from pagesight.ingestion.ocr.rapid import (
    INT8_OP_TYPES,
    OpenVinoSession,
    RapidOcrEngine,
    openvino_precision,
    packaged_model_paths,
    resolve_runtime,
)
from tests.unit.ingestion.test_ocr import ENGLISH_LINES, _located_word_recall, _make_page


def _read_drawn_page(engine: RapidOcrEngine) -> float:
    image, truth = _make_page(ENGLISH_LINES)
    result = engine.recognize(image)
    assert len(result.lines) == len(ENGLISH_LINES)
    # The per-stage profile bench/bench_ocr.py reports.
    assert {"orientation", "detection", "recognition"} <= result.stage_seconds.keys()
    return _located_word_recall(result, truth)


def test_speed_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGESIGHT_PARSE__OCR__KIND", "rapidocr")
    monkeypatch.setenv("PAGESIGHT_PARSE__OCR__DET_LIMIT_TYPE", "max")
    monkeypatch.setenv("PAGESIGHT_PARSE__OCR__DET_LIMIT_SIDE_LEN", "1280")
    monkeypatch.setenv("PAGESIGHT_PARSE__OCR__INT8_RECOGNITION", "false")
    monkeypatch.setenv("PAGESIGHT_PARSE__OCR__THREADS", "1")
    ocr = Settings().parse.ocr
    assert isinstance(ocr, RapidOcrOptions)
    assert (ocr.det_limit_type, ocr.det_limit_side_len) == ("max", 1280)
    assert (ocr.int8_recognition, ocr.threads) == (False, 1)
    with pytest.raises(ValueError):
        RapidOcrOptions(det_limit_side_len=10)
    with pytest.raises(ValueError):
        RapidOcrOptions(rec_batch_size=0)


def test_options_reach_rapidocr_and_onnx_runtime(tmp_path: Path) -> None:
    options = RapidOcrOptions(
        runtime="onnxruntime",
        det_limit_type="max",
        det_limit_side_len=960,
        rec_batch_size=16,
        threads=1,
        int8_detection=False,
        int8_recognition=False,
        model_cache_dir=tmp_path,
        fallback=None,
    )
    engine = RapidOcrEngine(options, detect_orientation=False)
    engine.warm_up()
    assert engine.runtime == "onnxruntime"
    cfg = engine._engine.cfg
    assert (cfg.Det.limit_side_len, cfg.Det.limit_type) == (960, "max")
    assert cfg.Rec.rec_batch_num == 16
    for stage in (engine._engine.text_det, engine._engine.text_rec):
        assert stage.session.session.get_session_options().intra_op_num_threads == 1
    assert engine.model_paths == packaged_model_paths()
    assert list(tmp_path.iterdir()) == []  # float models asked for: nothing quantised
    assert _read_drawn_page(engine) >= 0.9


def test_int8_models_are_made_once_into_the_cache_and_read_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = RapidOcrOptions(
        int8_detection=True, int8_recognition=True, model_cache_dir=tmp_path, fallback=None
    )
    engine = RapidOcrEngine(options, detect_orientation=False)
    engine.warm_up()
    floats = packaged_model_paths()
    for task in ("det", "rec"):
        path = engine.model_paths[task]
        assert path.parent == tmp_path and path.is_file()
        assert path == quantise.int8_model_path(floats[task], tmp_path, INT8_OP_TYPES[task])
        assert path.stat().st_size < 0.7 * floats[task].stat().st_size  # int8 weights
    assert not list(tmp_path.glob(".*partial*"))
    assert _read_drawn_page(engine) >= 0.9

    # A second worker finds the copies: the quantiser is not called again.
    import onnxruntime.quantization

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("quantised again")

    monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", refuse)
    again = RapidOcrEngine(options, detect_orientation=False)
    again.warm_up()
    assert again.model_paths == engine.model_paths


def test_without_a_quantiser_the_engine_reads_with_the_float_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime.quantization", None)  # import fails
    options = RapidOcrOptions(
        int8_detection=True, int8_recognition=True, model_cache_dir=tmp_path, fallback=None
    )
    engine = RapidOcrEngine(options, detect_orientation=False)
    with caplog.at_level(logging.WARNING, logger=quantise.__name__):
        engine.warm_up()
    assert engine.model_paths == packaged_model_paths()
    assert "using the float model" in caplog.text
    assert _read_drawn_page(engine) >= 0.9


def test_an_unwritable_cache_dir_falls_back_to_the_float_model(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    source = packaged_model_paths()["rec"]
    assert quantise.int8_or_float(source, not_a_dir, INT8_OP_TYPES["rec"]) == source


def test_a_corrupt_cached_int8_model_falls_back_to_the_float_models(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    floats = packaged_model_paths()
    corrupt = quantise.int8_model_path(floats["det"], tmp_path, INT8_OP_TYPES["det"])
    corrupt.write_bytes(b"not an onnx model")
    options = RapidOcrOptions(int8_detection=True, model_cache_dir=tmp_path, fallback=None)
    engine = RapidOcrEngine(options, detect_orientation=False)
    with caplog.at_level(logging.WARNING):
        engine.warm_up()
    assert engine.model_paths == floats
    assert "using the float models" in caplog.text
    assert _read_drawn_page(engine) >= 0.9


def test_runtime_auto_is_openvino_unless_int8_is_asked_for_or_it_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert resolve_runtime(RapidOcrOptions()) == "openvino"
    assert resolve_runtime(RapidOcrOptions(int8_recognition=True)) == "onnxruntime"
    assert resolve_runtime(RapidOcrOptions(runtime="onnxruntime")) == "onnxruntime"
    with pytest.raises(ValueError, match="onnxruntime"):
        RapidOcrOptions(runtime="openvino", int8_detection=True)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "openvino" else real_find_spec(name, *a),
    )
    assert resolve_runtime(RapidOcrOptions()) == "onnxruntime"
    assert resolve_runtime(RapidOcrOptions(runtime="openvino")) == "openvino"


def test_openvino_at_f32_reads_exactly_what_onnx_runtime_reads() -> None:
    image, _ = _make_page(ENGLISH_LINES)
    readings = {}
    for runtime in ("openvino", "onnxruntime"):
        options = RapidOcrOptions(runtime=runtime, openvino_precision="f32", fallback=None)
        engine = RapidOcrEngine(options, detect_orientation=False)
        engine.warm_up()
        assert engine.runtime == runtime
        assert engine.precision == ("f32" if runtime == "openvino" else "")
        result = engine.recognize(image)
        readings[runtime] = [(line.text, line.bbox_px) for line in result.lines]
    assert len(readings["openvino"]) == len(ENGLISH_LINES)
    assert readings["openvino"] == readings["onnxruntime"]


def test_threads_and_precision_reach_openvino() -> None:
    options = RapidOcrOptions(threads=1, openvino_precision="f32", fallback=None)
    engine = RapidOcrEngine(options, detect_orientation=False)
    engine.warm_up()
    for stage in (engine._engine.text_det, engine._engine.text_rec):
        assert isinstance(stage.session, OpenVinoSession)
        compiled = stage.session.compiled_model
        assert compiled.get_property("INFERENCE_NUM_THREADS") == 1
        assert str(compiled.get_property("INFERENCE_PRECISION_HINT")) in {
            "f32",
            "<Type: 'float32'>",
        }
    assert _read_drawn_page(engine) >= 0.9


class _FakeCore:
    def __init__(self, capabilities: list[str]) -> None:
        self.capabilities = capabilities

    def get_property(self, device: str, name: str) -> Any:
        assert (device, name) == ("CPU", "OPTIMIZATION_CAPABILITIES")
        return self.capabilities


def test_auto_precision_is_bf16_only_where_the_cpu_has_bf16() -> None:
    assert openvino_precision(_FakeCore(["FP32", "BF16", "INT8"]), "auto") == "bf16"
    assert openvino_precision(_FakeCore(["FP32", "INT8"]), "auto") == "f32"
    assert openvino_precision(_FakeCore(["FP32"]), "bf16") == "bf16"
    assert openvino_precision(_FakeCore(["BF16"]), "f32") == "f32"


def test_a_model_openvino_cannot_compile_leaves_the_engine_on_onnx_runtime(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no CPU plugin")

    monkeypatch.setattr(rapid_module, "OpenVinoSession", refuse)
    engine = RapidOcrEngine(RapidOcrOptions(fallback=None), detect_orientation=False)
    with caplog.at_level(logging.WARNING, logger=rapid_module.__name__):
        engine.warm_up()
    assert (engine.runtime, engine.precision) == ("onnxruntime", "")
    assert "no CPU plugin" in caplog.text and "using ONNX Runtime" in caplog.text
    assert _read_drawn_page(engine) >= 0.9


def test_openvino_keeps_its_compiled_models_in_the_cache_dir(tmp_path: Path) -> None:
    options = RapidOcrOptions(model_cache_dir=tmp_path, fallback=None)
    first = RapidOcrEngine(options, detect_orientation=False)
    first.warm_up()
    assert first.runtime == "openvino"
    blobs = sorted((tmp_path / "openvino").iterdir())
    assert len(blobs) >= 2  # one compiled blob per model (detector, recogniser)
    again = RapidOcrEngine(options, detect_orientation=False)
    again.warm_up()  # loads the blobs: nothing new is compiled into the cache
    assert sorted((tmp_path / "openvino").iterdir()) == blobs
    assert again.runtime == "openvino"
    assert _read_drawn_page(again) >= 0.9


def test_an_unwritable_cache_dir_leaves_openvino_compiling_every_start(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    assert rapid_module.openvino_cache_dir(not_a_dir) is None
    engine = RapidOcrEngine(
        RapidOcrOptions(model_cache_dir=not_a_dir, fallback=None), detect_orientation=False
    )
    engine.warm_up()
    assert engine.runtime == "openvino"
    assert _read_drawn_page(engine) >= 0.9
