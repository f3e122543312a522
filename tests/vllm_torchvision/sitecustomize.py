"""Lets PyPI's CUDA-linked torchvision import next to CPU torch, in the vLLM test server only.

vLLM serves a Qwen2-VL model only if its python imports torchvision (transformers' Qwen2-VL
image processor module and the video processor ``Qwen2VLProcessor`` always loads need it), and
PyPI has no CPU build of torchvision: the CUDA build's ``_C.so`` cannot load next to CPU torch,
which torchvision tolerates, but its fake-kernel registrations then fail on the missing
``torchvision::nms`` / ``qnms`` operators. Before the first ``import torchvision`` this hook
tries to load ``_C.so`` the way torchvision does; only when that fails does it declare the two
operator schemas (no kernels: nothing here runs NMS), so the import completes and the
pure-Python transforms the processors use work. With a torchvision whose ``_C.so`` loads it
does nothing.

It is put on the server's ``PYTHONPATH`` (with the torchvision installed beside ``.venv-vllm`` by
``make setup-vllm``) by tests/integration/test_vllm_server.py and ``bench/gpu_answers.sh tiny``,
never on the path of the main venv or of a GPU machine, whose torchvision is a real build.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

#: The declared operator libraries, kept alive for the life of the process.
_DECLARED: list[Any] = []


class _TorchvisionOperators(importlib.abc.MetaPathFinder):
    """Runs once, on the first lookup of ``torchvision``, and never finds anything itself."""

    def __init__(self) -> None:
        self.done = False

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname != "torchvision" or self.done:
            return None
        self.done = True
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.submodule_search_locations:
            return None
        import torch

        package = Path(next(iter(spec.submodule_search_locations)))
        library = next(iter(sorted(package.glob("_C*.so"))), None)
        if library is not None:
            try:
                torch.ops.load_library(str(library))
                return None  # a build that loads: its own operators are registered
            except (OSError, RuntimeError):
                pass
        declared = torch.library.Library("torchvision", "FRAGMENT")
        for name in ("nms", "qnms"):
            declared.define(f"{name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _DECLARED.append(declared)
        return None


sys.meta_path.insert(0, _TorchvisionOperators())
