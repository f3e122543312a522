"""Small helpers shared by the engines that load Hugging Face checkpoints."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from pagesight.core.errors import ErrorCode, PageSightError, Stage


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' per-load weight report and progress bars while loading.

    The report is noise for our checkpoints (an unused ``position_ids`` buffer, say); callers
    that care check ``output_loading_info`` instead, and errors still raise.
    """
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    progress_bar = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if progress_bar:
            hf_logging.enable_progress_bar()


def model_id_of_dir(path: Path) -> str:
    """``org/name`` for a hub-cache snapshot (``models--org--name/snapshots/<sha>``), else the
    directory's name: the id stamped into an index schema for a model loaded from disk."""
    resolved = path.resolve()
    if resolved.parent.name == "snapshots" and resolved.parent.parent.name.startswith("models--"):
        return resolved.parent.parent.name.removeprefix("models--").replace("--", "/")
    return resolved.name


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` forbids downloads (then a hub id must already be cached)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def cuda_surely_absent() -> bool:
    """Whether torch cannot see a CUDA device, decided without importing torch (~6 s cold).

    True on macOS, with a CPU-only torch build (``+cpu``) or no torch at all, and on Linux when
    no GPU device node exists (``/dev/nvidiactl``, ``/dev/nvidia0``…, ``/dev/dxg`` for WSL,
    ``/dev/kfd`` for ROCm, whose torch also answers to ``cuda``). False means "ask torch".
    """
    if sys.platform == "darwin":
        return True
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return True
    if version.endswith("+cpu"):
        return True
    if not sys.platform.startswith("linux"):
        return False
    dev = Path("/dev")
    nodes = ("nvidiactl", "nvidia0", "dxg", "kfd")
    return not any((dev / node).exists() for node in nodes) and not any(dev.glob("nvidia[0-9]*"))


def cached_snapshot_dir(repo_id: str) -> Path | None:
    """The Hugging Face cache's snapshot directory that an offline load of ``repo_id`` reads
    (the ``main`` ref), or None when it is not cached or ``repo_id`` is not a hub id."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # an invalid repo id, an unreadable cache: no fast path, nothing else
        return None
    return Path(found).parent if isinstance(found, str) else None


def resolve_device(requested: str, what: str, stage: Stage) -> str:
    """``"auto"`` -> ``"cuda"`` when torch sees one, else ``"cpu"``; an explicit ``"cuda"``
    without a visible device is an EMBED_FAILED error naming ``what`` (e.g. "reranker").
    ``"auto"`` and ``"cpu"`` import torch only when :func:`cuda_surely_absent` cannot tell."""
    if requested == "cpu" or (requested == "auto" and cuda_surely_absent()):
        return "cpu"
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise PageSightError(
            ErrorCode.EMBED_FAILED, stage, f"{what} device is 'cuda' but none is visible"
        )
    return requested


def load_failure(
    what: str, source: str, local: Path | None, setting: str, exc: Exception, stage: Stage
) -> PageSightError:
    """The error for a checkpoint that would not load, with a hint when ``source`` was a hub id
    (the usual cause offline): set ``setting`` to a local directory."""
    hint = (
        ""
        if local is not None
        else " (not a local directory, and not in the Hugging Face cache or offline:"
        f" set {setting} to a local directory)"
    )
    return PageSightError(
        ErrorCode.EMBED_FAILED, stage, f"could not load {what} {source!r}{hint}: {exc}"
    )
