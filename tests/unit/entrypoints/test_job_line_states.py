"""``pagesight jobs``' human lines: a READY job whose document a re-index left out reads
MISSING (not READY with chunks that no live index holds); every other job reads as before."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pagesight.core.errors import ErrorCode
from pagesight.core.types import DocumentState, JobState, JobStatus
from pagesight.entrypoints.cli_common import _job_line

NOW = datetime(2026, 12, 3, tzinfo=UTC)


def _job(**fields: Any) -> JobStatus:
    base: dict[str, Any] = {
        "job_id": "j",
        "tenant": "t",
        "source_uri": "file:///docs/chart.pdf",
        "doc_id": "doc-1",
        "state": JobState.READY,
        "pages": 2,
        "chunks": 5,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return JobStatus(**(base | fields))


def test_a_ready_job_of_a_missing_document_reads_missing() -> None:
    line = _job_line(_job(document_state=DocumentState.MISSING))
    assert line.split()[:3] == ["MISSING", "chart.pdf", "doc-1"]
    assert "chunks" not in line and "not searchable" in line
    unchanged = _job_line(_job(unchanged=True, document_state=DocumentState.MISSING))
    assert unchanged.startswith("MISSING")


def test_other_jobs_read_as_before() -> None:
    for shown in (None, DocumentState.READY):
        assert _job_line(_job(document_state=shown)).split()[0] == "READY"
        assert "2 pages, 5 chunks" in _job_line(_job(document_state=shown))
    failed = _job(
        state=JobState.FAILED,
        error_code=ErrorCode.CORRUPT,
        error_stage="parse",
        error_message="bad xref",
        document_state=DocumentState.MISSING,  # an older version's document: still FAILED
    )
    assert _job_line(failed).startswith("FAILED") and "parse/CORRUPT" in _job_line(failed)
    running = _job(state=JobState.PARSING, document_state=DocumentState.MISSING)
    assert _job_line(running).startswith("PARSING")
