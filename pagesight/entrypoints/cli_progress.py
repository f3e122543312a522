"""What ``pagesight bulk`` and ``pagesight reindex`` show while they run, and where Ray's own
output goes.

Three forms of the same events (:class:`pagesight.ingestion.bulk.BulkProgress`):

- ``--json``: standard output is JSON lines and nothing else -- ``{"event": "plan"}`` first,
  before Ray starts, then ``{"event": "progress"}`` lines, then ``{"event": "done", ...the
  report}`` (printed by the command);
- on a terminal: the plan as one line on stderr, then a bar (files, pages done of the pages
  counted so far, pages/s, failed, elapsed);
- otherwise (a pipe, a log file): the same JSON lines as ``--json``, on stderr.

Progress lines come every ``bulk.progress_interval_s`` seconds from a ticker thread, whether or
not a file finished (Ray's start and a long file take minutes with nothing finishing), and
at most that often when files finish quickly; the last state always. A ticker that never runs
faster than :data:`MIN_TICK_S` keeps a zero interval (one line per finished file) from spinning.

Ray's own lines -- ``ray.init``'s log, its C++ core's ``E`` lines, the raylet's and workers'
output, Ray Data's bars -- are not progress: unless ``--verbose``, file descriptors 1 and 2
point at ``<data_dir>/logs/<command>-ray.log`` for the run, while this process' ``sys.stdout``
(``--json`` events) and ``sys.stderr`` (progress, warnings, errors) keep the terminal through
duplicates of the original descriptors. With ``--verbose`` everything Ray prints goes to stderr
(stdout keeps only the result, as without it).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from pagesight.entrypoints.cli_common import err

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from pagesight.ingestion.bulk import BulkProgress

#: the ticker's shortest period (a zero ``progress_interval_s`` would spin otherwise)
MIN_TICK_S = 1.0

Mode = Literal["bar", "lines"]


@dataclass
class RunOutput:
    """Where a run's events go, and where Ray's output went (None: stderr, or not captured)."""

    events: TextIO
    ray_log: Path | None


@contextlib.contextmanager
def ray_output(verbose: bool, log_path: Path) -> Iterator[RunOutput]:
    """For the run: file descriptors 1 and 2 go to ``log_path`` (``verbose``: fd 1 to fd 2),
    ``sys.stdout``/``sys.stderr`` to duplicates of the originals; restored on exit. Streams
    without descriptors (a test runner's) are swapped at the Python level only."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        events = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            yield RunOutput(events=events, ray_log=None)
        return
    saved = (os.dup(out_fd), os.dup(err_fd))
    events = os.fdopen(os.dup(out_fd), "w", buffering=1, encoding="utf-8")
    user_err = os.fdopen(os.dup(err_fd), "w", buffering=1, encoding="utf-8")
    old = (sys.stdout, sys.stderr)
    log_file: TextIO | None = None
    try:
        if verbose:
            os.dup2(err_fd, out_fd)
            sys.stdout = user_err
        else:
            log_file = _open_log(log_path)
            os.dup2(log_file.fileno(), out_fd)
            os.dup2(log_file.fileno(), err_fd)
            sys.stdout = log_file
        sys.stderr = user_err
        yield RunOutput(events=events, ray_log=None if verbose else log_path)
    finally:
        for stream in (sys.stdout, sys.stderr, *old, events):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os.dup2(saved[0], out_fd)
        os.dup2(saved[1], err_fd)
        sys.stdout, sys.stderr = old
        for fd in saved:
            os.close(fd)
        for stream in (events, user_err, log_file):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _open_log(path: Path) -> TextIO:
    """The run's Ray log (truncated: one run's), or the null device when it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("w", encoding="utf-8")
    except OSError:
        return open(os.devnull, "w", encoding="utf-8")  # closed by the caller


class ProgressReporter:
    """Shows a run's events (module doc). Called by the run's thread with the live
    :class:`BulkProgress`; a ticker thread shows the same object between calls."""

    def __init__(
        self, command: str, mode: Mode, stream: TextIO, interval_s: float, bar: Progress | None
    ) -> None:
        self.command = command
        self.mode = mode
        self.stream = stream
        self.interval_s = interval_s
        self.bar = bar
        self._task: TaskID | None = None
        self._lock = threading.Lock()
        self._latest: BulkProgress | None = None
        self._shown = 0.0
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)

    def __call__(self, progress: BulkProgress) -> None:
        with self._lock:
            first = self._latest is None
            self._latest = progress
            if first:
                self._plan(progress)
                if progress.phase != "done":
                    self._ticker.start()
                return
            due = time.monotonic() - self._shown >= self.interval_s
            if progress.phase == "done" or due or self.mode == "bar":
                self._show(progress)

    def close(self) -> None:
        self._stop.set()
        if self._ticker.is_alive():
            self._ticker.join(timeout=5)

    def _tick(self) -> None:
        period = max(self.interval_s, MIN_TICK_S)
        while not self._stop.wait(period / 4):
            with self._lock:
                latest = self._latest
                if latest is None or latest.phase == "done":
                    continue
                if time.monotonic() - self._shown >= period:
                    self._show(latest.tick())

    def _plan(self, progress: BulkProgress) -> None:
        self._shown = time.monotonic()
        if self.mode == "lines":
            self._write(progress.plan_dict())
            return
        err.print(plan_text(progress), markup=False, highlight=False)
        if self.bar is not None:
            self._task = self.bar.add_task(
                self.command, total=progress.files_total, **_fields(progress)
            )

    def _show(self, progress: BulkProgress) -> None:
        self._shown = time.monotonic()
        if self.mode == "lines":
            self._write(progress.as_dict())
        elif self.bar is not None and self._task is not None:
            self.bar.update(
                self._task,
                completed=progress.files_done,
                total=progress.files_total,
                **_fields(progress),
            )

    def _write(self, event: dict[str, Any]) -> None:
        try:
            self.stream.write(json.dumps(event) + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe: the run goes on, unwatched
            pass


def plan_text(progress: BulkProgress) -> str:
    """The plan in words: ``bulk: 12 files: 3 already done, 9 to do``; the pages ahead too
    when they are all counted already (a re-index knows them from the catalog)."""
    plan = progress.plan_dict()
    noun = "documents" if progress.command == "reindex" else "files"
    parts = []
    if plan["already_done"]:
        parts.append(f"{plan['already_done']} already done")
    if plan["held"]:
        parts.append(f"{plan['held']} held by another worker")
    if plan["missing"]:
        parts.append(f"{plan['missing']} missing")
    if plan["failed"]:
        parts.append(f"{plan['failed']} failed before parsing")
    parts.append(f"{plan['to_do']} to do")
    pages = f" ({progress.pages_counted} pages)" if progress.files_counted == plan["to_do"] else ""
    return f"{progress.command}: {plan['files']} {noun}: {', '.join(parts)}{pages}"


def _fields(progress: BulkProgress) -> dict[str, Any]:
    counting = progress.files_counted < progress.to_do
    return {
        "phase": progress.phase,
        "pages": progress.pages_done,
        "counted": f"{progress.pages_counted}{'+' if counting else ''}",
        "rate": progress.pages_per_s,
        "failed": progress.failed,
    }


def _terminal_bar() -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description} [dim]{task.fields[phase]}[/dim]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(
            "files  {task.fields[pages]}/{task.fields[counted]} pages  "
            "{task.fields[rate]:.2f} pages/s"
        ),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


@contextlib.contextmanager
def run_progress(
    command: str, data_dir: Path, interval_s: float, *, as_json: bool, verbose: bool
) -> Iterator[tuple[ProgressReporter, RunOutput]]:
    """Ray's output out of the way (:func:`ray_output`) and a reporter for the run's events,
    in the form the module doc describes; both undone on exit. ``PAGESIGHT_DEBUG`` is
    ``verbose`` too."""
    verbose = verbose or bool(os.environ.get("PAGESIGHT_DEBUG"))
    with ray_output(verbose, data_dir / "logs" / f"{command}-ray.log") as output:
        if as_json or not err.is_terminal:
            stream = output.events if as_json else sys.stderr
            reporter = ProgressReporter(command, "lines", stream, interval_s, None)
            try:
                yield reporter, output
            finally:
                reporter.close()
            return
        with _terminal_bar() as bar:
            reporter = ProgressReporter(command, "bar", sys.stderr, interval_s, bar)
            try:
                yield reporter, output
            finally:
                reporter.close()
