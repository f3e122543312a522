"""Count the pages a bulk run has ahead of it, beside the run and out of its process.

``pagesight bulk`` prints its plan before Ray starts and then the pages still ahead as they
are counted, so an operator sees the size of the run within seconds. Opening a file is MuPDF
native code, and the files are untrusted (the reason every parse runs isolated, see
:mod:`pagesight.ingestion.isolation`): counting runs in one child process of its own, with the
parse memory cap and a per-file time limit, and dies with its parent. A file that hangs or
crashes the counter ends the counting (the run goes on; its pages are counted as it parses).

Only formats whose page count is known before parsing are counted: PDF and images. A DOCX, HTML
or Markdown file's pages exist only after conversion; it counts as counted, with no pages.

The child speaks a line protocol on its standard streams: a JSON string (a path) in, the page
count (or ``-`` when unknown) out.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

#: suffixes whose page count MuPDF reads without parsing (images are one page, TIFF may be more)
COUNTED_SUFFIXES = frozenset(
    {".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp", ".pnm"}
)

#: prctl(2): the signal this process gets when its parent dies
_PR_SET_PDEATHSIG = 1


def count_pages(path: Path) -> int | None:
    """The file's page count, or None when it is not known before parsing (another format,
    a password-protected PDF, a file MuPDF refuses)."""
    if path.suffix.lower() not in COUNTED_SUFFIXES:
        return None
    import pymupdf

    try:
        with pymupdf.open(path) as doc:
            return None if doc.needs_pass else int(doc.page_count)
    except Exception:  # a broken file: the parse will say what is wrong with it
        return None


class PageCounter:
    """Counts ``paths`` in a child process on a thread of its own, calling ``on_count`` with
    each file's page count (None: unknown) in order. :meth:`stop` ends it early."""

    def __init__(
        self,
        paths: Sequence[str],
        on_count: Callable[[int | None], None],
        *,
        memory_mb: int,
        file_timeout_s: float = 30.0,
    ) -> None:
        self.paths = list(paths)
        self.on_count = on_count
        self.memory_mb = memory_mb
        self.file_timeout_s = file_timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="page-counter", daemon=True)
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> PageCounter:
        if self.paths:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def __enter__(self) -> PageCounter:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        proc = self._proc = subprocess.Popen(  # this interpreter, this module
            [sys.executable, "-m", __name__, str(self.memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for path in self.paths:
                if self._stop.is_set():
                    return
                proc.stdin.write(json.dumps(path) + "\n")
                proc.stdin.flush()
                ready, _, _ = select.select([proc.stdout], [], [], self.file_timeout_s)
                answer = proc.stdout.readline() if ready else ""
                if not answer:  # it hung, crashed, or was stopped
                    if not self._stop.is_set():
                        log.info("page counting stopped at %s", path)
                    return
                self.on_count(int(answer) if answer.strip().isdigit() else None)
        except (BrokenPipeError, OSError, ValueError):  # the child is gone: counting ends
            return
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def _child(memory_mb: int) -> None:
    """The counter's side: one count per path line, until its input ends."""
    if sys.platform.startswith("linux"):
        import ctypes

        parent = os.getppid()
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)
    import resource

    cap = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    for line in sys.stdin:
        pages = count_pages(Path(json.loads(line)))
        sys.stdout.write(("-" if pages is None else str(pages)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":  # pragma: no cover - the child, tested through PageCounter
    _child(int(sys.argv[1]))
