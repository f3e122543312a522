"""bench/bench_maxsim.py's synthetic pages are pinned: every figure in the README's MaxSim tables
(float16 layout before, compact layouts after) was measured on exactly these pages and queries,
so a change to the generator would silently make old and new numbers incomparable.

What is pinned: the shared content kinds (numpy's PCG64 draws alone, the same bits on every
machine, so an exact checksum), and the float16 pages of seed 7 (two chunks: the chunking is
part of the output, because the random draws run chunk by chunk) and one query, as a sketch:
their sum projected onto four fixed random directions. The pages pass through float32 matrix
products, whose last bits depend on the BLAS kernel the CPU gets (an exact checksum of the pages
taken on one machine failed on another, AVX-512 BF16, while the pages rounded to 1/8 matched).
Moving 2,000 page values by one float16 step moves the sketch by 0.002; seed 8 instead of 7
moves it by 247; the tolerance is 0.05.
"""

from __future__ import annotations

import hashlib

import numpy as np

from bench.bench_maxsim import PageGenerator, l2_normalise

KINDS = "e015a0cabbfc850d7509ad2d4c23f8d4e63b42f6e7bab7c9af97a0681dcff56b"
#: the 40 pages' sum projected onto 4 directions (float64; see the module docstring)
PAGES_SKETCH = (-1.5637597863731374, -191.01509867684902, -42.195159877083825, -209.24969173958985)
QUERY_SKETCH = (-2.0102641180610923, 4.4971157408710125, 1.967345199657701, 3.5584257954872713)
TOLERANCE = 0.05


def _sha(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _sketch(rows: np.ndarray) -> np.ndarray:
    """``rows`` (one flattened item a row) summed over items, projected onto 4 fixed directions."""
    directions = np.random.default_rng(0).standard_normal((rows.shape[1], len(PAGES_SKETCH)))
    return (rows.astype(np.float64) @ directions).sum(axis=0)


def test_the_synthetic_pages_and_queries_are_pinned() -> None:
    generator = PageGenerator(seed=7)
    assert _sha(generator.kinds) == KINDS
    blocks = list(generator.pages(40, chunk=32))
    assert [b.shape for b in blocks] == [(32, 750, 128), (8, 750, 128)]
    assert all(b.dtype == np.float16 for b in blocks)
    pages = _sketch(np.concatenate(blocks).reshape(40, -1))
    assert np.allclose(pages, PAGES_SKETCH, rtol=0, atol=TOLERANCE), (
        f"bench_maxsim's pages changed (sketch {pages.tolist()}): the generator changed, so its "
        "figures are no longer comparable with the README's"
    )
    rng = np.random.default_rng([7, 40])
    query = generator.query(l2_normalise(blocks[0][3].astype(np.float32)), rng)
    assert query.dtype == np.float32 and query.shape == (20, 128)
    assert np.allclose(_sketch(query.reshape(1, -1)), QUERY_SKETCH, rtol=0, atol=TOLERANCE)


def test_the_sketch_tells_last_bits_from_a_changed_generator() -> None:
    """The tolerance sits between what a BLAS kernel can change and what a generator change does."""
    blocks = np.concatenate(list(PageGenerator(seed=7).pages(40, chunk=32))).reshape(40, -1)
    nudged = blocks.copy().reshape(-1)
    where = np.random.default_rng(1).choice(nudged.size, 2000, replace=False)
    nudged[where] = np.nextafter(nudged[where], np.float16(1))
    assert np.allclose(_sketch(nudged.reshape(40, -1)), PAGES_SKETCH, rtol=0, atol=TOLERANCE)
    other = np.concatenate(list(PageGenerator(seed=8).pages(40, chunk=32))).reshape(40, -1)
    assert not np.allclose(_sketch(other), PAGES_SKETCH, rtol=0, atol=TOLERANCE)
