"""Small helpers shared by the engines that load Hugging Face checkpoints."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path


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
