"""The ingestion catalog: jobs, documents, pages, structure and the audit log, in one SQLite file
(``catalog.sqlite3`` under the data directory) or, for the cluster profile, in PostgreSQL
(:mod:`pagesight.store.catalog_postgres`); :func:`open_catalog` picks one.

The vector index holds what retrieval needs; the catalog holds what operations need: the job
state machine (so ``kill -9`` in the middle of a batch can be resumed), the documents a tenant
has (for ``sync`` and listings), each page's image reference (for page images and for
deleting them), and the audit log of deletes and replacements (who, what, when). SQLite in
WAL mode: one writer (the ingest process or the server), many readers.

Both backends are :class:`~pagesight.store.catalog_base.SqlCatalog` (statements written once, over
:mod:`pagesight.store.tables`); they differ in the database they run on.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from pagesight.core.protocols import CatalogRepository
from pagesight.core.settings import Settings
from pagesight.core.types import AccessFilter, DocumentStructure
from pagesight.store import tables as t
from pagesight.store.catalog_base import SqlCatalog
from pagesight.store.sqlite import SqliteDb


class Catalog(SqlCatalog):
    """The catalog in one SQLite file (WAL mode: one writer, the ingest process or the server,
    and many readers), migrated when opened (:class:`pagesight.store.sqlite.SqliteDb`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(SqliteDb(path, t.CATALOG_TABLES))


class CatalogStructures:
    """:class:`~pagesight.core.protocols.StructureSource` over a catalog, with the permission rule
    of every other read and a small cache: a structure is read (and validated) once per document
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
        from pagesight.store.catalog_postgres import PostgresCatalog

        return PostgresCatalog.open(settings)
    return Catalog(settings.data_dir / "catalog.sqlite3")
