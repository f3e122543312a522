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
    from tests.unit.test_plain_pages import _report as report_pdf

    path = report_pdf(tmp_path / "report.pdf")
    assert _run(_parse_then_collect, (str(path),), timeout_s=60, memory_mb=4096) == [
        "text-layer-rules",
        "text-layer",
    ]
