"""What the trace store backends share (:mod:`pagesight.store.traces` for SQLite,
:mod:`pagesight.store.traces_postgres` for PostgreSQL): all of it but how each is opened, statements
written once over :mod:`pagesight.store.tables` (see :mod:`pagesight.store.traces` for the rules
they keep).
"""

from __future__ import annotations

import sqlalchemy as sa

from pagesight.core.types import RetrievalTrace
from pagesight.store import tables as t
from pagesight.store.database import Database
from pagesight.store.tables import TenantTable

_TRACES = TenantTable(t.traces)
_TRACE_DOCS = TenantTable(t.trace_docs)


class SqlTraceStore:
    """Traces by id, scoped to a tenant, purged with the documents they name, kept for
    ``retention_s`` seconds."""

    def __init__(self, db: Database, retention_s: float = 30 * 86400) -> None:
        self._db = db
        self.retention_s = float(retention_s)

    def put(self, tenant: str, trace: RetrievalTrace, doc_ids: set[str]) -> None:
        """Store ``trace`` under (tenant, trace id), replacing only that tenant's trace of the
        same id, with the documents it names."""
        traces, docs = t.traces, t.trace_docs
        insert = self._db.insert(traces).values(
            tenant=tenant,
            trace_id=trace.trace_id,
            created_at=self._db.now(),
            body=trace.model_dump_json(),
        )
        upsert = insert.on_conflict_do_update(
            index_elements=[traces.c.tenant, traces.c.trace_id],
            set_={"created_at": insert.excluded.created_at, "body": insert.excluded.body},
        )
        with self._db.tx() as db:
            db.execute(upsert)
            db.execute(_TRACE_DOCS.delete(tenant).where(docs.c.trace_id == trace.trace_id))
            if doc_ids:
                db.execute(
                    sa.insert(docs),
                    [
                        {"tenant": tenant, "trace_id": trace.trace_id, "doc_id": doc_id}
                        for doc_id in sorted(doc_ids)
                    ],
                )

    def get(self, tenant: str, trace_id: str) -> tuple[RetrievalTrace, set[str]] | None:
        """The trace and the documents it names, or None when it does not exist *or belongs
        to another tenant*."""
        traces, docs = t.traces, t.trace_docs
        with self._db.read() as db:
            row = db.execute(
                _TRACES.select(tenant, traces.c.body).where(
                    traces.c.trace_id == trace_id,
                    traces.c.created_at >= self._db.now(after_s=-self.retention_s),
                )
            ).fetchone()
            if row is None:
                return None
            named = db.execute(
                _TRACE_DOCS.select(tenant, docs.c.doc_id).where(docs.c.trace_id == trace_id)
            )
            return RetrievalTrace.model_validate_json(row[0]), {r[0] for r in named}

    def purge_document(self, tenant: str, doc_id: str) -> int:
        """Delete every trace of ``tenant`` that names ``doc_id``; return how many."""
        traces, docs = t.traces, t.trace_docs
        naming = _TRACE_DOCS.select(tenant, docs.c.trace_id).where(docs.c.doc_id == doc_id)
        with self._db.tx() as db:
            cursor = db.execute(_TRACES.delete(tenant).where(traces.c.trace_id.in_(naming)))
            # their document lists (PostgreSQL's foreign key has cascaded already)
            db.execute(_TRACE_DOCS.delete(tenant).where(docs.c.trace_id.in_(naming)))
            return int(cursor.rowcount)

    def expire(self) -> int:
        """Delete traces older than the retention, every tenant's (upkeep, not a tenant's
        read); return how many."""
        traces, docs = t.traces, t.trace_docs
        old = traces.c.created_at < self._db.now(after_s=-self.retention_s)
        with self._db.tx() as db:
            expired = sa.select(traces.c.tenant, traces.c.trace_id).where(old)
            db.execute(
                sa.delete(docs).where(sa.tuple_(docs.c.tenant, docs.c.trace_id).in_(expired))
            )
            return int(db.execute(sa.delete(traces).where(old)).rowcount)

    def close(self) -> None:
        self._db.close()
