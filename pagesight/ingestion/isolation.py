"""Run the parse stage in a child process with a wall-clock and memory limit.

MuPDF, Tesseract and ONNX Runtime are native code: a malformed file can crash or hang them, or
make them allocate without bound. Each file is therefore parsed in its own process, forked from
a server that has already imported the parsing stack (so a fork costs milliseconds, not the
seconds of re-importing), with an address-space cap. What the parent sees:

- the child returns a ParsedDocument, or a PageSightError it raised -> passed through;
- the child exceeded the wall clock -> killed, TIMEOUT;
- the child ran out of memory (MemoryError, or killed by the kernel) -> TOO_LARGE;
- the child died from a signal (segfault, abort) -> CORRUPT.

Progress messages travel over the same pipe, so the CLI can draw a bar for a 400-page file.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import Settings
from pagesight.core.types import ParsedDocument
from pagesight.ingestion.pipeline import DocumentParser, ProgressCallback, SourceInfo

_PRELOAD = [
    "pagesight.ingestion.pipeline",
    "pagesight.ingestion.parse.pdf",
    "pagesight.ingestion.render",
    "pymupdf",
]
_context: Any = None
#: prctl(2): the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def _mp_context() -> Any:
    global _context
    if _context is None:
        if "forkserver" in mp.get_all_start_methods():
            _context = mp.get_context("forkserver")
            _context.set_forkserver_preload(_PRELOAD)
        else:  # pragma: no cover - platforms without fork
            _context = mp.get_context("spawn")
    return _context


def _limit_memory(memory_mb: int) -> None:
    import resource

    cap = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when its parent (the fork server, which exits with
    the service) dies, so a parse outlives no kill -9 of the service and writes nothing after
    it. Elsewhere the pipe's broken end stops it at its next message."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    # The fork server gave this child a copy of the service's "alive" pipe, which keeps the fork
    # server running as long as any child holds it; a parse never starts processes of its own,
    # so it lets go, and the fork server exits with the service (which then kills this child).
    from multiprocessing import forkserver

    alive = getattr(forkserver._forkserver, "_forkserver_alive_fd", None)
    if alive is not None:
        with contextlib.suppress(OSError):
            os.close(alive)
        setattr(forkserver._forkserver, "_forkserver_alive_fd", None)  # noqa: B010  # private
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _child(
    conn: Connection,
    target: Callable[..., Any],
    args: tuple[Any, ...],
    memory_mb: int,
) -> None:
    try:
        _die_with_parent()
        _limit_memory(memory_mb)
        os.environ.setdefault("OMP_THREAD_LIMIT", "1")
        result = target(*args, progress=lambda done, total: conn.send(("progress", done, total)))
        conn.send(("ok", result))
    except PageSightError as exc:
        conn.send(("error", exc.code.value, exc.stage.value, exc.message))
    except MemoryError:
        conn.send(("error", ErrorCode.TOO_LARGE.value, Stage.PARSE.value, _oom_message(memory_mb)))
    except (BrokenPipeError, EOFError):  # the parent is gone: nobody to tell, nothing to log
        os._exit(1)
    except BaseException as exc:  # anything else is a parser bug or a broken file
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        with contextlib.suppress(BrokenPipeError):
            conn.send(
                ("error", ErrorCode.CORRUPT.value, Stage.PARSE.value, f"parser failed: {detail}")
            )
    finally:
        with contextlib.suppress(OSError):
            conn.close()


def _oom_message(memory_mb: int) -> str:
    return f"parsing needed more than the {memory_mb} MiB memory limit"


def run_isolated(
    target: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    label: str,
    timeout_s: float,
    memory_mb: int,
    progress: ProgressCallback | None = None,
) -> Any:
    """Call ``target(*args, progress=...)`` in a child process and return its (picklable) result.

    ``target`` must be a module-level function. Failures become PageSightError (see module doc).
    """
    ctx = _mp_context()
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child_conn, target, args, memory_mb), daemon=True)
    proc.start()
    child_conn.close()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PageSightError(
                    ErrorCode.TIMEOUT, Stage.PARSE, f"{label}: took longer than {timeout_s:g} s"
                )
            if not parent_conn.poll(min(remaining, 0.5)):
                if not proc.is_alive() and not parent_conn.poll(0):
                    proc.join(5)
                    raise _death_error(label, proc.exitcode, memory_mb)
                continue
            try:
                message = parent_conn.recv()
            except EOFError:
                proc.join(5)
                raise _death_error(label, proc.exitcode, memory_mb) from None
            if message[0] == "progress":
                if progress:
                    progress(message[1], message[2])
                continue
            if message[0] == "ok":
                return message[1]
            _, code, stage, text = message
            raise PageSightError(ErrorCode(code), Stage(stage), text)
    finally:
        parent_conn.close()
        if proc.is_alive():
            proc.kill()
        proc.join(5)


def _parse_in_child(
    path: str, source: SourceInfo, settings: Settings, progress: ProgressCallback
) -> dict[str, Any]:
    from pagesight.ingestion.render import PageImageStore

    store = PageImageStore(settings.page_image_dir, settings.render)
    parser = DocumentParser(settings, image_store=store)
    # JSON-mode dump: plain types pickle fast and do not depend on class identity.
    return parser.parse(Path(path), source, progress=progress).model_dump(mode="json")


def parse_isolated(
    path: Path,
    settings: Settings,
    source: SourceInfo | None = None,
    progress: ProgressCallback | None = None,
    timeout_s: float | None = None,
    memory_mb: int | None = None,
) -> ParsedDocument:
    """Parse ``path`` in a child process; raise PageSightError with a stage code on any failure."""
    result = run_isolated(
        _parse_in_child,
        (str(path), source or SourceInfo(), settings),
        label=path.name,
        timeout_s=timeout_s if timeout_s is not None else settings.limits.parse_timeout_s,
        memory_mb=memory_mb if memory_mb is not None else settings.limits.parse_memory_mb,
        progress=progress,
    )
    return ParsedDocument.model_validate(result)


def _death_error(label: str, exitcode: int | None, memory_mb: int) -> PageSightError:
    if exitcode is not None and exitcode < 0:
        sig = -exitcode
        if sig == signal.SIGKILL:
            # The kernel's OOM killer is the usual sender of SIGKILL to a parser.
            return PageSightError(ErrorCode.TOO_LARGE, Stage.PARSE, _oom_message(memory_mb))
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return PageSightError(
            ErrorCode.CORRUPT, Stage.PARSE, f"{label}: the parser crashed ({name})"
        )
    return PageSightError(
        ErrorCode.CORRUPT, Stage.PARSE, f"{label}: the parser exited early (code {exitcode})"
    )
