"""What the catalog backends share (:mod:`ingestion.catalog` for SQLite,
:mod:`ingestion.catalog_postgres` for PostgreSQL): everything that does not depend on the SQL
dialect, so the two cannot drift apart on what a new job looks like, which order the queue runs
in, or what a document indexed before structure was captured reports as its structure.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from datetime import UTC, datetime

from core.errors import ErrorCode
from core.types import Document, DocumentStructure, IngestJob, JobState, Page, StructurePage

#: Terminal job states (a job in one is never claimed again, and holds no claim).
TERMINAL_STATES = tuple(s.value for s in JobState if s.terminal)

#: The queue's order: oldest first, as :meth:`BaseCatalog.unfinished_jobs` lists it (the
#: reverse of :meth:`Catalog.jobs`' ``created_at DESC, job_id``).
QUEUE_ORDER = "created_at, job_id DESC"

#: Page numbers a catalog can hold (a 32-bit column on PostgreSQL). A caller may ask for any
#: integer (a URL path's): beyond these no page exists, and the driver is never handed one
#: it cannot bind (SQLite overflows past 64 bits).
PAGE_NUMBERS = range(1, 2**31)


def _now() -> datetime:
    return datetime.now(UTC)


class BaseCatalog(ABC):
    """The part of :class:`~core.protocols.CatalogRepository` both backends share: it reads
    and writes only through the backend's own methods, so the two cannot drift apart on what
    a new job looks like, which order the queue runs in, or what a document indexed before
    structure was captured reports as its structure."""

    @abstractmethod
    def _write_job(self, job: IngestJob) -> None:
        """Insert or update the job's row: its state and body, never its claim, except that
        a terminal job drops it (a finished job has nothing left to run)."""

    @abstractmethod
    def jobs(
        self,
        tenant: str | None = None,
        states: list[JobState] | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[IngestJob]: ...

    @abstractmethod
    def pages(self, tenant: str, doc_id: str) -> list[Page]: ...

    @abstractmethod
    def _stored_structure(self, document: Document) -> DocumentStructure | None:
        """The structure stored with ``document``'s version, if any."""

    def new_job(
        self,
        *,
        tenant: str,
        source_uri: str,
        path: str,
        doc_id: str,
        acl: list[str],
        valid_until: datetime | None = None,
        submitted_by: str | None = None,
    ) -> IngestJob:
        now = _now()
        job = IngestJob(
            submitted_by=submitted_by,
            job_id=str(uuid.uuid4()),
            tenant=tenant,
            source_uri=source_uri,
            path=path,
            doc_id=doc_id,
            acl=acl,
            valid_until=valid_until,
            created_at=now,
            updated_at=now,
        )
        self.save_job(job)
        return job

    def save_job(self, job: IngestJob) -> None:
        """Persist ``job`` as it is now. Its claim stays with the worker holding it (that
        worker is the one saving it as it advances), except that a terminal job holds none."""
        job.updated_at = _now()
        self._write_job(job)

    def advance(self, job: IngestJob, state: JobState, **fields: object) -> IngestJob:
        """Move ``job`` to ``state`` (with updated fields) and persist it before returning."""
        updated = job.model_copy(update={"state": state, **fields})
        self.save_job(updated)
        return updated

    def fail(self, job: IngestJob, code: ErrorCode, stage: str, message: str) -> IngestJob:
        return self.advance(
            job, JobState.FAILED, error_code=code, error_stage=stage, error_message=message
        )

    def unfinished_jobs(self) -> list[IngestJob]:
        """Jobs a killed process left behind, oldest first (the order they were queued): the
        reverse of :meth:`jobs`' newest-first order, which is also the order claims take."""
        states = [s for s in JobState if not s.terminal]
        return list(reversed(self.jobs(states=states, limit=1_000_000)))

    def structure(self, document: Document) -> DocumentStructure:
        """``document``'s structure as ingestion captured it: page labels, sections, numbered
        figures and tables. A document indexed before structure was captured has its pages
        only (re-ingesting it re-parses it: see ``Document.structure_version``)."""
        stored = self._stored_structure(document)
        if stored is not None:
            return stored
        return DocumentStructure(
            doc_id=document.doc_id,
            version=document.version,
            pages=[
                StructurePage(
                    page_number=p.page_number, label=p.label, width=p.width, height=p.height
                )
                for p in self.pages(document.tenant, document.doc_id)
            ],
        )
