"""int8 copies of RapidOCR's ONNX models, made once per worker host and kept in a cache dir.

ONNX Runtime's dynamic quantisation (``onnxruntime.quantization.quantize_dynamic``: int8 weights,
activations quantised per call) needs no calibration data, so the copy is made offline from the
float model the rapidocr wheel ships, in well under a second, at ``warm_up``. The float model is
never replaced: the int8 file lives in ``cache_dir`` under a name keyed by the float file's
content and the onnxruntime version (a new wheel or runtime makes a new copy), written to a
temporary name and renamed into place so that concurrent workers never load half a file.

Anything that stops the copy (no ``onnxruntime.quantization`` or ``onnx`` module, a read-only
cache dir, a quantiser error) leaves the engine on the float model with a warning: int8 is a
speed choice, not a reason for a worker to refuse pages.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

logger = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/pagesight/ocr`` (``~/.cache/pagesight/ocr``), beside the text encoder's."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pagesight" / "ocr"


def _content_key(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    try:
        runtime = importlib.metadata.version("onnxruntime")
    except importlib.metadata.PackageNotFoundError:
        runtime = "unknown"
    digest.update(runtime.encode())
    return digest.hexdigest()[:16]


def int8_model_path(source: Path, cache_dir: Path, op_types: Sequence[str]) -> Path:
    """Where the int8 copy of ``source`` quantising ``op_types`` lives (it may not exist yet)."""
    ops = "-".join(sorted(op_types)).lower()
    return cache_dir / f"{source.stem}.{_content_key(source)}.{ops}.int8.onnx"


def quantise_dynamic(source: Path, cache_dir: Path, op_types: Sequence[str]) -> Path:
    """The int8 copy of ``source`` (``op_types`` quantised), made now unless already cached.

    Raises whatever the quantiser or the file system raises; :func:`int8_or_float` is the
    forgiving entry point.
    """
    target = int8_model_path(source, cache_dir, op_types)
    if target.is_file():
        return target
    from onnxruntime.quantization import QuantType, quantize_dynamic

    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = cache_dir / f".{target.stem}.{uuid.uuid4().hex}.partial.onnx"
    try:
        quantize_dynamic(
            source,
            partial,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=list(op_types),
        )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    logger.info("quantised %s to int8 (%s) at %s", source.name, ",".join(op_types), target)
    return target


def int8_or_float(source: Path, cache_dir: Path | None, op_types: Sequence[str]) -> Path:
    """The int8 copy of ``source`` when it exists or can be made; otherwise ``source`` itself."""
    try:
        return quantise_dynamic(source, cache_dir or default_cache_dir(), op_types)
    except Exception as exc:  # any failure means: read with the float model
        logger.warning(
            "no int8 copy of %s (%s: %s); using the float model",
            source.name,
            type(exc).__name__,
            exc,
        )
        return source
