"""The structure cache (pagesight.query.structure_cache, issue 33): what a query needs of a
document's structure is read and prepared once per document version and index version, never per
query; it refreshes on a new index version, on a write through this process's index (a
re-ingested or deleted document), and otherwise after ``check_s``; a query with no reference cue
never reaches the structures or the resolver; and the answers are those of the uncached path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pytest

from pagesight.core.identity import DocumentIdentity
from pagesight.core.protocols import CatalogRepository
from pagesight.core.settings import RetrievalOptions
from pagesight.core.types import (
    AccessFilter,
    Document,
    DocumentStructure,
    RouteName,
    SparseVector,
    StructuralReference,
    StructureItem,
    StructurePage,
    StructureSection,
)
from pagesight.index.base import ScoredPoint, StoredPoint, VectorStore
from pagesight.query import reference_resolution, structure_cache
from pagesight.query.reference_resolution import PreparedStructure, resolve_reference
from pagesight.query.references import parse_references
from pagesight.query.retrieval import Retriever
from pagesight.query.structure_cache import CachedStructures, PageChunks, StructureView
from pagesight.query.structure_search import StructureRoutes

TENANT = "t"
ACCESS = AccessFilter(tenant=TENANT)


def _structure(doc_id: str, version: str, first_folio_sheet: int = 3) -> DocumentStructure:
    """12 sheets, printed folio 1 on ``first_folio_sheet``; an outline with notes; a figure."""
    return DocumentStructure(
        doc_id=doc_id,
        version=version,
        pages=[
            StructurePage(
                page_number=n,
                label=str(n - first_folio_sheet + 1) if n >= first_folio_sheet else None,
            )
            for n in range(1, 13)
        ],
        sections=[
            StructureSection(title="Leadership program", page_start=4, page_end=5),
            StructureSection(title="Consolidated Balance Sheets", page_start=8, page_end=8),
            StructureSection(title="Notes to the financial statements", page_start=10, page_end=12),
            StructureSection(title="7. Income taxes", level=2, page_start=11, page_end=11),
        ],
        items=[StructureItem(kind="figure", number="2", page_number=7)],
        # as ingest stores it now: the domain packs' detectors ran (none fired); a structure
        # without marks is detected on load (tests/unit/query/test_finance_pack.py)
        domains=[],
        identity=DocumentIdentity(),  # read at ingest: no fallback read of the chunks
    )


def _document(doc_id: str, version: str, acl: list[str] | None = None) -> Document:
    return Document(
        doc_id=doc_id,
        version=version,
        tenant=TENANT,
        acl=acl if acl is not None else ["*"],
        source_uri=f"file:///{doc_id}.pdf",
    )


class Catalog:
    """The catalog's two reads the cache makes, counted; ``rows`` and ``structures`` are what
    ingestion last wrote."""

    def __init__(self) -> None:
        self.rows: dict[str, Document] = {}
        self.structures: dict[tuple[str, str], DocumentStructure] = {}
        self.document_reads = 0
        self.structure_reads = 0

    def put(self, structure: DocumentStructure, acl: list[str] | None = None) -> None:
        self.rows[structure.doc_id] = _document(structure.doc_id, structure.version, acl)
        self.structures[(structure.doc_id, structure.version)] = structure

    def document(self, tenant: str, doc_id: str) -> Document | None:
        self.document_reads += 1
        row = self.rows.get(doc_id)
        return row.model_copy(deep=True) if row is not None and tenant == TENANT else None

    def structure(self, document: Document) -> DocumentStructure:
        self.structure_reads += 1
        return self.structures[(document.doc_id, document.version)]

    def documents(self, tenant: str) -> list[Document]:
        """The tenant's rows, as the identity index lists them (route ``document``)."""
        return [r.model_copy(deep=True) for r in self.rows.values() if tenant == TENANT]


class Index:
    """What the cache reads of the chunk index: its version, its write count, the points of a
    document (page numbers only)."""

    def __init__(self) -> None:
        self.collection = "chunks__v1"
        self.writes = 0
        self.points: dict[str, list[StoredPoint]] = {}
        self.reads: list[tuple[str, list[str] | None]] = []

    def points_of_document(
        self, tenant: str, doc_id: str, fields: Sequence[str] | None = None
    ) -> list[StoredPoint]:
        self.reads.append((doc_id, None if fields is None else list(fields)))
        return self.points.get(doc_id, [])


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _cache(
    catalog: Catalog, index: Index, check_s: float = 10.0, clock: Clock | None = None
) -> CachedStructures:
    return CachedStructures(
        cast(CatalogRepository, catalog),
        cast(VectorStore, index),
        check_s=check_s,
        clock=clock or Clock(),
    )


PAGE_3 = StructuralReference(kind="page", text="page 3", value="3")


def test_a_structure_is_read_once_per_version_not_per_query() -> None:
    catalog, index = Catalog(), Index()
    catalog.put(_structure("a", "v1"))
    cache = _cache(catalog, index)
    first = cache.view_of(ACCESS, "a")
    assert first is not None and first.resolve(PAGE_3).pages == [5]
    for _ in range(20):
        assert cache.view_of(ACCESS, "a") is first
    assert catalog.structure_reads == 1
    assert catalog.document_reads == 1  # the row too: in memory until something changes
    assert cache.structure_of(ACCESS, "a") is first.structure


def test_a_new_index_version_refreshes_the_cache() -> None:
    catalog, index = Catalog(), Index()
    catalog.put(_structure("a", "v1"))
    cache = _cache(catalog, index)
    first = cache.view_of(ACCESS, "a")
    # a re-index re-parses under newer rules: same file version, another structure
    catalog.structures[("a", "v1")] = _structure("a", "v1", first_folio_sheet=2)
    assert cache.view_of(ACCESS, "a") is first  # the version served has not moved
    index.collection = "chunks__v2"  # promoted (or an alias switched, or a rollback)
    second = cache.view_of(ACCESS, "a")
    assert second is not first and second is not None
    assert second.resolve(PAGE_3).pages == [4]
    assert cache.stats.clears == 1 and catalog.structure_reads == 2


def test_a_reingested_document_refreshes_its_entry() -> None:
    catalog, index = Catalog(), Index()
    catalog.put(_structure("a", "v1"))
    catalog.put(_structure("b", "v1"))
    cache = _cache(catalog, index)
    a1, b1 = cache.view_of(ACCESS, "a"), cache.view_of(ACCESS, "b")
    # re-ingest a changed file: the index is written through this process, then the catalog
    index.writes += 2
    catalog.put(_structure("a", "v2", first_folio_sheet=2))
    a2 = cache.view_of(ACCESS, "a")
    assert a2 is not a1 and a2 is not None and a2.structure.version == "v2"
    assert a2.resolve(PAGE_3).pages == [4]
    # b's row was read again (it might have changed) but is the same: its view stays
    assert cache.view_of(ACCESS, "b") is b1
    assert catalog.structure_reads == 3
    # deleted: gone at the next write
    del catalog.rows["a"]
    index.writes += 1
    assert cache.view_of(ACCESS, "a") is None


def test_another_process_write_is_seen_after_check_s() -> None:
    catalog, index, clock = Catalog(), Index(), Clock()
    catalog.put(_structure("a", "v1"))
    cache = _cache(catalog, index, check_s=1.0, clock=clock)
    first = cache.view_of(ACCESS, "a")
    catalog.put(_structure("a", "v2", first_folio_sheet=2))  # an ingest worker elsewhere
    clock.now += 0.5
    assert cache.view_of(ACCESS, "a") is first
    clock.now += 0.6
    second = cache.view_of(ACCESS, "a")
    assert second is not None and second.structure.version == "v2"
    # with check_s 0 the row is read on every use, the structure still once per version
    eager = _cache(catalog, index, check_s=0.0, clock=clock)
    views = {id(eager.view_of(ACCESS, "a")) for _ in range(3)}
    assert len(views) == 1 and catalog.document_reads == 2 + 3


def test_access_is_checked_on_every_use_in_memory() -> None:
    catalog, index = Catalog(), Index()
    catalog.put(_structure("a", "v1"), acl=["group:finance"])
    cache = _cache(catalog, index)
    assert cache.view_of(AccessFilter(tenant=TENANT, principals=["group:hr"]), "a") is None
    assert cache.view_of(AccessFilter(tenant=TENANT, principals=["group:finance"]), "a")
    assert cache.view_of(AccessFilter(tenant="other"), "a") is None
    assert cache.view_of(ACCESS, "missing") is None
    assert catalog.structure_reads == 1


def test_the_page_map_is_built_once_and_dropped_on_a_write() -> None:
    catalog, index = Catalog(), Index()
    catalog.put(_structure("a", "v1"))
    index.points["a"] = [
        StoredPoint("p3", {"page_numbers": [2, 3]}),
        StoredPoint("p1", {"page_numbers": [3]}),
        StoredPoint("p2", {"page_numbers": [1]}),
        StoredPoint("p0", {}),
    ]
    cache = _cache(catalog, index)
    pages = cache.page_chunks(TENANT, "a")
    assert pages is not None and pages.ids_on([3, 2]) == ["p3", "p1"]
    assert cache.page_chunks(TENANT, "a") is pages
    assert index.reads == [("a", ["page_numbers"])]  # one narrow read
    index.writes += 1
    assert cache.page_chunks(TENANT, "a") is not pages
    assert len(index.reads) == 2
    assert cache.page_chunks(TENANT, "unknown") is None


def test_page_chunks_keep_the_index_order() -> None:
    pages = PageChunks.of([("z", [1]), ("a", [2, 1]), ("m", [1])])
    assert pages.ids_on([1]) == ["z", "a", "m"]
    assert pages.ids_on([2, 1, 2]) == ["z", "a", "m"]
    assert pages.ids_on([9]) == []


def test_a_view_resolves_as_the_resolver_does_and_once_per_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    structure = _structure("a", "v1")
    named = "page 3, pages 2-4, Figure 2, Note 7, the last page, the 'Leadership program' section"
    references = [
        *parse_references(named),
        StructuralReference(kind="domain", domain="finance", text="balance sheet", value="balance"),
    ]
    expected = [resolve_reference(r, structure) for r in references]
    assert [resolve_reference(r, PreparedStructure(structure)) for r in references] == expected
    calls: list[StructuralReference] = []

    def counting(reference: StructuralReference, prepared: Any) -> Any:
        calls.append(reference)
        return reference_resolution.resolve_reference(reference, prepared)

    monkeypatch.setattr(structure_cache, "resolve_reference", counting)
    view = StructureView(structure)
    for _ in range(3):
        assert [view.resolve(r) for r in references] == expected
    assert len(calls) == len(references)
    # what a caller does with a resolution cannot change the view's
    view.resolve(references[0]).pages.append(99)
    assert view.resolve(references[0]) == expected[0]


# -- through the retriever ---------------------------------------------------------------------


class Store:
    """A chunk index of one document whose pages 1-12 each hold one chunk about ``text``."""

    collection = "chunks__v1"
    writes = 0

    def __init__(self, doc_id: str) -> None:
        self.payloads = {
            f"{doc_id}-{n}": {
                "doc_id": doc_id,
                "page_numbers": [n],
                "chunk_id": f"{doc_id}/c{n}",
                "seq": n,
                "text": f"graduates rotated through plant {n}",
            }
            for n in range(1, 13)
        }
        self.document_reads = 0

    def query_sparse(self, *args: Any, **kwargs: Any) -> list[ScoredPoint]:
        return [ScoredPoint(i, 1.0 / int(i.split("-")[1]), p) for i, p in self.payloads.items()][8:]

    def query_dense(self, *args: Any, **kwargs: Any) -> list[ScoredPoint]:
        return []

    def retrieve(
        self, ids: Sequence[str], access: AccessFilter | None = None
    ) -> dict[str, dict[str, Any]]:
        return {i: self.payloads[i] for i in ids if i in self.payloads}

    def points_of_document(
        self, tenant: str, doc_id: str, fields: Sequence[str] | None = None
    ) -> list[StoredPoint]:
        self.document_reads += 1
        return [StoredPoint(i, p) for i, p in self.payloads.items() if p["doc_id"] == doc_id]


class Sparse:
    model_id = "bm25"

    def encode_query(self, text: str) -> SparseVector:
        return SparseVector(indices=[1], values=[1.0])

    def encode_documents(self, texts: Any) -> list[SparseVector]:
        return []


class Embedder:
    model_id = "mini"
    dim = 3
    languages = None

    def embed_query(self, text: str) -> np.ndarray:
        return np.zeros(3, dtype=np.float32)


class SpySource:
    """A StructureSource that records every look-up."""

    def __init__(self, structure: DocumentStructure) -> None:
        self.structure = structure
        self.calls: list[str] = []

    def structure_of(self, access: AccessFilter, doc_id: str) -> DocumentStructure | None:
        self.calls.append(doc_id)
        return self.structure if doc_id == self.structure.doc_id else None


def _retriever(store: Store, structures: Any) -> Retriever:
    return Retriever(
        cast(VectorStore, store),
        cast(Any, Embedder()),
        Sparse(),
        options=RetrievalOptions(),
        structures=structures,
    )


def test_a_query_without_a_reference_cue_never_reaches_the_resolver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolved: list[StructuralReference] = []
    original = StructureView.resolve

    def spy(self: StructureView, reference: StructuralReference) -> Any:
        resolved.append(reference)
        return original(self, reference)

    monkeypatch.setattr(StructureView, "resolve", spy)
    for module in (reference_resolution, structure_cache):
        monkeypatch.setattr(module, "resolve_reference", lambda *a: pytest.fail("resolved"))
    source = SpySource(_structure("a", "v1"))
    retriever = _retriever(Store("a"), source)
    result = retriever.search("How were graduates trained?", ACCESS, RouteName.TEXT, 5)
    assert result.hits and result.trace.references == []
    assert source.calls == [] and resolved == []
    assert {"reference", "statement"} <= result.trace.stages_ms.keys()
    assert "structure_lookup" not in result.trace.stages_ms
    # a cue does reach it
    monkeypatch.undo()
    result = retriever.search("What does page 3 say about graduates?", ACCESS, RouteName.TEXT, 5)
    assert [r.pages for r in result.trace.references] == [[("a", 5)]]
    assert source.calls == ["a"] and "structure_lookup" in result.trace.stages_ms


def test_every_trace_times_its_stages() -> None:
    source = SpySource(_structure("a", "v1"))
    result = _retriever(Store("a"), source).search(
        "What does page 3 say about graduates?", ACCESS, RouteName.TEXT, 5
    )
    stages = result.trace.stages_ms
    expected = {"keyword", "page", "row", "dense", "embed_dense", "structure_prefuse"}
    assert expected | {"reference", "statement", "fuse", "passages", "page_text"} <= stages.keys()
    assert all(ms >= 0 for ms in stages.values())


def test_pages_only_a_structure_route_found_read_by_id_with_the_same_text() -> None:
    structure = _structure("a", "v1")
    query = "What does page 3 say about graduates?"
    plain_store = Store("a")
    plain = _retriever(plain_store, SpySource(structure)).search(query, ACCESS, RouteName.TEXT, 5)
    catalog = Catalog()
    catalog.put(structure)
    store = Store("a")
    cache = CachedStructures(cast(CatalogRepository, catalog), cast(VectorStore, store))
    retriever = _retriever(store, cache)
    for _ in range(3):
        cached = retriever.search(query, ACCESS, RouteName.TEXT, 5)
        assert [h.model_dump() for h in cached.hits] == [h.model_dump() for h in plain.hits]
    # page 5 (printed "3") is only the reference route's: its text came from the page map
    assert ("a", 5) in [(h.doc_id, h.page_number) for h in cached.hits]
    assert plain_store.document_reads == 1 and store.document_reads == 1  # the map, once
    assert catalog.structure_reads == 1


def test_structure_routes_over_any_source_still_work_without_a_cache() -> None:
    source = SpySource(_structure("a", "v1"))
    routes = StructureRoutes(source)
    found = routes.references_in("page 3 and Figure 2")
    for _ in range(2):
        ranking = routes.reference_pages(found, ["a"], ACCESS)
        assert ranking.pages == [("a", 5), ("a", 7)]
    assert source.calls == ["a", "a"]  # no cache: read on every search, as before
