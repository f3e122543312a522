"""The compact page layouts (``turbo8``, ``turbo4``: IndexSchema.with_page_layout) through the
VectorStore contract on every backend: the embedded engine, the Qdrant server code path (on
qdrant-client's local mode, which keeps floats whatever the datatype, so there the codes are
exact) and reads forwarded to an embedded owner.

A layout changes how rows are stored, not what is written or asked: the same float rows go in,
the same two-stage query comes back ranked by MaxSim over the stored codes. So the contract here
is the float layout's with tolerances: the two-stage result equals the store's own full scan
when the prefetch covers every page, the planted page is first, scores stay near exact float
MaxSim, filters apply inside every stage, rows read back near what was written, and the layout
survives a reopen (a store asked for another layout is refused with a re-index message).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.types import AccessFilter
from pagesight.index.base import IndexPoint, IndexSchema, VectorStore, pooled_vector_name
from pagesight.index.edge import SHARD_DIR, EdgeVectorStore
from pagesight.index.qdrant_server import QdrantServerStore
from pagesight.models.pooling import pool_blocks, query_centroids
from tests.contract.test_vector_store import COLLECTION, _ForwardedOverEdge, make_point

DIM = 128
GRID = (4, 5)
PROMPT_ROWS = 2
POOLED = pooled_vector_name("page")
#: per layout: the most a query's score may differ from exact float MaxSim (6 query rows),
#: the least cosine of a read-back row to the written one, and the least recall@10 of the
#: full scan against exact float MaxSim over 40 pages
TOLERANCE = {"turbo8": (0.03, 0.995, 0.9), "turbo4": (0.25, 0.9, 0.7)}

Factory = Callable[[Path, IndexSchema | None, bool], VectorStore]


def _edge(root: Path, schema: IndexSchema | None, create: bool) -> VectorStore:
    if create:
        assert schema is not None
        return EdgeVectorStore.create(root / "index", schema)
    return EdgeVectorStore.open(root / "index", schema)


def _qdrant(root: Path, schema: IndexSchema | None, create: bool) -> VectorStore:
    client = QdrantClient(path=str(root / "qdrant"))
    try:
        if create:
            assert schema is not None
            store = QdrantServerStore.create(client, COLLECTION, schema)
        else:
            store = QdrantServerStore.open(client, COLLECTION, schema)
    except BaseException:
        client.close()
        raise
    store.add_close_hook(client.close)
    return store


def _forwarded(root: Path, schema: IndexSchema | None, create: bool) -> VectorStore:
    return _ForwardedOverEdge(_edge(root, schema, create))


BACKENDS: dict[str, Factory] = {"edge": _edge, "qdrant": _qdrant, "forwarded": _forwarded}


def page_schema(layout: str) -> IndexSchema:
    return IndexSchema.for_pages(
        name="page", dim=DIM, model_id="test-colqwen", pooling="mean-blocks-2x2", layout=layout
    )


def page_rows(rng: np.random.Generator) -> np.ndarray:
    matrix = rng.normal(size=(PROMPT_ROWS + GRID[0] * GRID[1], DIM))
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def make_page(key: str, rows: np.ndarray, **kw: object) -> IndexPoint:
    mask = np.arange(len(rows)) >= PROMPT_ROWS
    pooled = pool_blocks(rows, mask, GRID, (2, 2))
    point = make_point(key, **kw)  # type: ignore[arg-type]
    return point.model_copy(
        update={"multivector": {"page": rows.tolist(), POOLED: pooled.tolist()}}
    )


def planted_query(rng: np.random.Generator, rows: np.ndarray, count: int = 6) -> list[list[float]]:
    picked = rows[PROMPT_ROWS + rng.choice(len(rows) - PROMPT_ROWS, size=count, replace=False)]
    noisy = picked + 0.3 * rng.normal(size=picked.shape) / np.sqrt(DIM)
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).tolist()


def exact(query: list[list[float]], pages: list[IndexPoint]) -> dict[str, float]:
    q = np.asarray(query, dtype=np.float64)
    return {p.id: float((q @ np.asarray(p.multivector["page"]).T).max(axis=1).sum()) for p in pages}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Factory:
    return BACKENDS[request.param]


@pytest.fixture(params=sorted(TOLERANCE))
def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture()
def store(backend: Factory, layout: str, tmp_path: Path) -> Iterator[VectorStore]:
    opened = backend(tmp_path, page_schema(layout), True)
    yield opened
    opened.close()


def test_two_stage_ranks_by_maxsim_over_the_stored_codes(store: VectorStore, layout: str) -> None:
    score_tolerance, _, least_recall = TOLERANCE[layout]
    rng = np.random.default_rng(41)
    pages = [make_page(f"p{i}", page_rows(rng)) for i in range(40)]
    store.upsert(pages)
    store.optimize()
    access = AccessFilter(tenant="acme")
    recalls = []
    for target in (0, 9, 17, 28, 39):
        query = planted_query(rng, np.asarray(pages[target].multivector["page"]))
        truth = exact(query, pages)
        full_scan = store.query_multivector("page", query, access, 10)
        every = store.query_two_stage("page", POOLED, query, access, 10, prefetch=40)
        assert [h.id for h in every] == [h.id for h in full_scan]
        assert [h.score for h in every] == pytest.approx([h.score for h in full_scan], abs=1e-4)
        assert full_scan[0].id == pages[target].id
        for hit in full_scan:
            assert hit.score == pytest.approx(truth[hit.id], abs=score_tolerance)
        best = sorted(truth, key=lambda pid: -truth[pid])[:10]
        recalls.append(len(set(best) & {h.id for h in full_scan}) / 10)
        centroids = query_centroids(query, 2).tolist()
        cascade = store.query_two_stage(
            "page", POOLED, query, access, 1, 5, coarse_query=centroids, coarse_limit=10
        )
        assert [h.id for h in cascade] == [pages[target].id]
        assert cascade[0].payload["chunk_id"] == f"doc-1/v1/p{target}"
    assert np.mean(recalls) >= least_recall


def test_filters_apply_inside_every_stage(store: VectorStore) -> None:
    # Hidden pages hold the query's exact rows, the visible one a noisy copy: a filter applied
    # after any stage would let a hidden page take the single slot.
    rng = np.random.default_rng(42)
    content = page_rows(rng)
    noisy = content + 0.3 * rng.normal(size=content.shape) / np.sqrt(DIM)
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    visible = make_page("visible", noisy, acl=["alice"])
    hidden = [
        make_page("other-tenant", content, tenant="globex"),
        make_page("bob-only", content, acl=["bob"]),
        make_page("expired", content, valid_until=time.time() - 3600),
        make_page("other-doc", content, doc_id="doc-2", acl=["alice"]),
    ]
    others = [make_page(f"p{i}", page_rows(rng), acl=["alice"]) for i in range(10)]
    store.upsert([visible, *hidden, *others])
    query = content[PROMPT_ROWS : PROMPT_ROWS + 6].tolist()
    alice = AccessFilter(tenant="acme", principals=["alice"], doc_ids=["doc-1"])
    for prefetch in (1, 3):
        hits = store.query_two_stage("page", POOLED, query, alice, 1, prefetch)
        assert [h.id for h in hits] == [visible.id]
        staged = store.query_two_stage(
            "page", POOLED, query, alice, 1, prefetch, coarse_query=query[:2], coarse_limit=prefetch
        )
        assert [h.id for h in staged] == [visible.id]
    bob = AccessFilter(tenant="acme", principals=["bob"])
    assert [h.id for h in store.query_two_stage("page", POOLED, query, bob, 1, 1)] == [hidden[1].id]


def test_rows_read_back_near_what_was_written(store: VectorStore, layout: str) -> None:
    _, least_cosine, _ = TOLERANCE[layout]
    rng = np.random.default_rng(43)
    pages = [make_page(f"p{i}", page_rows(rng)) for i in range(3)]
    store.upsert(pages)
    stored = store.vectors_of([p.id for p in pages], "page", AccessFilter(tenant="acme"))
    for page in pages:
        written = np.asarray(page.multivector["page"])
        read = stored[page.id]
        assert read.shape == written.shape
        cosines = np.sum(read * written, axis=1) / np.linalg.norm(read, axis=1)
        assert cosines.min() >= least_cosine
    pooled = store.multivectors([pages[0].id], POOLED)[pages[0].id]
    assert len(pooled) == 4


def test_the_layout_survives_reopen_and_another_is_refused(
    backend: Factory, layout: str, tmp_path: Path
) -> None:
    rng = np.random.default_rng(44)
    pages = [make_page(f"p{i}", page_rows(rng)) for i in range(5)]
    store = backend(tmp_path, page_schema(layout), True)
    store.upsert(pages)
    store.flush()
    store.close()
    with pytest.raises(PageSightError) as err:
        backend(tmp_path, page_schema("float16"), False)
    assert err.value.code == ErrorCode.INDEX_FAILED
    assert f"stores its page vectors in the {layout!r} layout" in err.value.message
    assert "`pagesight reindex`" in err.value.message
    assert f"PAGESIGHT_INDEX__PAGE_LAYOUT={layout}" in err.value.message
    reopened = backend(tmp_path, None, False)
    try:
        assert reopened.schema.page_layout() == layout
        assert reopened.count() == 5
        query = planted_query(rng, np.asarray(pages[2].multivector["page"]))
        hits = reopened.query_two_stage("page", POOLED, query, AccessFilter(tenant="acme"), 1, 3)
        assert [h.id for h in hits] == [pages[2].id]
    finally:
        reopened.close()


def test_edge_stores_the_codes_not_the_floats(tmp_path: Path) -> None:
    """The embedded engine really keeps codes: the full rows' storage shrinks ~2x (turbo8)
    and ~4x (turbo4) against float16, the pooled rows ~4x against float32."""
    rng = np.random.default_rng(45)
    pages = [make_page(f"p{i}", page_rows(rng)) for i in range(300)]
    sizes: dict[str, dict[str, int]] = {}
    for layout in ("float16", "turbo8", "turbo4"):
        # segment_mb=1: sealed (optimized) segments, whose storage is sized to their rows
        store = EdgeVectorStore.create(tmp_path / layout, page_schema(layout), segment_mb=1)
        try:
            store.upsert(pages)
            store.optimize()
        finally:
            store.close()
        segments = tmp_path / layout / SHARD_DIR / "segments"
        sizes[layout] = {
            name: sum(
                f.stat().st_blocks * 512
                for d in segments.glob(f"*/vector_storage-{name}")
                for f in d.rglob("*")
                if f.is_file()
            )
            for name in ("page", POOLED)
        }
    assert sizes["turbo8"]["page"] < 0.6 * sizes["float16"]["page"]
    assert sizes["turbo4"]["page"] < 0.35 * sizes["float16"]["page"]
    assert sizes["turbo8"][POOLED] < 0.35 * sizes["float16"][POOLED]
