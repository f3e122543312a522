"""bench/bench_maxsim.py's synthetic pages are pinned: every figure in the README's MaxSim tables
(float16 layout before, compact layouts after) was measured on exactly these pages and queries,
so a change to the generator would silently make old and new numbers incomparable.

The checksums cover the float16 pages of seed 7 (two chunks: the chunking is part of the
output, because the random draws run chunk by chunk), the shared content kinds and one query.
They depend on numpy's PCG64 streams and float32 arithmetic; should a different BLAS kernel
change last bits only, the coarse checksum (pages rounded to 1/8) still matches and the message
says so.
"""

from __future__ import annotations

import hashlib

import numpy as np

from bench.bench_maxsim import PageGenerator, l2_normalise

PAGES = "da064fb07fdee71d2f4777a234780e64e760105a0e3d603d08c109d0882339ef"
KINDS = "e015a0cabbfc850d7509ad2d4c23f8d4e63b42f6e7bab7c9af97a0681dcff56b"
QUERY = "f2cadbd237ad7efab0cb0305c6d59b7f9e9c09f3b7bbe21b441c81d9da1cf64c"
#: the first two pages of a fresh generator, chunk=2, rounded to 1/8
COARSE = "7f5c4471451022048701af1648436c196ee2d1b0a18af4a4e2f0689a182b6a0b"


def _sha(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def test_the_synthetic_pages_and_queries_are_pinned() -> None:
    generator = PageGenerator(seed=7)
    assert _sha(generator.kinds) == KINDS
    blocks = list(generator.pages(40, chunk=32))
    assert [b.shape for b in blocks] == [(32, 750, 128), (8, 750, 128)]
    assert all(b.dtype == np.float16 for b in blocks)
    digest = hashlib.sha256()
    for block in blocks:
        digest.update(block.tobytes())
    coarse = next(PageGenerator(seed=7).pages(2, chunk=2)).astype(np.float32)
    coarse_ok = _sha(np.round(coarse * 8).astype(np.int8)) == COARSE
    assert digest.hexdigest() == PAGES, "bench_maxsim's pages changed: " + (
        "only in last bits (the coarse checksum matches: a different BLAS or CPU?)"
        if coarse_ok
        else "the generator changed; its figures are no longer comparable"
    )
    rng = np.random.default_rng([7, 40])
    query = generator.query(l2_normalise(blocks[0][3].astype(np.float32)), rng)
    assert query.dtype == np.float32 and query.shape == (20, 128)
    assert _sha(query) == QUERY
