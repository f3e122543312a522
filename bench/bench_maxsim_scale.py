"""The visual index at archive scale: one page layout, ``--pages`` synthetic pages (100,000 by
default), on this machine.

The pages are bench/bench_maxsim.py's (same generator, seed and chunking: its first 10,000 are
the pages of that bench's 10k run), written as ingestion writes a page collection (full rows +
4 x 5 block means, ``IndexSchema.for_pages(layout=...)``,
:class:`bench.maxsim_layouts.LayoutStore`).
What it reports:

- **build**: seconds generating the pages, building IndexPoints + upserting them (the rate),
  sealing what is left, and the wall time of the whole build;
- **bytes per page on disk** at rest (everything the index directory holds, after a close);
- **serving**, in a fresh process that only opens the index and queries it (so its memory is
  what serving needs, not the build's): open time, the first query, then two-stage search p50 /
  p99 over ``--rounds`` rounds of the ``--queries`` queries (the cascade retrieval runs: 3 query
  centroids against the block means keep ``--coarse-limit`` pages, the full query ranks those,
  MaxSim over the stored rows reranks ``--prefetch``), and the process's resident memory
  (``VmRSS`` / ``VmHWM``, split into anonymous memory and mapped index files);
- **recall@10** of those queries against exact MaxSim over the float16 pages as stored (read
  back in blocks from a float16 copy written beside the index during the build, renormalised
  and scored in float32 block by block: a float32 copy of 100k pages, 38 GB, fits in no RAM
  here).

Queries are bench_maxsim's (20 patches of a target page plus noise), targets drawn uniformly
from all pages. Resumable: a finished build is stamped, and a later run with the same
arguments measures it again without rebuilding (``--rebuild`` forces one).

    python bench/bench_maxsim_scale.py --out var/bench/maxsim-scale-100k.json
    python bench/bench_maxsim_scale.py --pages 2000 --workdir /tmp/scale --out /tmp/scale.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.bench_maxsim import (  # noqa: E402  # after sys.path
    BLOCK_POOLING,
    DIM,
    FULL,
    PATCHES,
    POOLED,
    POOLED_BLOCKS,
    TENANT,
    TOP_K,
    Matrix,
    PageGenerator,
    page_id,
    page_point,
    top_k,
)
from bench.maxsim_layouts import LayoutStore, layout_point  # noqa: E402  # after sys.path
from pagesight.core.settings import IndexOptions, RetrievalOptions  # noqa: E402  # after sys.path
from pagesight.core.types import AccessFilter  # noqa: E402  # after sys.path
from pagesight.index.base import DEFAULT_PAGE_LAYOUT  # noqa: E402  # after sys.path
from pagesight.models.pooling import l2_normalise  # noqa: E402  # after sys.path

STAMP_FILE = "scale-build.json"
CORPUS_FILE = "pages-float16.npy"
QUERIES_FILE = "queries.npz"
ACCESS = AccessFilter(tenant=TENANT, principals=["reader"])


# -- build ---------------------------------------------------------------------------------------


def _stamp(args: argparse.Namespace) -> dict[str, Any]:
    """What a reusable build must match."""
    return {
        "pages": args.pages,
        "layout": args.layout,
        "seed": args.seed,
        "segment_mb": args.segment_mb,
        "generator": PageGenerator(seed=args.seed).parameters(),
    }


def _store(root: Path, args: argparse.Namespace) -> LayoutStore:
    return LayoutStore.create(root, args.layout, FULL, DIM, BLOCK_POOLING, args.segment_mb)


def build(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Generate and write every page; the float16 copy of the pages goes to ``CORPUS_FILE``.

    The store's ``write_s`` times IndexPoint building + upsert, as bench_maxsim's upsert rate
    does; generation and the copy are timed apart."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    layout = _store(root, args)
    corpus = np.lib.format.open_memmap(
        root / CORPUS_FILE, mode="w+", dtype=np.float16, shape=(args.pages, PATCHES, DIM)
    )
    started = time.perf_counter()
    written = 0
    copy_s = 0.0
    last_report = started
    for block in PageGenerator(seed=args.seed).pages(args.pages):
        copy_started = time.perf_counter()
        corpus[written : written + len(block)] = block
        copy_s += time.perf_counter() - copy_started
        pages32 = l2_normalise(block.reshape(-1, DIM).astype(np.float32)).reshape(block.shape)
        write_started = time.perf_counter()
        points = [page_point(written + i, page) for i, page in enumerate(pages32)]
        layout.write_s += time.perf_counter() - write_started
        layout.upsert([layout_point(p, FULL, POOLED_BLOCKS, POOLED) for p in points])
        written += len(block)
        if time.perf_counter() - last_report > 60:
            last_report = time.perf_counter()
            rate = written / (last_report - started)
            print(f"  {written:,} pages, {rate:.1f} pages/s overall", flush=True)
    corpus.flush()
    del corpus
    layout.settle()
    wall_s = time.perf_counter() - started
    disk = layout.disk(args.pages)
    layout.close()
    result = {
        "wall_s": round(wall_s, 1),
        "generate_s": round(wall_s - layout.write_s - layout.settle_s - copy_s, 1),
        "write_s": round(layout.write_s, 1),
        "upsert_pages_per_s": round(args.pages / layout.write_s, 1),
        "seal_s": round(layout.settle_s, 1),
        "float16_copy_s": round(copy_s, 1),
        **disk,
    }
    (root / STAMP_FILE).write_text(json.dumps({**_stamp(args), "build": result}, indent=2))
    return result


def reusable(root: Path, args: argparse.Namespace) -> dict[str, Any] | None:
    """The stamped build in ``root`` if it matches ``args`` (and its page copy is there)."""
    try:
        stored = json.loads((root / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return None
    wanted = json.loads(json.dumps(_stamp(args)))
    if {k: stored.get(k) for k in wanted} != wanted or not (root / CORPUS_FILE).exists():
        return None
    built: dict[str, Any] = stored["build"]
    return built


# -- exact baseline ------------------------------------------------------------------------------


def queries(root: Path, args: argparse.Namespace) -> tuple[list[int], Matrix]:
    """``args.queries`` targets drawn uniformly from every page, each query 20 of its patches
    plus noise (bench_maxsim's recipe), from the stored float16 pages."""
    corpus = np.load(root / CORPUS_FILE, mmap_mode="r")
    rng = np.random.default_rng([args.seed, args.pages, 1])
    targets = sorted(int(t) for t in rng.integers(0, args.pages, size=args.queries))
    generator = PageGenerator(seed=args.seed)
    made = [
        generator.query(l2_normalise(np.asarray(corpus[t], dtype=np.float32)), rng) for t in targets
    ]
    return targets, np.stack(made)


def exact_top(root: Path, query_rows: Matrix, block_pages: int = 256) -> list[list[int]]:
    """Exact MaxSim top 10 of each query over every stored page: the float16 pages read back
    block by block, renormalised in float32 (as the cosine index stores them), all queries in
    one matmul per block."""
    corpus = np.load(root / CORPUS_FILE, mmap_mode="r")
    n_pages, n_queries, rows = corpus.shape[0], query_rows.shape[0], query_rows.shape[1]
    stacked = np.ascontiguousarray(query_rows.reshape(-1, DIM).T)  # [dim, queries * rows]
    scores = np.empty((n_queries, n_pages), dtype=np.float32)
    for start in range(0, n_pages, block_pages):
        block = np.asarray(corpus[start : start + block_pages], dtype=np.float32)
        count = len(block)
        flat = l2_normalise(block.reshape(-1, DIM))
        sims = (flat @ stacked).reshape(count, PATCHES, n_queries, rows)
        scores[:, start : start + count] = sims.max(axis=1).sum(axis=2).T
    return [top_k(row, TOP_K) for row in scores]


# -- serving (a fresh process) -------------------------------------------------------------------


def _memory() -> dict[str, int]:
    """This process's resident memory, kB, from /proc/self/status."""
    wanted = ("VmRSS", "VmHWM", "RssAnon", "RssFile")
    out: dict[str, int] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in wanted:
            out[name] = int(value.split()[0])
    return out


def serve(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Open the index and search it, as a Query replica would: open time, first query, then
    ``args.rounds`` timed rounds of every query; the memory the process holds after each."""
    query_rows = np.load(root / QUERIES_FILE)["rows"]
    before = _memory()
    started = time.perf_counter()
    layout = LayoutStore.open(root, args.layout, FULL, DIM, BLOCK_POOLING, args.segment_mb)
    open_s = time.perf_counter() - started
    found: list[list[str]] = []
    latencies: list[float] = []
    first_s = 0.0
    for round_number in range(args.rounds + 1):
        for rows in query_rows:
            query_started = time.perf_counter()
            hits = layout.query(
                FULL, rows.tolist(), ACCESS, TOP_K, args.prefetch, args.coarse_limit
            )
            elapsed = time.perf_counter() - query_started
            if round_number == 0:  # the first round warms the page cache: reported apart
                first_s = first_s or elapsed
                found.append([h.id for h in hits])
            else:
                latencies.append(elapsed)
    after = _memory()
    layout.close()
    ms = np.array(latencies) * 1000
    return {
        "open_s": round(open_s, 2),
        "first_query_ms": round(first_s * 1000, 1),
        "queries_timed": len(latencies),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "mean_ms": round(float(ms.mean()), 1),
        "memory_kb_before_open": before,
        "memory_kb_serving": after,
        "found": found,
    }


def serve_in_fresh_process(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--serve-only", str(root), *_passed(args)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _passed(args: argparse.Namespace) -> list[str]:
    """The arguments a serving process needs to open the same index the same way."""
    return [
        f"--pages={args.pages}",
        f"--layout={args.layout}",
        f"--seed={args.seed}",
        f"--segment-mb={args.segment_mb}",
        f"--queries={args.queries}",
        f"--rounds={args.rounds}",
        f"--prefetch={args.prefetch}",
        f"--coarse-limit={args.coarse_limit}",
        "--out=-",
    ]


# -- the run -------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    root: Path = args.workdir
    built = None if args.rebuild else reusable(root, args)
    reused = built is not None
    if built is None:
        print(f"building {args.pages:,} pages ({args.layout}) in {root}", flush=True)
        built = build(root, args)
    print(f"build: {built}", flush=True)
    targets, query_rows = queries(root, args)
    np.savez(root / QUERIES_FILE, rows=query_rows, targets=np.array(targets))
    exact_started = time.perf_counter()
    truth = exact_top(root, query_rows)
    exact_s = time.perf_counter() - exact_started
    print(f"exact MaxSim of {len(targets)} queries over every page: {exact_s:.0f} s", flush=True)
    served = serve_in_fresh_process(root, args)
    found = served.pop("found")
    by_id = {page_id(i): i for i in range(args.pages)}
    recall = [
        len({by_id[h] for h in hits} & set(best)) / TOP_K
        for hits, best in zip(found, truth, strict=True)
    ]
    exact_top1 = sum(best[0] == t for best, t in zip(truth, targets, strict=True))
    if not args.keep_pages:
        (root / CORPUS_FILE).unlink()
        (root / STAMP_FILE).unlink()  # without the page copy the build cannot be measured again
    return {
        "pages": args.pages,
        "layout": args.layout,
        "build": built,
        "build_reused": reused,
        "serving": served,
        "recall@10": round(float(np.mean(recall)), 4),
        "recall@10_each": recall,
        "exact": {"seconds_all_queries": round(exact_s, 1), "target_at_1": exact_top1},
        "config": {
            "queries": args.queries,
            "rounds": args.rounds,
            "prefetch": args.prefetch,
            "coarse_limit": args.coarse_limit,
            "segment_mb": args.segment_mb,
            "seed": args.seed,
            "generator": PageGenerator(seed=args.seed).parameters(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
    }


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True, help="JSON results file ('-': stdout)")
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument(
        "--layout", default=DEFAULT_PAGE_LAYOUT, help="pagesight.index.schema.PAGE_LAYOUTS"
    )
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds of every query")
    ap.add_argument("--prefetch", type=int, default=RetrievalOptions().visual_prefetch)
    ap.add_argument("--coarse-limit", type=int, default=RetrievalOptions().visual_coarse)
    ap.add_argument("--segment-mb", type=int, default=IndexOptions().segment_mb)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--workdir",
        type=Path,
        default=REPO_ROOT / "var" / "bench" / "scale",
        help="where the index and the float16 page copy are built (100k pages: ~21 GB + 19 GB)",
    )
    ap.add_argument("--rebuild", action="store_true", help="build even if a stamped build fits")
    ap.add_argument(
        "--keep-pages",
        action="store_true",
        help="keep the float16 page copy (and so the build's reusability) after the run",
    )
    ap.add_argument("--serve-only", type=Path, default=None, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.serve_only is not None:
        print(json.dumps(serve(args.serve_only, args)))
        return 0
    result = run(args)
    text = json.dumps(result, indent=2)
    if args.out == "-":
        print(text)
    else:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        summary = {k: result[k] for k in ("pages", "layout", "recall@10")}
        print(json.dumps({**summary, "build": result["build"], "serving": result["serving"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
