"""Two-stage MaxSim in the embedded index against exact brute-force MaxSim in numpy.

What it measures, at each collection size N (pages of 25 x 30 = 750 patch vectors of 128):

- latency of :meth:`pagesight.index.base.VectorStore.query_two_stage` on
  :class:`pagesight.index.edge.EdgeVectorStore`
  (pooled first stage with the access filter inside it, exact MaxSim rerank of ``prefetch``
  pages, top 10) against exact MaxSim over every page in numpy, float32, batched matmul (the
  baseline: for each page, max over its rows of ``q . p``, summed over the query rows). Both
  run in this process, query by query, in a shuffled order per query, so the background load
  of the machine hits all alike; ``speedup`` = exact p50 / two-stage p50 of the same run;
- recall@10 of the two-stage top 10 against the exact numpy top 10, per ``prefetch``;
- bytes per page on disk (the shard directory's growth / N, after flush and optimize: full
  rows at float16, pooled rows, int8 codes, payload, WAL, indexes), next to the raw float16
  size of the full rows (750 * 128 * 2 = 192,000 bytes);
- upsert rate (building the IndexPoints from numpy rows + ``upsert``; generation and pooling
  are not counted) and the time of ``optimize`` after each load;
- reopen: ``close`` + ``EdgeVectorStore.open`` + the first two-stage query (the cascade, as
  retrieval runs it), median of three. The page cache is whatever the run left: the index files
  were written minutes before, and on a host that reclaims idle page cache (this one pages out
  what is untouched for ~60 s) the first reopen reads most of them from disk again.

First stages compared (all stored in the same collection, so one build serves all of them):

- ``rows_cols``: mean pooling over patch rows and columns (25 + 30 = 55 vectors, float32),
  the recipe Qdrant recommends for ColPali (pagesight.models.pooling.pool_rows_cols);
- ``rows_cols_int8``: the same vectors scored on their scalar int8 codes, not rescored;
- ``blocks_4x5``: means over a 4 x 5 tiling of the grid (20 vectors,
pagesight.models.pooling.pool_blocks);
- ``cascade_q3_4x5`` (what retrieval runs): stage 0 scores 3 k-means centroids of the query
  rows (pagesight.models.pooling.query_centroids, computed per query inside the timing) against
  every page's 4 x 5 blocks and keeps ``--coarse-limit`` pages, the full query ranks those on the
  same blocks, the exact MaxSim reranks ``prefetch`` (nested prefetches in one engine query).
  ``results`` holds this one; the others are under ``variants``.

The store seals a segment every ``--segment-mb`` of vectors written (pagesight/index/edge.py;
ingestion does the same with ``PAGESIGHT_INDEX__SEGMENT_MB``), and a query scans the segments in
parallel.

Synthetic but structured data (no model weights here): a page is a guillotine split of its
grid into 3-8 rectangular regions; each region takes a "content kind" from a shared vocabulary
(Zipf-distributed, so pages share kinds the way real pages share body text, tables, white
margins) plus a page-specific offset; every patch is its region's mean + a spatially smooth
field (bilinear upsampling of a coarse random grid, so neighbouring patches are alike) + small
noise, L2-normalised, stored as float16. A query is 20 patches of one target page plus noise
(cosine ~0.78 to them), so the exact top-1 is the target and ranks 2-10 are the pages richest in
the same kinds of content, which is where a first stage can lose recall.

    python bench/bench_maxsim.py --out var/bench/maxsim.json
    python bench/bench_maxsim.py --sizes 500,1000 --prefetch 50,100 --queries 20 --out /tmp/m.json
    # build a 10k index once into var/bench/idx-10k, later runs reopen it (minutes saved)
    python bench/bench_maxsim.py --sizes 10000 --index var/bench/idx-10k --out /tmp/m.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.maxsim_layouts import (  # noqa: E402  # after sys.path
    DEFAULT_LAYOUTS,
    LayoutStore,
    disk_bytes,
    layout_point,
    layout_rows,
    layout_targets,
)
from pagesight.core.settings import IndexOptions, RetrievalOptions  # noqa: E402  # after sys.path
from pagesight.core.types import EVERYONE, AccessFilter  # noqa: E402  # after sys.path
from pagesight.index.base import IndexPoint, IndexSchema, MultiVectorSpec  # noqa: E402  # after sys.path
from pagesight.index.edge import SHARD_DIR, EdgeVectorStore  # noqa: E402  # after sys.path
from pagesight.models.pooling import (  # noqa: E402  # after sys.path
    ROWS_COLS,
    l2_normalise,
    pool_blocks,
    pool_rows_cols,
    query_centroids,
)

GRID = (25, 30)
PATCHES = GRID[0] * GRID[1]
DIM = 128
QUERY_ROWS = 20
TOP_K = 10
BLOCKS = (4, 5)
#: How the stored block means are named in the schema (a change of pooling means a re-index).
BLOCK_POOLING = f"mean-blocks-{BLOCKS[0]}x{BLOCKS[1]}"
TENANT = "bench"
#: reopens per size; the median one is reported (and its close / open / first-query parts)
REOPENS = 3
#: written into an ``--index`` directory once its build is complete (what was built, load times)
STAMP_FILE = "bench-build.json"

FULL = "page-colqwen"
POOLED = "page-colqwen-pooled"
POOLED_BLOCKS = "page-colqwen-pooled-blocks"

Matrix = npt.NDArray[np.float32]


# -- synthetic pages -----------------------------------------------------------------------------


def _interpolation(n_out: int, n_in: int) -> Matrix:
    """``[n_out, n_in]`` linear interpolation weights (bilinear upsampling, one axis)."""
    position = np.linspace(0, n_in - 1, n_out)
    low = np.floor(position).astype(int)
    high = np.minimum(low + 1, n_in - 1)
    frac = (position - low).astype(np.float32)
    weights = np.zeros((n_out, n_in), dtype=np.float32)
    weights[np.arange(n_out), low] += 1 - frac
    weights[np.arange(n_out), high] += frac
    return weights


def _regions(rng: np.random.Generator, count: int) -> list[tuple[int, int, int, int]]:
    """A guillotine split of the grid into ``count`` rectangles ``(r0, r1, c0, c1)``: the
    largest rectangle is cut across its longer side at 30-70 %, like a page layout."""
    rects = [(0, GRID[0], 0, GRID[1])]
    while len(rects) < count:
        rects.sort(key=lambda r: (r[1] - r[0]) * (r[3] - r[2]))
        r0, r1, c0, c1 = rects.pop()
        height, width = r1 - r0, c1 - c0
        if max(height, width) < 2:
            rects.append((r0, r1, c0, c1))
            break
        if height >= width:
            cut = r0 + max(1, min(height - 1, round(height * rng.uniform(0.3, 0.7))))
            rects += [(r0, cut, c0, c1), (cut, r1, c0, c1)]
        else:
            cut = c0 + max(1, min(width - 1, round(width * rng.uniform(0.3, 0.7))))
            rects += [(r0, r1, c0, cut), (r0, r1, cut, c1)]
    return rects


@dataclass
class PageGenerator:
    """Seeded synthetic page multi-vectors with the spatial structure described above."""

    seed: int
    vocabulary: int = 512
    zipf: float = 1.0
    page_offset: float = 0.6
    smooth_field: float = 0.5
    patch_noise: float = 0.35
    query_noise: float = 0.8
    coarse: tuple[int, int] = (5, 6)
    rng: np.random.Generator = field(init=False)
    kinds: Matrix = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.kinds = l2_normalise(self.rng.standard_normal((self.vocabulary, DIM), np.float32))
        weights = 1.0 / np.arange(1, self.vocabulary + 1) ** self.zipf
        self._kind_cdf = np.cumsum(weights / weights.sum())
        self._up_rows = _interpolation(GRID[0], self.coarse[0])
        self._up_cols = _interpolation(GRID[1], self.coarse[1])

    def pages(self, count: int, chunk: int = 32) -> Iterator[npt.NDArray[np.float16]]:
        """``count`` pages, ``chunk`` at a time, as float16 ``[chunk, 750, 128]`` blocks."""
        for start in range(0, count, chunk):
            yield self._chunk(min(chunk, count - start))

    def _chunk(self, n: int) -> npt.NDArray[np.float16]:
        rng = self.rng
        x = np.empty((n, *GRID, DIM), dtype=np.float32)
        for page in range(n):
            for r0, r1, c0, c1 in _regions(rng, int(rng.integers(3, 9))):
                kind = int(np.searchsorted(self._kind_cdf, rng.random()))
                offset = rng.standard_normal(DIM).astype(np.float32)
                mean = self.kinds[kind] + self.page_offset * offset / np.linalg.norm(offset)
                x[page, r0:r1, c0:c1] = mean / np.linalg.norm(mean)
        coarse = rng.standard_normal((n, self.coarse[0], self.coarse[1] * DIM), np.float32)
        rows_up = np.matmul(self._up_rows, coarse).reshape(n, GRID[0], self.coarse[1], DIM)
        smooth = np.matmul(self._up_cols, rows_up)  # [n, rows, cols, dim]
        smooth *= self.smooth_field / np.sqrt(DIM)
        x += smooth
        noise = rng.standard_normal(x.shape, np.float32)
        noise *= self.patch_noise / np.sqrt(DIM)
        x += noise
        x /= np.sqrt(np.einsum("...d,...d->...", x, x))[..., None]
        return x.reshape(n, PATCHES, DIM).astype(np.float16)

    def query(self, page: Matrix, rng: np.random.Generator) -> Matrix:
        """``QUERY_ROWS`` of ``page``'s patches plus noise, unit length."""
        picked = page[rng.choice(PATCHES, size=QUERY_ROWS, replace=False)]
        noise = rng.standard_normal(picked.shape, np.float32)
        return l2_normalise(picked + self.query_noise * noise / np.sqrt(DIM))

    def parameters(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.init}


# -- the exact baseline --------------------------------------------------------------------------


def exact_maxsim(corpus: Matrix, n_pages: int, query: Matrix, chunk: int = 64) -> Matrix:
    """Exact MaxSim of ``query`` against the first ``n_pages`` pages of ``corpus``.

    ``corpus`` is float32 ``[N, rows, dim]``: one ``[chunk * rows, dim] @ [dim, q]`` matmul per
    chunk of pages (cache-sized, BLAS), then max over each page's rows and sum over the query.
    """
    rows = corpus.shape[1]
    query_t = np.ascontiguousarray(query.T)
    scores = np.empty(n_pages, dtype=np.float32)
    for start in range(0, n_pages, chunk):
        block = corpus[start : min(n_pages, start + chunk)]
        sims = block.reshape(-1, DIM) @ query_t
        scores[start : start + len(block)] = (
            sims.reshape(len(block), rows, -1).max(axis=1).sum(axis=1)
        )
    return scores


def top_k(scores: Matrix, k: int) -> list[int]:
    best = np.argpartition(-scores, k)[:k]
    return [int(i) for i in best[np.argsort(-scores[best])]]


# -- the index -----------------------------------------------------------------------------------


def bench_schema() -> IndexSchema:
    """The page schema of :meth:`IndexSchema.for_pages` (with int8 codes on the pooled rows,
    which a float first stage ignores) plus the 4 x 5 block-pooled variant."""
    base = IndexSchema.for_pages(
        name=FULL, dim=DIM, model_id="synthetic-colqwen", pooled_quantization="int8"
    )
    blocks = MultiVectorSpec(
        dim=DIM,
        model_id="synthetic-colqwen",
        datatype="float32",
        pooled_from=FULL,
        pooling=BLOCK_POOLING,
    )
    assert base.multivector[POOLED].pooling == ROWS_COLS
    return IndexSchema(multivector={**base.multivector, POOLED_BLOCKS: blocks})


@dataclass(frozen=True)
class FirstStage:
    name: str
    pooled: str
    quantized: bool
    #: k-means centroids of the query that stage 0 scores against ``pooled`` (0: no stage 0)
    centroids: int = 0


FIRST_STAGES = (
    FirstStage("rows_cols", POOLED, quantized=False),
    FirstStage("rows_cols_int8", POOLED, quantized=True),
    FirstStage(f"blocks_{BLOCKS[0]}x{BLOCKS[1]}", POOLED_BLOCKS, quantized=False),
    FirstStage("cascade_q3_4x5", POOLED_BLOCKS, quantized=False, centroids=3),
)
MAIN_STAGE = FIRST_STAGES[-1].name


def two_stage(
    store: EdgeVectorStore,
    stage: FirstStage,
    rows: list[list[float]],
    access: AccessFilter,
    prefetch: int,
    args: argparse.Namespace,
) -> list[Any]:
    centroids = query_centroids(rows, stage.centroids).tolist() if stage.centroids else None
    return store.query_two_stage(
        FULL,
        stage.pooled,
        rows,
        access,
        TOP_K,
        prefetch,
        stage.quantized,
        coarse_query=centroids,
        coarse_limit=max(args.coarse_limit, prefetch) if centroids else None,
    )


def page_id(number: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench/page/{number}"))


def page_point(number: int, rows: Matrix) -> IndexPoint:
    """A page point as ingestion writes it: full rows, both pooled first stages, payload."""
    mask = np.ones(PATCHES, dtype=bool)
    return IndexPoint(
        id=page_id(number),
        multivector={
            FULL: rows.tolist(),
            POOLED: pool_rows_cols(rows, mask, GRID).tolist(),
            POOLED_BLOCKS: pool_blocks(rows, mask, GRID, BLOCKS).tolist(),
        },
        payload={
            "tenant": TENANT,
            "acl": [EVERYONE],
            "doc_id": f"doc-{number // 20}",
            "version": "sha256-bench",
            "page_numbers": [number % 20 + 1],
            "page": number,
            "kinds": ["page"],
            "source_uri": f"file:///bench/doc-{number // 20}.pdf",
        },
    )


def _stamp_matches(index: Path, stamp: dict[str, Any]) -> bool:
    """Whether ``index`` is a complete build of the same pages (seed, generator, size) under the
    same schema: only then may a run reuse it instead of spending minutes on the upserts."""
    try:
        stored = json.loads((index / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return False
    return bool({k: stored.get(k) for k in stamp} == json.loads(json.dumps(stamp)))


def percentile_ms(seconds: list[float], q: float) -> float:
    return round(float(np.percentile(seconds, q)) * 1000, 2)


# -- the run -------------------------------------------------------------------------------------


@dataclass
class _Load:
    """One size's load: the pages added and the seconds each part took."""

    new: int
    write_s: float
    generate_s: float
    flush_s: float
    optimize_s: float


@dataclass
class _Empty:
    """Bytes the empty index held (allocated, apparent, the WAL's allocated)."""

    allocated: int
    apparent: int
    wal: int


@dataclass
class _Disk:
    """Bytes the index holds at rest: allocated, apparent, the WAL's, each stored vector's."""

    allocated: int
    apparent: int
    wal_allocated: int
    by_vector: dict[str, int]


@dataclass
class _Queries:
    """Every query of one size: its target page, the timings and what each config found."""

    targets: list[int]
    queries: list[Matrix]
    exact_s: list[float] = field(default_factory=list)
    exact_top1: int = 0
    two_stage_s: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    recall: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    top1: dict[tuple[str, int], int] = field(default_factory=dict)


class _Bench:
    """What one run carries from size to size: the store (built here, or reused from
    ``--index``), the pages written so far and their float32 copy for the exact baseline."""

    def __init__(self, args: argparse.Namespace, sizes: list[int]) -> None:
        self.args = args
        self.sizes = sizes
        self.generator = PageGenerator(seed=args.seed)
        self.access = AccessFilter(tenant=TENANT, principals=["reader"])
        self.schema = bench_schema()
        self.stamp = {
            "n_pages": sizes[-1],
            "seed": args.seed,
            "generator": self.generator.parameters(),
            "schema": self.schema.fingerprint(),
            "segment_mb": args.segment_mb,
        }
        self.reuse = args.index is not None and _stamp_matches(args.index, self.stamp)
        if self.reuse and len(sizes) > 1:
            raise SystemExit(
                f"--index {args.index} holds {sizes[-1]} pages: give --sizes {sizes[-1]}"
            )
        if (
            args.index is not None
            and not self.reuse
            and args.index.exists()
            and any(args.index.iterdir())
        ):
            raise SystemExit(f"--index {args.index} holds another build: delete it or pick another")
        self.workdir: Path | None = None
        if args.index is not None:
            self.index_path: Path = args.index
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="bench-maxsim-", dir=args.workdir))
            self.index_path = self.workdir / "index"
        # the exact baseline's copy
        self.corpus = np.empty((sizes[-1], PATCHES, DIM), dtype=np.float32)
        # One index per page layout, each in a directory of its own (bench/maxsim_layouts.py).
        self.layout_root = Path(tempfile.mkdtemp(prefix="bench-maxsim-layouts-", dir=args.workdir))
        self.layouts = [
            LayoutStore.create(
                self.layout_root,
                name,
                FULL,
                DIM,
                BLOCK_POOLING,
                args.segment_mb,
            )
            for name in args.layouts.split(",")
            if name
        ]
        self.written = 0
        self.built: dict[str, Any] = {}
        if self.reuse:
            self.store = EdgeVectorStore.open(
                self.index_path, self.schema, segment_mb=args.segment_mb
            )
            self.built = json.loads((self.index_path / STAMP_FILE).read_text())["build"]
            # The pages depend on the chunks they were generated in, so replay the build's sizes.
            for earlier in self.built.get("sizes", sizes)[:-1]:
                for block in self.generator.pages(earlier - self.written):
                    pages32 = l2_normalise(block.reshape(-1, DIM).astype(np.float32))
                    self.corpus[self.written : self.written + len(block)] = pages32.reshape(
                        block.shape
                    )
                    self.written += len(block)
            self.empty = _Empty(
                self.built["empty_allocated"], self.built["empty_apparent"], self.built["empty_wal"]
            )
        else:
            self.store = EdgeVectorStore.create(
                self.index_path, self.schema, segment_mb=args.segment_mb
            )
            empty_allocated, empty_apparent = disk_bytes(self.index_path / SHARD_DIR)
            empty_wal = disk_bytes(self.index_path / SHARD_DIR / "wal")[0]
            self.empty = _Empty(empty_allocated, empty_apparent, empty_wal)

    def close(self) -> None:
        self.store.close()
        for layout in self.layouts:
            layout.close()
        if not self.args.keep:
            shutil.rmtree(self.layout_root, ignore_errors=True)
        if self.workdir is not None and not self.args.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def load(self, n_pages: int) -> _Load:
        """Generate the pages up to ``n_pages``, timing IndexPoint building + upsert only, then
        flush and optimize; a reused index's load numbers are the build's, from the stamp."""
        write_s = 0.0
        new = n_pages - self.written
        started = time.perf_counter()
        for block in self.generator.pages(new):
            # What is stored (float16, renormalised by the cosine index) is what numpy scores.
            pages32 = l2_normalise(block.reshape(-1, DIM).astype(np.float32))
            pages32 = pages32.reshape(block.shape)
            self.corpus[self.written : self.written + len(block)] = pages32
            if not self.reuse or self.layouts:
                write_started = time.perf_counter()
                points = [page_point(self.written + i, page) for i, page in enumerate(pages32)]
                if not self.reuse:
                    self.store.upsert(points)
                write_s += time.perf_counter() - write_started
                for layout in self.layouts:
                    layout.upsert([layout_point(p, FULL, POOLED_BLOCKS, POOLED) for p in points])
            self.written += len(block)
        generate_s = time.perf_counter() - started - write_s
        generate_s -= sum(layout.write_s for layout in self.layouts)
        for layout in self.layouts:
            layout.settle()
        if self.reuse:
            built = self.built
            write_s = new / built["upsert_pages_per_s"]
            return _Load(new, write_s, generate_s, built["flush_s"], built["optimize_s"])
        flush_started = time.perf_counter()
        self.store.flush()
        flush_s = time.perf_counter() - flush_started
        self.store.optimize()
        optimize_s = time.perf_counter() - flush_started - flush_s
        load = _Load(new, write_s, generate_s, flush_s, optimize_s)
        if self.args.index is not None and n_pages == self.sizes[-1]:
            self._write_stamp(load)
        return load

    def _write_stamp(self, load: _Load) -> None:
        """Written once the build is complete: only then may a later run reopen it."""
        build = {
            "sizes": self.sizes,
            "upsert_pages_per_s": load.new / load.write_s,
            "flush_s": load.flush_s,
            "optimize_s": load.optimize_s,
            "empty_allocated": self.empty.allocated,
            "empty_apparent": self.empty.apparent,
            "empty_wal": self.empty.wal,
        }
        stamp_text = json.dumps({**self.stamp, "build": build}, indent=2)
        (self.index_path / STAMP_FILE).write_text(stamp_text)

    def measure_queries(self, n_pages: int, prefetches: list[int]) -> _Queries:
        """Exact and every first stage x prefetch, interleaved per query."""
        args = self.args
        query_rng = np.random.default_rng([args.seed, n_pages])
        targets = [int(t) for t in query_rng.integers(0, n_pages, size=args.queries)]
        queries = [self.generator.query(self.corpus[t], query_rng) for t in targets]
        exact_maxsim(self.corpus, n_pages, queries[0])  # warm-up, untimed
        for stage in FIRST_STAGES:
            two_stage(self.store, stage, queries[0].tolist(), self.access, prefetches[-1], args)
        for layout in self.layouts:
            layout.query(
                FULL, queries[0].tolist(), self.access, TOP_K, prefetches[-1], args.coarse_limit
            )
        measured = _Queries(targets, queries)
        # Per query, the exact scan and every first stage x prefetch run in a shuffled
        # order: whatever runs right after numpy's matmul shares the cores with OpenBLAS
        # threads still spinning, and that penalty must not always land on one config.
        plan: list[tuple[FirstStage | LayoutStore, int] | None] = [None]
        plan += [(stage, prefetch) for stage in FIRST_STAGES for prefetch in prefetches]
        plan += [(layout, prefetch) for layout in self.layouts for prefetch in prefetches]
        for target, query in zip(targets, queries, strict=True):
            found, scores = self._query_once(n_pages, query, plan, query_rng, measured)
            truth = top_k(scores, TOP_K)
            measured.exact_top1 += truth[0] == target
            truth_ids = {page_id(i) for i in truth}
            for key, ids in found.items():
                measured.recall.setdefault(key, []).append(len(truth_ids & set(ids)) / TOP_K)
                measured.top1[key] = measured.top1.get(key, 0) + (
                    bool(ids) and ids[0] == page_id(target)
                )
        return measured

    def _query_once(
        self,
        n_pages: int,
        query: Matrix,
        plan: list[tuple[FirstStage | LayoutStore, int] | None],
        query_rng: np.random.Generator,
        measured: _Queries,
    ) -> tuple[dict[tuple[str, int], list[str]], Matrix]:
        """One query through every step of ``plan`` in a shuffled order, timings recorded in
        ``measured``: the ids each config found, and the exact scores."""
        rows = query.tolist()
        found: dict[tuple[str, int], list[str]] = {}
        scores = np.empty(0, dtype=np.float32)
        for position in query_rng.permutation(len(plan)):
            step = plan[position]
            step_started = time.perf_counter()
            if step is None:
                scores = exact_maxsim(self.corpus, n_pages, query)
                measured.exact_s.append(time.perf_counter() - step_started)
                continue
            stage, prefetch = step
            if isinstance(stage, LayoutStore):
                hits = stage.query(FULL, rows, self.access, TOP_K, prefetch, self.args.coarse_limit)
                key = (f"layout:{stage.layout}", prefetch)
            else:
                hits = two_stage(self.store, stage, rows, self.access, prefetch, self.args)
                key = (stage.name, prefetch)
            measured.two_stage_s.setdefault(key, []).append(time.perf_counter() - step_started)
            found[key] = [h.id for h in hits]
        return found, scores

    def reopen(
        self, queries: list[Matrix], prefetch: int
    ) -> tuple[list[tuple[float, float, float]], _Disk]:
        """REOPENS times: close + open + first query (each a different query); (close, open,
        first query) seconds of each, and the disk at rest, measured after the first close."""
        reopens: list[tuple[float, float, float]] = []
        disk: _Disk | None = None
        for attempt in range(REOPENS):
            close_started = time.perf_counter()
            self.store.close()
            close_s = time.perf_counter() - close_started
            if attempt == 0:  # the disk at rest, untimed
                disk = self._disk_at_rest()
            open_started = time.perf_counter()
            self.store = EdgeVectorStore.open(
                self.index_path, self.schema, segment_mb=self.args.segment_mb
            )
            open_s = time.perf_counter() - open_started
            rows = queries[(attempt + 1) % len(queries)].tolist()
            two_stage(self.store, FIRST_STAGES[-1], rows, self.access, prefetch, self.args)
            first_query_s = time.perf_counter() - open_started - open_s
            reopens.append((close_s, open_s, first_query_s))
        assert disk is not None
        return reopens, disk

    def _disk_at_rest(self) -> _Disk:
        shard_dir = self.index_path / SHARD_DIR
        allocated, apparent = disk_bytes(shard_dir)
        wal_allocated, _ = disk_bytes(shard_dir / "wal")
        by_vector = {
            name: sum(disk_bytes(d)[0] for d in shard_dir.glob(f"segments/*/vector_storage-{name}"))
            for name in self.schema.multivector
        }
        return _Disk(allocated, apparent, wal_allocated, by_vector)


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    prefetches = sorted({int(p) for p in args.prefetch.split(",")})
    if min(prefetches) < TOP_K:
        raise SystemExit(f"every prefetch must be at least {TOP_K}")
    bench = _Bench(args, sizes)
    per_n: list[dict[str, Any]] = []
    rows_out: list[dict[str, Any]] = []
    layouts_out: list[dict[str, Any]] = []
    try:
        for n_pages in sizes:
            load = bench.load(n_pages)
            info = bench.store.shard_info()
            print(
                f"[{n_pages}] wrote {load.new} pages: {load.new / load.write_s:.1f} pages/s, "
                f"optimize {load.optimize_s:.1f} s, {info}, generation {load.generate_s:.1f} s"
                + (f" (index reused from {bench.index_path})" if bench.reuse else ""),
                flush=True,
            )
            measured = bench.measure_queries(n_pages, prefetches)
            reopens, disk = bench.reopen(measured.queries, prefetches[0])
            summary = _summary(
                n_pages, load, reopens, disk, bench.empty, measured, reuse=bench.reuse, shard=info
            )
            per_n.append(summary)
            size_rows = _stage_rows(n_pages, prefetches, measured, summary)
            rows_out.extend(size_rows)
            print(json.dumps(summary), flush=True)
            for row in size_rows:
                print(
                    f"  {row['first_stage']:>14} prefetch {row['prefetch']:>4}: "
                    f"two-stage p50 {row['p50_ms_two_stage']:8.1f} ms  exact p50 "
                    f"{row['p50_ms_exact']:8.1f} ms  speedup {row['speedup']:6.1f}x  "
                    f"recall@10 {row['recall@10']:.3f}",
                    flush=True,
                )
            size_layouts = layout_rows(
                bench.layouts, n_pages, prefetches, measured, summary["p50_ms_exact"]
            )
            layouts_out.extend(size_layouts)
            for row in size_layouts:
                print(
                    f"  layout {row['layout']:>8} prefetch {row['prefetch']:>4}: "
                    f"{row['bytes_per_page']:>7} B/page  two-stage p50 "
                    f"{row['p50_ms_two_stage']:8.1f} ms  speedup {row['speedup']:6.1f}x  "
                    f"recall@10 {row['recall@10']:.3f}",
                    flush=True,
                )
    finally:
        bench.close()
    report = _report(args, sizes, prefetches, bench.generator, rows_out, per_n)
    report["layouts"] = layouts_out
    if layouts_out:
        report["targets"]["layouts_at_largest"] = layout_targets(layouts_out, sizes[-1])
    return report


def _summary(
    n_pages: int,
    load: _Load,
    reopens: list[tuple[float, float, float]],
    disk: _Disk,
    empty: _Empty,
    measured: _Queries,
    *,
    reuse: bool,
    shard: dict[str, int],
) -> dict[str, Any]:
    """One size's numbers: load, reopen (the median of :data:`REOPENS`), disk, exact scan."""
    close_s, open_s, first_query_s = sorted(reopens, key=sum)[len(reopens) // 2]
    reopen_s = close_s + open_s + first_query_s
    bytes_per_page = (disk.allocated - empty.allocated) / n_pages
    return {
        "n_pages": n_pages,
        "upsert_pages_per_s": round(load.new / load.write_s, 1),
        "index_reused": reuse,
        "optimize_s": round(load.optimize_s, 2),
        "flush_s": round(load.flush_s, 2),
        "generate_s": round(load.generate_s, 1),
        "reopen_s": round(reopen_s, 3),
        "reopen_s_each": [round(sum(r), 3) for r in reopens],
        "close_s": round(close_s, 3),
        "open_s": round(open_s, 3),
        "first_query_ms": round(first_query_s * 1000, 1),
        "bytes_per_page": round(bytes_per_page),
        "bytes_per_page_apparent": round((disk.apparent - empty.apparent) / n_pages),
        "bytes_per_page_without_wal": round(
            (disk.allocated - disk.wal_allocated - (empty.allocated - empty.wal)) / n_pages
        ),
        "vector_bytes_per_page": {k: round(v / n_pages) for k, v in disk.by_vector.items()},
        # what ingestion stores: full rows and 20 block means (no rows/cols)
        "bytes_per_page_production_schema": round(
            bytes_per_page - disk.by_vector[POOLED] / n_pages
        ),
        "wal_bytes": disk.wal_allocated,
        "theoretical_full_float16_bytes_per_page": PATCHES * DIM * 2,
        "shard": shard,
        "p50_ms_exact": percentile_ms(measured.exact_s, 50),
        "p99_ms_exact": percentile_ms(measured.exact_s, 99),
        "exact_target_at_1": round(measured.exact_top1 / len(measured.targets), 3),
    }


def _stage_rows(
    n_pages: int, prefetches: list[int], measured: _Queries, summary: dict[str, Any]
) -> list[dict[str, Any]]:
    """One row per first stage x prefetch at this size."""
    rows: list[dict[str, Any]] = []
    p50_exact = summary["p50_ms_exact"]
    for stage in FIRST_STAGES:
        for prefetch in prefetches:
            key = (stage.name, prefetch)
            p50_two = percentile_ms(measured.two_stage_s[key], 50)
            rows.append(
                {
                    "first_stage": stage.name,
                    "n_pages": n_pages,
                    "prefetch": prefetch,
                    "p50_ms_two_stage": p50_two,
                    "p99_ms_two_stage": percentile_ms(measured.two_stage_s[key], 99),
                    "p50_ms_exact": p50_exact,
                    "speedup": round(p50_exact / p50_two, 2),
                    "recall@10": round(float(np.mean(measured.recall[key])), 4),
                    "target_at_1": round(measured.top1[key] / len(measured.targets), 3),
                    "bytes_per_page": summary["bytes_per_page"],
                    "upsert_pages_per_s": summary["upsert_pages_per_s"],
                    "reopen_s": summary["reopen_s"],
                }
            )
    return rows


def _report(
    args: argparse.Namespace,
    sizes: list[int],
    prefetches: list[int],
    generator: PageGenerator,
    rows_out: list[dict[str, Any]],
    per_n: list[dict[str, Any]],
) -> dict[str, Any]:
    """The whole run's JSON: its config, the main stage's rows, the variants', every size's
    summary and whether the targets were met at the largest size."""
    largest = sizes[-1]
    at_largest = [r for r in rows_out if r["n_pages"] == largest]
    meeting = [r for r in at_largest if r["speedup"] >= 30 and r["recall@10"] >= 0.95]
    reopen_largest = per_n[-1]["reopen_s"]
    return {
        "config": {
            "sizes": sizes,
            "prefetch": prefetches,
            "queries": args.queries,
            "seed": args.seed,
            "grid": list(GRID),
            "dim": DIM,
            "query_rows": QUERY_ROWS,
            "top_k": TOP_K,
            "first_stages": [stage.__dict__ for stage in FIRST_STAGES],
            "coarse_limit": args.coarse_limit,
            "segment_mb": args.segment_mb,
            "generator": generator.parameters(),
            "exact_baseline": "numpy float32 corpus in RAM, chunked batched matmul, 1 query",
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        "results": [r for r in rows_out if r["first_stage"] == MAIN_STAGE],
        "variants": [r for r in rows_out if r["first_stage"] != MAIN_STAGE],
        "per_n": per_n,
        "targets": {
            f"speedup>=30x_with_recall@10>=0.95_at_{largest}": {
                "met": bool(meeting),
                "by": [(r["first_stage"], r["prefetch"]) for r in meeting],
                "best_speedup_with_recall>=0.95": max(
                    (
                        (r["speedup"], r["first_stage"], r["prefetch"])
                        for r in at_largest
                        if r["recall@10"] >= 0.95
                    ),
                    default=None,
                ),
            },
            f"reopen<5s_at_{largest}": {"met": reopen_largest < 5.0, "reopen_s": reopen_largest},
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON results file")
    parser.add_argument("--sizes", default="1000,5000,10000", help="collection sizes (pages)")
    parser.add_argument("--prefetch", default="50,100,200,400", help="first-stage sizes")
    parser.add_argument("--queries", type=int, default=50, help="queries per size")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--coarse-limit",
        type=int,
        default=RetrievalOptions().visual_coarse,
        help="pages stage 0 keeps (cascade); the default is retrieval's visual_coarse",
    )
    parser.add_argument(
        "--segment-mb",
        type=int,
        default=IndexOptions().segment_mb,
        help="vector data per sealed segment; the default is the index's segment_mb",
    )
    parser.add_argument(
        "--layouts",
        default=DEFAULT_LAYOUTS,
        help="page layouts measured, one index each (pagesight.index.schema.PAGE_LAYOUTS; '' none)",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="where the index is built")
    parser.add_argument("--keep", action="store_true", help="keep the index directory")
    parser.add_argument(
        "--index",
        type=Path,
        default=None,
        help=(
            "a persistent index directory: built there (and kept) when absent, reopened by a "
            "later run with the same seed, schema and (single, final) size, whose load numbers "
            "are then the build's; the pages are regenerated for the exact baseline either way. "
            "Delete it after changing how pagesight/index/edge.py stores vectors"
        ),
    )
    args = parser.parse_args(argv)
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result["targets"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
