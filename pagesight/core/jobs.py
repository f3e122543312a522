"""Ingest jobs and the audit log: a file's trip through ingestion, and who deleted or replaced
what."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from pagesight.core.document import DocumentState
from pagesight.core.errors import ErrorCode


class JobState(StrEnum):
    """Ingest job states (DESIGN.md section 2); READY and FAILED are terminal."""

    PENDING = "PENDING"
    RENDERING = "RENDERING"
    PARSING = "PARSING"
    EMBEDDING = "EMBEDDING"
    INDEXING = "INDEXING"
    READY = "READY"
    FAILED = "FAILED"

    @property
    def terminal(self) -> bool:
        return self in (JobState.READY, JobState.FAILED)


class JobStatus(BaseModel):
    """An ingest job as callers see it: its state, never where the service keeps the file."""

    job_id: str
    tenant: str
    source_uri: str
    doc_id: str
    version: str | None = None
    acl: list[str] = Field(default_factory=list)
    valid_until: datetime | None = None
    state: JobState = JobState.PENDING
    error_code: ErrorCode | None = None
    error_stage: str | None = None
    error_message: str | None = None
    warnings: list[str] = Field(default_factory=list)
    pages: int = 0
    chunks: int = 0
    unchanged: bool = False
    attempts: int = 0
    created_at: datetime
    updated_at: datetime
    document_state: DocumentState | None = Field(
        default=None,
        description="the state of the job's document now, as the catalog says when the job "
        "is read (a READY job whose document a re-index left out reads MISSING here); null "
        "when the catalog holds no document of that id (yet). Never stored with the job",
    )


class IngestJob(JobStatus):
    """One file's trip through ingestion, persisted so a killed batch can resume."""

    path: str = Field(description="where the service reads the file (internal)")
    submitted_by: str | None = Field(default=None, description="key id or CLI user")

    def status(self) -> JobStatus:
        """What the API shows of this job."""
        return JobStatus.model_validate(self.model_dump(include=set(JobStatus.model_fields)))


class AuditEntry(BaseModel):
    """One delete or replacement of a document: who (key id), what, when."""

    seq: int = 0
    at: datetime
    tenant: str
    actor: str = Field(description="API key id, or cli:<user> for the command line")
    action: Literal["delete", "replace"]
    doc_id: str
    version: str | None = Field(default=None, description="the version removed or replaced")
    new_version: str | None = None
    source_uri: str | None = None
    acl: list[str] = Field(default_factory=list, description="the document's ACL at the time")
    via: str = Field(default="", description="api, cli, sync")
