"""The verified ONNX cache of the text embedder (``pagesight.models.onnx_encoder``): a later process
loads the recorded export without torch and gets PyTorch's vectors; a changed model file,
option or library version, and a damaged cache file, all send the load back through PyTorch.

The first load of the packaged MiniLM (module fixture) exports it once; tests that damage the
cache work on a copy of that cache folder, and models are "changed" in copies of the model folder
whose weights are symlinks (a copy with the same contents has the same key).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pagesight.core.settings import EmbedderOptions
from pagesight.models import onnx_encoder
from pagesight.models.onnx_encoder import AGREEMENT, verified_cache_key
from pagesight.models.text_embedder import SentenceTransformerEmbedder, packaged_model_path

os.environ["HF_HUB_OFFLINE"] = "1"

TEXTS = [
    "Fuel prices remain the largest cost risk.",
    "東京の売上",
    "x",
    "",
    "  Revenue by REGION, table 3 (in millions) ",
    "a " * 300,
]


@pytest.fixture(scope="module")
def torch_reference() -> SentenceTransformerEmbedder:
    model = SentenceTransformerEmbedder(EmbedderOptions(device="cpu", backend="torch"))
    model.warm_up()
    return model


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache folder holding the verified export of the packaged model."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    first = SentenceTransformerEmbedder(_options(cache))
    assert first.backend == "onnx"
    assert len(list(cache.glob("*.verified.json"))) == 1
    yield cache


@pytest.fixture
def load_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Sources loaded through PyTorch (sentence-transformers) during the test."""
    calls: list[str] = []
    original = SentenceTransformerEmbedder._load_torch

    def spy(self: SentenceTransformerEmbedder, device: str, local: Any, source: str) -> Any:
        calls.append(source)
        return original(self, device, local, source)

    monkeypatch.setattr(SentenceTransformerEmbedder, "_load_torch", spy)
    return calls


def _options(cache: Path, **overrides: Any) -> EmbedderOptions:
    return EmbedderOptions(device="cpu", backend="onnx", onnx_cache_dir=cache, **overrides)


def _agree(expected: np.ndarray, got: np.ndarray) -> None:
    assert got.shape == expected.shape and got.dtype == np.float32
    assert float((expected * got).sum(axis=1).min()) >= AGREEMENT


def _cache_copy(recorded: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "cache"
    shutil.copytree(recorded, copy)
    return copy


def _model_copy(tmp_path: Path) -> Path:
    """The packaged model's folder, small files copied and the weights symlinked."""
    source = packaged_model_path()
    copy = tmp_path / "model"
    for path in source.rglob("*"):
        target = copy / path.relative_to(source)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.stat().st_size > 1_000_000:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return copy


def test_the_recorded_export_gives_the_torch_vectors_without_loading_torch(
    recorded: Path, torch_reference: SentenceTransformerEmbedder, load_calls: list[str]
) -> None:
    cached = SentenceTransformerEmbedder(_options(recorded))
    got = cached.embed_documents(TEXTS)
    assert load_calls == [] and cached.backend == "onnx" and cached.dim == 384
    _agree(torch_reference.embed_documents(TEXTS), got)
    _agree(torch_reference.embed_query(TEXTS[0])[None], cached.embed_query(TEXTS[0])[None])
    # the same vectors as the export checked against PyTorch in this process (first load)
    verified = SentenceTransformerEmbedder(_options(recorded))
    verified._load_verified = lambda key: False  # type: ignore[method-assign]
    np.testing.assert_allclose(verified.embed_documents(TEXTS), got, atol=1e-6)
    assert load_calls == [str(packaged_model_path())]


def test_a_fresh_process_on_the_recorded_export_imports_no_torch(recorded: Path) -> None:
    script = (
        "import sys; from pathlib import Path\n"
        "from pagesight.core.settings import EmbedderOptions\n"
        "from pagesight.models.text_embedder import SentenceTransformerEmbedder\n"
        "options = EmbedderOptions(device='cpu', onnx_cache_dir=Path(sys.argv[1]))\n"
        "e = SentenceTransformerEmbedder(options)\n"
        "v = e.embed_query('fuel cost risk')\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print(e.backend, v.shape[0], heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(recorded)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.stdout.split("\n")[0] == "onnx 384 []"


def test_the_key_follows_file_contents_not_paths_or_stamps(recorded: Path, tmp_path: Path) -> None:
    copy = _model_copy(tmp_path)
    key = verified_cache_key(packaged_model_path(), recorded, {"max_seq_length": None})
    assert verified_cache_key(copy, recorded, {"max_seq_length": None}) == key
    readme = copy / "README.md"
    stat = readme.stat()
    text = readme.read_bytes()
    readme.write_bytes(text.replace(b"e", b"E", 1))  # same size, and the mtime put back
    os.utime(readme, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = verified_cache_key(copy, recorded, {"max_seq_length": None})
    assert changed != key
    readme.write_bytes(text)
    assert verified_cache_key(copy, recorded, {"max_seq_length": None}) == key
    assert verified_cache_key(copy, recorded, {"max_seq_length": 128}) != key


def test_the_key_follows_library_versions(recorded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = verified_cache_key(packaged_model_path(), recorded, {"max_seq_length": None})
    real = onnx_encoder.importlib.metadata.version

    def version(name: str) -> str:
        return "0.0.1" if name == "transformers" else real(name)

    monkeypatch.setattr(onnx_encoder.importlib.metadata, "version", version)
    assert verified_cache_key(packaged_model_path(), recorded, {"max_seq_length": None}) != key


def test_a_changed_model_file_is_verified_again(
    recorded: Path, tmp_path: Path, load_calls: list[str]
) -> None:
    cache = _cache_copy(recorded, tmp_path)
    copy = _model_copy(tmp_path)
    same = SentenceTransformerEmbedder(_options(cache, model=str(copy)))
    assert same.backend == "onnx" and load_calls == []  # same contents: the record serves
    pooling = copy / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    changed = SentenceTransformerEmbedder(_options(cache, model=str(copy)))
    got = changed.embed_documents(TEXTS)
    assert load_calls == [str(copy)] and changed.backend == "onnx"
    assert len(list(cache.glob("*.verified.json"))) == 2
    torch_cls = SentenceTransformerEmbedder(
        EmbedderOptions(device="cpu", backend="torch", model=str(copy))
    )
    _agree(torch_cls.embed_documents(TEXTS), got)
    assert float((same.embed_documents(TEXTS)[:1] * got[:1]).sum()) < AGREEMENT  # not mean


def test_a_changed_option_is_verified_again(
    recorded: Path, tmp_path: Path, load_calls: list[str]
) -> None:
    cache = _cache_copy(recorded, tmp_path)
    short = SentenceTransformerEmbedder(_options(cache, max_seq_length=16))
    got = short.embed_documents(TEXTS)
    assert load_calls == [str(packaged_model_path())]
    again = SentenceTransformerEmbedder(_options(cache, max_seq_length=16))
    np.testing.assert_allclose(again.embed_documents(TEXTS), got, atol=1e-6)
    assert len(load_calls) == 1  # the second load used the new record
    torch_short = SentenceTransformerEmbedder(
        EmbedderOptions(device="cpu", backend="torch", max_seq_length=16)
    )
    _agree(torch_short.embed_documents(TEXTS), got)
    full = SentenceTransformerEmbedder(_options(cache)).embed_documents(TEXTS)
    assert float((got * full).sum(axis=1).min()) < AGREEMENT  # long texts: 16 tokens, not 256


@pytest.mark.parametrize("damage", ["record", "weights", "tokenizer", "graph"])
def test_a_damaged_cache_file_is_ignored_and_rebuilt(
    damage: str,
    recorded: Path,
    tmp_path: Path,
    torch_reference: SentenceTransformerEmbedder,
    load_calls: list[str],
) -> None:
    cache = _cache_copy(recorded, tmp_path)
    weights = {path.name for path in cache.glob("*.onnx.data")}
    if damage == "record":
        target = next(cache.glob("*.verified.json"))
        target.write_text('{"format": 2, "key": ')
    elif damage == "weights":
        target = next(cache.glob("*.onnx.data"))
        with target.open("r+b") as handle:  # same size, one weight changed
            handle.seek(target.stat().st_size // 2)
            handle.write(b"\x7f\x7f\x7f\x7f")
    elif damage == "tokenizer":
        target = next(cache.glob("*.tokenizer.json"))
        text = target.read_text()
        assert '"lowercase":true' in text
        target.write_text(text.replace('"lowercase":true', '"lowercase":false'))
    else:
        target = next(cache.glob("*[0-9a-f].onnx"))
        target.write_bytes(b"not a protobuf")
    rebuilt = SentenceTransformerEmbedder(_options(cache))
    _agree(torch_reference.embed_documents(TEXTS), rebuilt.embed_documents(TEXTS))
    assert load_calls == [str(packaged_model_path())] and rebuilt.backend == "onnx"
    record = json.loads(next(cache.glob("*.verified.json")).read_text())
    assert record["format"] == onnx_encoder.CACHE_FORMAT
    exported_again = {path.name for path in cache.glob("*.onnx.data")} != weights
    assert exported_again == (damage in ("weights", "graph"))  # changed files are not reused
    after = SentenceTransformerEmbedder(_options(cache))  # the rebuilt record serves again
    _agree(torch_reference.embed_documents(TEXTS), after.embed_documents(TEXTS))
    assert len(load_calls) == 1
