"""The child-process guard turns crashes, hangs and runaway memory into stage error codes."""

from __future__ import annotations

import ctypes
import time
from typing import Any

import pytest

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.ingestion.isolation import run_isolated


def _segfault(progress: Any) -> None:
    ctypes.string_at(0)


def _hang(progress: Any) -> None:
    time.sleep(60)


def _allocate(progress: Any) -> int:
    block = bytearray(3 * 1024**3)
    return len(block)


def _report(n: int, progress: Any) -> int:
    for i in range(n):
        progress(i + 1, n)
    return n * 2


def _raise_stage_error(progress: Any) -> None:
    from pagesight.core.errors import Stage

    raise PageSightError(ErrorCode.ENCRYPTED, Stage.RENDER, "needs a password")


def _run(target: Any, args: tuple[Any, ...] = (), **kw: Any) -> Any:
    kw.setdefault("timeout_s", 20)
    kw.setdefault("memory_mb", 1024)
    return run_isolated(target, args, label="test-file", **kw)


def test_result_and_progress_come_back() -> None:
    seen: list[tuple[int, int]] = []
    assert _run(_report, (3,), progress=lambda d, t: seen.append((d, t))) == 6
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_segfault_is_corrupt() -> None:
    with pytest.raises(PageSightError) as err:
        _run(_segfault)
    assert err.value.code == ErrorCode.CORRUPT
    assert "SIGSEGV" in err.value.message


def test_hang_is_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(PageSightError) as err:
        _run(_hang, timeout_s=1.5)
    assert err.value.code == ErrorCode.TIMEOUT
    assert time.monotonic() - started < 10


def test_runaway_memory_is_too_large() -> None:
    with pytest.raises(PageSightError) as err:
        _run(_allocate, memory_mb=512)
    assert err.value.code == ErrorCode.TOO_LARGE


def test_stage_errors_pass_through() -> None:
    with pytest.raises(PageSightError) as err:
        _run(_raise_stage_error)
    assert err.value.code == ErrorCode.ENCRYPTED
    assert err.value.message == "needs a password"


def _parse_then_collect(path: str, progress: Any) -> list[str]:
    import gc
    from pathlib import Path

    from pagesight.core.settings import Settings
    from pagesight.ingestion.pipeline import DocumentParser

    settings = Settings()
    settings.parse.plain_pages = True
    parsed = DocumentParser(settings).parse(Path(path))
    gc.collect()  # frees whatever the parse left unreferenced, cycles included
    return [p.parser for p in parsed.pages]


def test_born_digital_pages_parse_in_the_child(tmp_path: Any) -> None:
    """The child is forked from a server that imported pymupdf, whose layout model's ONNX
    thread pools belong to that server: replacing the model in the child once let it be
    freed, and freeing it joins threads the child does not have (a hang, here a timeout)."""
    from tests.unit.ingestion.test_plain_pages import _report as report_pdf

    path = report_pdf(tmp_path / "report.pdf")
    assert _run(_parse_then_collect, (str(path),), timeout_s=60, memory_mb=4096) == [
        "text-layer-rules",
        "text-layer",
    ]


def _record_pid_then_work(pid_file: str, report: bool, progress: Any) -> None:
    import os
    from pathlib import Path

    Path(pid_file).write_text(str(os.getpid()))
    for i in range(600):  # a long parse: reporting progress, or silent (in native code, say)
        if report:
            progress(i, 600)
        time.sleep(0.1)


_PARENT = """
import sys
sys.path.insert(0, {repo!r})
from tests.unit.ingestion.test_isolation import _record_pid_then_work
from pagesight.ingestion.isolation import run_isolated
if __name__ == "__main__":
    run_isolated(
        _record_pid_then_work, ({pid_file!r}, {report!r}), label="x", timeout_s=120, memory_mb=1024
    )
"""


@pytest.mark.parametrize("report", [True, False], ids=["reporting", "silent"])
def test_a_parse_dies_with_its_service_and_writes_nothing(tmp_path: Any, report: bool) -> None:
    """kill -9 of the process that asked for a parse: the child is gone within seconds (it ran
    on for ~20 s writing BrokenPipe tracebacks) and its stderr stays empty."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    pid_file = tmp_path / "child.pid"
    repo = str(Path(__file__).resolve().parents[3])
    script = _PARENT.format(repo=repo, pid_file=str(pid_file), report=report)
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stderr=subprocess.PIPE, text=True, cwd=repo
    )
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and parent.poll() is None, "the parse never started"
        time.sleep(0.1)
    child = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    _, stderr = parent.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the parse outlived its parent")
    time.sleep(1)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
