"""The ingestion catalog: jobs, documents and pages in one SQLite file (PostgreSQL for the
cluster profile: :mod:`ingestion.catalog_postgres`; :func:`open_catalog` picks one).

The vector index holds what retrieval needs; the catalog holds what operations need: the job
state machine (so ``kill -9`` in the middle of a batch can be resumed), the documents a tenant
has (for ``sync`` and listings), each page's image reference (for page images and for
deleting them), and the audit log of deletes and replacements (who, what, when). SQLite in
WAL mode: one writer (the ingest process or the server), many readers.

What does not depend on the SQL dialect (building a job, the state transitions, the queue's
order, the structure of a document indexed before structure was captured) lives in
:class:`ingestion.catalog_base.BaseCatalog`, which both backends extend.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from core.protocols import CatalogRepository
from core.settings import Settings
from core.sqlite import SqliteDb
from core.types import (
    AccessFilter,
    AuditEntry,
    Document,
    DocumentStructure,
    IngestJob,
    JobState,
    Page,
)
from ingestion.catalog_base import PAGE_NUMBERS, QUEUE_ORDER, TERMINAL_STATES, BaseCatalog

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at TEXT NOT NULL,
    body TEXT NOT NULL,
    claimed_by TEXT,
    lease_until REAL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_doc ON jobs(tenant, doc_id);
CREATE TABLE IF NOT EXISTS documents (
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    version TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, doc_id)
);
CREATE TABLE IF NOT EXISTS pages (
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    page_number INTEGER NOT NULL,
    image_ref TEXT,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, doc_id, page_number)
);
CREATE INDEX IF NOT EXISTS pages_image ON pages(tenant, image_ref);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_tenant ON audit(tenant, seq);
CREATE TABLE IF NOT EXISTS structures (
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    version TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, doc_id)
);
"""


#: Columns catalogs written before job claims lack, added when such a file is opened.
_CLAIM_COLUMNS = {"claimed_by": "TEXT", "lease_until": "REAL"}


def _marks(values: Sequence[object]) -> str:
    """``?,?,?``: one placeholder per value of an ``IN (...)`` list."""
    return ",".join("?" * len(values))


class Catalog(BaseCatalog):
    """Jobs, documents and pages; every method is one short transaction.

    Safe to share between threads (the server's ingest worker writes while request threads
    read): one connection, every statement under one lock. Safe to share between processes
    too: writes are ``BEGIN IMMEDIATE`` transactions, so a claim (read the queue, then mark
    the job) is atomic against other processes' claims.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sql = SqliteDb(path, _SCHEMA)
        self._tx = self._sql.tx
        self._rows = self._sql.rows
        self._add_claim_columns()

    def _add_claim_columns(self) -> None:
        """Give a catalog written before claims existed their columns. Checked without a lock
        first (an up-to-date file, every open but one, takes no write lock), then again in the
        write transaction, so two processes opening an old file add them once."""
        columns = "PRAGMA table_info(jobs)"  # rows of (cid, name, type, ...)
        if _CLAIM_COLUMNS.keys() <= {r[1] for r in self._rows(columns)}:
            return
        with self._tx() as db:
            have = {r[1] for r in db.execute(columns)}
            for column, kind in _CLAIM_COLUMNS.items():
                if column not in have:
                    db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self._sql.close()

    # -- jobs -------------------------------------------------------------------------------

    def _write_job(self, job: IngestJob) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO jobs (job_id, tenant, doc_id, state, created_at, body)"
                " VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (job_id) DO UPDATE SET tenant = excluded.tenant,"
                " doc_id = excluded.doc_id, state = excluded.state,"
                " created_at = excluded.created_at, body = excluded.body",
                (
                    job.job_id,
                    job.tenant,
                    job.doc_id,
                    job.state.value,
                    job.created_at.isoformat(),
                    job.model_dump_json(),
                ),
            )
            if job.state.terminal:
                db.execute(
                    "UPDATE jobs SET claimed_by = NULL, lease_until = NULL WHERE job_id = ?",
                    (job.job_id,),
                )

    def job(self, job_id: str) -> IngestJob | None:
        rows = self._rows("SELECT body FROM jobs WHERE job_id = ?", (job_id,))
        return IngestJob.model_validate_json(rows[0][0]) if rows else None

    def jobs(
        self,
        tenant: str | None = None,
        states: list[JobState] | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[IngestJob]:
        """Newest first; ``states`` filters before ``limit`` applies."""
        sql = "SELECT body FROM jobs WHERE 1=1"
        args: list[object] = []
        if tenant is not None:
            sql += " AND tenant = ?"
            args.append(tenant)
        if states:
            sql += f" AND state IN ({_marks(states)})"
            args.extend(s.value for s in states)
        sql += " ORDER BY created_at DESC, job_id LIMIT ? OFFSET ?"
        args.extend([limit, offset])
        return [IngestJob.model_validate_json(r[0]) for r in self._rows(sql, args)]

    def delete_jobs(self, tenant: str, doc_id: str) -> int:
        """Forget a document's finished jobs (they name its source); return how many."""
        with self._tx() as db:
            cursor = db.execute(
                f"DELETE FROM jobs WHERE tenant = ? AND doc_id = ?"
                f" AND state IN ({_marks(TERMINAL_STATES)})",
                (tenant, doc_id, *TERMINAL_STATES),
            )
            return cursor.rowcount

    # -- claims -----------------------------------------------------------------------------

    def claim_job(self, worker: str, lease_s: float, job_id: str | None = None) -> IngestJob | None:
        """See :meth:`core.protocols.CatalogRepository.claim_job`. The lease is this host's
        clock; workers sharing a SQLite file share a host."""
        sql = (
            f"SELECT job_id, body FROM jobs WHERE state NOT IN ({_marks(TERMINAL_STATES)})"
            " AND (lease_until IS NULL OR lease_until < ?"
        )
        if job_id is None:
            sql += f") ORDER BY {QUEUE_ORDER} LIMIT 1"
            named: list[object] = []
        else:
            sql += " OR claimed_by = ?) AND job_id = ?"
            named = [worker, job_id]
        with self._tx() as db:
            now = time.time()  # after the write lock is ours: waiting for it ages no lease
            row = db.execute(sql, [*TERMINAL_STATES, now, *named]).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE jobs SET claimed_by = ?, lease_until = ? WHERE job_id = ?",
                (worker, now + lease_s, row[0]),
            )
        return IngestJob.model_validate_json(row[1])

    def release_job(self, job_id: str, worker: str) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET claimed_by = NULL, lease_until = NULL"
                " WHERE job_id = ? AND claimed_by = ?",
                (job_id, worker),
            )

    def renew_claims(self, worker: str, lease_s: float) -> int:
        with self._tx() as db:
            cursor = db.execute(
                f"UPDATE jobs SET lease_until = ? WHERE claimed_by = ?"
                f" AND state NOT IN ({_marks(TERMINAL_STATES)})",
                (time.time() + lease_s, worker, *TERMINAL_STATES),
            )
            return cursor.rowcount

    def job_claims(self) -> list[tuple[str, str]]:
        rows = self._rows(
            "SELECT job_id, claimed_by FROM jobs WHERE claimed_by IS NOT NULL ORDER BY job_id"
        )
        return [(r[0], r[1]) for r in rows]

    # -- audit log --------------------------------------------------------------------------

    def audit(self, entry: AuditEntry) -> None:
        """Append one entry (never updated, never deleted with the document it names)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO audit (tenant, doc_id, body) VALUES (?, ?, ?)",
                (entry.tenant, entry.doc_id, entry.model_dump_json(exclude={"seq"})),
            )

    def audit_entries(
        self, tenant: str, doc_id: str | None = None, limit: int = 100, before: int | None = None
    ) -> list[AuditEntry]:
        """The tenant's entries, newest first (``before``: only entries older than that seq)."""
        sql = "SELECT seq, body FROM audit WHERE tenant = ?"
        args: list[object] = [tenant]
        if doc_id is not None:
            sql += " AND doc_id = ?"
            args.append(doc_id)
        if before is not None:
            sql += " AND seq < ?"
            args.append(before)
        sql += " ORDER BY seq DESC LIMIT ?"
        args.append(limit)
        return [
            AuditEntry.model_validate_json(body).model_copy(update={"seq": seq})
            for seq, body in self._rows(sql, args)
        ]

    # -- documents and pages ----------------------------------------------------------------

    def put_document(
        self, document: Document, pages: list[Page], structure: DocumentStructure | None = None
    ) -> list[str]:
        """Record a document version, its pages and its structure; return image refs no page
        uses any more."""
        with self._tx() as db:
            old_refs = self._image_refs(db, document.tenant, document.doc_id)
            for table in ("pages", "structures"):
                db.execute(
                    f"DELETE FROM {table} WHERE tenant = ? AND doc_id = ?",
                    (document.tenant, document.doc_id),
                )
            if structure is not None:
                db.execute(
                    "INSERT INTO structures (tenant, doc_id, version, body) VALUES (?,?,?,?)",
                    (
                        document.tenant,
                        document.doc_id,
                        document.version,
                        structure.model_dump_json(),
                    ),
                )
            db.execute(
                "INSERT OR REPLACE INTO documents (tenant, doc_id, version, body) VALUES (?,?,?,?)",
                (document.tenant, document.doc_id, document.version, document.model_dump_json()),
            )
            db.executemany(
                "INSERT INTO pages (tenant, doc_id, page_number, image_ref, body)"
                " VALUES (?,?,?,?,?)",
                [
                    (document.tenant, p.doc_id, p.page_number, p.image_ref, p.model_dump_json())
                    for p in pages
                ],
            )
            return self._orphaned(db, document.tenant, old_refs)

    def delete_document(self, tenant: str, doc_id: str) -> list[str] | None:
        """Forget a document; return its now-unused image refs, or None if it was unknown."""
        with self._tx() as db:
            found = db.execute(
                "SELECT 1 FROM documents WHERE tenant = ? AND doc_id = ?", (tenant, doc_id)
            ).fetchone()
            refs = self._image_refs(db, tenant, doc_id)
            for table in ("pages", "structures", "documents"):
                db.execute(
                    f"DELETE FROM {table} WHERE tenant = ? AND doc_id = ?",
                    (tenant, doc_id),
                )
            orphans = self._orphaned(db, tenant, refs)
        return orphans if found else None

    def document(self, tenant: str, doc_id: str) -> Document | None:
        rows = self._rows(
            "SELECT body FROM documents WHERE tenant = ? AND doc_id = ?", (tenant, doc_id)
        )
        return Document.model_validate_json(rows[0][0]) if rows else None

    def documents(self, tenant: str) -> list[Document]:
        rows = self._rows("SELECT body FROM documents WHERE tenant = ? ORDER BY doc_id", (tenant,))
        return [Document.model_validate_json(r[0]) for r in rows]

    def tenants(self) -> list[str]:
        rows = self._rows("SELECT DISTINCT tenant FROM documents ORDER BY tenant", ())
        return [r[0] for r in rows]

    def audit_tenants(self) -> list[str]:
        rows = self._rows("SELECT DISTINCT tenant FROM audit ORDER BY tenant", ())
        return [r[0] for r in rows]

    def _stored_structure(self, document: Document) -> DocumentStructure | None:
        rows = self._rows(
            "SELECT body FROM structures WHERE tenant = ? AND doc_id = ? AND version = ?",
            (document.tenant, document.doc_id, document.version),
        )
        return DocumentStructure.model_validate_json(rows[0][0]) if rows else None

    def pages(self, tenant: str, doc_id: str) -> list[Page]:
        rows = self._rows(
            "SELECT body FROM pages WHERE tenant = ? AND doc_id = ? ORDER BY page_number",
            (tenant, doc_id),
        )
        return [Page.model_validate_json(r[0]) for r in rows]

    def page(self, tenant: str, doc_id: str, page_number: int) -> Page | None:
        if page_number not in PAGE_NUMBERS:
            return None
        rows = self._rows(
            "SELECT body FROM pages WHERE tenant = ? AND doc_id = ? AND page_number = ?",
            (tenant, doc_id, page_number),
        )
        return Page.model_validate_json(rows[0][0]) if rows else None

    @staticmethod
    def _image_refs(db: sqlite3.Connection, tenant: str, doc_id: str) -> set[str]:
        rows = db.execute(
            "SELECT image_ref FROM pages WHERE tenant = ? AND doc_id = ? AND image_ref IS NOT NULL",
            (tenant, doc_id),
        )
        return {r[0] for r in rows}

    @staticmethod
    def _orphaned(db: sqlite3.Connection, tenant: str, refs: set[str]) -> list[str]:
        """Of ``refs``, those no page of the tenant points at (identical pages share images)."""
        return sorted(
            ref
            for ref in refs
            if db.execute(
                "SELECT 1 FROM pages WHERE tenant = ? AND image_ref = ? LIMIT 1", (tenant, ref)
            ).fetchone()
            is None
        )


class CatalogStructures:
    """:class:`~core.protocols.StructureSource` over a catalog, with the permission rule of
    every other read and a small cache: a structure is read (and validated) once per document
    version, not once per query."""

    def __init__(self, catalog: CatalogRepository, cache_size: int = 256) -> None:
        self.catalog = catalog
        self._cache: OrderedDict[tuple[str, str, str], DocumentStructure] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def structure_of(self, access: AccessFilter, doc_id: str) -> DocumentStructure | None:
        document = self.catalog.document(access.tenant, doc_id)
        if document is None or not access.admits_document(document):
            return None
        key = (document.tenant, document.doc_id, document.version)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        structure = self.catalog.structure(document)
        with self._lock:
            self._cache[key] = structure
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return structure


def open_catalog(settings: Settings) -> CatalogRepository:
    """The catalog ``settings`` name: PostgreSQL when ``database_url`` is set (the cluster
    profile: every replica shares it), else SQLite under the data directory. The PostgreSQL
    module (and psycopg) is imported only then, so the embedded profile never loads it."""
    if settings.database_url is not None:
        from ingestion.catalog_postgres import PostgresCatalog

        return PostgresCatalog.open(settings)
    return Catalog(settings.data_dir / "catalog.sqlite3")
