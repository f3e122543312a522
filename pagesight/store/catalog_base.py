"""What the catalog backends share (:mod:`pagesight.store.catalog` for SQLite,
:mod:`pagesight.store.catalog_postgres` for PostgreSQL): all of it but how each is opened.
:class:`SqlCatalog`'s statements are written once, over :mod:`pagesight.store.tables`, and run on
the backend's :class:`~pagesight.store.database.Database`, which says what the two do differently
(whose clock a lease is on, what a claim locks, how document writes queue, text order), so the two
cannot drift apart on what a new job looks like, which order the queue runs in, or what a document
indexed before structure was captured reports as its structure.

Every per-tenant statement is built by a :class:`~pagesight.store.tables.TenantTable`, so the tenant
predicate is written in one place. What is not per tenant is said so where it happens: jobs
read or claimed by id (callers check the tenant of what they get), the queue of unfinished
jobs, and the lists of tenants.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

import sqlalchemy as sa

from pagesight.core.errors import ErrorCode
from pagesight.core.types import (
    AuditEntry,
    Document,
    DocumentState,
    DocumentStructure,
    IngestJob,
    JobState,
    Page,
    StructurePage,
)
from pagesight.store import tables as t
from pagesight.store.database import Database, Executor
from pagesight.store.tables import UNFINISHED, TenantTable

#: Terminal job states (a job in one is never claimed again, and holds no claim); the partial
#: index's predicate :data:`pagesight.store.tables.UNFINISHED` names them.
TERMINAL_STATES = tuple(s.value for s in JobState if s.terminal)

#: The queue's order: oldest first, as :meth:`SqlCatalog.unfinished_jobs` lists it (the
#: reverse of :meth:`SqlCatalog.jobs`' ``created_at DESC, job_id``).
QUEUE_ORDER = (t.jobs.c.created_at, t.jobs.c.job_id.desc())

#: Page numbers a catalog can hold (a 32-bit column on PostgreSQL). A caller may ask for any
#: integer (a URL path's): beyond these no page exists, and the driver is never handed one
#: it cannot bind (SQLite overflows past 64 bits).
PAGE_NUMBERS = range(1, 2**31)

#: Document writes of one tenant queue on this (with the tenant): two replicas writing one
#: document cannot both insert its pages, and "does any page still use this image?" is
#: answered by one writer at a time (SQLite's one writer gives both for free).
_DOCUMENT_WRITES = 0x43_41_54_47  # "CATG"

#: Image refs per ``IN (...)`` list (SQLite limits a statement's parameters).
_REFS_PER_QUERY = 500

_JOBS = TenantTable(t.jobs)
_DOCUMENTS = TenantTable(t.documents)
_PAGES = TenantTable(t.pages)
_STRUCTURES = TenantTable(t.structures)
_AUDIT = TenantTable(t.audit)


def _now() -> datetime:
    return datetime.now(UTC)


class SqlCatalog:
    """:class:`~pagesight.core.protocols.CatalogRepository` on a
    :class:`~pagesight.store.database.Database`: every method one short transaction, safe to share
    between threads (and processes, and replicas: see the database's locks)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def close(self) -> None:
        self._db.close()

    # -- jobs -------------------------------------------------------------------------------

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
        jobs = t.jobs
        insert = self._db.insert(jobs).values(
            job_id=job.job_id,
            tenant=job.tenant,
            doc_id=job.doc_id,
            state=job.state.value,
            created_at=job.created_at,
            body=job.model_dump_json(exclude={"document_state"}),
        )
        upsert = insert.on_conflict_do_update(
            index_elements=[jobs.c.job_id],
            set_={
                c: insert.excluded[c] for c in ("tenant", "doc_id", "state", "created_at", "body")
            },
        )
        with self._db.tx() as db:
            db.execute(upsert)
            if job.state.terminal:
                db.execute(
                    sa.update(jobs)
                    .where(jobs.c.job_id == job.job_id)
                    .values(claimed_by=None, lease_until=None)
                )

    def advance(self, job: IngestJob, state: JobState, **fields: object) -> IngestJob:
        """Move ``job`` to ``state`` (with updated fields) and persist it before returning."""
        updated = job.model_copy(update={"state": state, **fields})
        self.save_job(updated)
        return updated

    def fail(self, job: IngestJob, code: ErrorCode, stage: str, message: str) -> IngestJob:
        return self.advance(
            job, JobState.FAILED, error_code=code, error_stage=stage, error_message=message
        )

    def job(self, job_id: str) -> IngestJob | None:
        """By id, every tenant's: callers check the tenant of what they get."""
        rows = self._db.rows(sa.select(t.jobs.c.body).where(t.jobs.c.job_id == job_id))
        return IngestJob.model_validate_json(rows[0][0]) if rows else None

    def jobs(
        self,
        tenant: str | None = None,
        states: list[JobState] | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[IngestJob]:
        """Newest first; ``states`` filters before ``limit`` applies. No tenant: every
        tenant's (the queue a restart resumes)."""
        jobs = t.jobs
        query = sa.select(jobs.c.body) if tenant is None else _JOBS.select(tenant, jobs.c.body)
        if states:
            query = query.where(jobs.c.state.in_([s.value for s in states]))
        query = query.order_by(jobs.c.created_at.desc(), jobs.c.job_id).limit(limit).offset(offset)
        return [IngestJob.model_validate_json(r[0]) for r in self._db.rows(query)]

    def unfinished_jobs(self) -> list[IngestJob]:
        """Jobs a killed process left behind, oldest first (the order they were queued): the
        reverse of :meth:`jobs`' newest-first order, which is also the order claims take."""
        states = [s for s in JobState if not s.terminal]
        return list(reversed(self.jobs(states=states, limit=1_000_000)))

    def delete_jobs(self, tenant: str, doc_id: str) -> int:
        """Forget a document's finished jobs (they name its source); return how many."""
        jobs = t.jobs
        with self._db.tx() as db:
            cursor = db.execute(
                _JOBS.delete(tenant).where(
                    jobs.c.doc_id == doc_id, jobs.c.state.in_(TERMINAL_STATES)
                )
            )
            return int(cursor.rowcount)

    # -- claims (by job id, not per tenant: a worker runs every tenant's jobs) -------------

    def claim_job(self, worker: str, lease_s: float, job_id: str | None = None) -> IngestJob | None:
        """See :meth:`pagesight.core.protocols.CatalogRepository.claim_job`. Leases are on the
        database's clock (:meth:`~pagesight.store.database.Database.now`). The next job is picked
        without waiting on one another worker is claiming; a claim by id waits instead (its
        row is locked only for a moment, by a save or another claim), so a worker renewing
        its lease never reads a momentary lock as "not claimable"."""
        jobs = t.jobs
        with self._db.tx() as db:
            now = self._db.now()  # on SQLite: after the write lock is ours (it ages no lease)
            free = sa.or_(jobs.c.lease_until.is_(None), jobs.c.lease_until < now)
            query = sa.select(jobs.c.job_id, jobs.c.body).where(UNFINISHED)
            if job_id is None:
                query = query.where(free).order_by(*QUEUE_ORDER).limit(1)
                query = self._db.for_update(query, skip_locked=True)
            else:
                query = query.where(sa.or_(free, jobs.c.claimed_by == worker))
                query = self._db.for_update(query.where(jobs.c.job_id == job_id), skip_locked=False)
            row = db.execute(query).fetchone()
            if row is None:
                return None
            db.execute(
                sa.update(jobs)
                .where(jobs.c.job_id == row[0])
                .values(claimed_by=worker, lease_until=self._db.now(after_s=lease_s))
            )
        return IngestJob.model_validate_json(row[1])

    def release_job(self, job_id: str, worker: str) -> None:
        jobs = t.jobs
        with self._db.tx() as db:
            db.execute(
                sa.update(jobs)
                .where(jobs.c.job_id == job_id, jobs.c.claimed_by == worker)
                .values(claimed_by=None, lease_until=None)
            )

    def renew_claims(self, worker: str, lease_s: float) -> int:
        jobs = t.jobs
        with self._db.tx() as db:
            cursor = db.execute(
                sa.update(jobs)
                .where(jobs.c.claimed_by == worker, UNFINISHED)
                .values(lease_until=self._db.now(after_s=lease_s))
            )
            return int(cursor.rowcount)

    def job_claims(self) -> list[tuple[str, str]]:
        jobs = t.jobs
        rows = self._db.rows(
            sa.select(jobs.c.job_id, jobs.c.claimed_by)
            .where(jobs.c.claimed_by.is_not(None))
            .order_by(self._db.text_order(jobs.c.job_id))
        )
        return [(r[0], r[1]) for r in rows]

    # -- audit log --------------------------------------------------------------------------

    def audit(self, entry: AuditEntry) -> None:
        """Append one entry (never updated, never deleted with the document it names)."""
        with self._db.tx() as db:
            db.execute(
                sa.insert(t.audit).values(
                    tenant=entry.tenant,
                    doc_id=entry.doc_id,
                    body=entry.model_dump_json(exclude={"seq"}),
                )
            )

    def audit_entries(
        self, tenant: str, doc_id: str | None = None, limit: int = 100, before: int | None = None
    ) -> list[AuditEntry]:
        """The tenant's entries, newest first (``before``: only entries older than that seq)."""
        audit = t.audit
        query = _AUDIT.select(tenant, audit.c.seq, audit.c.body)
        if doc_id is not None:
            query = query.where(audit.c.doc_id == doc_id)
        if before is not None:
            query = query.where(audit.c.seq < before)
        query = query.order_by(audit.c.seq.desc()).limit(limit)
        return [
            AuditEntry.model_validate_json(body).model_copy(update={"seq": seq})
            for seq, body in self._db.rows(query)
        ]

    def audit_tenants(self) -> list[str]:
        """Every tenant with an audit entry (across tenants by design: rollback)."""
        return self._all_tenants(t.audit)

    # -- documents and pages ----------------------------------------------------------------

    def put_document(
        self, document: Document, pages: list[Page], structure: DocumentStructure | None = None
    ) -> list[str]:
        """Record a document version, its pages and its structure; return image refs no page
        of the tenant uses any more. The document's ``state`` is written as it is (a re-index
        records one it left out as MISSING, with no pages and no structure)."""
        tenant, doc_id = document.tenant, document.doc_id
        documents = t.documents
        with self._db.tx() as db:
            self._db.serialize(db, _DOCUMENT_WRITES, tenant)
            old_refs = self._image_refs(db, tenant, doc_id)
            for table in (_PAGES, _STRUCTURES):
                db.execute(table.delete(tenant).where(table.table.c.doc_id == doc_id))
            if structure is not None:
                db.execute(
                    sa.insert(t.structures).values(
                        tenant=tenant,
                        doc_id=doc_id,
                        version=document.version,
                        body=structure.model_dump_json(),
                    )
                )
            insert = self._db.insert(documents).values(
                tenant=tenant,
                doc_id=doc_id,
                version=document.version,
                body=document.model_dump_json(),
                state=document.state.value,
            )
            db.execute(
                insert.on_conflict_do_update(
                    index_elements=[documents.c.tenant, documents.c.doc_id],
                    set_={c: insert.excluded[c] for c in ("version", "body", "state")},
                )
            )
            if pages:
                db.execute(
                    sa.insert(t.pages),
                    [
                        {
                            "tenant": tenant,
                            "doc_id": p.doc_id,
                            "page_number": p.page_number,
                            "image_ref": p.image_ref,
                            "body": p.model_dump_json(),
                        }
                        for p in pages
                    ],
                )
            return self._orphaned(db, tenant, old_refs)

    def delete_document(self, tenant: str, doc_id: str) -> list[str] | None:
        """Forget a document; return its now-unused image refs, or None if it was unknown."""
        with self._db.tx() as db:
            self._db.serialize(db, _DOCUMENT_WRITES, tenant)
            known = _DOCUMENTS.select(tenant, sa.literal(1)).where(t.documents.c.doc_id == doc_id)
            found = db.execute(known).fetchone() is not None
            refs = self._image_refs(db, tenant, doc_id)
            for table in (_PAGES, _STRUCTURES, _DOCUMENTS):
                db.execute(table.delete(tenant).where(table.table.c.doc_id == doc_id))
            orphans = self._orphaned(db, tenant, refs)
        return orphans if found else None

    def document(self, tenant: str, doc_id: str) -> Document | None:
        documents = t.documents
        rows = self._db.rows(
            _DOCUMENTS.select(tenant, documents.c.body).where(documents.c.doc_id == doc_id)
        )
        return Document.model_validate_json(rows[0][0]) if rows else None

    def document_states(self, tenant: str, doc_ids: Iterable[str]) -> dict[str, DocumentState]:
        """The state of each of ``doc_ids`` the tenant has a document of (the others are left
        out): read from the ``state`` column, no body parsed, for a jobs listing to show each
        job's document state."""
        documents, found = t.documents, dict[str, DocumentState]()
        for chunk in _chunks(sorted(set(doc_ids)), _REFS_PER_QUERY):
            query = _DOCUMENTS.select(tenant, documents.c.doc_id, documents.c.state).where(
                documents.c.doc_id.in_(chunk)
            )
            found.update({r[0]: DocumentState(r[1]) for r in self._db.rows(query)})
        return found

    def documents(self, tenant: str) -> list[Document]:
        documents = t.documents
        query = _DOCUMENTS.select(tenant, documents.c.body).order_by(
            self._db.text_order(documents.c.doc_id)
        )
        return [Document.model_validate_json(r[0]) for r in self._db.rows(query)]

    def tenants(self) -> list[str]:
        """Every tenant with a document (across tenants by design: re-indexing)."""
        return self._all_tenants(t.documents)

    def structure(self, document: Document) -> DocumentStructure:
        """``document``'s structure as ingestion captured it: page labels, sections, numbered
        figures and tables. A document indexed before structure was captured has its pages
        only (re-ingesting it re-parses it: see ``Document.structure_version``)."""
        structures = t.structures
        rows = self._db.rows(
            _STRUCTURES.select(document.tenant, structures.c.body).where(
                structures.c.doc_id == document.doc_id,
                structures.c.version == document.version,
            )
        )
        if rows:
            return DocumentStructure.model_validate_json(rows[0][0])
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

    def pages(self, tenant: str, doc_id: str) -> list[Page]:
        pages = t.pages
        query = (
            _PAGES.select(tenant, pages.c.body)
            .where(pages.c.doc_id == doc_id)
            .order_by(pages.c.page_number)
        )
        return [Page.model_validate_json(r[0]) for r in self._db.rows(query)]

    def page(self, tenant: str, doc_id: str, page_number: int) -> Page | None:
        if page_number not in PAGE_NUMBERS:
            return None
        pages = t.pages
        rows = self._db.rows(
            _PAGES.select(tenant, pages.c.body).where(
                pages.c.doc_id == doc_id, pages.c.page_number == page_number
            )
        )
        return Page.model_validate_json(rows[0][0]) if rows else None

    # -- helpers ----------------------------------------------------------------------------

    def _all_tenants(self, table: sa.Table) -> list[str]:
        tenant = table.c.tenant
        query = sa.select(tenant).group_by(tenant).order_by(self._db.text_order(tenant))
        return [r[0] for r in self._db.rows(query)]

    @staticmethod
    def _image_refs(db: Executor, tenant: str, doc_id: str) -> set[str]:
        pages = t.pages
        rows = db.execute(
            _PAGES.select(tenant, pages.c.image_ref).where(
                pages.c.doc_id == doc_id, pages.c.image_ref.is_not(None)
            )
        )
        return {r[0] for r in rows}

    @staticmethod
    def _orphaned(db: Executor, tenant: str, refs: set[str]) -> list[str]:
        """Of ``refs``, those no page of the tenant points at (identical pages share images)."""
        pages = t.pages
        used: set[str] = set()
        for chunk in _chunks(sorted(refs), _REFS_PER_QUERY):
            query = _PAGES.select(tenant, pages.c.image_ref).where(pages.c.image_ref.in_(chunk))
            used.update(r[0] for r in db.execute(query.distinct()))
        return sorted(refs - used)


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
