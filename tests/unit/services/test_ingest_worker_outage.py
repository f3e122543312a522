"""A database outage pauses the ingest worker with one warning, not a traceback every poll,
and its end is said once; any other failure still logs its traceback."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import Settings
from pagesight.services import ingest_worker
from pagesight.services.ingest_worker import IngestWorker
from pagesight.services.metrics import ServiceMetrics

DOWN = PageSightError(ErrorCode.DATABASE_UNAVAILABLE, Stage.DATABASE, "PostgreSQL is unreachable")


def _worker(tmp_path: Path, outcomes: list[Any]) -> tuple[IngestWorker, threading.Event]:
    settings = Settings(
        data_dir=tmp_path,
        database_url="postgresql://pagesight@127.0.0.1:1/none",
        database={"job_poll_s": 0.001},
    )
    worker = IngestWorker(settings, stores=None, sources=None, metrics=ServiceMetrics())  # type: ignore[arg-type]
    done = threading.Event()

    def run_job(job_id: str | None) -> bool:
        if not outcomes:
            done.set()
            return False
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return bool(outcome)

    worker._run_job = run_job  # type: ignore[method-assign]
    return worker, done


def _run(worker: IngestWorker, done: threading.Event) -> None:
    thread = threading.Thread(target=worker._work, daemon=True)
    thread.start()
    assert done.wait(10)
    worker._queue.put(ingest_worker._STOP)
    thread.join(10)
    assert not thread.is_alive()


def test_an_outage_is_one_warning_and_its_end_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    worker, done = _worker(tmp_path, [DOWN] * 5 + [False] + [DOWN] * 2 + [False])
    with caplog.at_level(logging.INFO, logger=ingest_worker.log.name):
        _run(worker, done)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    paused = [m for level, m in lines if level == logging.WARNING and "paused" in m]
    resumed = [m for level, m in lines if "resumed" in m]
    assert len(paused) == 2 and len(resumed) == 2  # two outages, each said once
    assert not any(r.exc_info for r in caplog.records)


def test_other_failures_keep_their_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = PageSightError(ErrorCode.INDEX_FAILED, Stage.INDEX, "disk full")
    worker, done = _worker(tmp_path, [other, RuntimeError("bug"), False])
    with caplog.at_level(logging.INFO, logger=ingest_worker.log.name):
        _run(worker, done)
    assert sum(1 for r in caplog.records if r.exc_info) == 2
