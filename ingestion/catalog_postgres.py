"""The ingestion catalog in PostgreSQL, for the cluster profile: jobs, documents, pages,
structure and the audit log in the database every replica shares, with the semantics of the
SQLite :class:`~ingestion.catalog.Catalog` (the contract tests run both).

Every per-tenant statement is built by a :class:`~core.postgres.TenantTable`, so the tenant
predicate is written in one place. What is not per tenant is said so where it happens: jobs
read or claimed by id (callers check the tenant of what they get), the queue of unfinished
jobs, and the lists of tenants.

Three things SQLite gave for free are made explicit here:

- SQLite has one writer at a time; PostgreSQL does not. Document writes take a per-tenant
  advisory lock, so two replicas writing one document cannot both insert its pages, and the
  tenant-wide question "does any page still use this image?" is answered by one writer at a
  time, as in SQLite.
- Claims: ``SELECT ... FOR UPDATE SKIP LOCKED`` picks the next job without waiting on one
  another worker is claiming; a claim by id waits instead (its row is locked only for a
  moment, by a save or another claim), so a worker renewing its lease never reads a
  momentary lock as "not claimable".
- Text order: ``ORDER BY`` over ids callers choose (documents, tenants) uses the "C"
  collation, the byte order SQLite uses, whatever locale the database was created with (job
  ids are UUIDs: every collation orders them alike).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.postgres import SharedDb, TenantTable, jsonb, open_database
from core.settings import Settings
from core.types import AuditEntry, Document, DocumentStructure, IngestJob, JobState, Page
from ingestion.catalog_base import PAGE_NUMBERS, QUEUE_ORDER, TERMINAL_STATES, BaseCatalog

if TYPE_CHECKING:
    import psycopg

    Conn = psycopg.Connection[Any]

_JOBS = TenantTable("jobs")
_DOCUMENTS = TenantTable("documents")
_PAGES = TenantTable("pages")
_STRUCTURES = TenantTable("structures")
_AUDIT = TenantTable("audit")

#: Unfinished jobs, spelled with literals (not a parameter) so that the planner can use the
#: partial index ``jobs_unfinished``, whose predicate this is.
_UNFINISHED = f"state NOT IN ({', '.join(repr(s) for s in TERMINAL_STATES)})"

#: First key of the per-tenant document-write advisory lock (the second is the tenant's
#: hash); the two-key form never meets the migrations' one-key lock.
_DOCUMENT_WRITES = 0x43_41_54_47  # "CATG"


class PostgresCatalog(BaseCatalog):
    """:class:`~core.protocols.CatalogRepository` on PostgreSQL: every method one short
    transaction on the process's pool, safe to share between threads and between replicas."""

    def __init__(self, db: SharedDb) -> None:
        self._db = db

    @classmethod
    def open(cls, settings: Settings) -> PostgresCatalog:
        """On the process's pool (schema checked, see :func:`core.postgres.open_database`)."""
        return cls(open_database(settings))

    def close(self) -> None:
        self._db.close()

    # -- jobs -------------------------------------------------------------------------------

    def _write_job(self, job: IngestJob) -> None:
        with self._db.tx() as conn:
            conn.execute(
                "INSERT INTO jobs (job_id, tenant, doc_id, state, created_at, body)"
                " VALUES (%s, %s, %s, %s, %s, %s::jsonb)"
                " ON CONFLICT (job_id) DO UPDATE SET tenant = excluded.tenant,"
                " doc_id = excluded.doc_id, state = excluded.state,"
                " created_at = excluded.created_at, body = excluded.body",
                (
                    job.job_id,
                    job.tenant,
                    job.doc_id,
                    job.state.value,
                    job.created_at,
                    jsonb(job),
                ),
            )
            if job.state.terminal:
                conn.execute(
                    "UPDATE jobs SET claimed_by = NULL, lease_until = NULL WHERE job_id = %s",
                    (job.job_id,),
                )

    def job(self, job_id: str) -> IngestJob | None:
        """By id, every tenant's: callers check the tenant of what they get."""
        rows = self._db.rows("SELECT body::text FROM jobs WHERE job_id = %s", (job_id,))
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
        where = "state = ANY(%s)" if states else ""
        args: list[object] = [[s.value for s in states]] if states else []
        tail = "ORDER BY created_at DESC, job_id LIMIT %s OFFSET %s"
        args += [limit, offset]
        if tenant is not None:
            sql, params = _JOBS.select("body::text", tenant, where, args, tail)
        else:
            sql, params = f"SELECT body::text FROM jobs WHERE {where or 'TRUE'} {tail}", args
        return [IngestJob.model_validate_json(r[0]) for r in self._db.rows(sql, params)]

    def delete_jobs(self, tenant: str, doc_id: str) -> int:
        """Forget a document's finished jobs (they name its source); return how many."""
        with self._db.tx() as conn:
            cursor = conn.execute(
                *_JOBS.delete(
                    tenant, "doc_id = %s AND state = ANY(%s)", [doc_id, list(TERMINAL_STATES)]
                )
            )
            return int(cursor.rowcount)

    # -- claims (by job id, not per tenant: a worker runs every tenant's jobs) -------------

    def claim_job(self, worker: str, lease_s: float, job_id: str | None = None) -> IngestJob | None:
        """See :meth:`core.protocols.CatalogRepository.claim_job`; leases are on the
        database's clock, the one every replica shares."""
        sql = (
            f"SELECT job_id, body::text FROM jobs WHERE {_UNFINISHED}"
            " AND (lease_until IS NULL OR lease_until < now()"
        )
        if job_id is None:
            sql += f") ORDER BY {QUEUE_ORDER} LIMIT 1 FOR UPDATE SKIP LOCKED"
            named: list[object] = []
        else:
            sql += " OR claimed_by = %s) AND job_id = %s FOR UPDATE"
            named = [worker, job_id]
        with self._db.tx() as conn:
            row = conn.execute(sql, named).fetchone()
            if row is None:
                return None
            conn.execute(
                "UPDATE jobs SET claimed_by = %s, lease_until = now() + %s * interval '1 second'"
                " WHERE job_id = %s",
                (worker, float(lease_s), row[0]),
            )
        return IngestJob.model_validate_json(row[1])

    def release_job(self, job_id: str, worker: str) -> None:
        with self._db.tx() as conn:
            conn.execute(
                "UPDATE jobs SET claimed_by = NULL, lease_until = NULL"
                " WHERE job_id = %s AND claimed_by = %s",
                (job_id, worker),
            )

    def renew_claims(self, worker: str, lease_s: float) -> int:
        with self._db.tx() as conn:
            cursor = conn.execute(
                "UPDATE jobs SET lease_until = now() + %s * interval '1 second'"
                f" WHERE claimed_by = %s AND {_UNFINISHED}",
                (float(lease_s), worker),
            )
            return int(cursor.rowcount)

    def job_claims(self) -> list[tuple[str, str]]:
        rows = self._db.rows(
            "SELECT job_id, claimed_by FROM jobs WHERE claimed_by IS NOT NULL"
            ' ORDER BY job_id COLLATE "C"'
        )
        return [(r[0], r[1]) for r in rows]

    # -- audit log --------------------------------------------------------------------------

    def audit(self, entry: AuditEntry) -> None:
        """Append one entry (never updated, never deleted with the document it names)."""
        with self._db.tx() as conn:
            conn.execute(
                "INSERT INTO audit (tenant, doc_id, body) VALUES (%s, %s, %s::jsonb)",
                (entry.tenant, entry.doc_id, jsonb(entry, exclude={"seq"})),
            )

    def audit_entries(
        self, tenant: str, doc_id: str | None = None, limit: int = 100, before: int | None = None
    ) -> list[AuditEntry]:
        """The tenant's entries, newest first (``before``: only entries older than that seq)."""
        where: list[str] = []
        args: list[object] = []
        if doc_id is not None:
            where.append("doc_id = %s")
            args.append(doc_id)
        if before is not None:
            where.append("seq < %s")
            args.append(before)
        rows = self._db.rows(
            *_AUDIT.select(
                "seq, body::text",
                tenant,
                " AND ".join(where),
                [*args, limit],
                "ORDER BY seq DESC LIMIT %s",
            )
        )
        return [
            AuditEntry.model_validate_json(body).model_copy(update={"seq": seq})
            for seq, body in rows
        ]

    # -- documents and pages ----------------------------------------------------------------

    def put_document(
        self, document: Document, pages: list[Page], structure: DocumentStructure | None = None
    ) -> list[str]:
        """Record a document version, its pages and its structure; return image refs no page
        of the tenant uses any more."""
        tenant, doc_id = document.tenant, document.doc_id
        with self._db.tx() as conn:
            self._lock_documents(conn, tenant)
            old_refs = self._image_refs(conn, tenant, doc_id)
            for table in (_PAGES, _STRUCTURES):
                conn.execute(*table.delete(tenant, "doc_id = %s", [doc_id]))
            if structure is not None:
                conn.execute(
                    "INSERT INTO structures (tenant, doc_id, version, body)"
                    " VALUES (%s, %s, %s, %s::jsonb)",
                    (tenant, doc_id, document.version, jsonb(structure)),
                )
            conn.execute(
                "INSERT INTO documents (tenant, doc_id, version, body)"
                " VALUES (%s, %s, %s, %s::jsonb) ON CONFLICT (tenant, doc_id)"
                " DO UPDATE SET version = excluded.version, body = excluded.body",
                (tenant, doc_id, document.version, jsonb(document)),
            )
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO pages (tenant, doc_id, page_number, image_ref, body)"
                    " VALUES (%s, %s, %s, %s, %s::jsonb)",
                    [(tenant, p.doc_id, p.page_number, p.image_ref, jsonb(p)) for p in pages],
                )
            return self._orphaned(conn, tenant, old_refs)

    def delete_document(self, tenant: str, doc_id: str) -> list[str] | None:
        """Forget a document; return its now-unused image refs, or None if it was unknown."""
        with self._db.tx() as conn:
            self._lock_documents(conn, tenant)
            known = conn.execute(*_DOCUMENTS.select("1", tenant, "doc_id = %s", [doc_id]))
            found = known.fetchone() is not None
            refs = self._image_refs(conn, tenant, doc_id)
            for table in (_PAGES, _STRUCTURES, _DOCUMENTS):
                conn.execute(*table.delete(tenant, "doc_id = %s", [doc_id]))
            orphans = self._orphaned(conn, tenant, refs)
        return orphans if found else None

    def document(self, tenant: str, doc_id: str) -> Document | None:
        rows = self._db.rows(*_DOCUMENTS.select("body::text", tenant, "doc_id = %s", [doc_id]))
        return Document.model_validate_json(rows[0][0]) if rows else None

    def documents(self, tenant: str) -> list[Document]:
        rows = self._db.rows(
            *_DOCUMENTS.select("body::text", tenant, tail='ORDER BY doc_id COLLATE "C"')
        )
        return [Document.model_validate_json(r[0]) for r in rows]

    def tenants(self) -> list[str]:
        """Every tenant with a document (across tenants by design: re-indexing)."""
        return self._all_tenants("documents")

    def audit_tenants(self) -> list[str]:
        """Every tenant with an audit entry (across tenants by design: rollback)."""
        return self._all_tenants("audit")

    def _stored_structure(self, document: Document) -> DocumentStructure | None:
        rows = self._db.rows(
            *_STRUCTURES.select(
                "body::text",
                document.tenant,
                "doc_id = %s AND version = %s",
                [document.doc_id, document.version],
            )
        )
        return DocumentStructure.model_validate_json(rows[0][0]) if rows else None

    def pages(self, tenant: str, doc_id: str) -> list[Page]:
        rows = self._db.rows(
            *_PAGES.select("body::text", tenant, "doc_id = %s", [doc_id], "ORDER BY page_number")
        )
        return [Page.model_validate_json(r[0]) for r in rows]

    def page(self, tenant: str, doc_id: str, page_number: int) -> Page | None:
        if page_number not in PAGE_NUMBERS:
            return None
        rows = self._db.rows(
            *_PAGES.select(
                "body::text", tenant, "doc_id = %s AND page_number = %s", [doc_id, page_number]
            )
        )
        return Page.model_validate_json(rows[0][0]) if rows else None

    # -- helpers ----------------------------------------------------------------------------

    def _all_tenants(self, table: str) -> list[str]:
        rows = self._db.rows(
            f'SELECT tenant FROM {table} GROUP BY tenant ORDER BY tenant COLLATE "C"'
        )
        return [r[0] for r in rows]

    @staticmethod
    def _lock_documents(conn: Conn, tenant: str) -> None:
        """Serialize the tenant's document writes until the transaction ends (see the module
        docstring: SQLite's one writer, for the orphaned-image check)."""
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_DOCUMENT_WRITES, tenant))

    @staticmethod
    def _image_refs(conn: Conn, tenant: str, doc_id: str) -> set[str]:
        rows = conn.execute(
            *_PAGES.select("image_ref", tenant, "doc_id = %s AND image_ref IS NOT NULL", [doc_id])
        )
        return {r[0] for r in rows}

    @staticmethod
    def _orphaned(conn: Conn, tenant: str, refs: set[str]) -> list[str]:
        """Of ``refs``, those no page of the tenant points at (identical pages share images)."""
        if not refs:
            return []
        used = conn.execute(
            *_PAGES.select("DISTINCT image_ref", tenant, "image_ref = ANY(%s)", [sorted(refs)])
        )
        return sorted(refs - {r[0] for r in used})
