"""The visual page rerank against a real page index written by ingestion with a tiny ColQwen2.

The tiny model is random: these tests check that the rerank's MaxSim is the index's MaxSim for
the same page, that it only ever reads what the caller may see, and how it orders pages it
cannot score, not that its ranking is any good.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest

from pagesight.core.ids import point_id
from pagesight.core.protocols import PageEmbedder
from pagesight.core.settings import Settings, VisualEmbedderOptions
from pagesight.core.types import AccessFilter, PageKey
from pagesight.index.base import IndexPoint, IndexSchema
from pagesight.index.edge import EdgeVectorStore
from pagesight.index.vectors import PAGE_POOLED_VECTOR, PAGE_VECTOR
from pagesight.ingestion import samples
from pagesight.ingestion.ingest import IngestRequest
from pagesight.models.colqwen import ColQwen2Embedder
from pagesight.models.pooling import pool_rows_cols, query_centroids
from pagesight.models.testing.tiny_colqwen import build_tiny_colqwen2
from pagesight.query.visual_rerank import VisualPageReranker, fuse_visual_ranking, maxsim
from pagesight.services.stack import LocalStack

pytestmark = pytest.mark.integration
os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUERY = "Which chart shows revenue by region?"
ADMIN = AccessFilter(tenant="default")  # principals=None: every ACL of the tenant


@dataclass
class Indexed:
    """The module's index: three one-page documents in tenant ``default`` (the chart readable
    by alice only), and in tenant ``other`` a different file under the report's doc_id."""

    stack: LocalStack
    report: PageKey
    table: PageKey
    chart: PageKey


class CountingEmbedder:
    """Wraps the page embedder to count query embeddings (the rerank embeds at most once)."""

    def __init__(self, inner: PageEmbedder) -> None:
        self.inner = inner
        self.query_calls = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def warm_up(self) -> None:
        self.inner.warm_up()

    def embed_pages(self, images: Any) -> Any:
        return self.inner.embed_pages(images)

    def embed_queries(self, texts: Any) -> Any:
        self.query_calls += 1
        return self.inner.embed_queries(texts)


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> ColQwen2Embedder:
    model = build_tiny_colqwen2(tmp_path_factory.mktemp("tiny-colqwen2"))
    return ColQwen2Embedder(VisualEmbedderOptions(model=str(model), device="cpu"))


@pytest.fixture(scope="module")
def indexed(
    tmp_path_factory: pytest.TempPathFactory, embedder: ColQwen2Embedder
) -> Iterator[Indexed]:
    root = tmp_path_factory.mktemp("visual-rerank")
    docs = root / "docs"
    docs.mkdir()
    report, table, chart = (
        samples.text_pdf(docs / "report.pdf"),
        samples.table_pdf(docs / "table.pdf"),
        samples.chart_pdf(docs / "chart.pdf"),
    )
    settings = Settings(data_dir=root / "var", visual=embedder.options)
    with LocalStack(settings, page_embedder=embedder) as stack:
        jobs = stack.ingestor.ingest(
            [
                stack.request(report),
                stack.request(table),
                stack.request(chart, acl=["alice"]),
            ]
        )
        assert [j.state.value for j in jobs] == ["READY"] * 3
        # The same doc_id in another tenant (caller-given ids may collide), other content.
        shared = IngestRequest(path=chart, tenant="other", doc_id=jobs[0].doc_id)
        assert stack.ingestor.ingest([shared])[0].state.value == "READY"
        yield Indexed(
            stack=stack,
            report=(jobs[0].doc_id, 1),
            table=(jobs[1].doc_id, 1),
            chart=(jobs[2].doc_id, 1),
        )


@pytest.fixture(params=["numpy", "index"])
def reranker(indexed: Indexed, request: pytest.FixtureRequest) -> VisualPageReranker:
    """Each test runs with MaxSim computed here (numpy) and by the index: same contract."""
    stack = indexed.stack
    assert stack.page_store is not None and stack.page_embedder is not None
    return VisualPageReranker(
        stack.page_store, CountingEmbedder(stack.page_embedder), scoring=request.param
    )


def store_scores(indexed: Indexed, access: AccessFilter, rows: np.ndarray) -> dict[PageKey, float]:
    """Exact MaxSim as the index computes it, for every page ``access`` may see: a full scan,
    and the three-stage query with every limit covering all pages (both must agree)."""
    store = indexed.stack.page_store
    assert store is not None
    full = store.query_multivector(PAGE_VECTOR, rows.tolist(), access, limit=100)
    staged = store.query_two_stage(
        PAGE_VECTOR,
        PAGE_POOLED_VECTOR,
        rows.tolist(),
        access,
        limit=100,
        prefetch=100,
        coarse_query=query_centroids(rows, 3).tolist(),
        coarse_limit=100,
    )
    assert [h.id for h in staged] == [h.id for h in full]
    return {(h.payload["doc_id"], h.payload["page_number"]): h.score for h in full}


def test_maxsim_is_the_index_exact_maxsim_best_first(
    indexed: Indexed, reranker: VisualPageReranker, embedder: ColQwen2Embedder
) -> None:
    candidates = [indexed.chart, indexed.table, indexed.report]
    ranked = reranker.rerank(QUERY, candidates, ADMIN)
    rows = embedder.embed_queries([QUERY])[0]
    expected = store_scores(indexed, ADMIN, rows)
    assert set(expected) == set(candidates)
    assert dict(ranked) == pytest.approx(expected, abs=2e-3)
    scores = [score for _, score in ranked if score is not None]
    assert len(scores) == len(candidates)
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == len(scores), "random pages should not tie"

    # And numpy on the embedder's own (unrounded) page rows: float16 storage is the only gap.
    stack = indexed.stack
    own: dict[PageKey, float] = {}
    from PIL import Image

    for doc_id, number in candidates:
        page = next(p for p in stack.catalog.pages("default", doc_id) if p.page_number == number)
        with Image.open(stack.ingestor.images.path(str(page.image_ref))) as img:
            vectors = embedder.embed_pages([img.convert("RGB")])[0].vectors
        own[(doc_id, number)] = float(maxsim(rows, [vectors])[0])
    assert dict(ranked) == pytest.approx(own, abs=1e-2)


def test_given_query_rows_skip_the_embedder_and_results_are_deterministic(
    indexed: Indexed, reranker: VisualPageReranker, embedder: ColQwen2Embedder
) -> None:
    counting = reranker.page_embedder
    assert isinstance(counting, CountingEmbedder)
    candidates = [indexed.report, indexed.table, indexed.chart]
    first = reranker.rerank(QUERY, candidates, ADMIN)
    assert counting.query_calls == 1
    again = [reranker.rerank(QUERY, candidates, ADMIN) for _ in range(3)]
    assert all(run == first for run in again)  # bit for bit, order included
    rows = embedder.embed_queries([QUERY])[0]
    calls = counting.query_calls
    assert reranker.rerank(QUERY, candidates, ADMIN, query_rows=rows) == first
    assert counting.query_calls == calls
    shuffled = reranker.rerank(QUERY, [indexed.chart, indexed.report, indexed.table], ADMIN)
    assert shuffled == first  # distinct scores: the input order does not matter


def test_pages_without_a_vector_keep_their_order_after_the_scored_ones(
    indexed: Indexed, reranker: VisualPageReranker
) -> None:
    report_doc = indexed.report[0]
    candidates = [
        ("no-such-doc", 1),
        indexed.table,
        (report_doc, 99),  # the document exists, the page does not
        indexed.report,
        ("another-missing-doc", 3),
        indexed.table,  # a repeat (two passages on one page) is one candidate
    ]
    ranked = reranker.rerank(QUERY, candidates, ADMIN)
    scored = [page for page, score in ranked if score is not None]
    assert sorted(scored) == sorted([indexed.table, indexed.report])
    assert ranked[len(scored) :] == [
        (("no-such-doc", 1), None),
        ((report_doc, 99), None),
        (("another-missing-doc", 3), None),
    ]
    counting = reranker.page_embedder
    assert isinstance(counting, CountingEmbedder)
    calls = counting.query_calls
    nothing = [("no-such-doc", 1), ("another-missing-doc", 3)]
    assert reranker.rerank(QUERY, nothing, ADMIN) == [(page, None) for page in nothing]
    assert reranker.rerank(QUERY, [], ADMIN) == []
    assert counting.query_calls == calls, "nothing to score: the query is not embedded"


def test_only_pages_the_caller_may_see_are_read_or_scored(
    indexed: Indexed, reranker: VisualPageReranker, embedder: ColQwen2Embedder
) -> None:
    store = indexed.stack.page_store
    assert store is not None
    candidates = [indexed.report, indexed.table, indexed.chart]
    rows = embedder.embed_queries([QUERY])[0]
    admin_scores = store_scores(indexed, ADMIN, rows)

    def rerank_reading(access: AccessFilter) -> tuple[list[Any], set[tuple[str, PageKey]]]:
        """The rerank for ``access`` and the (tenant, page) of every vector it read or had
        the index score."""
        read: list[str] = []
        vectors_of, query_multivector = store.vectors_of, store.query_multivector

        def reading(*args: Any, **kwargs: Any) -> Any:
            out = vectors_of(*args, **kwargs)
            read.extend(out)
            return out

        def scoring(*args: Any, **kwargs: Any) -> Any:
            hits = query_multivector(*args, **kwargs)
            read.extend(hit.id for hit in hits)
            return hits

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(store, "vectors_of", reading)
            patch.setattr(store, "query_multivector", scoring)
            ranked = reranker.rerank(QUERY, candidates, access)
        payloads = store.retrieve(read).values()  # no filter: what was actually read
        return ranked, {(p["tenant"], (p["doc_id"], p["page_number"])) for p in payloads}

    # bob may not read the chart: it is neither read nor scored, and comes last
    as_bob, read = rerank_reading(AccessFilter(tenant="default", principals=["bob"]))
    assert read == {("default", indexed.report), ("default", indexed.table)}
    assert as_bob[-1] == (indexed.chart, None) and all(s is not None for _, s in as_bob[:2])
    as_alice, read = rerank_reading(AccessFilter(tenant="default", principals=["alice"]))
    assert read == {("default", page) for page in candidates}
    assert dict(as_alice) == pytest.approx(admin_scores, abs=2e-3)

    # tenant "other" holds its own page under the report's doc_id: that one, and only it
    other = AccessFilter(tenant="other")
    other_scores = store_scores(indexed, other, rows)
    assert list(other_scores) == [indexed.report]
    as_other, read = rerank_reading(other)
    assert read == {("other", indexed.report)}
    assert as_other[0] == (indexed.report, pytest.approx(other_scores[indexed.report], abs=2e-3))
    assert as_other[1:] == [(indexed.table, None), (indexed.chart, None)]
    assert abs(admin_scores[indexed.report] - other_scores[indexed.report]) > 1e-3

    # the caller's own doc_ids restriction holds too
    narrowed, read = rerank_reading(AccessFilter(tenant="default", doc_ids=[indexed.table[0]]))
    assert read == {("default", indexed.table)}
    assert narrowed == [
        (indexed.table, pytest.approx(admin_scores[indexed.table], abs=2e-3)),
        (indexed.report, None),
        (indexed.chart, None),
    ]
    nobody, read = rerank_reading(AccessFilter(tenant="initech"))
    assert read == set() and nobody == [(page, None) for page in candidates]


def test_construction_checks_the_store_and_the_embedder(
    tmp_path: Path, embedder: ColQwen2Embedder
) -> None:
    schema = IndexSchema.for_pages(name=PAGE_VECTOR, dim=embedder.dim, model_id="m")
    with (
        EdgeVectorStore.create(tmp_path / "ok", schema) as store,
        pytest.raises(ValueError, match="no full multi-vector"),
    ):
        VisualPageReranker(store, embedder, vector_name=PAGE_POOLED_VECTOR)
    narrow = IndexSchema.for_pages(name=PAGE_VECTOR, dim=embedder.dim + 1, model_id="m")
    with (
        EdgeVectorStore.create(tmp_path / "narrow", narrow) as store,
        pytest.raises(ValueError, match="rows"),
    ):
        VisualPageReranker(store, embedder)


@dataclass
class Passage:
    chunk_id: str
    doc_id: str
    page_number: int


def page_of(passage: Passage) -> PageKey:
    return (passage.doc_id, passage.page_number)


def test_fusion_moves_passages_on_visually_strong_pages_up() -> None:
    a1, a2 = Passage("a1", "A", 1), Passage("a2", "A", 1)
    b1, c1, d1 = Passage("b1", "B", 1), Passage("c1", "C", 1), Passage("d1", "D", 1)
    text = [a1, a2, b1, c1, d1]
    visual: list[tuple[PageKey, float | None]] = [
        (("C", 1), 9.0),
        (("A", 1), 7.0),
        (("B", 1), 5.0),
        (("D", 1), None),
    ]
    fused = fuse_visual_ranking(text, page_of, visual)
    order = [p.chunk_id for p, _ in fused]
    # c1 (text 4th) is on the visually best page and passes b1 (text 3rd, visually 3rd)
    assert order.index("c1") < order.index("b1")
    assert order[:2] == ["a1", "a2"]
    assert sorted(order) == sorted(p.chunk_id for p in text)
    scores = [s for _, s in fused]
    assert scores == sorted(scores, reverse=True)
    # without a visual vote the text order stands; equal ranks keep the text order
    assert [p for p, _ in fuse_visual_ranking(text, page_of, visual, visual_weight=0.0)] == text
    assert [p for p, _ in fuse_visual_ranking(text, page_of, [])] == text
    # a missing vector costs what the visually weakest page costs, not the whole vote
    weakest = [(("C", 1), 9.0), (("A", 1), 7.0), (("B", 1), 5.0), (("D", 1), 1.0)]
    with_none = dict((p.chunk_id, s) for p, s in fused)
    with_weakest = dict((p.chunk_id, s) for p, s in fuse_visual_ranking(text, page_of, weakest))
    assert with_none["d1"] == pytest.approx(with_weakest["d1"])
    with pytest.raises(ValueError):
        fuse_visual_ranking(text, page_of, visual, text_weight=0.0)


def test_fusion_of_a_real_rerank(indexed: Indexed, reranker: VisualPageReranker) -> None:
    passages = [
        Passage("r", *indexed.report),
        Passage("t", *indexed.table),
        Passage("x", "no-such-doc", 1),
        Passage("c", *indexed.chart),
    ]
    visual = reranker.rerank(QUERY, [page_of(p) for p in passages], ADMIN)
    fused = fuse_visual_ranking(passages, page_of, visual, k=1.0)
    assert sorted(p.chunk_id for p, _ in fused) == ["c", "r", "t", "x"]
    best_page = visual[0][0]
    assert page_of(fused[0][0]) in {best_page, indexed.report}  # text 1st or visual 1st


class FixedQueryEmbedder:
    """A page embedder whose every query is the same rows (for hand-written page points)."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows.astype(np.float32)

    @property
    def model_id(self) -> str:
        return "fixed"

    @property
    def dim(self) -> int:
        return int(self.rows.shape[1])

    def warm_up(self) -> None:
        return None

    def embed_pages(self, images: Any) -> Any:
        raise NotImplementedError

    def embed_queries(self, texts: Any) -> list[np.ndarray]:
        return [self.rows for _ in texts]


@pytest.mark.parametrize("scoring", ["numpy", "index"])
def test_a_page_caught_mid_replace_takes_its_better_version(
    tmp_path: Path, scoring: Literal["numpy", "index"]
) -> None:
    """Between writing a changed file's points and deleting the old ones a page exists under
    two versions: it is still one candidate, with the better of the two scores."""
    rng = np.random.default_rng(5)
    dim = 16

    def unit_rows(n: int) -> np.ndarray:
        rows = rng.normal(size=(n, dim))
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    def page(version: str, rows: np.ndarray) -> IndexPoint:
        mask = np.arange(len(rows)) >= 2
        return IndexPoint(
            id=point_id("acme", f"doc/{version}/page/1"),
            multivector={
                PAGE_VECTOR: rows.tolist(),
                PAGE_POOLED_VECTOR: pool_rows_cols(rows, mask, (3, 4)).tolist(),
            },
            payload={
                "tenant": "acme",
                "doc_id": "doc",
                "version": version,
                "acl": ["*"],
                "page_number": 1,
            },
        )

    query = unit_rows(5)
    old, new = unit_rows(14), unit_rows(14)
    new[2:7] = query  # the new version holds the query's rows: MaxSim 5
    schema = IndexSchema.for_pages(name=PAGE_VECTOR, dim=dim, model_id="fixed")
    with EdgeVectorStore.create(tmp_path / "pages", schema) as store:
        store.upsert([page("v1", old), page("v2", new)])
        reranker = VisualPageReranker(store, FixedQueryEmbedder(query), scoring=scoring)
        ranked = reranker.rerank("q", [("doc", 1), ("doc", 2)], AccessFilter(tenant="acme"))
    assert ranked[0][0] == ("doc", 1) and ranked[0][1] == pytest.approx(5.0, abs=5e-3)
    assert ranked[1:] == [(("doc", 2), None)]
