"""``DocumentState``: a document is READY unless a re-index left it out (MISSING), and a body
written before the state existed reads READY (every document then was in the live index)."""

from __future__ import annotations

from pagesight.core.types import Document, DocumentState, JobState, JobStatus


def test_a_document_is_ready_unless_said_otherwise() -> None:
    doc = Document(doc_id="d", version="v", source_uri="file:///d.pdf")
    assert doc.state is DocumentState.READY
    missing = doc.model_copy(update={"state": DocumentState.MISSING})
    assert Document.model_validate_json(missing.model_dump_json()).state is DocumentState.MISSING


def test_a_body_from_before_states_reads_ready() -> None:
    old = '{"doc_id": "d", "version": "v", "source_uri": "upload:d.pdf"}'
    assert Document.model_validate_json(old).state is DocumentState.READY


def test_states_are_their_names_and_not_job_states() -> None:
    assert [s.value for s in DocumentState] == ["READY", "MISSING"]
    assert "MISSING" not in {s.value for s in JobState}  # a job's history is not rewritten


def test_a_job_shows_its_documents_state_only_when_told() -> None:
    job = JobStatus.model_validate(
        {
            "job_id": "j",
            "tenant": "t",
            "source_uri": "upload:d.pdf",
            "doc_id": "d",
            "created_at": "2026-12-03T00:00:00Z",
            "updated_at": "2026-12-03T00:00:00Z",
        }
    )
    assert job.document_state is None
    shown = job.model_copy(update={"document_state": DocumentState.MISSING})
    assert shown.model_dump(mode="json")["document_state"] == "MISSING"
