"""bench/bench_maxsim_scale.py: its exact baseline (all queries in one matmul per block, read
back from the float16 copy) ranks as bench_maxsim's per-query one does, its pages are
bench_maxsim's, and a build is reused only when everything that made it matches."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench.bench_maxsim import PageGenerator, exact_maxsim, top_k
from bench.bench_maxsim_scale import (
    CORPUS_FILE,
    STAMP_FILE,
    _stamp,
    exact_top,
    parser,
    queries,
    reusable,
)
from pagesight.models.pooling import l2_normalise


def _args(tmp_path: Path, **changes: object) -> argparse.Namespace:
    args = parser().parse_args(["--out", "-", "--pages", "40", "--queries", "4"])
    args.workdir = tmp_path
    for name, value in changes.items():
        setattr(args, name, value)
    return args


def _write_pages(root: Path, pages: int) -> np.ndarray:
    """bench_maxsim's first ``pages`` pages, stored as the build stores its float16 copy."""
    block = np.concatenate(list(PageGenerator(seed=7).pages(pages)))
    copy = np.lib.format.open_memmap(
        root / CORPUS_FILE, mode="w+", dtype=np.float16, shape=block.shape
    )
    copy[:] = block
    copy.flush()
    return block


def test_the_exact_baseline_ranks_as_bench_maxsims(tmp_path: Path) -> None:
    args = _args(tmp_path)
    block = _write_pages(tmp_path, args.pages)
    targets, rows = queries(tmp_path, args)
    assert rows.shape == (4, 20, 128) and all(0 <= t < args.pages for t in targets)
    corpus = l2_normalise(block.reshape(-1, 128).astype(np.float32)).reshape(block.shape)
    expected = [top_k(exact_maxsim(corpus, args.pages, query), 10) for query in rows]
    assert exact_top(tmp_path, rows, block_pages=16) == expected  # blocks that split the pages
    assert [best[0] for best in expected] == targets  # each query finds its own page first


def test_a_build_is_reused_only_when_it_matches(tmp_path: Path) -> None:
    args = _args(tmp_path)
    assert reusable(tmp_path, args) is None  # nothing built
    (tmp_path / STAMP_FILE).write_text(json.dumps({**_stamp(args), "build": {"wall_s": 1.0}}))
    assert reusable(tmp_path, args) is None  # no page copy: the baseline could not be computed
    _write_pages(tmp_path, args.pages)
    assert reusable(tmp_path, args) == {"wall_s": 1.0}
    assert reusable(tmp_path, _args(tmp_path, layout="turbo4")) is None
    assert reusable(tmp_path, _args(tmp_path, pages=41)) is None
    assert reusable(tmp_path, _args(tmp_path, seed=8)) is None
