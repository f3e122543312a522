"""ONNX Runtime execution of a sentence-transformers text encoder, for CPU serving.

On CPU a short query through MiniLM-L6 takes ~22 ms in PyTorch eager and ~12 ms in ONNX Runtime
(one thread each, measured here), and the query embedding is most of a text search's cost: the
gateway's throughput target needs the faster one. The same weights are exported once with
``torch.onnx.export`` (the TorchScript exporter, dynamic batch and sequence axes) into a cache
directory, then every encode runs tokenizer → ONNX transformer → the model's own pooling → L2
norm in numpy.

Only the common chain Transformer → Pooling (mean or CLS) → [Normalize] is supported; anything
else (Dense heads, other poolings) stays on PyTorch. The ONNX vectors are checked against
PyTorch's (cosine ≥ 0.9999 on probe sentences) before an export is ever used: documents and
queries must come from the same function.

Verified cache (cold start). Importing torch + transformers + sentence-transformers and loading
the weights costs seconds per process, only to run that check. So once an export has passed it,
:meth:`OnnxTextEncoder.from_sentence_transformer` records it: ``<key>.onnx`` (the weights in
``<key>.<random>.onnx.data``, which ONNX Runtime memory-maps: a session opens in ~0.1 s, not the
~0.6 s of parsing one 90 MB protobuf), the model's own tokenizer serialised for the standalone
``tokenizers`` library (``<key>.tokenizer.json``, used only when it gives exactly the token ids,
type ids and masks of the transformers tokenizer on probe texts), and ``<key>.verified.json``
(settings, file hashes, PyTorch's vectors for the probes), each written atomically, the manifest
last. :meth:`OnnxTextEncoder.from_cache` then
loads without torch: it checks the files against the manifest's hashes and the ONNX vectors
against PyTorch's recorded probe vectors at the same threshold, and answers None (the caller
goes the PyTorch way and re-records) on any mismatch or unreadable file.

``key`` (:func:`verified_cache_key`) hashes the *contents* of the model directory's files, the
options that change tokens (``max_seq_length``), and the versions of onnxruntime, transformers,
tokenizers, sentence-transformers and torch: a changed model or library is verified again. File
hashes are memoised by (size, mtime, ctime, inode) in ``digests/`` as git's index does, so an
unchanged 90 MB checkpoint is not re-read by every process.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROBES = ("How many parcels were delivered in 2024?", "Revenue by region, table 3 (in millions)")
#: Texts on which the standalone tokenizer must reproduce the transformers tokenizer exactly:
#: casing, accents, CJK, special-token strings, surrounding spaces, empty, and truncation.
_TOKEN_PROBES = (
    *_PROBES,
    "",
    "  Leading and trailing   spaces  ",
    "東京の売上は12%増加した。",
    "Àccénts, naïve café — ŒUVRE Straße",
    "[CLS] literal [SEP] special [MASK] tokens [PAD] <s></s> <|endoftext|>",
    "word " * 600,
)
AGREEMENT = 0.9999
#: Version of the verified-cache layout; part of every key.
CACHE_FORMAT = 2
_LIBRARIES = ("transformers", "tokenizers", "sentence-transformers", "torch")
#: Top-level folders of a model repository that a PyTorch load never reads.
_UNREAD_DIRS = frozenset({"onnx", "openvino"})

Tokenize = Callable[[list[str]], Mapping[str, npt.NDArray[Any]]]


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

    def __init__(self, session: Any, tokenize: Tokenize, pooling: str) -> None:
        self._session = session
        self._tokenize = tokenize
        self._pooling = pooling
        self._inputs = [i.name for i in session.get_inputs()]

    @classmethod
    def from_sentence_transformer(
        cls,
        model: Any,
        source: str,
        cache_dir: Path | None,
        threads: int,
        key: str | None = None,
    ) -> OnnxTextEncoder | None:
        """Export (or reuse the cached export of) ``model``'s transformer and check it against
        ``model``; None when the module chain is not supported or the export disagrees.

        With ``key`` (:func:`verified_cache_key` of the model's directory) the export is named by
        it and, once it agrees, recorded for :meth:`from_cache`; a cached file that no longer
        loads or agrees is exported again once."""
        pooling = supported_pooling(model)
        if pooling is None:
            return None
        cache_dir = cache_dir or default_cache_dir()
        name = key or _legacy_key(source, model[0].auto_model)
        path = cache_dir / f"{name}.onnx"
        fresh = not path.is_file()
        if fresh:
            _export(model, source, path)
        max_length = int(model.max_seq_length)
        tokenize: Tokenize = _hf_tokenizer(model.tokenizer, max_length)
        spec = _tokenizer_spec(model.tokenizer, max_length) if key is not None else None
        tokenizer_path = cache_dir / f"{name}.tokenizer.json"
        standalone = _standalone_if_identical(model.tokenizer, spec, tokenizer_path, tokenize)
        if standalone is not None:
            tokenize = standalone
        expected = _torch_vectors(model, _PROBES)
        encoder: OnnxTextEncoder | None = None
        while encoder is None:
            try:
                encoder = cls(_session(path, threads), tokenize, pooling)
                if not encoder._agrees(expected):
                    encoder = None
            except Exception:
                if fresh:
                    raise
                log.warning("cached ONNX export %s does not load", path, exc_info=True)
            if encoder is None and fresh:
                return None
            if encoder is None:
                log.warning("exporting %s to ONNX again (the cached one is unusable)", source)
                _export(model, source, path)
                fresh = True
        if key is not None and standalone is not None and spec is not None:
            try:
                _record(cache_dir, key, source, path, tokenizer_path, spec, pooling, expected)
            except OSError:
                log.warning("could not record the verified ONNX export in %s", cache_dir)
        return encoder

    @classmethod
    def from_cache(
        cls, cache_dir: Path | None, key: str, threads: int
    ) -> tuple[OnnxTextEncoder, int] | None:
        """The encoder and its width from a verified record, without torch or transformers;
        None when there is none, or a file, hash or probe vector does not match it."""
        cache_dir = cache_dir or default_cache_dir()
        manifest_path = cache_dir / f"{key}.verified.json"
        try:
            manifest = json.loads(manifest_path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            log.warning("ignoring unreadable ONNX cache record %s", manifest_path)
            return None
        try:
            return cls._from_manifest(cache_dir, key, manifest, threads)
        except Exception:  # a damaged record or file: the caller verifies and records again
            log.warning("ignoring ONNX cache record %s", manifest_path, exc_info=True)
            return None

    @classmethod
    def _from_manifest(
        cls, cache_dir: Path, key: str, manifest: dict[str, Any], threads: int
    ) -> tuple[OnnxTextEncoder, int] | None:
        if manifest.get("format") != CACHE_FORMAT or manifest.get("key") != key:
            log.warning("ONNX cache record for %s is for another key or format", key)
            return None
        onnx_path = cache_dir / manifest["onnx"]["file"]
        files = [manifest["onnx"], *manifest["onnx_data"]]
        if any(Path(record["file"]).name != record["file"] for record in files):
            raise ValueError("a file name in the record is a path")
        for record in files:
            if not _file_matches(cache_dir / record["file"], record):
                # Changed since verified: not to be reused by the PyTorch way either (it would
                # only re-check the probes), so remove it and let that way export again.
                log.warning("%s changed since it was verified; exporting again", record["file"])
                for stale in files:
                    (cache_dir / stale["file"]).unlink(missing_ok=True)
                return None
        spec = manifest["tokenizer"]
        if Path(spec["file"]).name != spec["file"]:
            raise ValueError(f"not a file name: {spec['file']!r}")
        tokenizer_bytes = (cache_dir / spec["file"]).read_bytes()
        if hashlib.sha256(tokenizer_bytes).hexdigest() != spec["sha256"]:
            log.warning("%s changed since it was verified", spec["file"])
            return None
        tokenize = _standalone_tokenizer(tokenizer_bytes.decode("utf-8"), spec)
        encoder = cls(_session(onnx_path, threads), tokenize, str(manifest["pooling"]))
        probes = [str(text) for text in manifest["probes"]]
        expected = np.asarray(manifest["probe_vectors"], dtype=np.float32)
        if expected.shape != (len(probes), int(manifest["dim"])) or not encoder._agrees(
            expected, probes
        ):
            return None
        return encoder, int(manifest["dim"])

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

    def agrees_with(self, model: Any, threshold: float = AGREEMENT) -> bool:
        """Whether this export reproduces ``model`` (PyTorch) on probe sentences."""
        return self._agrees(_torch_vectors(model, _PROBES), list(_PROBES), threshold)

    def _agrees(
        self,
        expected: npt.NDArray[np.float32],
        probes: Sequence[str] = _PROBES,
        threshold: float = AGREEMENT,
    ) -> bool:
        got = self.encode(list(probes))
        cosines = (expected * got).sum(axis=1)
        if float(cosines.min()) < threshold:
            log.warning("ONNX export disagrees with PyTorch (cosine %.5f)", float(cosines.min()))
            return False
        return True

    def _encode_batch(self, texts: list[str]) -> npt.NDArray[np.float32]:
        encoded = self._tokenize(texts)
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


# -- tokenizers ---------------------------------------------------------------------------


def _hf_tokenizer(tokenizer: Any, max_length: int) -> Tokenize:
    """The transformers tokenizer, called as sentence-transformers calls it."""

    def tokenize(texts: list[str]) -> Mapping[str, npt.NDArray[Any]]:
        encoded = tokenizer(
            texts, padding=True, truncation=True, max_length=max_length, return_tensors="np"
        )
        return {name: np.asarray(value) for name, value in encoded.items()}

    return tokenize


def _tokenizer_spec(tokenizer: Any, max_length: int) -> dict[str, Any] | None:
    """What a transformers fast tokenizer sets on its ``tokenizers`` backend for
    ``tokenizer(texts, padding=True, truncation=True, max_length=...)``; None without one."""
    if getattr(tokenizer, "backend_tokenizer", None) is None or tokenizer.pad_token is None:
        return None
    return {
        "max_length": max_length,
        "truncation_side": str(tokenizer.truncation_side),
        "padding_side": str(tokenizer.padding_side),
        "pad_token": str(tokenizer.pad_token),
        "pad_token_id": int(tokenizer.pad_token_id),
        "pad_token_type_id": int(tokenizer.pad_token_type_id),
        "split_special_tokens": bool(getattr(tokenizer, "split_special_tokens", False)),
        "model_input_names": [str(name) for name in tokenizer.model_input_names],
    }


class _StandaloneTokenizer:
    """The serialised backend of a transformers tokenizer, run by ``tokenizers`` alone."""

    def __init__(self, backend: Any, spec: Mapping[str, Any]) -> None:
        backend.enable_truncation(
            int(spec["max_length"]),
            stride=0,
            strategy="longest_first",
            direction=spec["truncation_side"],
        )
        backend.enable_padding(
            direction=spec["padding_side"],
            pad_id=int(spec["pad_token_id"]),
            pad_type_id=int(spec["pad_token_type_id"]),
            pad_token=spec["pad_token"],
            length=None,
            pad_to_multiple_of=None,
        )
        backend.encode_special_tokens = bool(spec["split_special_tokens"])
        self._backend = backend
        names = set(spec["model_input_names"])
        self._type_ids = "token_type_ids" in names
        self._mask = "attention_mask" in names

    def __call__(self, texts: list[str]) -> Mapping[str, npt.NDArray[Any]]:
        encodings = self._backend.encode_batch(texts, add_special_tokens=True)
        out = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64)}
        if self._type_ids:
            out["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        if self._mask:
            out["attention_mask"] = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        return out


def _standalone_tokenizer(serialised: str, spec: Mapping[str, Any]) -> _StandaloneTokenizer:
    from tokenizers import Tokenizer

    return _StandaloneTokenizer(Tokenizer.from_str(serialised), spec)


def _standalone_if_identical(
    tokenizer: Any, spec: Mapping[str, Any] | None, path: Path, reference: Tokenize
) -> _StandaloneTokenizer | None:
    """Serialise ``tokenizer``'s backend to ``path`` and load it back standalone, when that
    gives exactly ``reference``'s arrays on the token probes (one batch and one by one)."""
    if spec is None:
        return None
    try:
        serialised = tokenizer.backend_tokenizer.to_str()
        _write_atomic(path, serialised.encode("utf-8"))
        standalone = _standalone_tokenizer(path.read_text(encoding="utf-8"), spec)
        batches = [list(_TOKEN_PROBES), *([text] for text in _TOKEN_PROBES)]
        for batch in batches:
            want, got = reference(batch), standalone(batch)
            if set(want) != set(got) or not all(
                np.array_equal(want[name], got[name]) for name in want
            ):
                log.info("the standalone tokenizer differs from transformers'; not recording")
                return None
    except Exception:  # serialising, writing or loading it: only the fast path is lost
        log.info("no standalone tokenizer for this model", exc_info=True)
        return None
    return standalone


# -- the verified cache -------------------------------------------------------------------


def verified_cache_key(model_dir: Path, cache_dir: Path | None, options: Mapping[str, Any]) -> str:
    """Key of a verified export: the model directory's file contents, ``options`` (anything
    that changes tokens or vectors) and the library versions involved."""
    import onnxruntime

    versions: dict[str, str | None] = {"onnxruntime": onnxruntime.__version__}
    for name in _LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    parts = {
        "format": CACHE_FORMAT,
        "model": model_digest(model_dir, cache_dir or default_cache_dir()),
        "options": dict(options),
        "versions": versions,
    }
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def model_digest(model_dir: Path, cache_dir: Path) -> str:
    """SHA-256 over every file a PyTorch load may read (relative path, size, content hash).

    Content hashes are memoised under ``cache_dir/digests`` by (size, mtime_ns, ctime_ns,
    inode, device): any write to a file changes its ctime, so a changed file is hashed again."""
    folder = model_dir.resolve()
    memo_path = cache_dir / "digests" / f"{_sha256_bytes(str(folder).encode())[:24]}.json"
    try:
        memo = json.loads(memo_path.read_bytes())
        if not isinstance(memo, dict):
            memo = {}
    except (OSError, ValueError):
        memo = {}
    files: dict[str, list[Any]] = {}
    for path in _model_files(folder):
        stat = path.stat()
        stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]
        relative = path.relative_to(folder).as_posix()
        known = memo.get(relative)
        if isinstance(known, list) and len(known) == 2 and known[0] == stamp:
            files[relative] = known
        else:
            files[relative] = [stamp, _sha256_file(path)]
    if files != memo:
        try:
            _write_atomic(memo_path, json.dumps(files, sort_keys=True).encode())
        except OSError:
            log.debug("could not memoise file hashes in %s", memo_path)
    listing = sorted((rel, stamp[0], digest) for rel, (stamp, digest) in files.items())
    return _sha256_bytes(json.dumps(listing).encode())


def _model_files(folder: Path) -> Iterator[Path]:
    for root, dirs, names in os.walk(folder):
        at_top = Path(root) == folder
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and not (at_top and d in _UNREAD_DIRS)
        )
        for name in sorted(names):
            if not name.startswith("."):
                yield Path(root) / name


def _record(
    cache_dir: Path,
    key: str,
    source: str,
    onnx_path: Path,
    tokenizer_path: Path,
    spec: Mapping[str, Any],
    pooling: str,
    expected: npt.NDArray[np.float32],
) -> None:
    """Write ``<key>.verified.json`` (atomically, after the files it names)."""
    data = [onnx_path.parent / name for name in _external_files(onnx_path)]
    manifest = {
        "format": CACHE_FORMAT,
        "key": key,
        "source": source,
        "pooling": pooling,
        "dim": int(expected.shape[1]),
        "onnx": _file_record(onnx_path),
        "onnx_data": [_file_record(path) for path in data],
        "tokenizer": {
            **spec,
            "file": tokenizer_path.name,
            "sha256": _sha256_bytes(tokenizer_path.read_bytes()),
        },
        "probes": list(_PROBES),
        "probe_vectors": expected.astype(np.float32).tolist(),
        "threshold": AGREEMENT,
    }
    _write_atomic(cache_dir / f"{key}.verified.json", json.dumps(manifest).encode())


def _file_record(path: Path) -> dict[str, Any]:
    digest = _sha256_file(path)
    return {"file": path.name, "size": path.stat().st_size, "sha256": digest, "stamp": _stamp(path)}


def _file_matches(path: Path, record: Mapping[str, Any]) -> bool:
    """Size, then content hash unless the stat stamp is the one recorded after hashing."""
    if path.stat().st_size != int(record["size"]):
        return False
    return _stamp(path) == record["stamp"] or _sha256_file(path) == record["sha256"]


def _stamp(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]


def _sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file in ``path``'s folder, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- export -------------------------------------------------------------------------------


def _torch_vectors(model: Any, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    vectors = model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
    return np.asarray(vectors, dtype=np.float32)


def _session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _export(model: Any, source: str, path: Path) -> None:
    """Export ``model``'s transformer to ``path`` (atomically: concurrent exporters both win)."""
    import torch

    transformer = model[0].auto_model
    path.parent.mkdir(parents=True, exist_ok=True)
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
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        exported = staging / "model.onnx"
        with warnings.catch_warnings():
            # Tracer warnings about Python-side shape checks; the caller verifies the graph
            # on texts of other lengths than the export sample.
            warnings.simplefilter("ignore")
            _onnx_export(wrapper, tuple(sample[n] for n in names), exported, names)
        data = _externalise(exported, f"{path.stem}.{uuid.uuid4().hex[:12]}.onnx.data")
        if data is not None:  # first the weights, under a name no other export uses
            os.replace(staging / data, path.parent / data)
        os.replace(exported, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        transformer.train(was_training)
    log.info("exported %s to ONNX at %s", source, path)


def _externalise(path: Path, data_name: str) -> str | None:
    """Move the weights of the ONNX file ``path`` into ``data_name`` beside it (the graph is
    unchanged): ONNX Runtime memory-maps external data, so a session opens in ~0.1 s instead of
    ~0.6 s of parsing 90 MB of protobuf. None (one file kept) without the ``onnx`` package."""
    try:
        import onnx
    except ImportError:
        return None
    proto = onnx.load(str(path))
    path.unlink()
    onnx.save_model(
        proto,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=data_name,
        size_threshold=1024,
    )
    return data_name


def _external_files(path: Path) -> list[str]:
    """Names of the external data files the ONNX file ``path`` refers to."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    names = {
        entry.value
        for tensor in proto.graph.initializer
        for entry in tensor.external_data
        if entry.key == "location"
    }
    return sorted(names)


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


def _legacy_key(source: str, transformer: Any) -> str:
    """Export name for a model without a local directory (a hub id, online): its source, config,
    file names and sizes and library versions. Such exports are verified at every load."""
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
