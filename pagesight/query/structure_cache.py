"""What a query needs of a document's structure, held in memory per index version (issue 33).

The structure routes (:mod:`pagesight.query.structure_search`) resolve "page 17", "Note 7" or
"the balance sheet" in up to ``reference_confirm_documents`` documents per search, and the
retriever fetches the text of the pages only they found. Read from the catalog and resolved
from scratch on every search, that cost a reference query more than its keyword and dense
searches together. Here it is paid once per document version:

- :class:`StructureView`: one document version's structure with what resolution reads of it
  prepared (page count, pages by printed label: :class:`~pagesight.query.reference_resolution.
  PreparedStructure`), the section titles' terms (section route), and every reference resolved
  in it so far (a bounded memo; a resolution is a pure function of the reference's kind,
  value, range end and position and of the structure).
- Domain marks (:mod:`pagesight.query.domains`): a structure stored before domain packs is
  detected when first read here (from the index's chunk texts and the catalog's margin lines:
  no re-parse), once per document version.
- :class:`CachedStructures`: the :class:`~pagesight.core.protocols.StructureSource` a stack
  gives its retriever. Per (tenant, document) it keeps the catalog's row (the version, the
  ACL and validity every search is checked against, in memory), the view, and which chunk
  points of the index lie on each page (:class:`PageChunks`, so that the text of a page only
  a structure route found is read by id rather than by reading the whole document).

When the cache refreshes (never per query):

- **A new index version** (``index.collection`` changed: a re-index promoted, an alias
  switched or rolled back): everything is dropped.
- **A write to the index through this process** (``index.writes`` moved: a document ingested,
  re-ingested or deleted here): every entry re-reads its catalog row before its next use.
- **Otherwise at most every** ``check_s`` **seconds** per document (``index.alias_check_s``,
  the interval at which the same searcher notices a re-index; 0 = on every use), which is
  how a write by another process (an ingest worker on a shared catalog) is seen.

A re-read row that equals the cached one keeps the view and the page map; any change (a new
version, a re-parse under newer rules, another ACL, a deletion) replaces them. Only the row
is re-read: the structure is read and prepared once per version.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from pagesight.core.identity import DocumentIdentity, first_pages, identity_of
from pagesight.core.protocols import CatalogRepository, StructureSource
from pagesight.core.types import AccessFilter, Document, DocumentStructure, StructuralReference
from pagesight.index.base import VectorStore
from pagesight.ingestion.domains import (
    CHUNK_PAGE_TEXT_FIELDS,
    chunk_page_texts,
    detect_domains,
)
from pagesight.models.text import tokenize
from pagesight.query import domains
from pagesight.query.document_identity import IdentityIndex
from pagesight.query.reference_resolution import PreparedStructure, Resolution, resolve_reference

#: Resolutions kept per view (distinct references resolved in one document version).
RESOLUTION_MEMO = 512
#: Documents whose structure is kept (least recently used out first).
CACHE_DOCUMENTS = 1024
#: Seconds between two listings of a tenant's documents for the identity index (a write
#: through this process or a new index version relists at once).
IDENTITY_CHECK_S = 30.0


class StructureView:
    """One document version's structure as the query side reads it (module doc). Built once
    per version and shared by every search, so it is never changed after it is built: a
    resolution is returned as a copy."""

    def __init__(self, structure: DocumentStructure, memo: int = RESOLUTION_MEMO) -> None:
        self.structure = structure
        self.prepared = PreparedStructure(structure)
        self._memo = memo
        self._resolved: dict[
            tuple[str, str | None, str | None, int | None, str | None], Resolution
        ] = {}
        self._section_terms: list[frozenset[str]] | None = None
        self._lock = threading.Lock()

    @property
    def doc_id(self) -> str:
        return self.structure.doc_id

    def resolve(self, reference: StructuralReference) -> Resolution:
        """:func:`~pagesight.query.reference_resolution.resolve_reference` in this document,
        computed once per distinct reference."""
        key = (reference.kind, reference.value, reference.end, reference.position, reference.domain)
        with self._lock:
            found = self._resolved.get(key)
        if found is None:
            found = resolve_reference(reference, self.prepared)
            with self._lock:
                if len(self._resolved) >= self._memo:
                    self._resolved.clear()
                self._resolved[key] = found
        return Resolution(list(found.pages), found.reason, found.confidences)

    def section_terms(self) -> list[frozenset[str]]:
        """Each section's title as index terms (``models.text.tokenize``), in section order."""
        terms = self._section_terms
        if terms is None:
            terms = [frozenset(tokenize(s.title)) for s in self.structure.sections]
            self._section_terms = terms
        return terms


class ViewSource(Protocol):
    """Where :class:`~pagesight.query.structure_search.StructureRoutes` gets its views."""

    def view_of(self, access: AccessFilter, doc_id: str) -> StructureView | None: ...


class FreshViews:
    """Views over any :class:`~pagesight.core.protocols.StructureSource`, made anew on every
    call: a source that does not say when a structure changes cannot be cached safely (a
    catalog can: :class:`CachedStructures`)."""

    def __init__(self, structures: StructureSource) -> None:
        self.structures = structures

    def view_of(self, access: AccessFilter, doc_id: str) -> StructureView | None:
        structure = self.structures.structure_of(access, doc_id)
        return StructureView(domains.marks_of(structure)) if structure is not None else None


@dataclass(frozen=True)
class PageChunks:
    """Which chunk points of the index lie on each page of one document: point ids in the
    order the index lists the document's points (``points_of_document``), by page number."""

    order: dict[str, int]
    by_page: dict[int, list[str]]

    @classmethod
    def of(cls, points: Iterable[tuple[str, Iterable[int]]]) -> PageChunks:
        order: dict[str, int] = {}
        by_page: dict[int, list[str]] = {}
        for point_id, pages in points:
            order.setdefault(point_id, len(order))
            for number in pages:
                by_page.setdefault(int(number), []).append(point_id)
        return cls(order=order, by_page=by_page)

    def ids_on(self, pages: Iterable[int]) -> list[str]:
        """The points on any of ``pages``, each once, in the index's order."""
        found = {point_id for n in pages for point_id in self.by_page.get(n, ())}
        return sorted(found, key=self.order.__getitem__)


@dataclass
class _Entry:
    document: Document | None  # None: the catalog does not know the document
    checked: float  # when its row was last read (clock)
    writes: int  # the index's write count then
    view: StructureView | None = None
    pages: PageChunks | None = None
    pages_writes: int = -1


@dataclass
class _Identities:
    """A tenant's identity index and the document rows it was built from."""

    index: IdentityIndex
    documents: dict[str, Document]
    checked: float
    writes: int


@dataclass
class CacheStats:
    """What the cache did, for tests and benchmarks."""

    catalog_reads: int = 0
    structure_reads: int = 0
    page_maps: int = 0
    clears: int = 0
    hits: int = 0


class CachedStructures:
    """The structure source of a stack: the catalog's structures and the index's page map,
    held per index version (module doc).

    ``index``: the chunk index, whose ``collection`` names the version served and whose
    ``writes`` count this process's writes (None: neither is followed, only ``check_s``).
    ``clock`` is injectable so that refreshing can be tested without sleeping.
    """

    def __init__(
        self,
        catalog: CatalogRepository,
        index: VectorStore | None = None,
        *,
        check_s: float = 1.0,
        size: int = CACHE_DOCUMENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if check_s < 0 or size < 1:
            raise ValueError("check_s must be >= 0 and size positive")
        self.catalog = catalog
        self.index = index
        self.check_s = check_s
        self.size = size
        self.clock = clock
        self.stats = CacheStats()
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._collection: str | None = None
        self._lock = threading.Lock()
        self._identities: dict[str, _Identities] = {}
        self._identity_memo: dict[tuple[str, str, str], DocumentIdentity | None] = {}
        #: Structures the identity index read, kept for the first view of each (one read).
        self._read_ahead: dict[tuple[str, str, str], DocumentStructure] = {}

    # -- StructureSource ---------------------------------------------------------------------

    def structure_of(self, access: AccessFilter, doc_id: str) -> DocumentStructure | None:
        view = self.view_of(access, doc_id)
        return view.structure if view is not None else None

    def view_of(self, access: AccessFilter, doc_id: str) -> StructureView | None:
        """The document's view if ``access`` may see the document (as the catalog's row says,
        checked in memory), else None, exactly as for a document that does not exist."""
        key = (access.tenant, doc_id)
        entry = self._entry(key)
        document = entry.document
        if document is None or not access.admits_document(document):
            return None
        view = entry.view
        if view is None:
            read = self._read_ahead.pop((document.tenant, document.doc_id, document.version), None)
            structure = self._with_domains(document, read or self.catalog.structure(document))
            view = StructureView(structure)
            with self._lock:
                self.stats.structure_reads += 1
                if entry.view is None:
                    entry.view = view
                else:
                    view = entry.view
        return view

    def _with_domains(self, document: Document, structure: DocumentStructure) -> DocumentStructure:
        """``structure`` with its domain packs' marks: as ingest stored them, else (an index
        built before packs) detected now from what the index and the catalog keep of the
        pages (the chunks' texts by their spans, the pages' margin lines), once per
        document version, so that no re-parse is needed; with no index, from the titles."""
        if structure.domains is not None or self.index is None:
            return domains.marks_of(structure)
        texts = chunk_page_texts(
            self._stored_chunks(document), self.catalog.pages(document.tenant, document.doc_id)
        )
        return structure.model_copy(update={"domains": detect_domains(texts, structure.sections)})

    # -- the page map --------------------------------------------------------------------------

    def page_chunks(self, tenant: str, doc_id: str) -> PageChunks | None:
        """Which chunk points lie on each page of the document (whatever their ACL or validity,
        as ``points_of_document`` reads them); None when the catalog does not know the
        document or there is no index to read."""
        index = self.index
        if index is None:
            return None
        entry = self._entry((tenant, doc_id))
        if entry.document is None:
            return None
        writes = self._writes()
        if entry.pages is not None and entry.pages_writes == writes:
            return entry.pages
        points = index.points_of_document(tenant, doc_id, fields=["page_numbers"])
        pages = PageChunks.of((p.id, p.payload.get("page_numbers") or []) for p in points)
        with self._lock:
            entry.pages, entry.pages_writes = pages, writes
            self.stats.page_maps += 1
        return pages

    def forget_pages(self, tenant: str, doc_id: str) -> None:
        """Drop the document's page map (a read by its ids found a point gone)."""
        with self._lock:
            entry = self._entries.get((tenant, doc_id))
            if entry is not None:
                entry.pages = None

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._identities.clear()
            self._read_ahead.clear()
            self.stats.clears += 1

    # -- identities (the document route) -------------------------------------------------------

    def identity_index(self, tenant: str) -> tuple[IdentityIndex, dict[str, Document]]:
        """Every document of ``tenant`` by name (:mod:`pagesight.query.document_identity`)
        and the catalog rows it was built from, which the caller checks each match's access
        against. Relisted at most every :data:`IDENTITY_CHECK_S` seconds, at once after a
        write here or a new index version; a document's identity is read once per version."""
        self._follow_version()
        now, writes = self.clock(), self._writes()
        with self._lock:
            held = self._identities.get(tenant)
        if held is not None and held.writes == writes and now - held.checked < IDENTITY_CHECK_S:
            return held.index, held.documents
        documents = {d.doc_id: d for d in self.catalog.documents(tenant)}
        identities = []
        for document in documents.values():
            identity = self._identity(document)
            if identity is not None:
                identities.append((document.doc_id, identity))
        fresh = _Identities(IdentityIndex(identities), documents, now, writes)
        with self._lock:
            self._identities[tenant] = fresh
        return fresh.index, fresh.documents

    def _identity(self, document: Document) -> DocumentIdentity | None:
        key = (document.tenant, document.doc_id, document.version)
        with self._lock:
            if key in self._identity_memo:
                return self._identity_memo[key]
        structure = self.catalog.structure(document)
        with self._lock:
            if len(self._read_ahead) >= self.size:
                self._read_ahead.clear()
            self._read_ahead[key] = structure
        identity = structure.identity
        if identity is None:
            identity = self._identity_from_index(document)
        with self._lock:
            if len(self._identity_memo) >= 8 * self.size:
                self._identity_memo.clear()
            self._identity_memo[key] = identity
        return identity

    def _identity_from_index(self, document: Document) -> DocumentIdentity | None:
        """The identity of a document stored before identities were kept, read from its
        first pages' text as its stored chunks hold it (``chunk_page_texts``, as the domain
        packs read an older index)."""
        if self.index is None:
            return None
        texts = chunk_page_texts(self._stored_chunks(document))
        return identity_of(first_pages(texts), document.title, document.source_name)

    def _stored_chunks(self, document: Document) -> Iterator[dict[str, Any]]:
        """What the index keeps of the document's chunks that tells their pages' text."""
        assert self.index is not None  # the callers return earlier without one
        points = self.index.points_of_document(
            document.tenant, document.doc_id, fields=list(CHUNK_PAGE_TEXT_FIELDS)
        )
        return (p.payload for p in points)

    # -- freshness -----------------------------------------------------------------------------

    def _writes(self) -> int:
        return self.index.writes if self.index is not None else 0

    def _entry(self, key: tuple[str, str]) -> _Entry:
        self._follow_version()
        now = self.clock()
        writes = self._writes()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.writes == writes and now - entry.checked < self.check_s:
                self._entries.move_to_end(key)
                self.stats.hits += 1
                return entry
        document = self.catalog.document(*key)
        fresh = _Entry(document=document, checked=now, writes=writes)
        with self._lock:
            self.stats.catalog_reads += 1
            current = self._entries.get(key)
            if current is not None and current.document == document:
                fresh.view = current.view  # the same row: the same structure
                fresh.pages, fresh.pages_writes = current.pages, current.pages_writes
            self._entries[key] = fresh
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return fresh

    def _follow_version(self) -> None:
        if self.index is None:
            return
        collection = self.index.collection
        if collection == self._collection:
            return
        with self._lock:
            if collection != self._collection:
                if self._collection is not None:
                    self._entries.clear()
                    self._identities.clear()
                    self._read_ahead.clear()
                    self.stats.clears += 1
                self._collection = collection
