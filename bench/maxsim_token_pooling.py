"""Token pooling against exact MaxSim on bench_maxsim.py's synthetic pages (issue 36).

For each pool factor, every page's 750 rows are pooled (``pagesight.models.pooling.pool_tokens``,
Ward clusters of near-duplicate rows, and for comparison 2-D grid means of neighbouring
patches), and recall@10 of exact float32 MaxSim over the pooled rows is measured against exact
float32 MaxSim over the unpooled rows: the most any layout that stores pooled rows for the
rerank could recall, before a first stage or any quantization loses more. Bytes are what the
pooled rows take per page at 1 byte a dimension (8-bit codes) and at float16.

    python bench/maxsim_token_pooling.py --pages 1000 --factors 2,3,4 --out var/bench/pool.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.bench_maxsim import (  # noqa: E402  # after sys.path
    DIM,
    GRID,
    PATCHES,
    TOP_K,
    Matrix,
    PageGenerator,
    exact_maxsim,
    top_k,
)
from pagesight.models.pooling import l2_normalise, pool_tokens  # noqa: E402  # after sys.path

#: grid cells merged per pool factor: neighbouring patches, 1 x 2, 1 x 3, 2 x 2
GRID_CELLS = {2: (1, 2), 3: (1, 3), 4: (2, 2)}


def pool_grid(page: Matrix, factor: int) -> Matrix:
    """Means of ``GRID_CELLS[factor]`` neighbouring patches (the spatial alternative)."""
    cell_rows, cell_cols = GRID_CELLS[factor]
    grid = page.reshape(*GRID, DIM)
    means = [
        cell.reshape(-1, DIM).mean(axis=0)
        for band in np.array_split(grid, -(-GRID[0] // cell_rows), axis=0)
        for cell in np.array_split(band, -(-GRID[1] // cell_cols), axis=1)
    ]
    return l2_normalise(np.stack(means))


def run(args: argparse.Namespace) -> dict[str, Any]:
    generator = PageGenerator(seed=args.seed)
    corpus = np.concatenate([b.astype(np.float32) for b in generator.pages(args.pages)])
    corpus = l2_normalise(corpus.reshape(-1, DIM)).reshape(args.pages, PATCHES, DIM)
    rng = np.random.default_rng([args.seed, args.pages])
    targets = rng.integers(0, args.pages, size=args.queries)
    queries = [generator.query(corpus[t], rng) for t in targets]
    truth = [set(top_k(exact_maxsim(corpus, args.pages, q), TOP_K)) for q in queries]
    rows: list[dict[str, Any]] = []
    methods = {"ward": pool_tokens, "grid": pool_grid}
    for factor in (int(f) for f in args.factors.split(",")):
        for method, pool in methods.items():
            if method == "grid" and factor not in GRID_CELLS:
                continue
            started = time.perf_counter()
            pooled = [pool(page, factor) for page in corpus]
            pool_s = time.perf_counter() - started
            recall = []
            for query, best in zip(queries, truth, strict=True):
                scores = np.array([(p @ query.T).max(axis=0).sum() for p in pooled])
                recall.append(len(best & set(top_k(scores, TOP_K))) / TOP_K)
            mean_rows = float(np.mean([len(p) for p in pooled]))
            rows.append(
                {
                    "method": method,
                    "factor": factor,
                    "rows_per_page": round(mean_rows, 1),
                    "bytes_per_page_8bit": round(mean_rows * DIM),
                    "bytes_per_page_float16": round(mean_rows * DIM * 2),
                    "ms_per_page": round(pool_s / args.pages * 1000, 2),
                    "recall@10_rerank_only": round(float(np.mean(recall)), 4),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return {
        "config": {
            "pages": args.pages,
            "queries": args.queries,
            "seed": args.seed,
            "generator": generator.parameters(),
            "truth": "exact float32 MaxSim over the unpooled rows",
        },
        "results": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--factors", default="2,3,4")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
