"""Retrieval traces in PostgreSQL, for the cluster profile: the rules of :mod:`index.traces`
(per-tenant keys, purged with the documents they name, kept for the gateway's retention) on
the database every replica shares.

The trace's documents are ``trace_docs`` rows whose foreign key cascades, so deleting a trace
deletes its document list in the same statement. Ages are measured on the database's clock
(``now()``), the one clock all replicas agree on.
"""

from __future__ import annotations

from core.postgres import SharedDb, TenantTable, jsonb, open_database
from core.settings import Settings
from core.types import RetrievalTrace

_TRACES = TenantTable("traces")
_TRACE_DOCS = TenantTable("trace_docs")

#: ``created_at`` within the retention (its one placeholder: the retention in seconds).
_KEPT = "created_at >= now() - %s * interval '1 second'"


class PostgresTraceStore:
    """:class:`~core.protocols.TraceRepository` on PostgreSQL: one short transaction per
    call, safe to share between threads (the pool hands each its own connection)."""

    def __init__(self, db: SharedDb, retention_s: float = 30 * 86400) -> None:
        self._db = db
        self.retention_s = float(retention_s)  # a float8 parameter, whatever the caller passed

    @classmethod
    def open(cls, settings: Settings) -> PostgresTraceStore:
        """On the process's pool, with the gateway's retention."""
        return cls(
            open_database(settings), retention_s=settings.gateway.trace_retention_days * 86400
        )

    def put(self, tenant: str, trace: RetrievalTrace, doc_ids: set[str]) -> None:
        """Store ``trace`` under (tenant, trace id), replacing only that tenant's trace of the
        same id, with the documents it names."""
        with self._db.tx() as conn:
            conn.execute(
                "INSERT INTO traces (tenant, trace_id, created_at, body)"
                " VALUES (%s, %s, now(), %s::jsonb) ON CONFLICT (tenant, trace_id)"
                " DO UPDATE SET created_at = excluded.created_at, body = excluded.body",
                (tenant, trace.trace_id, jsonb(trace)),
            )
            conn.execute(*_TRACE_DOCS.delete(tenant, "trace_id = %s", [trace.trace_id]))
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO trace_docs (tenant, trace_id, doc_id) VALUES (%s, %s, %s)",
                    [(tenant, trace.trace_id, doc_id) for doc_id in sorted(doc_ids)],
                )

    def get(self, tenant: str, trace_id: str) -> tuple[RetrievalTrace, set[str]] | None:
        """The trace and the documents it names, or None when it does not exist *or belongs
        to another tenant*."""
        with self._db.tx() as conn:
            row = conn.execute(
                *_TRACES.select(
                    "body::text", tenant, f"trace_id = %s AND {_KEPT}", [trace_id, self.retention_s]
                )
            ).fetchone()
            if row is None:
                return None
            docs = conn.execute(*_TRACE_DOCS.select("doc_id", tenant, "trace_id = %s", [trace_id]))
            return RetrievalTrace.model_validate_json(row[0]), {r[0] for r in docs}

    def purge_document(self, tenant: str, doc_id: str) -> int:
        """Delete every trace of ``tenant`` that names ``doc_id``; return how many."""
        with self._db.tx() as conn:
            ids = [
                r[0]
                for r in conn.execute(
                    *_TRACE_DOCS.select("trace_id", tenant, "doc_id = %s", [doc_id])
                )
            ]
            if not ids:
                return 0
            cursor = conn.execute(*_TRACES.delete(tenant, "trace_id = ANY(%s)", [ids]))
            return int(cursor.rowcount)

    def expire(self) -> int:
        """Delete traces older than the retention, every tenant's (upkeep, not a tenant's
        read); return how many."""
        with self._db.tx() as conn:
            cursor = conn.execute(f"DELETE FROM traces WHERE NOT ({_KEPT})", (self.retention_s,))
            return int(cursor.rowcount)

    def close(self) -> None:
        self._db.close()
