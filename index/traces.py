"""Retrieval traces, stored next to the index so that any gateway replica can read them.

A trace (:class:`core.types.RetrievalTrace`) says what one query did: the rewritten query,
candidates and scores per route, the fused order, the index version. Users fetch it by id to
debug a result; auditors fetch it to see why a page was shown. Three rules shape this store:

- it lives on disk under the data directory, not in a replica's memory, so a trace written
  through one gateway replica is readable through another;
- only the tenant that made the request can read it (another tenant's trace id reads as
  missing, exactly like an unknown id). Trace ids can come from callers (``traceparent``,
  ``X-Request-ID``): they are correlation ids, so traces are stored per (tenant, trace id) and
  one tenant reusing another's id never replaces or hides that tenant's trace;
- deleting a document purges every trace that names it (``trace_docs``), because a trace
  carries its snippets' provenance and "delete means gone everywhere".

SQLite in WAL mode, one short transaction per call, safe to share between threads; the cluster
profile keeps the same rules in PostgreSQL (:mod:`index.traces_postgres`).
"""

from __future__ import annotations

import time
from pathlib import Path

from core.protocols import TraceRepository
from core.settings import Settings
from core.sqlite import SqliteDb
from core.types import RetrievalTrace

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tenant_traces (
    tenant TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, trace_id)
);
CREATE INDEX IF NOT EXISTS tenant_traces_created ON tenant_traces(created_at);
CREATE TABLE IF NOT EXISTS tenant_trace_docs (
    tenant TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    PRIMARY KEY (tenant, trace_id, doc_id)
);
CREATE INDEX IF NOT EXISTS tenant_trace_docs_doc ON tenant_trace_docs(tenant, doc_id);
"""

#: Stores written before traces were keyed per tenant: copied over once, then dropped.
_MIGRATE_V1 = """
INSERT OR IGNORE INTO tenant_traces SELECT tenant, trace_id, created_at, body FROM traces;
INSERT OR IGNORE INTO tenant_trace_docs SELECT tenant, trace_id, doc_id FROM trace_docs;
DROP TABLE traces;
DROP TABLE trace_docs;
"""


class TraceStore:
    """Traces by id, scoped to a tenant, purged with the documents they name."""

    def __init__(self, path: Path, retention_s: float = 30 * 86400) -> None:
        self.path = path
        self.retention_s = retention_s
        self._sql = SqliteDb(path, _SCHEMA)
        with self._sql.tx() as db:
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'traces'").fetchone():
                for statement in _MIGRATE_V1.strip().split(";\n"):
                    db.execute(statement.rstrip(";"))

    def put(self, tenant: str, trace: RetrievalTrace, doc_ids: set[str]) -> None:
        """Store ``trace`` under (tenant, trace id), replacing only that tenant's trace of the
        same id, with the documents it names."""
        with self._sql.tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO tenant_traces (tenant, trace_id, created_at, body) "
                "VALUES (?, ?, ?, ?)",
                (tenant, trace.trace_id, time.time(), trace.model_dump_json()),
            )
            db.execute(
                "DELETE FROM tenant_trace_docs WHERE tenant = ? AND trace_id = ?",
                (tenant, trace.trace_id),
            )
            db.executemany(
                "INSERT INTO tenant_trace_docs (tenant, trace_id, doc_id) VALUES (?, ?, ?)",
                [(tenant, trace.trace_id, doc_id) for doc_id in sorted(doc_ids)],
            )

    def get(self, tenant: str, trace_id: str) -> tuple[RetrievalTrace, set[str]] | None:
        """The trace and the documents it names, or None when it does not exist *or belongs
        to another tenant*."""
        rows = self._sql.rows(
            "SELECT body FROM tenant_traces WHERE tenant = ? AND trace_id = ? AND created_at >= ?",
            (tenant, trace_id, time.time() - self.retention_s),
        )
        if not rows:
            return None
        docs = self._sql.rows(
            "SELECT doc_id FROM tenant_trace_docs WHERE tenant = ? AND trace_id = ?",
            (tenant, trace_id),
        )
        return RetrievalTrace.model_validate_json(rows[0][0]), {r[0] for r in docs}

    def purge_document(self, tenant: str, doc_id: str) -> int:
        """Delete every trace of ``tenant`` that names ``doc_id``; return how many."""
        return self._delete_where(
            "SELECT tenant, trace_id FROM tenant_trace_docs WHERE tenant = ? AND doc_id = ?",
            (tenant, doc_id),
        )

    def expire(self) -> int:
        """Delete traces older than the retention; return how many."""
        return self._delete_where(
            "SELECT tenant, trace_id FROM tenant_traces WHERE created_at < ?",
            (time.time() - self.retention_s,),
        )

    def _delete_where(self, select_keys: str, args: tuple[object, ...]) -> int:
        """Delete the traces whose (tenant, trace id) ``select_keys`` selects, in one
        transaction; return how many."""
        with self._sql.tx() as db:
            keys = [(r[0], r[1]) for r in db.execute(select_keys, args)]
            for table in ("tenant_traces", "tenant_trace_docs"):
                db.executemany(f"DELETE FROM {table} WHERE tenant = ? AND trace_id = ?", keys)
        return len(keys)

    def close(self) -> None:
        self._sql.close()


def open_traces(settings: Settings) -> TraceRepository:
    """The trace store ``settings`` name, with the gateway's retention: PostgreSQL when
    ``database_url`` is set (:mod:`index.traces_postgres`, imported only then, so the embedded
    profile never loads psycopg), else SQLite next to the index."""
    if settings.database_url is not None:
        from index.traces_postgres import PostgresTraceStore

        return PostgresTraceStore.open(settings)
    return TraceStore(
        settings.data_dir / "traces.sqlite3",
        retention_s=settings.gateway.trace_retention_days * 86400,
    )
