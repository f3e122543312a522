"""Low-bit row codes against exact MaxSim on bench_maxsim.py's synthetic pages (issue 36).

The question behind issue 36's visual-index target (≤ 60 KB a page at recall@10 ≥ 0.97): how
much recall can ~4 bits a dimension keep at all? 60 KB over 750 rows of 128 dimensions is 5.1
bits a dimension with nothing else stored, so every layout that fits codes its rows at about 4.

Two codings are compared, each a full scan (exact float32 MaxSim of the query against the
decoded rows of every page), so the figure is the most any layout storing those codes could
recall before a first stage loses more:

- ``plain``: each row rotated by one fixed random orthogonal matrix (its coordinates then look
  Gaussian, as TurboQuant assumes), coded per coordinate on the Lloyd-Max levels of a unit
  Gaussian, with one float16 scale a row fitted by least squares.
- ``residual``: the row minus the float16 mean of its block of the patch grid (as the index's
  block means, ``pagesight.models.pooling.pool_blocks``, without the normalisation), and that
  residual coded as ``plain`` codes a row: PLAID-style residual compression, with the block
  means as the centroids (a row's block follows from its position, so no centroid id is stored).

Bytes a page count the codes, the scales and the block means; payload, the first stages' block
means and the engine's own overhead come on top (2.7-10 KB in ``bench_maxsim``'s layouts).

    python bench/maxsim_residual_codes.py --pages 1500 --bits 3,4,5 --out var/bench/codes.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

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

#: block tilings of the 25 x 30 patch grid tried as residual bases: the index's 4 x 5, finer ones
BLOCK_TILINGS = ((4, 5), (5, 6), (5, 10))


def lloyd_max_levels(bits: int, iterations: int = 5000) -> npt.NDArray[np.float64]:
    """The ``2**bits`` Lloyd-Max reconstruction levels of a unit Gaussian (the MSE-optimal
    scalar quantizer): each level the Gaussian's mean over its cell, each boundary midway
    between levels, iterated in closed form until the levels stop moving (Max's 1960 table;
    tested)."""
    levels = np.linspace(-2.5, 2.5, 2**bits)
    for _ in range(iterations):
        bounds = np.concatenate([[-np.inf], (levels[1:] + levels[:-1]) / 2, [np.inf]])
        density = np.exp(-0.5 * bounds * bounds) / np.sqrt(2 * np.pi)
        mass = np.array([0.5 * (1 + math.erf(b / np.sqrt(2))) for b in bounds])
        moved = (density[:-1] - density[1:]) / (mass[1:] - mass[:-1])
        if np.abs(moved - levels).max() < 1e-12:
            return moved
        levels = moved
    return levels


@dataclass(frozen=True)
class RowCoder:
    """Codes rows at ``bits`` per dimension: rotate, code each coordinate on the Lloyd-Max
    levels, keep one least-squares scale a row (float16)."""

    bits: int
    rotation: Matrix
    levels: Matrix

    @classmethod
    def build(cls, bits: int, seed: int) -> RowCoder:
        gaussian = np.random.default_rng(seed).standard_normal((DIM, DIM))
        rotation = np.linalg.qr(gaussian)[0].astype(np.float32)
        return cls(bits, rotation, lloyd_max_levels(bits).astype(np.float32))

    def encode(self, rows: Matrix) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float16]]:
        rotated = rows @ self.rotation
        norms = np.linalg.norm(rotated, axis=-1, keepdims=True)
        unit = rotated * (np.sqrt(DIM) / np.maximum(norms, 1e-12))
        codes = np.searchsorted((self.levels[1:] + self.levels[:-1]) / 2, unit).astype(np.uint8)
        coded = self.levels[codes]
        scale = (rotated * coded).sum(-1) / np.maximum((coded * coded).sum(-1), 1e-12)
        return codes, scale.astype(np.float16)

    def decode(self, codes: npt.NDArray[np.uint8], scale: npt.NDArray[np.float16]) -> Matrix:
        coded = self.levels[codes] * scale.astype(np.float32)[..., None]
        return coded @ self.rotation.T

    def bytes_per_row(self) -> int:
        return -(-DIM * self.bits // 8) + 2  # packed codes + the float16 scale


def block_index(tiling: tuple[int, int]) -> npt.NDArray[np.intp]:
    """The block of each patch (raster order) under ``np.array_split`` boundaries, as
    ``pool_blocks`` tiles the grid."""
    block_rows, block_cols = tiling
    index = np.empty(GRID, dtype=np.intp)
    for i, rows in enumerate(np.array_split(np.arange(GRID[0]), block_rows)):
        for j, cols in enumerate(np.array_split(np.arange(GRID[1]), block_cols)):
            index[np.ix_(rows, cols)] = i * block_cols + j
    return index.reshape(-1)


def block_bases(corpus: Matrix, tiling: tuple[int, int]) -> tuple[Matrix, int]:
    """Each patch's block mean (float16-rounded, unnormalised) ``[pages, PATCHES, DIM]`` and
    the number of blocks a page stores."""
    index = block_index(tiling)
    blocks = tiling[0] * tiling[1]
    one_hot = np.zeros((blocks, PATCHES), dtype=np.float32)
    one_hot[index, np.arange(PATCHES)] = 1.0
    means = (one_hot @ corpus) / one_hot.sum(axis=1)[:, None]
    means = means.astype(np.float16).astype(np.float32)
    return means[:, index], blocks


def full_scan_recall(decoded: Matrix, queries: list[Matrix], truth: list[set[int]]) -> float:
    recall = [
        len(best & set(top_k(exact_maxsim(decoded, len(decoded), q), TOP_K))) / TOP_K
        for q, best in zip(queries, truth, strict=True)
    ]
    return float(np.mean(recall))


def run(args: argparse.Namespace) -> dict[str, Any]:
    generator = PageGenerator(seed=args.seed)
    corpus = np.concatenate([b.astype(np.float32) for b in generator.pages(args.pages)])
    rng = np.random.default_rng([args.seed, args.pages])
    targets = rng.choice(args.pages, size=args.queries, replace=False)
    queries = [generator.query(corpus[t], rng) for t in targets]
    truth = [set(top_k(exact_maxsim(corpus, args.pages, q), TOP_K)) for q in queries]
    rows: list[dict[str, Any]] = []

    def measure(coding: str, coder: RowCoder, base: Matrix | None, blocks: int) -> None:
        started = time.perf_counter()
        target = corpus if base is None else corpus - base
        decoded = coder.decode(*coder.encode(target))
        if base is not None:
            decoded += base
        code_s = time.perf_counter() - started
        error = np.linalg.norm(decoded - corpus, axis=-1).mean()
        rows.append(
            {
                "coding": coding,
                "bits": coder.bits,
                "blocks": blocks,
                "bytes_per_page": PATCHES * coder.bytes_per_row() + blocks * DIM * 2,
                "mean_residual_norm": round(float(np.linalg.norm(target, axis=-1).mean()), 4),
                "mean_row_error": round(float(error), 4),
                "ms_per_page_coding": round(code_s / args.pages * 1000, 2),
                "recall@10_full_scan": round(full_scan_recall(decoded, queries, truth), 4),
            }
        )
        print(json.dumps(rows[-1]), flush=True)

    for bits in (int(b) for b in args.bits.split(",")):
        coder = RowCoder.build(bits, args.seed)
        measure("plain", coder, None, 0)
        for tiling in BLOCK_TILINGS:
            base, blocks = block_bases(corpus, tiling)
            measure(f"residual_{tiling[0]}x{tiling[1]}", coder, base, blocks)
            del base
    return {
        "config": {
            "pages": args.pages,
            "queries": args.queries,
            "seed": args.seed,
            "generator": generator.parameters(),
            "truth": "exact float32 MaxSim over the float16 rows",
        },
        "results": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--bits", default="3,4,5")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
