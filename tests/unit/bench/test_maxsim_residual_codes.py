"""bench/maxsim_residual_codes.py: the coder behind issue 36's "how much recall can ~4 bits keep".

Its figures back a blocked target, so what it computes is pinned here: the Lloyd-Max levels are
the known ones, the error falls as bits are added, the residual bases are the index's block
means (same tiling as ``pool_blocks``), and the bytes add up as the module says.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.bench_maxsim import DIM, GRID, PATCHES, PageGenerator
from bench.maxsim_residual_codes import (
    RowCoder,
    block_bases,
    block_index,
    lloyd_max_levels,
    main,
)
from pagesight.models.pooling import l2_normalise, pool_blocks


def test_lloyd_max_levels_are_the_textbook_ones() -> None:
    # Max (1960): 1 bit ±sqrt(2/pi); 2 bits ±0.4528, ±1.510
    assert np.allclose(lloyd_max_levels(1), [-np.sqrt(2 / np.pi), np.sqrt(2 / np.pi)], atol=1e-3)
    assert np.allclose(lloyd_max_levels(2), [-1.510, -0.4528, 0.4528, 1.510], atol=2e-3)
    # 4 bits, the positive half (Max's table)
    four = [0.1284, 0.3881, 0.6568, 0.9424, 1.256, 1.618, 2.069, 2.733]
    levels = lloyd_max_levels(4)
    assert np.allclose(levels[8:], four, atol=1e-3)
    assert np.allclose(levels, -levels[::-1], atol=1e-6)


def test_the_row_error_falls_with_each_bit_and_decoding_inverts_the_rotation() -> None:
    rows = l2_normalise(np.random.default_rng(1).standard_normal((400, DIM)).astype(np.float32))
    errors = []
    for bits in (2, 3, 4, 5):
        coder = RowCoder.build(bits, seed=7)
        codes, scale = coder.encode(rows)
        assert codes.dtype == np.uint8 and codes.max() < 2**bits and scale.shape == (400,)
        errors.append(float(np.linalg.norm(coder.decode(codes, scale) - rows, axis=1).mean()))
    assert errors == sorted(errors, reverse=True)
    # Lloyd-Max MSE of a unit Gaussian at 4 bits is 0.0095 of the variance: error ~0.097
    assert 0.08 < errors[2] < 0.11
    assert RowCoder.build(4, seed=7).bytes_per_row() == 64 + 2


def test_residual_bases_are_the_block_means_of_the_index_tiling() -> None:
    page = next(PageGenerator(seed=7).pages(1, chunk=1)).astype(np.float32)
    bases, blocks = block_bases(page, (4, 5))
    assert blocks == 20 and bases.shape == (1, PATCHES, DIM)
    means = np.stack([bases[0][block_index((4, 5)) == b][0] for b in range(blocks)])
    pooled = pool_blocks(page[0], np.ones(PATCHES, bool), GRID, (4, 5))
    assert np.allclose(l2_normalise(means), pooled, atol=2e-3)
    assert np.bincount(block_index((5, 6))).min() >= (GRID[0] // 5) * (GRID[1] // 6)


@pytest.mark.slow
def test_a_small_run_writes_every_coding(tmp_path: Path) -> None:
    out = tmp_path / "codes.json"
    assert main(["--pages", "60", "--queries", "4", "--bits", "4", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [r["coding"] for r in rows] == ["plain", "residual_4x5", "residual_5x6", "residual_5x10"]
    assert rows[0]["bytes_per_page"] == PATCHES * 66
    assert rows[1]["bytes_per_page"] == PATCHES * 66 + 20 * DIM * 2
    assert all(r["mean_row_error"] < rows[0]["mean_row_error"] for r in rows[1:])
    assert all(0.0 <= r["recall@10_full_scan"] <= 1.0 for r in rows)
