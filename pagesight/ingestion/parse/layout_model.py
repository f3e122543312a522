"""PyMuPDF's layout model, with its ONNX sessions set up for throughput.

pymupdf-layout makes every ONNX Runtime session with the memory arena off, so that a process
reading documents of every shape keeps a flat RSS. That is right for the graph model, whose
input grows with the number of text boxes on a page. The image feature model and the table
grid model, though, take one fixed-size image: their arena reaches its peak on the first page
and never grows, while without it every call allocates and frees ~60 MB of outputs. With the
arena on for fixed-shape models only, the image feature model runs in ~90 instead of ~150 ms a
page on this 2-core machine (same outputs: the arena changes allocation, not arithmetic).

The thread count is ours to choose too: bulk runs several parse tasks side by side, each of
which should keep to its own cores (``parse.layout_threads``).

The library installs its model as ``pymupdf._get_layout`` when imported; :func:`use_layout_model`
builds one through the same factory (``DocumentLayoutAnalyzer.get_model``) with our session
options and installs it the same way, once per process and thread count.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

_lock = threading.Lock()
_installed_threads: int | None = None
#: The layout functions replaced so far, kept alive on purpose (see :func:`use_layout_model`).
_replaced: list[Any] = []


def fixed_input_shape(session: Any) -> bool:
    """True when every input has a fixed shape apart from its batch dimension."""
    return all(
        isinstance(dim, int) for tensor in session.get_inputs() for dim in list(tensor.shape)[1:]
    )


def make_session(model_path: str, providers: list[str] | None = None, threads: int = 0) -> Any:
    """An ONNX Runtime session for one of the layout models: memory arena on when the model's
    input shape is fixed (its peak cannot grow), off otherwise, as the library has it."""
    import onnxruntime as ort

    def build(arena: bool) -> Any:
        options = ort.SessionOptions()
        options.enable_cpu_mem_arena = arena
        options.intra_op_num_threads = threads
        return ort.InferenceSession(model_path, sess_options=options, providers=providers)

    session = build(arena=False)
    return build(arena=True) if fixed_input_shape(session) else session


@contextlib.contextmanager
def _session_factory(threads: int) -> Iterator[int]:
    """Route the layout package's ``make_session`` through ours while a model is built; yields
    how many modules were patched (none would mean the library changed its layout)."""
    modules: list[Any] = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("pymupdf.layout") and callable(getattr(module, "make_session", None))
    ]
    saved = {module: module.make_session for module in modules}

    def factory(model_path: str, providers: list[str] | None = None) -> Any:
        return make_session(model_path, providers, threads)

    for module in modules:
        module.make_session = factory
    try:
        yield len(modules)
    finally:
        for module, original in saved.items():
            module.make_session = original


def use_layout_model(threads: int = 0) -> None:
    """Install the tuned layout model for this process (no-op when already installed with the
    same thread count). ``threads`` 0 lets ONNX Runtime use one thread per core."""
    global _installed_threads
    with _lock:
        if _installed_threads == threads:
            return
        import pymupdf
        from pymupdf.layout import DocumentLayoutAnalyzer

        with _session_factory(threads) as patched:
            if not patched:
                raise RuntimeError("pymupdf.layout no longer exposes make_session")
            model = DocumentLayoutAnalyzer.get_model()

        def get_layout(*args: Any, **kwargs: Any) -> Any:
            return model.predict(*args, **kwargs)

        # The model replaced here must never be freed: in a parse child forked from a process
        # that imported pymupdf, its ONNX sessions' thread pools were started by the parent,
        # and freeing them joins threads that do not exist in the child (a hang).
        _replaced.append(pymupdf._get_layout)
        pymupdf._get_layout = get_layout
        _installed_threads = threads
