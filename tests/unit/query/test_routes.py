"""The retrieval routes as a registry (pagesight.query.routes): which routes a search runs,
how a registered route's candidates fuse with its weight, and what the trace lists.

The stores and models are small fakes: the registry's behaviour does not depend on an index
(the evaluation's before/after comparison, bench/compare_retrieval.py, covers real ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pytest

from pagesight.core.settings import RetrievalOptions
from pagesight.core.types import (
    AccessFilter,
    DocumentStructure,
    PageKey,
    RouteName,
    SparseVector,
)
from pagesight.index.base import ScoredPoint, StoredPoint, VectorStore
from pagesight.query.retrieval import Retriever
from pagesight.query.routes import (
    WORD_SEARCHES,
    Leading,
    RouteContext,
    RouteResult,
    default_routes,
)

ACCESS = AccessFilter(tenant="t")
K = RetrievalOptions().rrf_k


def _chunk(doc: str, page: int, score: float, unit: str = "chunk") -> ScoredPoint:
    return ScoredPoint(
        id=f"{doc}-{page}-{unit}",
        score=score,
        payload={"doc_id": doc, "page_numbers": [page], "chunk_id": f"{doc}-{page}", "unit": unit},
    )


class Store:
    """query_sparse/query_dense answer fixed hits; the text of a chunk is its payload."""

    collection = "chunks"

    def __init__(self, sparse: list[ScoredPoint], dense: list[ScoredPoint] | None = None) -> None:
        self.sparse = sparse
        self.dense = dense or []
        self.queries: list[str] = []

    def query_sparse(self, *args: Any, **kwargs: Any) -> list[ScoredPoint]:
        self.queries.append("sparse")
        return self.sparse

    def query_dense(self, *args: Any, **kwargs: Any) -> list[ScoredPoint]:
        self.queries.append("dense")
        return self.dense

    def retrieve(self, ids: list[str], access: AccessFilter) -> dict[str, dict[str, Any]]:
        return {}

    def points_of_document(self, tenant: str, doc_id: str) -> list[StoredPoint]:
        return []


class Sparse:
    model_id = "bm25"

    def encode_query(self, text: str) -> SparseVector:
        return SparseVector()

    def encode_documents(self, texts: Any) -> list[SparseVector]:
        return []


class Embedder:
    model_id = "mini"
    dim = 3

    def __init__(self, languages: frozenset[str] | None = None) -> None:
        self.languages = languages

    def embed_query(self, text: str) -> np.ndarray:
        return np.zeros(3, dtype=np.float32)

    def embed_documents(self, texts: Any) -> np.ndarray:
        return np.zeros((len(texts), 3), dtype=np.float32)


class Structures:
    def structure_of(self, access: AccessFilter, doc_id: str) -> DocumentStructure | None:
        return None


@dataclass
class Fixed:
    """A route of its own: ranks ``pages`` (a plain class: the protocol is structural)."""

    name: str
    pages: list[PageKey]
    serves: frozenset[RouteName] = WORD_SEARCHES
    reads_fusion: bool = False
    calls: list[RouteContext] = field(default_factory=list)
    leading: list[Leading | None] = field(default_factory=list)

    def weight(self, options: RetrievalOptions) -> float:
        return options.weights.get(self.name, 1.0)

    def enabled(self, options: RetrievalOptions) -> bool:
        return options.weights.get(self.name, 1.0) > 0

    def search(self, context: RouteContext) -> RouteResult:
        self.calls.append(context)
        self.leading.append(context.leading)
        return RouteResult(pages=[(key, 1.0 / n) for n, key in enumerate(self.pages, start=1)])


def _retriever(
    store: Store,
    weights: dict[str, float] | None = None,
    languages: frozenset[str] | None = None,
    structures: bool = False,
) -> Retriever:
    options = RetrievalOptions()
    options.weights.update(weights or {})
    return Retriever(
        cast(VectorStore, store),
        cast(Any, Embedder(languages)),
        Sparse(),
        options=options,
        structures=Structures() if structures else None,
    )


def test_the_default_registry_follows_the_configuration() -> None:
    store = cast(VectorStore, Store([]))
    plain = default_routes(store, cast(Any, Embedder()), Sparse())
    assert [r.name for r in plain] == ["keyword", "page", "row", "dense"]
    full = _retriever(Store([]), structures=True)
    assert [r.name for r in full.routes] == [
        *("keyword", "page", "row", "dense"),
        *("reference", "statement", "section", "count"),
    ]


def test_a_disabled_route_is_not_called() -> None:
    off = Fixed("custom", [("b", 2)])
    elsewhere = Fixed("pictures", [("c", 3)], serves=frozenset({RouteName.KEYWORD}))
    retriever = _retriever(Store([_chunk("a", 1, 5.0)]), weights={"custom": 0.0})
    retriever.register(off)
    retriever.register(elsewhere)
    result = retriever.search("tax rate", ACCESS, RouteName.TEXT)
    assert off.calls == [] and elsewhere.calls == []  # weight 0; not a route of 'text'
    assert {r.route for r in result.trace.routes}.isdisjoint({"custom", "pictures"})
    assert ("b", 2) not in {(h.doc_id, h.page_number) for h in result.hits}

    retriever.options.weights["custom"] = 2.0  # read at search time, not at construction
    retriever.search("tax rate", ACCESS, RouteName.TEXT)
    assert len(off.calls) == 1


def test_a_registered_routes_candidates_fuse_with_its_weight() -> None:
    store = Store([_chunk("a", 1, 5.0)])
    retriever = _retriever(store, weights={"page": 0.0, "custom": 3.0})
    retriever.register(Fixed("custom", [("b", 2), ("a", 1)]))
    result = retriever.search("tax rate", ACCESS, RouteName.TEXT)

    hits = {(h.doc_id, h.page_number): h for h in result.hits}
    # b#2: custom rank 1 (weight 3); a#1: keyword rank 1 (1) + custom rank 2 (3).
    assert hits[("b", 2)].score == pytest.approx(3 / (K + 1))
    assert hits[("a", 1)].score == pytest.approx(1 / (K + 1) + 3 / (K + 2))
    assert [(h.doc_id, h.page_number) for h in result.hits] == [("a", 1), ("b", 2)]
    assert hits[("b", 2)].route_scores == {"custom": 1.0}
    custom = next(r for r in result.trace.routes if r.route == "custom")
    assert custom.weight == 3.0
    assert custom.candidates == [("page:b#2", 1.0), ("page:a#1", 0.5)]


def test_the_trace_lists_each_route_in_registry_order() -> None:
    rows = [_chunk("a", 1, 5.0), _chunk("a", 1, 4.0, unit="table_row")]
    retriever = _retriever(Store(rows, dense=[_chunk("a", 2, 0.9)]))
    retriever.register(Fixed("custom", [("b", 2)]))
    result = retriever.search("tax rate", ACCESS, RouteName.TEXT)
    assert [r.route for r in result.trace.routes] == [
        *("keyword", "page", "row", "dense", "custom"),
    ]
    weights = RetrievalOptions().weights
    assert [r.weight for r in result.trace.routes] == [
        *(weights["keyword"], weights["page"], weights["row"], weights["dense"], 1.0),
    ]
    keyword = result.trace.routes[0]
    assert keyword.candidates == [("a-1-chunk", 5.0)]  # rows rank on their own
    assert result.trace.routes[2].candidates == [("page:a#1", 4.0)]
    assert set(result.trace.stages_ms) >= {"keyword", "page", "row", "dense", "custom", "fuse"}

    keyword_only = retriever.search("tax rate", ACCESS, RouteName.KEYWORD)
    assert "dense" not in {r.route for r in keyword_only.trace.routes}


def test_a_skipped_route_is_listed_with_its_reason() -> None:
    store = Store([_chunk("a", 1, 5.0)])
    retriever = _retriever(store, languages=frozenset({"en"}))
    result = retriever.search("実効税率はいくらですか", ACCESS, RouteName.TEXT)
    dense = next(r for r in result.trace.routes if r.route == "dense")
    assert dense.weight == 0.0 and dense.skipped and "mini" in dense.skipped
    assert "dense" not in store.queries


def test_routes_reading_the_fusion_run_last_and_see_the_routes_before() -> None:
    retriever = _retriever(Store([_chunk("a", 1, 5.0), _chunk("z", 4, 1.0)]), structures=True)
    follower = Fixed("follower", [("a", 1)], reads_fusion=True)
    retriever.register(follower)
    retriever.register(Fixed("custom", [("b", 2)]))
    names = [r.name for r in retriever.routes]
    assert names.index("custom") < names.index("reference") < names.index("follower")
    with pytest.raises(ValueError, match="already registered"):
        retriever.register(Fixed("custom", []))

    result = retriever.search("tax rate", ACCESS, RouteName.TEXT)
    leading = follower.leading[0]
    assert leading is not None
    # keyword (1) and page (0.5) put z#4 second, ahead of the custom route's b#2 (1 at rank 1)
    assert leading.pages == [("a", 1), ("z", 4), ("b", 2)]
    assert leading.rank == {("a", 1): 1, ("z", 4): 2, ("b", 2): 3}
    assert leading.documents == ["a", "z", "b"]
    assert "structure_prefuse" in result.trace.stages_ms
    assert result.trace.routes[-1].route == "follower"

    one_document = AccessFilter(tenant="t", doc_ids=["z"])
    retriever.search("tax rate", one_document, RouteName.TEXT)
    last = follower.leading[-1]
    assert last is not None and last.documents == ["z"]


def test_a_reference_weighs_less_in_each_later_document_when_asked_to() -> None:
    from pagesight.query.routes import by_document_rank

    pages = [("a", 2), ("b", 2), ("c", 2)]
    leading = Leading(
        pages=[("a", 1), ("b", 5), ("a", 3), ("c", 9)],
        rank={},
        documents=["a", "b", "c"],
    )
    weighed = by_document_rank(pages, {("c", 2): 0.5}, leading, decay=1.0)
    assert weighed == {("a", 2): 1.0, ("b", 2): 0.5, ("c", 2): 0.5 / 3}
    assert by_document_rank(pages, {}, leading, decay=0.0) == {}  # off: unchanged
