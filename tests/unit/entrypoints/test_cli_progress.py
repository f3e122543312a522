"""What ``bulk`` and ``reindex`` show while they run: the plan first, progress lines from a
ticker while nothing finishes, the last state always; and Ray's output kept off stderr unless
``--verbose`` (file descriptors, so a child process tells the truth)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pagesight.entrypoints import cli_progress
from pagesight.entrypoints.cli_progress import ProgressReporter, plan_text
from pagesight.ingestion.bulk import BulkProgress


def _events(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _planned() -> BulkProgress:
    progress = BulkProgress(files_total=5, skipped=2, to_do=3)
    progress.files_done = 2
    return progress


def test_the_plan_comes_first_and_the_ticker_reports_while_nothing_finishes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli_progress, "MIN_TICK_S", 0.05)
    stream = io.StringIO()
    reporter = ProgressReporter("bulk", "lines", stream, 0.05, None)
    progress = _planned()
    reporter(progress)
    progress.phase = "starting"  # a Ray start: minutes in which no file finishes
    deadline = time.monotonic() + 30
    while len(_events(stream)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    progress.files_done, progress.pages_done = 5, 12
    progress.finish()
    reporter(progress)
    reporter.close()
    events = _events(stream)
    assert events[0] == {
        "event": "plan",
        "command": "bulk",
        "files": 5,
        "already_done": 2,
        "held": 0,
        "missing": 0,
        "failed": 0,
        "to_do": 3,
    }
    ticks = [e for e in events[1:-1] if e["event"] == "progress"]
    assert len(ticks) >= 2, events
    assert {t["phase"] for t in ticks} == {"starting"} and {t["files_done"] for t in ticks} == {2}
    assert ticks[0]["elapsed_s"] < ticks[-1]["elapsed_s"]  # read from the clock, not a file
    assert events[-1]["phase"] == "done" and events[-1]["files_done"] == 5


def test_finished_files_are_shown_at_most_every_interval_and_the_last_always() -> None:
    stream = io.StringIO()
    reporter = ProgressReporter("bulk", "lines", stream, 3600.0, None)
    progress = _planned()
    reporter(progress)
    for _ in range(3):
        progress.files_done += 1
        reporter(progress)
    progress.finish()
    reporter(progress)
    reporter.close()
    events = _events(stream)
    assert [e["event"] for e in events] == ["plan", "progress"]
    assert events[-1]["files_done"] == 5 and events[-1]["phase"] == "done"


def test_the_run_clock_stops_once() -> None:
    progress = BulkProgress(files_total=1)
    wall = progress.finish()
    time.sleep(0.01)
    assert progress.tick().elapsed_s == wall  # the summary and the last line: one reading
    assert progress.as_dict()["elapsed_s"] == round(wall, 3)


def test_the_plan_in_words() -> None:
    progress = BulkProgress(files_total=12, skipped=4, held=1, failed=1, to_do=7)
    assert plan_text(progress) == (
        "bulk: 12 files: 3 already done, 1 held by another worker, 1 failed before parsing, 7 to do"
    )
    reindex = BulkProgress(
        files_total=5, missing=1, to_do=4, command="reindex", files_counted=4, pages_counted=40
    )
    assert plan_text(reindex) == "reindex: 5 documents: 1 missing, 4 to do (40 pages)"


_CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from pagesight.entrypoints.cli_progress import ray_output

    with ray_output({verbose}, Path(sys.argv[1])) as output:
        os.write(2, b"E core_worker.cc: a Ray line on fd 2\\n")
        os.write(1, b"(raylet) a Ray line on fd 1\\n")
        print("ours on sys.stderr", file=sys.stderr)
        output.events.write('{{"event": "plan"}}\\n')
    print("after, on stdout")
    """
)


@pytest.mark.parametrize("verbose", [False, True])
def test_ray_output_is_kept_off_stderr_unless_verbose(tmp_path: Path, verbose: bool) -> None:
    log = tmp_path / "logs" / "bulk-ray.log"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(verbose=verbose), str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.splitlines() == ['{"event": "plan"}', "after, on stdout"]
    assert "ours on sys.stderr" in done.stderr
    ray_lines = ["E core_worker.cc: a Ray line on fd 2", "(raylet) a Ray line on fd 1"]
    if verbose:
        assert all(line in done.stderr for line in ray_lines)
        assert not log.exists()
    else:
        assert not any(line in done.stderr for line in ray_lines), done.stderr
        assert all(line in log.read_text() for line in ray_lines)


def test_the_terminal_bar_takes_every_event(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    shown = io.StringIO()
    monkeypatch.setattr(cli_progress, "err", Console(file=shown, force_terminal=True, width=160))
    bar = cli_progress._terminal_bar()
    with bar:
        reporter = ProgressReporter("bulk", "bar", io.StringIO(), 3600.0, bar)
        progress = _planned()
        reporter(progress)
        progress.phase, progress.pages_counted, progress.files_counted = "running", 7, 1
        progress.files_done, progress.pages_done = 3, 4
        reporter(progress)
        task = bar.tasks[0]
        assert (task.completed, task.total) == (3, 5)
        assert task.fields["counted"] == "7+" and task.fields["pages"] == 4
        progress.finish()
        reporter(progress)
        reporter.close()
    assert bar.tasks[0].fields["phase"] == "done"
    assert "bulk: 5 files: 2 already done, 3 to do" in shown.getvalue()
