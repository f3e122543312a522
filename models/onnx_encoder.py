"""ONNX Runtime execution of a sentence-transformers text encoder, for CPU serving.

On CPU a short query through MiniLM-L6 takes ~22 ms in PyTorch eager and ~12 ms in ONNX Runtime
(one thread each, measured here), and the query embedding is most of a text search's cost: the
gateway's throughput target needs the faster one. The same weights are exported once with
``torch.onnx.export`` (the TorchScript exporter, dynamic batch and sequence axes) into a cache
directory keyed by the model's files, then every encode runs tokenizer → ONNX transformer →
the model's own pooling → L2 norm in numpy.

Only the common chain Transformer → Pooling (mean or CLS) → [Normalize] is supported; anything
else (Dense heads, other poolings) stays on PyTorch. :meth:`OnnxTextEncoder.agrees_with` checks
the ONNX vectors against PyTorch's at load time, so an export that does not reproduce the model
(cosine below 0.9999) is never used: documents and queries must come from the same function.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROBES = ("How many parcels were delivered in 2024?", "Revenue by region, table 3 (in millions)")


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pagesight" / "onnx"


def supported_pooling(model: Any) -> str | None:
    """``"mean"`` or ``"cls"`` when ``model`` is Transformer → Pooling → [Normalize], else None."""
    kinds = [type(module).__name__ for module in model]
    if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
        return None
    config = model[1].get_config_dict()
    mode = config.get("pooling_mode")  # sentence-transformers 5: one name
    if mode is None:  # older configs: one flag per mode
        flags = [k for k, v in config.items() if k.startswith("pooling_mode_") and v]
        legacy = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
        mode = legacy.get(flags[0]) if len(flags) == 1 else None
    return mode if mode in ("mean", "cls") else None


class OnnxTextEncoder:
    """Tokenize, run the exported transformer, pool and normalise (thread-safe)."""

    def __init__(self, session: Any, tokenizer: Any, pooling: str, max_length: int) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._pooling = pooling
        self._max_length = max_length
        self._inputs = [i.name for i in session.get_inputs()]

    @classmethod
    def from_sentence_transformer(
        cls, model: Any, source: str, cache_dir: Path | None, threads: int
    ) -> OnnxTextEncoder | None:
        """Export (or reuse the cached export of) ``model``'s transformer; None when the model's
        module chain is not supported."""
        pooling = supported_pooling(model)
        if pooling is None:
            return None
        import onnxruntime as ort

        path = _export(model, source, cache_dir or default_cache_dir())
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return cls(session, model.tokenizer, pooling, int(model.max_seq_length))

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> npt.NDArray[np.float32]:
        """Unit vectors, one row per text; batches are formed by length to pad little."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[npt.NDArray[np.float32]] = [np.empty(0, np.float32)] * len(texts)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            for index, vector in zip(
                chunk, self._encode_batch([texts[i] for i in chunk]), strict=True
            ):
                out[index] = vector
        return np.stack(out).astype(np.float32, copy=False)

    def agrees_with(self, model: Any, threshold: float = 0.9999) -> bool:
        """Whether this export reproduces ``model`` (PyTorch) on probe sentences."""
        expected = model.encode(list(_PROBES), normalize_embeddings=True, convert_to_numpy=True)
        got = self.encode(list(_PROBES))
        cosines = (expected * got).sum(axis=1)
        if float(cosines.min()) < threshold:
            log.warning("ONNX export disagrees with PyTorch (cosine %.5f)", float(cosines.min()))
            return False
        return True

    def _encode_batch(self, texts: list[str]) -> npt.NDArray[np.float32]:
        encoded = self._tokenizer(
            texts,
            padding=True,
            truncation=True,
            max_length=self._max_length,
            return_tensors="np",
        )
        feed = {name: encoded[name].astype(np.int64) for name in self._inputs if name in encoded}
        if "token_type_ids" in self._inputs and "token_type_ids" not in feed:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        hidden = self._session.run(None, feed)[0]
        if self._pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def _export(model: Any, source: str, cache_dir: Path) -> Path:
    """The cached ONNX file of ``model``'s transformer, exported now if missing."""
    transformer = model[0].auto_model
    key = _cache_key(source, transformer)
    path = cache_dir / f"{key}.onnx"
    if path.is_file():
        return path
    import torch

    cache_dir.mkdir(parents=True, exist_ok=True)
    names = [n for n in _INPUTS if n in model.tokenizer.model_input_names] or list(_INPUTS[:2])

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args, strict=True))).last_hidden_state

    sample = model.tokenizer(list(_PROBES), padding=True, return_tensors="pt")
    wrapper = _Hidden(transformer).eval()  # eval() propagates: no dropout in the graph
    was_training = transformer.training
    with tempfile.NamedTemporaryFile(dir=cache_dir, suffix=".onnx.tmp", delete=False) as tmp:
        tmp_path = Path(tmp.name)
    try:
        with warnings.catch_warnings():
            # Tracer warnings about Python-side shape checks; agrees_with() verifies the graph
            # on texts of other lengths than the export sample.
            warnings.simplefilter("ignore")
            _onnx_export(wrapper, tuple(sample[n] for n in names), tmp_path, names)
        os.replace(tmp_path, path)  # atomic: concurrent replicas exporting at once both win
    finally:
        tmp_path.unlink(missing_ok=True)
        transformer.train(was_training)
    log.info("exported %s to ONNX at %s", source, path)
    return path


def _onnx_export(wrapper: Any, sample: tuple[Any, ...], path: Path, names: list[str]) -> None:
    import torch

    torch.onnx.export(
        wrapper,
        sample,
        str(path),
        input_names=names,
        output_names=["last_hidden_state"],
        dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]},
        opset_version=17,
        dynamo=False,
    )


def _cache_key(source: str, transformer: Any) -> str:
    """Model files (sizes and names) + config + library versions: a changed model re-exports."""
    import torch
    import transformers

    parts: dict[str, Any] = {
        "source": source,
        "config": transformer.config.to_dict(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    folder = Path(source)
    if folder.is_dir():
        parts["files"] = sorted((p.name, p.stat().st_size) for p in folder.iterdir() if p.is_file())
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:24]
