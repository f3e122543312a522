"""RapidOCR 3.x (PP-OCR text detection and recognition on ONNX Runtime).

The wheel ships its models (``rapidocr/models``: PP-OCRv6 small detector and multilingual
recogniser, plus a 0/180 line classifier we do not use). We point RapidOCR at those files
explicitly: left to itself it resolves models by URL and downloads any file whose checksum it does
not find, which must never happen on an offline worker; a missing file is an ``OCR_FAILED`` at
warm-up instead.

Words: RapidOCR's word boxes (``return_word_box``: CTC character positions, a box per Latin word
and per CJK character) are used when they line up with the line's text; otherwise the line is
split on spaces and each word gets the share of the line's width its characters take.

Rotation: the page is read as given first, and asked which way is up only when that reading looks
turned (:func:`looks_turned`): most of its line boxes taller than wide (a page on its side: the
detector finds the lines, and the recogniser reads them with high scores, but as columns), or a
median line score under :data:`UPRIGHT_MEDIAN_SCORE` (upside down: the recogniser still emits
characters, with low scores). Then, when the Tesseract binary is present, its OSD decides (as in
:mod:`pagesight.ingestion.ocr.tesseract`), and a page it turns is read again; without it, or when
OSD keeps the page as it is, the first reading stands. On eval pages at 300 dpi, 12 English and 6
Japanese, upright pages with text scored a median of 0.99-1.0 (0.58 on one poor scan, which OSD
then leaves as it is) and had at most 14 % tall boxes; turned 180 degrees they scored 0.49-0.78,
turned 90 degrees 60-100 % of their boxes were tall. OSD took about a tenth of a page's time, so
upright pages, nearly all of an archive, save it; a turned page costs a second reading.

RapidOCR's own per-line 0/180 classifier (the packaged
``ch_ppocr_mobile_v2.0_cls``) is always off: it flips long upright lines by mistake, taking CER on
a 10-K page in 8 pt print from 0.3 % to 9.4 % (2.2 % to 8.9 % on an earnings release) at the same
speed, and on an upside-down page it left four of five lines unflipped (scores under its 0.9
threshold), so it does not even serve as a fallback.

Speed (issue 36; ``bench/bench_ocr.py`` reports each stage's seconds per page, from RapidOCR's own
timings, in ``stage_s_mean``). RapidOCR first shrinks a page to 2000 px on its longer side; with
its own detector bound (``limit_type="min"``, 736: the *shorter* side at least 736 px) the
detector then reads that whole 2000 px image, and detection is most of a page's time. The
settings under :class:`~pagesight.core.settings.RapidOcrOptions` are the knobs:

* ``det_limit_type="max"`` with ``det_limit_side_len`` bounds the detector's input instead; the
  line crops the recogniser reads are still cut from the 2000 px image, so recognition keeps its
  resolution and only the boxes come from a coarser map. The default, 1600, cut detection from
  2.1 to 1.3 s a page at the same CER (+0.0004) and kept every scan question; 1280 lost two.
* ``rec_batch_size``: RapidOCR already recognises a page's lines in batches, sorted by width so
  that a batch pads little; larger batches pad to a wider line and did not pay on two cores.
* ``int8_detection`` / ``int8_recognition``: dynamic-int8 copies made at warm-up
  (:mod:`pagesight.ingestion.ocr.quantise`), float models when no copy can be made or loaded.
  Off by default: on this machine's CPU (AVX-512 VNNI, ONNX Runtime 1.32, one thread, CPU
  seconds of one session run, float and int8 interleaved) the int8 detector took 1.85x the float
  one's time (``ConvInteger`` is not a fast path) and the int8 recogniser 0.9x (MatMuls only), a
  few percent of a page for an unmeasured change in CER.
* ``threads``: the runtime's threads for this worker (0 = one per core); with several OCR
  workers on one host, give each cores / workers.
* ``runtime``: OpenVINO or ONNX Runtime runs both models (the same ONNX files from the wheel).
  ``auto`` takes OpenVINO when it is installed (a PageSight dependency) and no int8 copy is asked
  for; a model OpenVINO fails to compile leaves the engine on ONNX Runtime with a warning.
  ``openvino_precision``: ``auto`` is bf16 on a CPU with bf16 instructions and f32 elsewhere
  (bf16 emulated on plain AVX-512 is slower than f32), resolved here rather than left to
  OpenVINO so that the engine can say what it ran. On this machine's CPU (2 cores, AVX-512 with
  BF16), page by page against ONNX Runtime with the same settings on 20 eval pages: f32 read
  every page exactly as ONNX Runtime did, detection in ~0.7x its time and recognition in
  ~0.92x; bf16 changed a few characters on 6 of the 20 pages, detection ~0.47x, recognition
  ~0.63x, a page ~0.58x; ``make bench-ocr`` put bf16's CER at +0.0000 (English) and +0.0002
  (Japanese) against f32's.

The engine (and its sessions) is built once per worker and kept across pages.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import re
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import RapidOcrOptions
from pagesight.ingestion.ocr.base import (
    OcrLine,
    OcrResult,
    OcrWord,
    PixelBox,
    clip_box,
    sort_lines_in_reading_order,
    union_box,
)
from pagesight.ingestion.ocr.preprocess import line_to_original_frame, rotate_clockwise
from pagesight.ingestion.ocr.quantise import default_cache_dir, int8_or_float
from pagesight.ingestion.ocr.tesseract import (
    detect_orientation,
    tesseract_languages,
    upright_rotation,
)

logger = logging.getLogger(__name__)

#: PP-OCRv6's recogniser is one multilingual model (Chinese, English, Japanese, Latin scripts).
RAPIDOCR_LANGUAGE = "multi"

#: A first reading whose median line score is below this may be upside down (module docstring).
UPRIGHT_MEDIAN_SCORE = 0.9
#: ... and one with at least this share of its line boxes taller than wide may lie on its side.
SIDEWAYS_TALL_SHARE = 0.5
#: A box is tall when its height exceeds its width by this factor.
TALL_RATIO = 1.5

_WHITESPACE = re.compile(r"\s+")

#: Operators ``int8_detection`` / ``int8_recognition`` quantise. The detector is all convolutions;
#: the recogniser's convolutions stay float, because ONNX Runtime's dynamic ``ConvInteger`` made
#: the recogniser 4x slower here (the transformer MatMuls alone: 0.9x).
INT8_OP_TYPES: dict[str, tuple[str, ...]] = {"det": ("Conv",), "rec": ("MatMul",)}

# A quadrilateral as RapidOCR returns it: four (x, y) points.
Quad = Sequence[Sequence[float]]


def packaged_model_paths() -> dict[str, Path]:
    """The detection and recognition ONNX files inside the rapidocr wheel."""
    import rapidocr

    models_dir = Path(rapidocr.__file__).resolve().parent / "models"
    paths: dict[str, Path] = {}
    for task in ("det", "rec"):
        found = sorted(models_dir.glob(f"*_{task}_*.onnx"))
        if len(found) != 1:
            raise PageSightError(
                ErrorCode.OCR_FAILED,
                Stage.OCR,
                f"expected one packaged RapidOCR {task} model in {models_dir}, found "
                f"{[p.name for p in found]}; reinstall rapidocr>=3.10 (its wheel ships the models)",
            )
        paths[task] = found[0]
    return paths


class RapidOcrEngine:
    """RapidOCR behind :class:`~pagesight.ingestion.ocr.base.OcrEngine`."""

    name = "rapidocr"

    def __init__(
        self, options: RapidOcrOptions | None = None, *, detect_orientation: bool = True
    ) -> None:
        self.options = options or RapidOcrOptions()
        self._want_orientation = detect_orientation
        self._use_osd = False
        self._engine: Any = None
        #: The ONNX files the loaded engine reads (the int8 copies, or the float models).
        self.model_paths: dict[str, Path] = {}
        #: What runs them once warmed up: "openvino" or "onnxruntime", and OpenVINO's precision.
        self.runtime = ""
        self.precision = ""

    def warm_up(self) -> None:
        """Load the detection and recognition models from the wheel; check for Tesseract OSD."""
        if self._engine is not None:
            return
        try:
            import rapidocr  # noqa: F401  (fail here, with a clear message, not on a page)
        except ImportError as exc:
            raise PageSightError(
                ErrorCode.OCR_FAILED, Stage.OCR, f"rapidocr is not installed: {exc}"
            ) from exc
        if self._want_orientation:
            try:
                self._use_osd = "osd" in tesseract_languages()
            except PageSightError as exc:
                logger.info("no Tesseract OSD for RapidOCR page orientation (%s)", exc.message)
        models = packaged_model_paths()
        options = self.options
        det_path, rec_path = models["det"], models["rec"]
        if options.int8_detection:
            det_path = int8_or_float(det_path, options.model_cache_dir, INT8_OP_TYPES["det"])
        if options.int8_recognition:
            rec_path = int8_or_float(rec_path, options.model_cache_dir, INT8_OP_TYPES["rec"])
        try:
            engine = _load_engine(self._params(det_path, rec_path))
        except Exception as exc:
            if (det_path, rec_path) == (models["det"], models["rec"]):
                raise PageSightError(
                    ErrorCode.OCR_FAILED, Stage.OCR, f"RapidOCR failed to load its models: {exc}"
                ) from exc
            # A cached int8 copy that does not load (truncated, made by another runtime) must not
            # stop the worker: the float models are the ones the wheel guarantees.
            logger.warning("RapidOCR int8 models failed to load (%s); using the float models", exc)
            det_path, rec_path = models["det"], models["rec"]
            try:
                engine = _load_engine(self._params(det_path, rec_path))
            except Exception as float_exc:
                raise PageSightError(
                    ErrorCode.OCR_FAILED,
                    Stage.OCR,
                    f"RapidOCR failed to load its models: {float_exc}",
                ) from float_exc
        runtime, precision = "onnxruntime", ""
        if resolve_runtime(options) == "openvino":
            try:
                precision = _run_on_openvino(engine, det_path, rec_path, options)
                runtime = "openvino"
            except Exception as exc:
                # OpenVINO is a speed choice: the ONNX Runtime sessions RapidOCR built stay.
                logger.warning(
                    "OpenVINO could not run RapidOCR's models (%s); using ONNX Runtime", exc
                )
        self.model_paths = {"det": det_path, "rec": rec_path}
        self.runtime, self.precision = runtime, precision
        self._engine = engine

    def _params(self, det_path: Path, rec_path: Path) -> dict[str, Any]:
        options = self.options
        return {
            # "warning" would log every page without text ("text detection result is empty").
            "Global.log_level": "error",
            # Our own min_confidence filter runs after word alignment; RapidOCR's own filter
            # drops lines without dropping their word boxes, which shifts the two out of step.
            "Global.text_score": 0.0,
            # The line classifier does more harm than good (module docstring).
            "Global.use_cls": False,
            "Det.model_path": str(det_path),
            "Rec.model_path": str(rec_path),
            "Det.limit_side_len": options.det_limit_side_len,
            "Det.limit_type": options.det_limit_type,
            "Rec.rec_batch_num": options.rec_batch_size,
            # -1 is RapidOCR's "ONNX Runtime decides" (one thread per core).
            "EngineConfig.onnxruntime.intra_op_num_threads": options.threads or -1,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1 if options.threads else -1,
        }

    def recognize(self, image: Image.Image) -> OcrResult:
        self.warm_up()
        original_size = image.size
        page = image if image.mode == "RGB" else image.convert("RGB")
        rotation, output, orientation_s = self._read_upright(page)
        upright_size = page.size if rotation in (0, 180) else (page.height, page.width)
        lines = _lines_from_output(output, upright_size, self.options.min_confidence)
        lines = sort_lines_in_reading_order(lines)
        return OcrResult(
            lines=[line_to_original_frame(line, rotation, original_size) for line in lines],
            rotation_applied=rotation,
            image_size=original_size,
            language=RAPIDOCR_LANGUAGE,
            engine=self.name,
            stage_seconds={"orientation": orientation_s, **_stage_seconds(output)},
        )

    def _read_upright(self, page: Image.Image) -> tuple[int, Any, float]:
        """The clockwise turn applied, RapidOCR's reading of the turned page, and the seconds
        spent deciding the turn (OSD, plus a first reading that turned out to be of a turned
        page): OSD first (``orientation="always"``), or only when the first reading looks
        turned (module docstring)."""
        if not self._use_osd:
            return 0, self._read(page), 0.0
        if self.options.orientation == "always":
            rotation, orientation_s = _osd_turn(page)
            return rotation, self._read(rotate_clockwise(page, rotation)), orientation_s
        output = self._read(page)
        if not looks_turned(output):
            return 0, output, 0.0
        rotation, orientation_s = _osd_turn(page)
        if not rotation:
            return 0, output, orientation_s
        orientation_s += sum(_stage_seconds(output).values())
        return rotation, self._read(rotate_clockwise(page, rotation)), orientation_s

    def _read(self, image: Image.Image) -> Any:
        """RapidOCR's output for ``image`` as it lies, with word boxes where it can give them."""
        try:
            return self._engine(image, return_word_box=True)
        except Exception as first_exc:
            # RapidOCR 3.10 drops lines without word boxes from its word list and then indexes
            # that list by line number, which can fail; the lines themselves are fine, so read
            # the page again without word boxes (words then get proportional boxes).
            logger.debug("RapidOCR with word boxes failed (%s); retrying without", first_exc)
            try:
                return self._engine(image, return_word_box=False)
            except Exception as exc:
                raise PageSightError(
                    ErrorCode.OCR_FAILED, Stage.OCR, f"RapidOCR failed on the page: {exc}"
                ) from exc


def resolve_runtime(options: RapidOcrOptions) -> str:
    """The runtime ``options`` ask for: ``auto`` is OpenVINO when it is importable and no int8
    copy (ONNX Runtime's quantised operators) is asked for, else ONNX Runtime."""
    if options.runtime != "auto":
        return options.runtime
    if options.int8_detection or options.int8_recognition:
        return "onnxruntime"
    return "openvino" if importlib.util.find_spec("openvino") is not None else "onnxruntime"


class OpenVinoSession:
    """One ONNX model compiled by OpenVINO for the CPU, called the way RapidOCR calls a session
    (a batch in, the first output out).

    Built here rather than through RapidOCR's own OpenVINO engine because that one cannot set the
    inference precision (module docstring).
    """

    def __init__(self, core: Any, model_path: Path, *, precision: str, threads: int) -> None:
        config: dict[str, Any] = {
            "INFERENCE_PRECISION_HINT": precision,
            "PERFORMANCE_HINT": "LATENCY",
        }
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        self.compiled_model = core.compile_model(str(model_path), "CPU", config)
        self._request = self.compiled_model.create_infer_request()

    def __call__(self, batch: Any) -> Any:
        self._request.infer([batch])
        # A view of the request's own output buffer, valid until the next call: RapidOCR decodes
        # each batch before it runs the next. Not copied, because the recogniser's output is
        # batch x steps x ~18,000 characters of float32 (tens of MB a batch).
        return self._request.get_output_tensor(0).data


def openvino_cache_dir(model_cache_dir: Path | None) -> Path | None:
    """Where OpenVINO keeps the models it compiled (``<model_cache_dir>/openvino``), or None when
    that directory cannot be made.

    Each file is parsed in a fresh child process, which builds its own engine: compiling both
    models costs ~0.4 s there, loading them from this cache ~0.1 s. OpenVINO keys a cached blob
    by the model, the compile settings and the device, and compiles afresh when a blob does not
    load.
    """
    path = (model_cache_dir or default_cache_dir()) / "openvino"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        logger.info("no OpenVINO model cache at %s (%s): compiling on every start", path, exc)
        return None
    return path


def openvino_precision(core: Any, asked: str) -> str:
    """``asked``, or for ``auto`` bf16 where the CPU has bf16 instructions and f32 elsewhere."""
    if asked != "auto":
        return asked
    return "bf16" if "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES") else "f32"


def _run_on_openvino(engine: Any, det_path: Path, rec_path: Path, options: RapidOcrOptions) -> str:
    """Swap the detector's and recogniser's ONNX Runtime sessions for OpenVINO ones; returns the
    precision they run at.

    Both are compiled before either is swapped, so a failure leaves the engine as it was. The
    recogniser keeps what it read at load (its character list, from the ONNX metadata); only the
    callable that runs a batch changes. ``text_det``/``text_rec``/``session`` are RapidOCR's
    attribute names, not public API: if a release renames them, this raises and the caller stays
    on ONNX Runtime.
    """
    import openvino

    detector, recogniser = engine.text_det, engine.text_rec
    if detector is None or recogniser is None or not hasattr(detector, "session"):
        raise RuntimeError("this RapidOCR release does not expose its detector and recogniser")
    core = openvino.Core()
    cache_dir = openvino_cache_dir(options.model_cache_dir)
    if cache_dir is not None:
        core.set_property({"CACHE_DIR": str(cache_dir)})
    precision = openvino_precision(core, options.openvino_precision)
    sessions = [
        OpenVinoSession(core, path, precision=precision, threads=options.threads)
        for path in (det_path, rec_path)
    ]
    detector.session, recogniser.session = sessions
    return precision


def _osd_turn(page: Image.Image) -> tuple[int, float]:
    """The clockwise turn Tesseract's OSD makes upright (0 when unsure), and its seconds."""
    started = time.perf_counter()
    rotation = upright_rotation(detect_orientation(page.convert("L")))
    return rotation, time.perf_counter() - started


def looks_turned(output: Any) -> bool:
    """Whether RapidOCR's reading of a page suggests the page is not upright (module docstring):
    most line boxes tall, or a low median line score. A reading without lines does not."""
    boxes = getattr(output, "boxes", None)
    scores = getattr(output, "scores", None)
    if boxes is None or scores is None or len(scores) == 0:
        return False
    tall = sum(1 for quad in boxes if _is_tall(_quad_to_box(quad)))
    if tall >= SIDEWAYS_TALL_SHARE * len(boxes):
        return True
    return statistics.median(float(s) for s in scores) < UPRIGHT_MEDIAN_SCORE


def _is_tall(box: PixelBox) -> bool:
    x0, y0, x1, y1 = box
    return (y1 - y0) > TALL_RATIO * (x1 - x0)


def _load_engine(params: dict[str, Any]) -> Any:
    from rapidocr import RapidOCR

    engine = RapidOCR(params=params)
    # RapidOCR loads each model on first use; loading them here moves the cost (and any failure)
    # to start-up. These loaders are not public API: if a release renames them, the models simply
    # load on the first page.
    for loader in ("_load_det_model", "_load_rec_model"):
        if callable(getattr(engine, loader, None)):
            getattr(engine, loader)()
    return engine


def _stage_seconds(output: Any) -> dict[str, float]:
    """RapidOCR's own timings (``elapse_list``: detection, classifier, recognition), if any."""
    elapsed = getattr(output, "elapse_list", None) or ()
    names = ("detection", "classifier", "recognition")
    return {name: float(s) for name, s in zip(names, elapsed, strict=False) if s is not None}


def _lines_from_output(output: Any, size: tuple[int, int], min_confidence: float) -> list[OcrLine]:
    boxes = getattr(output, "boxes", None)
    texts = getattr(output, "txts", None)
    scores = getattr(output, "scores", None)
    if boxes is None or texts is None or scores is None:
        return []  # nothing detected (RapidOCR returns an empty output object)
    width, height = size
    word_groups = _align_word_groups(texts, getattr(output, "word_results", ()) or ())

    lines: list[OcrLine] = []
    for quad, text, score, group in zip(boxes, texts, scores, word_groups, strict=True):
        text = str(text).strip()
        if not text or float(score) < min_confidence:
            continue
        line_box = clip_box(_quad_to_box(quad), width, height)
        if group is not None:
            words = [
                OcrWord(
                    text=str(word_text),
                    bbox_px=clip_box(_quad_to_box(word_quad), width, height),
                    confidence=_unit(word_score),
                )
                for word_text, word_score, word_quad in group
                if str(word_text).strip()
            ]
        else:
            words = _split_line_into_words(text, line_box, _unit(score))
        lines.append(
            OcrLine(
                text=text,
                bbox_px=union_box([line_box, *(w.bbox_px for w in words)]) if words else line_box,
                confidence=_unit(score),
                words=words,
            )
        )
    return lines


def _align_word_groups(
    texts: Sequence[str], word_results: Sequence[Any]
) -> list[list[tuple[str, float, Quad]] | None]:
    """Pair each line with its word boxes, or ``None`` where RapidOCR gave none for it.

    RapidOCR omits lines without word boxes from ``word_results`` (and returns raw decoder output
    when any line lacks them), so the two sequences are matched by text, not index: a group
    belongs to a line when its words, concatenated, spell the line without spaces.
    """
    groups = [list(group) for group in word_results if _is_word_group(group)]
    aligned: list[list[tuple[str, float, Quad]] | None] = []
    next_group = 0
    for text in texts:
        squashed = _WHITESPACE.sub("", str(text))
        if next_group < len(groups):
            candidate = groups[next_group]
            if _WHITESPACE.sub("", "".join(str(w[0]) for w in candidate)) == squashed:
                aligned.append(candidate)
                next_group += 1
                continue
        aligned.append(None)
    return aligned


def _is_word_group(group: Any) -> bool:
    if not isinstance(group, (tuple, list)) or not group:
        return False
    for item in group:
        if not (isinstance(item, (tuple, list)) and len(item) == 3 and isinstance(item[0], str)):
            return False
        quad = item[2]
        if quad is None or len(quad) != 4:
            return False
    return True


def _split_line_into_words(text: str, line_box: PixelBox, confidence: float) -> list[OcrWord]:
    """Words of a line without word boxes: split on spaces, widths proportional to characters."""
    x0, y0, x1, y1 = line_box
    per_char = (x1 - x0) / max(1, len(text))
    return [
        OcrWord(
            text=match.group(),
            bbox_px=(
                x0 + math.floor(match.start() * per_char),
                y0,
                x0 + math.ceil(match.end() * per_char),
                y1,
            ),
            confidence=confidence,
        )
        for match in re.finditer(r"\S+", text)
    ]


def _quad_to_box(quad: Quad) -> PixelBox:
    xs = [float(point[0]) for point in quad]
    ys = [float(point[1]) for point in quad]
    return (math.floor(min(xs)), math.floor(min(ys)), math.ceil(max(xs)), math.ceil(max(ys)))


def _unit(score: Any) -> float:
    return min(max(float(score), 0.0), 1.0)
