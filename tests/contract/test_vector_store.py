"""The VectorStore contract: every backend passes the same tests (qdrant-client's idea of one API).

:class:`VectorStoreContract` holds the tests; each backend subclasses it and says how to create
and reopen a store. The Qdrant server path runs on qdrant-client's local mode, which is pure
Python: the data here stays small.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_client import QdrantClient

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.ids import point_id
from pagesight.core.types import EVERYONE, AccessFilter, SparseVector
from pagesight.index.base import (
    DenseVectorSpec,
    IndexPoint,
    IndexSchema,
    MultiVectorSpec,
    Selection,
    SparseVectorSpec,
    VectorStore,
    pooled_vector_name,
)
from pagesight.index.edge import EdgeVectorStore
from pagesight.index.forwarded import ForwardedVectorStore, read_primitive
from pagesight.index.qdrant_server import QdrantServerStore
from pagesight.models.pooling import pool_rows_cols, query_centroids

DIM = 8
MV_DIM = 4
SCHEMA = IndexSchema(
    dense={"text": DenseVectorSpec(dim=DIM, model_id="test-dense")},
    sparse={"bm25": SparseVectorSpec(model_id="test-bm25")},
    multivector={"page": MultiVectorSpec(dim=MV_DIM, model_id="test-colqwen")},
)
#: A page collection: full page rows ("page") and their row/column mean-pooled first stage.
PAGE_DIM = 16
PAGE_GRID = (4, 5)
PROMPT_ROWS = 2
PAGE_SCHEMA = IndexSchema.for_pages(name="page", dim=PAGE_DIM, model_id="test-colqwen")
PAGE_SCHEMA_INT8 = IndexSchema.for_pages(
    name="page", dim=PAGE_DIM, model_id="test-colqwen", pooled_quantization="int8"
)
POOLED = pooled_vector_name("page")
COLLECTION = "contract__00000000000000000001"
#: small scroll pages, so a few dozen points already exercise paging
SCROLL_PAGE = 7


def unit(rng: np.random.Generator, dim: int = DIM) -> list[float]:
    v = rng.normal(size=dim)
    return [float(x) for x in v / np.linalg.norm(v)]


def make_point(
    key: str,
    *,
    tenant: str = "acme",
    doc_id: str = "doc-1",
    version: str = "v1",
    acl: list[str] | None = None,
    dense: list[float] | None = None,
    sparse: SparseVector | None = None,
    multivector: list[list[float]] | None = None,
    **payload: Any,
) -> IndexPoint:
    return IndexPoint(
        id=point_id(tenant, f"{doc_id}/{version}/{key}"),
        dense={} if dense is None else {"text": dense},
        sparse={} if sparse is None else {"bm25": sparse},
        multivector={} if multivector is None else {"page": multivector},
        payload={
            "tenant": tenant,
            "doc_id": doc_id,
            "version": version,
            "acl": [EVERYONE] if acl is None else acl,
            "chunk_id": f"{doc_id}/{version}/{key}",
            "text": key,
            **payload,
        },
    )


def page_rows(rng: np.random.Generator, rows: int = PAGE_GRID[0] * PAGE_GRID[1]) -> np.ndarray:
    """A page's rows: ``PROMPT_ROWS`` prompt tokens, then ``rows`` image patches, unit length."""
    matrix = rng.normal(size=(PROMPT_ROWS + rows, PAGE_DIM))
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def make_page(
    key: str,
    rows: np.ndarray,
    grid: tuple[int, int] = PAGE_GRID,
    **kw: Any,
) -> IndexPoint:
    """A page point: its full rows plus their row/column mean-pooled first stage."""
    mask = np.arange(len(rows)) >= PROMPT_ROWS
    point = make_point(key, **kw)
    vectors = {"page": rows.tolist(), POOLED: pool_rows_cols(rows, mask, grid).tolist()}
    return point.model_copy(update={"multivector": vectors})


def planted_query(rng: np.random.Generator, page: np.ndarray, rows: int = 6) -> list[list[float]]:
    """Query rows drawn from one page's image patches plus noise (cosine ~0.9 to them)."""
    picked = page[PROMPT_ROWS + rng.choice(len(page) - PROMPT_ROWS, size=rows, replace=False)]
    noisy = picked + 0.3 * rng.normal(size=picked.shape) / np.sqrt(PAGE_DIM)
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).tolist()


def exact_maxsim(query: list[list[float]], pages: list[IndexPoint]) -> np.ndarray:
    """Exact MaxSim of ``query`` against each page's full rows, as stored (float16)."""
    q = np.asarray(query, dtype=np.float32)
    return np.array(
        [
            float(
                (q @ np.asarray(p.multivector["page"], np.float16).astype(np.float32).T)
                .max(axis=1)
                .sum()
            )
            for p in pages
        ]
    )


def assert_exact_top_k(hits: list[Any], exact: np.ndarray, pages: list[IndexPoint], k: int) -> None:
    """``hits`` are an exact MaxSim top-``k``: each score is its page's exact score, in order,
    and they are the ``k`` best exact scores (compared by score, so float16 near-ties between
    two pages may come in either order)."""
    by_id = {p.id: float(score) for p, score in zip(pages, exact, strict=True)}
    scores = [h.score for h in hits]
    assert len(hits) == k
    assert scores == sorted(scores, reverse=True)
    assert scores == pytest.approx([by_id[h.id] for h in hits], abs=5e-3)
    assert scores == pytest.approx(sorted(exact, reverse=True)[:k], abs=5e-3)


def ids_of(hits: list[Any]) -> list[str]:
    return [h.id for h in hits]


def cosine_order(query: list[float], points: list[IndexPoint]) -> list[str]:
    matrix = np.array([p.dense["text"] for p in points])
    scores = matrix @ np.array(query) / np.linalg.norm(matrix, axis=1) / np.linalg.norm(query)
    return [points[i].id for i in np.argsort(-scores)]


class VectorStoreContract:
    """The tests every backend must pass; subclasses implement :meth:`create` and :meth:`reopen`."""

    def create(self, root: Path, schema: IndexSchema) -> VectorStore:
        raise NotImplementedError

    def reopen(self, root: Path, schema: IndexSchema | None) -> VectorStore:
        raise NotImplementedError

    @pytest.fixture()
    def store(self, tmp_path: Path) -> Any:
        store = self.create(tmp_path, SCHEMA)
        yield store
        store.close()

    # -- ranking --

    def test_dense_query_ranks_nearest_first(self, store: VectorStore) -> None:
        rng = np.random.default_rng(1)
        points = [make_point(f"c{i}", dense=unit(rng)) for i in range(30)]
        store.upsert(points)
        query = unit(rng)
        hits = store.query_dense("text", query, AccessFilter(tenant="acme"), limit=10)
        assert ids_of(hits) == cosine_order(query, points)[:10]
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        exact = store.query_dense("text", points[7].dense["text"], AccessFilter(tenant="acme"), 1)
        assert exact[0].id == points[7].id
        assert exact[0].score == pytest.approx(1.0, abs=1e-5)
        assert exact[0].payload["chunk_id"] == "doc-1/v1/c7"

    def test_sparse_query_weighs_rare_terms_higher(self, store: VectorStore) -> None:
        # Term 1 is in six points, term 99 in one, each weighing 1.0: without IDF every point
        # would score 1.0 for the query "1 99"; with IDF the rare term's point ranks first.
        common = [
            make_point(f"common{i}", sparse=SparseVector(indices=[1], values=[1.0]))
            for i in range(6)
        ]
        rare = make_point("rare", sparse=SparseVector(indices=[99], values=[1.0]))
        store.upsert([*common, rare])
        query = SparseVector(indices=[1, 99], values=[1.0, 1.0])
        hits = store.query_sparse("bm25", query, AccessFilter(tenant="acme"), limit=10)
        assert len(hits) == 7
        assert hits[0].id == rare.id
        assert hits[0].score > 2 * hits[1].score
        unknown = SparseVector(indices=[12345], values=[1.0])
        assert store.query_sparse("bm25", unknown, AccessFilter(tenant="acme"), 5) == []
        assert store.query_sparse("bm25", SparseVector(), AccessFilter(tenant="acme"), 5) == []

    def test_multivector_query_is_maxsim(self, store: VectorStore) -> None:
        rng = np.random.default_rng(5)
        pages = [
            make_point(f"p{i}", multivector=[unit(rng, MV_DIM) for _ in range(3)]) for i in range(8)
        ]
        store.upsert(pages)
        query = [unit(rng, MV_DIM) for _ in range(2)]
        hits = store.query_multivector("page", query, AccessFilter(tenant="acme"), limit=8)
        maxsim = [
            float((np.array(query) @ np.array(p.multivector["page"]).T).max(axis=1).sum())
            for p in pages
        ]
        assert ids_of(hits) == [pages[i].id for i in np.argsort(maxsim)[::-1]]
        # float16 storage: scores agree to about three decimals
        assert hits[0].score == pytest.approx(max(maxsim), abs=5e-3)

    # -- two-stage (pooled first stage, exact MaxSim rerank) --

    @pytest.fixture()
    def page_store(self, tmp_path: Path) -> Any:
        store = self.create(tmp_path, PAGE_SCHEMA)
        yield store
        store.close()

    def test_two_stage_equals_exact_maxsim_when_prefetch_covers_every_page(
        self, page_store: VectorStore
    ) -> None:
        rng = np.random.default_rng(21)
        pages = [make_page(f"p{i}", page_rows(rng)) for i in range(24)]
        page_store.upsert(pages)
        access = AccessFilter(tenant="acme")
        queries = [planted_query(rng, np.asarray(pages[3].multivector["page"]))]
        queries += [page_rows(rng, 4)[PROMPT_ROWS:].tolist() for _ in range(2)]
        for query in queries:
            exact = exact_maxsim(query, pages)
            full_scan = page_store.query_multivector("page", query, access, 10)
            assert_exact_top_k(full_scan, exact, pages, 10)
            for prefetch in (24, 100):
                hits = page_store.query_two_stage("page", POOLED, query, access, 10, prefetch)
                assert_exact_top_k(hits, exact, pages, 10)
                assert ids_of(hits) == ids_of(full_scan)
        planted = page_store.query_two_stage("page", POOLED, queries[0], access, 1, prefetch=3)
        assert ids_of(planted) == [pages[3].id]
        assert planted[0].payload["chunk_id"] == "doc-1/v1/p3"

    def test_two_stage_filters_inside_the_first_stage(self, page_store: VectorStore) -> None:
        # The query is an exact copy of rows of the hidden pages and a noisy copy of those of
        # the visible one: hidden pages win both stages if they are candidates at all. With a
        # prefetch of 1, a filter applied only after the first stage would return nothing.
        rng = np.random.default_rng(22)
        content = page_rows(rng)
        noisy = content + 0.3 * rng.normal(size=content.shape) / np.sqrt(PAGE_DIM)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        visible = make_page("visible", noisy, acl=["alice"])
        hidden = [
            make_page("other-tenant", content, tenant="globex"),
            make_page("bob-only", content, acl=["bob"]),
            make_page("expired", content, valid_until=time.time() - 3600),
            make_page("other-doc", content, doc_id="doc-2"),
        ]
        others = [make_page(f"p{i}", page_rows(rng), acl=["alice"]) for i in range(10)]
        page_store.upsert([visible, *hidden, *others])
        query = content[PROMPT_ROWS : PROMPT_ROWS + 6].tolist()
        alice = AccessFilter(tenant="acme", principals=["alice"], doc_ids=["doc-1"])
        for prefetch in (1, 2, 15):
            hits = page_store.query_two_stage("page", POOLED, query, alice, 1, prefetch)
            assert ids_of(hits) == [visible.id]
            every = page_store.query_two_stage("page", POOLED, query, alice, prefetch, prefetch)
            assert not {h.id for h in every} & {p.id for p in hidden}
            assert {h.payload["tenant"] for h in every} == {"acme"}
        bob = AccessFilter(tenant="acme", principals=["bob"])
        assert ids_of(page_store.query_two_stage("page", POOLED, query, bob, 1, 1)) == [
            hidden[1].id
        ]
        nobody = AccessFilter(tenant="acme", doc_ids=[])
        assert page_store.query_two_stage("page", POOLED, query, nobody, 1, 1) == []

    def test_quantized_first_stage_keeps_the_planted_top1(self, tmp_path: Path) -> None:
        rng = np.random.default_rng(23)
        pages = [make_page(f"p{i}", page_rows(rng)) for i in range(24)]
        store = self.create(tmp_path, PAGE_SCHEMA_INT8)
        try:
            store.upsert(pages)
            store.optimize()
            access = AccessFilter(tenant="acme")
            for target in (0, 5, 11, 17, 23):
                query = planted_query(rng, np.asarray(pages[target].multivector["page"]))
                for quantized in (None, True, False):
                    hits = store.query_two_stage(
                        "page", POOLED, query, access, 1, prefetch=3, quantized=quantized
                    )
                    assert ids_of(hits) == [pages[target].id]
                    assert hits[0].score == pytest.approx(
                        float(exact_maxsim(query, [pages[target]])[0]), abs=5e-3
                    )
        finally:
            store.close()

    def test_three_stages_equal_exact_and_filter_inside_stage_zero(
        self, page_store: VectorStore
    ) -> None:
        """With stage 0 (the query's centroids against the pooled rows) in front: == exact
        MaxSim when every limit covers the visible pages; stage 0 scores its own rows, not the
        query's; and the access filter applies inside stage 0 too (limit 1 would otherwise be
        taken by a hidden page)."""
        rng = np.random.default_rng(25)
        pages = [make_page(f"p{i}", page_rows(rng)) for i in range(24)]
        content = page_rows(rng)
        noisy = content + 0.3 * rng.normal(size=content.shape) / np.sqrt(PAGE_DIM)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        visible = make_page("visible", noisy, acl=["alice"])
        hidden = make_page("hidden", content, tenant="globex")
        page_store.upsert([*pages, visible, hidden])
        everyone = AccessFilter(tenant="acme")
        query = planted_query(rng, np.asarray(pages[7].multivector["page"]))
        centroids = query_centroids(query, 2).tolist()
        exact = exact_maxsim(query, [*pages, visible])
        hits = page_store.query_two_stage(
            "page", POOLED, query, everyone, 10, 25, coarse_query=centroids, coarse_limit=25
        )
        assert_exact_top_k(hits, exact, [*pages, visible], 10)
        planted = page_store.query_two_stage(
            "page", POOLED, query, everyone, 1, 3, coarse_query=centroids, coarse_limit=6
        )
        assert ids_of(planted) == [pages[7].id]
        # stage 0 keeps one page, chosen by its own rows: the full query cannot bring 7 back
        elsewhere = planted_query(rng, np.asarray(pages[3].multivector["page"]))
        only_stage0 = page_store.query_two_stage(
            "page", POOLED, query, everyone, 1, 1, coarse_query=elsewhere, coarse_limit=1
        )
        assert ids_of(only_stage0) == [pages[3].id]
        alice = AccessFilter(tenant="acme", principals=["alice"])
        leak = content[PROMPT_ROWS : PROMPT_ROWS + 6].tolist()
        only = page_store.query_two_stage(
            "page", POOLED, leak, alice, 1, 1, coarse_query=leak[:2], coarse_limit=1
        )
        assert ids_of(only) == [visible.id]
        with pytest.raises(ValueError, match="coarse_limit"):
            page_store.query_two_stage("page", POOLED, query, everyone, 1, 5, coarse_query=query)
        with pytest.raises(ValueError, match="coarse_limit"):
            page_store.query_two_stage(
                "page", POOLED, query, everyone, 1, 5, coarse_query=query, coarse_limit=4
            )
        with pytest.raises(PageSightError, match=r"stage 0 .* expected one or more rows of 16"):
            page_store.query_two_stage(
                "page", POOLED, query, everyone, 1, 1, coarse_query=[[1.0]], coarse_limit=5
            )

    def test_two_stage_refuses_bad_requests(self, page_store: VectorStore) -> None:
        rng = np.random.default_rng(24)
        rows = page_rows(rng)
        access = AccessFilter(tenant="acme")
        query = rows[:3].tolist()
        with pytest.raises(ValueError, match="prefetch"):
            page_store.query_two_stage("page", POOLED, query, access, 10, prefetch=5)
        with pytest.raises(PageSightError, match="no multivector vector 'nope'"):
            page_store.query_two_stage("page", "nope", query, access, 1, 1)
        with pytest.raises(PageSightError, match="not a first stage"):
            page_store.query_two_stage(POOLED, "page", query, access, 1, 1)
        with pytest.raises(PageSightError, match="no quantization"):
            page_store.query_two_stage("page", POOLED, query, access, 1, 1, quantized=True)
        with pytest.raises(PageSightError, match="expected one or more rows of 16"):
            page_store.query_two_stage("page", POOLED, [[1.0, 0.0]], access, 1, 1)
        full_only = make_point("full-only", multivector=rows.tolist())
        with pytest.raises(PageSightError, match="written together"):
            page_store.upsert([full_only])
        pooled_only = make_point("pooled-only").model_copy(
            update={"multivector": {POOLED: rows[:9].tolist()}}
        )
        with pytest.raises(PageSightError, match="written together"):
            page_store.upsert([pooled_only])
        assert page_store.count() == 0

    def test_multivectors_reads_stored_rows_back(self, page_store: VectorStore) -> None:
        rng = np.random.default_rng(25)
        pages = [make_page(f"p{i}", page_rows(rng)) for i in range(3)]
        page_store.upsert(pages)
        missing = make_point("never-written").id
        stored = page_store.multivectors([pages[1].id, missing], "page")
        assert set(stored) == {pages[1].id}
        expected = np.asarray(pages[1].multivector["page"])
        assert np.allclose(np.asarray(stored[pages[1].id]), expected, atol=2e-3)  # float16
        pooled = page_store.multivectors([pages[0].id], POOLED)[pages[0].id]
        assert len(pooled) == PAGE_GRID[0] + PAGE_GRID[1]
        assert page_store.multivectors([], "page") == {}

    def test_vectors_of_reads_only_what_access_may_see(self, page_store: VectorStore) -> None:
        """vectors_of filters inside the read, as retrieve does: every hidden page's id is
        asked for and none comes back; a visible page's rows score exactly as the store does."""
        rng = np.random.default_rng(26)
        visible = [make_page(f"p{i}", page_rows(rng), acl=["alice"]) for i in range(3)]
        hidden = [
            make_page("other-tenant", page_rows(rng), tenant="globex"),
            make_page("bob-only", page_rows(rng), acl=["bob"]),
            make_page("expired", page_rows(rng), valid_until=time.time() - 3600),
            make_page("other-doc", page_rows(rng), doc_id="doc-2", acl=["alice"]),
        ]
        page_store.upsert([*visible, *hidden])
        alice = AccessFilter(tenant="acme", principals=["alice"], doc_ids=["doc-1"])
        missing = make_point("never-written").id
        asked = [p.id for p in [*hidden, *visible]] + [missing, visible[0].id]
        stored = page_store.vectors_of(asked, "page", alice)
        assert set(stored) == {p.id for p in visible}
        for page in visible:
            rows = stored[page.id]
            assert rows.dtype == np.float32 and rows.shape == (len(page.multivector["page"]), 16)
            assert np.allclose(rows, np.asarray(page.multivector["page"]), atol=2e-3)  # float16
        query = planted_query(rng, np.asarray(visible[1].multivector["page"]))
        hits = page_store.query_multivector("page", query, alice, limit=10)
        q = np.asarray(query, dtype=np.float32)
        mine = {pid: float((q @ rows.T).max(axis=1).sum()) for pid, rows in stored.items()}
        assert {h.id: h.score for h in hits} == pytest.approx(mine, abs=5e-3)
        pooled = page_store.vectors_of([visible[0].id], POOLED, alice)[visible[0].id]
        assert pooled.shape == (PAGE_GRID[0] + PAGE_GRID[1], 16)
        admin = AccessFilter(tenant="acme")  # principals=None: every ACL, still one tenant
        assert set(page_store.vectors_of(asked, "page", admin)) == {
            *(p.id for p in visible),
            hidden[1].id,
            hidden[3].id,
        }
        assert page_store.vectors_of([], "page", alice) == {}
        assert page_store.vectors_of(asked, "page", alice.model_copy(update={"doc_ids": []})) == {}
        with pytest.raises(PageSightError, match="no multivector vector 'nope'"):
            page_store.vectors_of(asked, "nope", alice)

    def test_multivector_query_scores_only_the_given_visible_ids(
        self, page_store: VectorStore
    ) -> None:
        """query_multivector(ids=...): the exact MaxSim of just those points, filtered by
        access as every query is (a hidden page asked for by id is not scored)."""
        rng = np.random.default_rng(28)
        pages = [make_page(f"p{i}", page_rows(rng), acl=["alice"]) for i in range(12)]
        hidden = make_page("bob-only", page_rows(rng), acl=["bob"])
        page_store.upsert([*pages, hidden])
        alice = AccessFilter(tenant="acme", principals=["alice"])
        query = planted_query(rng, np.asarray(pages[0].multivector["page"]))
        everything = {h.id: h.score for h in page_store.query_multivector("page", query, alice, 20)}
        asked = [pages[7].id, hidden.id, pages[0].id, pages[3].id, make_point("none").id]
        hits = page_store.query_multivector("page", query, alice, 10, ids=asked)
        assert ids_of(hits) == [
            p.id for p in sorted([pages[0], pages[3], pages[7]], key=lambda p: -everything[p.id])
        ]
        assert {h.id: h.score for h in hits} == pytest.approx(
            {h.id: everything[h.id] for h in hits}, abs=1e-5
        )
        assert len(page_store.query_multivector("page", query, alice, 1, ids=asked)) == 1
        assert page_store.query_multivector("page", query, alice, 5, ids=[]) == []

    def test_visible_points_finds_pages_by_document(self, store: VectorStore) -> None:
        """visible_points: the access-filtered listing a caller uses to find point ids it
        cannot derive (a page's id needs the document's version); paged, fields cut."""
        rng = np.random.default_rng(27)
        points = [
            make_point(f"c{i}", doc_id=f"doc-{i % 3}", dense=unit(rng), page_number=i)
            for i in range(20)
        ]
        hidden = [
            make_point("other-tenant", doc_id="doc-0", dense=unit(rng), tenant="globex"),
            make_point("bob-only", doc_id="doc-0", dense=unit(rng), acl=["bob"]),
            make_point("expired", doc_id="doc-0", dense=unit(rng), valid_until=time.time() - 1),
        ]
        store.upsert([*points, *hidden])
        alice = AccessFilter(tenant="acme", principals=["alice"], doc_ids=["doc-0", "doc-2"])
        found = store.visible_points(alice, fields=["doc_id", "page_number"])
        expected = [p for p in points if p.payload["doc_id"] in {"doc-0", "doc-2"}]
        assert sorted(p.id for p in found) == sorted(p.id for p in expected)
        assert [p.id for p in found] == sorted(p.id for p in found)  # id order
        assert all(set(p.payload) == {"doc_id", "page_number"} for p in found)
        assert {p.id: p.payload["page_number"] for p in found} == {
            p.id: p.payload["page_number"] for p in expected
        }
        assert store.visible_points(alice.model_copy(update={"doc_ids": []})) == []
        full = store.visible_points(AccessFilter(tenant="acme", doc_ids=["doc-0"]))
        assert {p.payload["text"] for p in full} >= {"bob-only", "c0"}

    # -- writes --

    def test_upsert_is_idempotent_and_overwrites(self, store: VectorStore) -> None:
        rng = np.random.default_rng(2)
        points = [make_point(f"c{i}", dense=unit(rng)) for i in range(5)]
        store.upsert(points)
        store.upsert(points)
        assert store.count() == 5
        changed = points[0].model_copy(update={"payload": {**points[0].payload, "text": "new"}})
        store.upsert([changed])
        assert store.count() == 5
        assert store.retrieve([points[0].id])[points[0].id]["text"] == "new"

    def test_candidate_fields_follow_every_write(self, store: VectorStore) -> None:
        """What a search returns of the payload is what the last write stored, however often
        the same points were searched before (the embedded store keeps candidates' payloads
        in memory: pagesight.index.payload_cache)."""
        rng = np.random.default_rng(12)
        points = [make_point(f"c{i}", dense=unit(rng), title="old") for i in range(6)]
        store.upsert(points)
        query = points[0].dense["text"]
        acme = AccessFilter(tenant="acme")
        fields = ("chunk_id", "title")
        for _ in range(2):
            hits = store.query_dense("text", query, acme, 6, fields)
            assert {h.payload["title"] for h in hits} == {"old"}
            assert set(hits[0].payload) <= set(fields)
        hits[0].payload["title"] = "edited by a caller"
        assert store.query_dense("text", query, acme, 1, fields)[0].payload["title"] == "old"
        store.upsert(
            [points[0].model_copy(update={"payload": {**points[0].payload, "title": "new"}})]
        )
        hits = store.query_dense("text", query, acme, 6, fields)
        assert hits[0].id == points[0].id and hits[0].payload["title"] == "new"
        store.delete_document("acme", "doc-1")
        assert store.query_dense("text", query, acme, 6, fields) == []

    def test_delete_document_keeps_only_the_named_version(self, store: VectorStore) -> None:
        rng = np.random.default_rng(3)
        old = [make_point(f"c{i}", version="v1", dense=unit(rng)) for i in range(4)]
        new = [make_point(f"c{i}", version="v2", dense=unit(rng)) for i in range(2)]
        other_doc = [make_point("c0", doc_id="doc-2", dense=unit(rng))]
        other_tenant = [make_point("c0", tenant="globex", version="v1", dense=unit(rng))]
        store.upsert([*old, *new, *other_doc, *other_tenant])
        store.delete_document("acme", "doc-1", keep_version="v2")
        remaining = store.points_of_document("acme", "doc-1")
        assert sorted(p.id for p in remaining) == sorted(p.id for p in new)
        assert store.count(AccessFilter(tenant="globex")) == 1
        assert store.document_versions("acme") == {"doc-1": "v2", "doc-2": "v1"}
        store.delete_document("acme", "doc-1")
        assert store.points_of_document("acme", "doc-1") == []
        assert store.count() == 2

    def test_document_versions_pages_through_every_point(self, store: VectorStore) -> None:
        rng = np.random.default_rng(4)
        points = [
            make_point(f"c{i}", doc_id=f"doc-{d}", version=f"sha-{d}", dense=unit(rng))
            for d in range(9)
            for i in range(5)
        ]
        interrupted = [make_point("c9", doc_id="doc-3", version="sha-new", dense=unit(rng))]
        store.upsert([*points, *interrupted, make_point("x", tenant="globex", dense=unit(rng))])
        versions = store.document_versions("acme")
        assert len(points) > 5 * SCROLL_PAGE  # several scroll pages
        expected: dict[str, str | None] = {f"doc-{d}": f"sha-{d}" for d in range(9)}
        expected["doc-3"] = None  # two versions at once: an interrupted replace
        assert versions == expected
        assert len(store.points_of_document("acme", "doc-4")) == 5

    def test_bad_points_are_refused(self, store: VectorStore) -> None:
        rng = np.random.default_rng(6)
        with pytest.raises(PageSightError) as wrong_dim:
            store.upsert([make_point("a", dense=[1.0, 0.0])])
        assert wrong_dim.value.code == ErrorCode.INDEX_FAILED
        with pytest.raises(PageSightError, match="no dense vector 'nope'"):
            store.upsert(
                [
                    IndexPoint(
                        id=make_point("b").id,
                        dense={"nope": unit(rng)},
                        payload=make_point("b").payload,
                    )
                ]
            )
        with pytest.raises(PageSightError, match="NaN"):
            store.upsert([make_point("c", dense=[float("nan")] * DIM)])
        with pytest.raises(ValueError, match="tenant"):
            IndexPoint(id=make_point("d").id, dense={"text": unit(rng)}, payload={"doc_id": "x"})
        with pytest.raises(ValueError):
            IndexPoint(id="not-a-uuid", payload=make_point("e").payload)
        assert store.count() == 0

    # -- access --

    def test_tenants_are_isolated(self, store: VectorStore) -> None:
        # Same document bytes in two tenants: same doc_id and content, per-tenant point ids.
        rng = np.random.default_rng(7)
        vectors = [unit(rng) for _ in range(4)]
        for tenant in ("acme", "globex"):
            store.upsert(
                [
                    make_point(
                        f"c{i}",
                        tenant=tenant,
                        dense=v,
                        sparse=SparseVector(indices=[i], values=[1.0]),
                    )
                    for i, v in enumerate(vectors)
                ]
            )
        assert store.count() == 8
        for tenant in ("acme", "globex"):
            access = AccessFilter(tenant=tenant)  # principals=None: tenant admin, still one tenant
            dense = store.query_dense("text", vectors[0], access, limit=10)
            sparse = store.query_sparse(
                "bm25", SparseVector(indices=[0, 1], values=[1.0, 1.0]), access, 10
            )
            assert len(dense) == 4 and len(sparse) == 2
            assert {h.payload["tenant"] for h in [*dense, *sparse]} == {tenant}
            assert store.count(access) == 4
        assert store.query_dense("text", vectors[0], AccessFilter(tenant="initech"), 10) == []
        globex_ids = [make_point("c0", tenant="globex").id]
        assert store.retrieve(globex_ids, AccessFilter(tenant="acme")) == {}

    def test_acl_is_applied_inside_the_query(self, store: VectorStore) -> None:
        rng = np.random.default_rng(8)
        public = make_point("public", acl=[EVERYONE], dense=unit(rng))
        alice = make_point("alice", acl=["alice", "group:finance"], dense=unit(rng))
        bob = make_point("bob", acl=["bob"], dense=unit(rng))
        admin_only = make_point("nobody", acl=[], dense=unit(rng))
        store.upsert([public, alice, bob, admin_only])

        def visible(principals: list[str] | None) -> set[str]:
            access = AccessFilter(tenant="acme", principals=principals)
            hits = store.query_dense("text", unit(rng), access, limit=10)
            assert store.count(access) == len(hits)
            return {h.payload["text"] for h in hits}

        assert visible(["alice"]) == {"public", "alice"}
        assert visible(["group:finance", "bob"]) == {"public", "alice", "bob"}
        assert visible(["mallory"]) == {"public"}
        assert visible([]) == {"public"}
        assert visible(None) == {"public", "alice", "bob", "nobody"}
        assert set(
            store.retrieve([alice.id, bob.id], AccessFilter(tenant="acme", principals=["bob"]))
        ) == {bob.id}

    def test_expired_points_are_invisible(self, store: VectorStore) -> None:
        rng = np.random.default_rng(9)
        now = time.time()
        expired = make_point("expired", dense=unit(rng), valid_until=now - 3600)
        future = make_point("future", dense=unit(rng), valid_until=now + 3600)
        null = make_point("null", dense=unit(rng), valid_until=None)
        absent = make_point("absent", dense=unit(rng))
        store.upsert([expired, future, null, absent])

        def visible(at: datetime | None) -> set[str]:
            access = AccessFilter(tenant="acme", principals=["anyone"], now=at)
            return {h.payload["text"] for h in store.query_dense("text", unit(rng), access, 10)}

        assert visible(None) == {"future", "null", "absent"}  # None = the current time
        assert visible(datetime.now(UTC) - timedelta(hours=2)) == {
            "expired",
            "future",
            "null",
            "absent",
        }
        assert visible(datetime.now(UTC) + timedelta(hours=2)) == {"null", "absent"}

    def test_doc_ids_restrict_candidates(self, store: VectorStore) -> None:
        rng = np.random.default_rng(10)
        store.upsert(
            [make_point(f"c{i}", doc_id=f"doc-{i % 3}", dense=unit(rng)) for i in range(9)]
        )
        access = AccessFilter(tenant="acme", doc_ids=["doc-0", "doc-2"])
        hits = store.query_dense("text", unit(rng), access, limit=10)
        assert len(hits) == 6 and {h.payload["doc_id"] for h in hits} == {"doc-0", "doc-2"}
        nothing = AccessFilter(tenant="acme", doc_ids=[])
        assert store.query_dense("text", unit(rng), nothing, limit=10) == []
        assert store.count(nothing) == 0

    # -- lifecycle --

    def test_data_and_schema_survive_reopen(self, tmp_path: Path) -> None:
        rng = np.random.default_rng(11)
        points = [
            make_point(f"c{i}", dense=unit(rng), sparse=SparseVector(indices=[i], values=[1.0]))
            for i in range(6)
        ]
        store = self.create(tmp_path, SCHEMA)
        store.upsert(points)
        store.flush()
        store.close()
        store.close()  # idempotent
        with pytest.raises(PageSightError, match="closed"):
            store.count()

        reopened = self.reopen(tmp_path, SCHEMA)
        try:
            assert reopened.count() == 6
            assert reopened.schema == SCHEMA
            hits = reopened.query_dense(
                "text", points[2].dense["text"], AccessFilter(tenant="acme"), 1
            )
            assert hits[0].id == points[2].id
        finally:
            reopened.close()

        untyped = self.reopen(tmp_path, None)  # no schema given: the stored one is used
        try:
            assert untyped.schema == SCHEMA
            assert untyped.document_versions("acme") == {"doc-1": "v1"}
        finally:
            untyped.close()

    def test_schema_mismatch_on_open_asks_for_reindex(self, tmp_path: Path) -> None:
        self.create(tmp_path, SCHEMA).close()
        other = SCHEMA.model_copy(
            update={
                "dense": {"text": DenseVectorSpec(dim=DIM * 2, model_id="bigger-model")},
                "id_scheme": "v2",
            }
        )
        with pytest.raises(PageSightError) as err:
            self.reopen(tmp_path, other)
        assert err.value.code == ErrorCode.INDEX_FAILED
        message = err.value.message
        assert "dim stored 8, requested 16" in message
        assert "model_id stored 'test-dense', requested 'bigger-model'" in message
        assert "id_scheme" in message and "re-index" in message
        # the failed open released the index
        self.reopen(tmp_path, SCHEMA).close()


class TestEdgeVectorStoreUncached(VectorStoreContract):
    """The embedded store with its payload cache off (``index.payload_cache_points: 0``)."""

    payload_cache_points = 0

    def create(self, root: Path, schema: IndexSchema) -> VectorStore:
        return EdgeVectorStore.create(
            root / "index",
            schema,
            scroll_page=SCROLL_PAGE,
            payload_cache_points=self.payload_cache_points,
        )

    def reopen(self, root: Path, schema: IndexSchema | None) -> VectorStore:
        return EdgeVectorStore.open(
            root / "index",
            schema,
            scroll_page=SCROLL_PAGE,
            payload_cache_points=self.payload_cache_points,
        )


class TestEdgeVectorStore(TestEdgeVectorStoreUncached):
    """The embedded store as the service opens it: candidates' payloads cached; and what is
    the embedded engine's own (locks, seals, optimize)."""

    payload_cache_points = 64

    def test_second_open_in_this_process_is_refused(self, store: VectorStore) -> None:
        assert isinstance(store, EdgeVectorStore)
        with pytest.raises(PageSightError, match="open in another process") as err:
            EdgeVectorStore.open(store.path, SCHEMA)
        assert err.value.code == ErrorCode.INDEX_FAILED
        assert "pagesight serve" in err.value.message
        store.upsert([make_point("still-works", dense=[1.0] + [0.0] * (DIM - 1))])
        assert store.count() == 1

    def test_second_open_from_another_process_is_refused(self, store: VectorStore) -> None:
        assert isinstance(store, EdgeVectorStore)
        script = textwrap.dedent(
            f"""
            from pathlib import Path
            from pagesight.core.errors import PageSightError
            from pagesight.index.edge import EdgeVectorStore
            try:
                EdgeVectorStore.open(Path({str(store.path)!r}))
            except PageSightError as exc:
                print(exc.message)
            else:
                print("OPENED")
            """
        )
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(
            [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60
        )
        assert "is open in another process" in out.stdout, out.stdout + out.stderr

    def test_optimize_builds_the_quantized_first_stage(self, tmp_path: Path) -> None:
        # The engine quantizes a segment once it holds ~20 MB of vectors (counted as float32):
        # 180 pages of 240 x 128 rows. Below that the first stage scores the floats, so the
        # small-data contract tests cannot tell whether the int8 codes are used at all.
        dim, grid = 128, (12, 20)
        schema = IndexSchema.for_pages(
            name="page", dim=dim, model_id="test-colqwen", pooled_quantization="int8"
        )
        rng = np.random.default_rng(26)
        mask = np.ones(grid[0] * grid[1], dtype=bool)
        pages, full = [], []
        for i in range(180):
            rows = rng.normal(size=(grid[0] * grid[1], dim)).astype(np.float32)
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            full.append(rows)
            point = make_point(f"p{i}").model_copy(
                update={
                    "multivector": {
                        "page": rows.tolist(),
                        POOLED: pool_rows_cols(rows, mask, grid).tolist(),
                    }
                }
            )
            pages.append(point)
        store = EdgeVectorStore.create(tmp_path / "index", schema)
        try:
            store.upsert(pages)
            store.optimize()
            assert store.shard_info()["indexed_vectors"] > 0
            access = AccessFilter(tenant="acme")
            candidates_differ = False
            for target in (0, 44, 99, 150, 179):
                picked = full[target][rng.choice(len(full[target]), size=16, replace=False)]
                query = picked + 0.3 * rng.normal(size=picked.shape) / np.sqrt(dim)
                query /= np.linalg.norm(query, axis=1, keepdims=True)
                top = store.query_two_stage("page", POOLED, query.tolist(), access, 1, 5, True)
                assert ids_of(top) == [pages[target].id]
                codes, floats = (
                    store.query_two_stage("page", POOLED, query.tolist(), access, 10, 10, q)
                    for q in (True, False)
                )
                candidates_differ |= set(ids_of(codes)) != set(ids_of(floats))
            # int8 codes rank the (near-tied) non-target candidates a little differently: the
            # quantized first stage is really in use.
            assert candidates_differ
        finally:
            store.close()

    def test_upsert_seals_a_segment_every_segment_mb(self, tmp_path: Path) -> None:
        """~77 KB of vectors a page and segment_mb=1: a segment is sealed every ~14 pages, the
        engine's merge step keeps them apart (also on optimize and after a reopen), and the
        two-stage query over many segments still equals exact MaxSim."""
        dim, grid = 128, (12, 20)
        schema = IndexSchema.for_pages(name="page", dim=dim, model_id="test-colqwen")
        rng = np.random.default_rng(27)
        mask = np.ones(grid[0] * grid[1], dtype=bool)
        pages = []
        for i in range(60):
            rows = rng.normal(size=(grid[0] * grid[1], dim)).astype(np.float32)
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            vectors = {"page": rows.tolist(), POOLED: pool_rows_cols(rows, mask, grid).tolist()}
            pages.append(make_point(f"p{i}").model_copy(update={"multivector": vectors}))
        store = EdgeVectorStore.create(tmp_path / "index", schema, segment_mb=1)
        try:
            for start in range(0, len(pages), 10):
                store.upsert(pages[start : start + 10])
            sealed = store.shard_info()["segments"]
            assert sealed >= 4
            store.optimize()
            assert store.shard_info()["segments"] >= sealed
            store.close()
            store = EdgeVectorStore.open(tmp_path / "index", schema, segment_mb=1)
            assert store.shard_info()["points"] == 60
            assert store.shard_info()["segments"] >= sealed
            access = AccessFilter(tenant="acme")
            query = planted_query(rng, np.asarray(pages[33].multivector["page"]))
            hits = store.query_two_stage("page", POOLED, query, access, 10, 60)
            assert_exact_top_k(hits, exact_maxsim(query, pages), pages, 10)
            assert ids_of(hits)[0] == pages[33].id
        finally:
            store.close()

    def test_a_seal_counts_what_earlier_opens_wrote(self, tmp_path: Path) -> None:
        """Batch jobs that each add a few pages and exit still seal: ~620 KB per open at
        segment_mb=1 stays in one segment, the second open's pages cross the 1 MB."""
        dim, grid = 128, (12, 20)
        schema = IndexSchema.for_pages(name="page", dim=dim, model_id="test-colqwen")
        rng = np.random.default_rng(29)
        mask = np.ones(grid[0] * grid[1], dtype=bool)

        def pages(start: int) -> list[IndexPoint]:
            out = []
            for i in range(start, start + 8):
                rows = rng.normal(size=(grid[0] * grid[1], dim)).astype(np.float32)
                rows /= np.linalg.norm(rows, axis=1, keepdims=True)
                vectors = {"page": rows.tolist(), POOLED: pool_rows_cols(rows, mask, grid).tolist()}
                out.append(make_point(f"p{i}").model_copy(update={"multivector": vectors}))
            return out

        with EdgeVectorStore.create(tmp_path / "index", schema, segment_mb=1) as store:
            store.upsert(pages(0))
            assert store.shard_info()["segments"] == 1
        with EdgeVectorStore.open(tmp_path / "index", schema, segment_mb=1) as store:
            store.upsert(pages(8))
            assert store.shard_info()["segments"] == 2  # sealed + a new appendable one
            assert store.count() == 16

    def test_a_chunk_index_does_not_seal(self, tmp_path: Path) -> None:
        """1.2 MB of dense vectors at segment_mb=1 stay in one segment: sealing would build
        the dense HNSW graph with the GIL held (only page indexes seal)."""
        schema = IndexSchema(dense={"text": DenseVectorSpec(dim=1024, model_id="test-dense")})
        rng = np.random.default_rng(28)
        store = EdgeVectorStore.create(tmp_path / "index", schema, segment_mb=1)
        try:
            for start in range(0, 300, 50):
                batch = range(start, start + 50)
                store.upsert(
                    [make_point(f"c{i}", dense=rng.normal(size=1024).tolist()) for i in batch]
                )
            assert store.shard_info()["segments"] == 1
        finally:
            store.close()

    def test_create_refuses_an_existing_index(self, store: VectorStore) -> None:
        assert isinstance(store, EdgeVectorStore)
        with pytest.raises(PageSightError, match="not empty"):
            EdgeVectorStore.create(store.path, SCHEMA)

    def test_open_of_a_missing_index_is_not_found(self, tmp_path: Path) -> None:
        with pytest.raises(PageSightError) as err:
            EdgeVectorStore.open(tmp_path / "nothing-here")
        assert err.value.code == ErrorCode.NOT_FOUND


class TestQdrantServerStore(VectorStoreContract):
    """The server code path, on qdrant-client's local mode (same API, no server)."""

    def create(self, root: Path, schema: IndexSchema) -> VectorStore:
        client = QdrantClient(path=str(root / "qdrant"))
        store = QdrantServerStore.create(client, COLLECTION, schema, scroll_page=SCROLL_PAGE)
        store.add_close_hook(client.close)
        return store

    def reopen(self, root: Path, schema: IndexSchema | None) -> VectorStore:
        client = QdrantClient(path=str(root / "qdrant"))
        try:
            store = QdrantServerStore.open(client, COLLECTION, schema, scroll_page=SCROLL_PAGE)
        except BaseException:
            client.close()
            raise
        store.add_close_hook(client.close)
        return store

    def test_open_of_a_missing_collection_is_not_found(self) -> None:
        client = QdrantClient(location=":memory:")
        with pytest.raises(PageSightError) as err:
            QdrantServerStore.open(client, "absent")
        assert err.value.code == ErrorCode.NOT_FOUND
        client.close()


def test_backends_agree_on_rankings(tmp_path: Path) -> None:
    """The same data in both backends gives the same top-10 for dense and sparse queries."""
    rng = np.random.default_rng(12)
    vocabulary = 40
    points = []
    for i in range(150):
        terms = rng.choice(vocabulary, size=int(rng.integers(2, 8)), replace=False)
        points.append(
            make_point(
                f"c{i}",
                doc_id=f"doc-{i % 10}",
                acl=[EVERYONE] if i % 3 else ["alice"],
                dense=unit(rng),
                sparse=SparseVector(
                    indices=[int(t) for t in terms],
                    values=[float(v) for v in rng.uniform(0.5, 3.0, size=len(terms))],
                ),
            )
        )
    client = QdrantClient(location=":memory:")
    stores = [
        EdgeVectorStore.create(tmp_path / "edge", SCHEMA),
        QdrantServerStore.create(client, COLLECTION, SCHEMA),
    ]
    try:
        for store in stores:
            store.upsert(points)
        accesses = [AccessFilter(tenant="acme"), AccessFilter(tenant="acme", principals=["bob"])]
        for _ in range(5):
            dense_query = unit(rng)
            terms = rng.choice(vocabulary, size=3, replace=False)
            sparse_query = SparseVector(indices=[int(t) for t in terms], values=[1.0, 1.0, 1.0])
            for access in accesses:
                dense = [s.query_dense("text", dense_query, access, 10) for s in stores]
                sparse = [s.query_sparse("bm25", sparse_query, access, 10) for s in stores]
                assert ids_of(dense[0]) == ids_of(dense[1])
                assert ids_of(sparse[0]) == ids_of(sparse[1])
                assert [h.score for h in dense[0]] == pytest.approx(
                    [h.score for h in dense[1]], abs=1e-4
                )
                assert [h.score for h in sparse[0]] == pytest.approx(
                    [h.score for h in sparse[1]], rel=1e-4
                )
    finally:
        for store in stores:
            store.close()
        client.close()


def test_page_schema_ties_the_pooled_first_stage_to_its_full_vector() -> None:
    spec = PAGE_SCHEMA.multivector[POOLED]
    assert (spec.pooled_from, spec.pooling, spec.quantization) == ("page", "mean-rows-cols", "none")
    assert PAGE_SCHEMA.pooled_of("page") == [POOLED]
    assert PAGE_SCHEMA_INT8.multivector[POOLED].quantization == "int8"
    # The pooling and the quantization are stamped: changing either asks for a re-index.
    assert any("quantization" in d for d in PAGE_SCHEMA.differences(PAGE_SCHEMA_INT8))
    full = MultiVectorSpec(dim=PAGE_DIM, model_id="m")
    with pytest.raises(ValueError, match="not a full multi-vector"):
        IndexSchema(
            multivector={
                "page": full,
                POOLED: full.model_copy(update={"pooled_from": "nope", "pooling": "x"}),
            }
        )
    with pytest.raises(ValueError, match="dim and distance"):
        IndexSchema(
            multivector={
                "page": full,
                POOLED: MultiVectorSpec(dim=8, model_id="m", pooled_from="page", pooling="x"),
            }
        )
    with pytest.raises(ValueError, match="only a pooled"):
        MultiVectorSpec(dim=PAGE_DIM, model_id="m", quantization="int8")
    with pytest.raises(ValueError, match="both pooled_from and pooling"):
        MultiVectorSpec(dim=PAGE_DIM, model_id="m", pooled_from="page")


class _ForwardedOverEdge(ForwardedVectorStore):
    """A query replica's view of an embedded index: reads go through the forwarding call (each
    request and reply pickled, as a Ray handle call does) to :func:`read_primitive` on the
    owner's store; writes go to the owner's store directly, as the owner's ingest does."""

    def __init__(self, owner: VectorStore) -> None:
        def call(primitive: str, args: tuple[Any, ...]) -> Any:
            request = pickle.loads(pickle.dumps(args))  # noqa: S301  # ours, as Ray pickles it
            reply = read_primitive(owner, primitive, request)
            return pickle.loads(pickle.dumps(reply))  # noqa: S301  # ours, as Ray pickles it

        super().__init__(owner.schema, call, owner="test owner", collection=owner.collection)
        self.owner = owner

    def _upsert(self, points: Sequence[IndexPoint]) -> None:
        self.owner._upsert(points)

    def _delete(self, selection: Selection) -> None:
        self.owner._delete(selection)

    def _flush(self) -> None:
        self.owner._flush()

    def optimize(self) -> None:
        self.owner.optimize()

    def _close(self) -> None:
        self.owner.close()


class TestForwardedVectorStore(VectorStoreContract):
    """Reads forwarded to the owner of an embedded index answer as the index itself does."""

    def create(self, root: Path, schema: IndexSchema) -> VectorStore:
        return _ForwardedOverEdge(TestEdgeVectorStore().create(root, schema))

    def reopen(self, root: Path, schema: IndexSchema | None) -> VectorStore:
        return _ForwardedOverEdge(TestEdgeVectorStore().reopen(root, schema))

    def test_writes_are_refused_where_the_index_is_not_owned(self, tmp_path: Path) -> None:
        owner = EdgeVectorStore.create(tmp_path / "index", SCHEMA)
        try:
            reads = ForwardedVectorStore(
                SCHEMA,
                lambda primitive, args: read_primitive(owner, primitive, args),
                owner="the owner",
                collection=owner.collection,
            )
            point = make_point("c1", dense=unit(np.random.default_rng(1)))
            for write in (lambda: reads.upsert([point]), reads.optimize):
                with pytest.raises(PageSightError, match="read-only here: the owner owns it"):
                    write()
            assert owner.count() == 0
        finally:
            owner.close()

    def test_the_owner_answers_reads_only(self, store: VectorStore) -> None:
        assert isinstance(store, _ForwardedOverEdge)
        for primitive in ("_upsert", "_delete", "_flush", "close", "__class__"):
            with pytest.raises(PageSightError, match="not a forwarded index read") as err:
                read_primitive(store.owner, primitive, ())
            assert err.value.code == ErrorCode.INVALID_REQUEST
        assert read_primitive(store.owner, "collection", ()) == store.owner.collection
