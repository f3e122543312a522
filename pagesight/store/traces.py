"""Retrieval traces, stored next to the catalog so that any gateway replica can read them.

A trace (:class:`pagesight.core.types.RetrievalTrace`) says what one query did: the rewritten query,
candidates and scores per route, the fused order, the index version. Users fetch it by id to
debug a result; auditors fetch it to see why a page was shown. Three rules shape this store:

- it lives on disk under the data directory (``traces.sqlite3``), or in PostgreSQL for the
  cluster profile (:mod:`pagesight.store.traces_postgres`), not in a replica's memory, so a trace
  written through one gateway replica is readable through another;
- only the tenant that made the request can read it (another tenant's trace id reads as
  missing, exactly like an unknown id). Trace ids can come from callers (``traceparent``,
  ``X-Request-ID``): they are correlation ids, so traces are stored per (tenant, trace id) and
  one tenant reusing another's id never replaces or hides that tenant's trace;
- deleting a document purges every trace that names it (``trace_docs``), because a trace
  carries its snippets' provenance and "delete means gone everywhere".

Both backends are :class:`~pagesight.store.traces_base.SqlTraceStore` (statements over
:mod:`pagesight.store.tables`), one short transaction per call, safe to share between threads; ages
are measured on the database's clock (:meth:`pagesight.store.database.Database.now`).
"""

from __future__ import annotations

from pathlib import Path

from pagesight.core.protocols import TraceRepository
from pagesight.core.settings import Settings
from pagesight.store import tables as t
from pagesight.store.sqlite import SqliteDb
from pagesight.store.traces_base import SqlTraceStore


class TraceStore(SqlTraceStore):
    """The trace store in one SQLite file (WAL mode), migrated when opened."""

    def __init__(self, path: Path, retention_s: float = 30 * 86400) -> None:
        self.path = path
        super().__init__(SqliteDb(path, t.TRACE_TABLES), retention_s)


def open_traces(settings: Settings) -> TraceRepository:
    """The trace store ``settings`` name, with the gateway's retention: PostgreSQL when
    ``database_url`` is set (:mod:`pagesight.store.traces_postgres`, imported only then, so the
    embedded profile never loads psycopg), else SQLite next to the index."""
    if settings.database_url is not None:
        from pagesight.store.traces_postgres import PostgresTraceStore

        return PostgresTraceStore.open(settings)
    return TraceStore(
        settings.data_dir / "traces.sqlite3",
        retention_s=settings.gateway.trace_retention_days * 86400,
    )
