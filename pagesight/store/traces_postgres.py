"""Retrieval traces in PostgreSQL, for the cluster profile: the rules of
:mod:`pagesight.store.traces` (per-tenant keys, purged with the documents they name, kept for the
gateway's retention) on the database every replica shares, with ages measured on its clock
(``now()``), the one clock all replicas agree on. The trace's documents are ``trace_docs`` rows
whose foreign key cascades.
"""

from __future__ import annotations

from pagesight.core.settings import Settings
from pagesight.store.postgres import open_database
from pagesight.store.traces_base import SqlTraceStore


class PostgresTraceStore(SqlTraceStore):
    """:class:`~pagesight.core.protocols.TraceRepository` on PostgreSQL: one short transaction per
    call, safe to share between threads (the pool hands each its own connection)."""

    @classmethod
    def open(cls, settings: Settings) -> PostgresTraceStore:
        """On the process's pool, with the gateway's retention."""
        return cls(
            open_database(settings), retention_s=settings.gateway.trace_retention_days * 86400
        )
