"""The ingestion catalog in PostgreSQL, for the cluster profile: jobs, documents, pages,
structure and the audit log in the database every replica shares, with the semantics of the
SQLite :class:`~pagesight.store.catalog.Catalog` (one implementation,
:class:`~pagesight.store.catalog_base.SqlCatalog`;
the contract tests run both).

Three things SQLite gives for free are explicit here, in the
:class:`~pagesight.store.postgres.SharedDb` the catalog runs on:

- SQLite has one writer at a time; PostgreSQL does not. Document writes take a per-tenant
  advisory lock, so two replicas writing one document cannot both insert its pages, and the
  tenant-wide question "does any page still use this image?" is answered by one writer at a
  time, as in SQLite.
- Claims: ``SELECT ... FOR UPDATE SKIP LOCKED`` picks the next job without waiting on one
  another worker is claiming; a claim by id waits instead. Leases are on the database's clock
  (``now()``), the one every replica shares.
- Text order: ``ORDER BY`` over ids callers choose (documents, tenants) uses the "C"
  collation, the byte order SQLite uses, whatever locale the database was created with (job
  ids are UUIDs: every collation orders them alike).
"""

from __future__ import annotations

from pagesight.core.settings import Settings
from pagesight.store.catalog_base import SqlCatalog
from pagesight.store.postgres import open_database


class PostgresCatalog(SqlCatalog):
    """:class:`~pagesight.core.protocols.CatalogRepository` on PostgreSQL: every method one short
    transaction on the process's pool, safe to share between threads and between replicas."""

    @classmethod
    def open(cls, settings: Settings) -> PostgresCatalog:
        """On the process's pool (schema checked, see
        :func:`pagesight.store.postgres.open_database`)."""
        return cls(open_database(settings))
