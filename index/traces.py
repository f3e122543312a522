"""Retrieval traces, stored next to the index so that any gateway replica can read them.

A trace (:class:`core.types.RetrievalTrace`) says what one query did: the rewritten query,
candidates and scores per route, the fused order, the index version. Users fetch it by id to
debug a result; auditors fetch it to see why a page was shown. Three rules shape this store:

- it lives on disk under the data directory, not in a replica's memory, so a trace written
  through one gateway replica is readable through another;
- only the tenant that made the request can read it (another tenant's trace id reads as
  missing, exactly like an unknown id);
- deleting a document purges every trace that names it (``trace_docs``), because a trace
  carries its snippets' provenance and "delete means gone everywhere".

SQLite in WAL mode, one short transaction per call, safe to share between threads.
"""

from __future__ import annotations

import time
from pathlib import Path

from core.sqlite import SqliteDb
from core.types import RetrievalTrace

_SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_created ON traces(created_at);
CREATE TABLE IF NOT EXISTS trace_docs (
    trace_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    PRIMARY KEY (trace_id, doc_id)
);
CREATE INDEX IF NOT EXISTS trace_docs_doc ON trace_docs(tenant, doc_id);
"""


class TraceStore:
    """Traces by id, scoped to a tenant, purged with the documents they name."""

    def __init__(self, path: Path, retention_s: float = 30 * 86400) -> None:
        self.path = path
        self.retention_s = retention_s
        self._sql = SqliteDb(path, _SCHEMA)

    def put(self, tenant: str, trace: RetrievalTrace, doc_ids: set[str]) -> None:
        """Store ``trace`` (replacing one with the same id) and the documents it names."""
        with self._sql.tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO traces (trace_id, tenant, created_at, body) "
                "VALUES (?, ?, ?, ?)",
                (trace.trace_id, tenant, time.time(), trace.model_dump_json()),
            )
            db.execute("DELETE FROM trace_docs WHERE trace_id = ?", (trace.trace_id,))
            db.executemany(
                "INSERT INTO trace_docs (trace_id, tenant, doc_id) VALUES (?, ?, ?)",
                [(trace.trace_id, tenant, doc_id) for doc_id in sorted(doc_ids)],
            )

    def get(self, tenant: str, trace_id: str) -> RetrievalTrace | None:
        """The trace, or None when it does not exist *or belongs to another tenant*."""
        rows = self._sql.rows(
            "SELECT body FROM traces WHERE trace_id = ? AND tenant = ? AND created_at >= ?",
            (trace_id, tenant, time.time() - self.retention_s),
        )
        return RetrievalTrace.model_validate_json(rows[0][0]) if rows else None

    def purge_document(self, tenant: str, doc_id: str) -> int:
        """Delete every trace of ``tenant`` that names ``doc_id``; return how many."""
        return self._delete_where(
            "SELECT trace_id FROM trace_docs WHERE tenant = ? AND doc_id = ?", (tenant, doc_id)
        )

    def expire(self) -> int:
        """Delete traces older than the retention; return how many."""
        return self._delete_where(
            "SELECT trace_id FROM traces WHERE created_at < ?", (time.time() - self.retention_s,)
        )

    def _delete_where(self, select_ids: str, args: tuple[object, ...]) -> int:
        """Delete the traces ``select_ids`` selects, in one transaction; return how many."""
        with self._sql.tx() as db:
            ids = [r[0] for r in db.execute(select_ids, args)]
            for start in range(0, len(ids), 500):
                batch = ids[start : start + 500]
                marks = ",".join("?" * len(batch))
                db.execute(f"DELETE FROM traces WHERE trace_id IN ({marks})", batch)
                db.execute(f"DELETE FROM trace_docs WHERE trace_id IN ({marks})", batch)
        return len(ids)

    def close(self) -> None:
        self._sql.close()
