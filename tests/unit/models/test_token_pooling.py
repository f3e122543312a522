"""pool_tokens: hierarchical (Ward) pooling of a page's rows into ceil(n / factor) means."""

from __future__ import annotations

import numpy as np
import pytest

from pagesight.models.pooling import pool_tokens


def test_near_duplicates_merge_and_distinct_rows_stay() -> None:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 16))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    # 4 groups of 3 near-identical rows: factor 3 gives back the 4 group directions
    rows = np.repeat(centres, 3, axis=0) + 0.01 * rng.normal(size=(12, 16))
    pooled = pool_tokens(rows, 3)
    assert pooled.shape == (4, 16) and pooled.dtype == np.float32
    assert np.allclose(np.linalg.norm(pooled, axis=1), 1.0, atol=1e-5)
    best = (pooled @ centres.T).max(axis=0)
    assert best.min() > 0.999  # every group kept, none averaged with another
    assert pool_tokens(rows, 5).shape == (3, 16)  # ceil(12 / 5)
    assert pool_tokens(rows, 1).shape == (12, 16)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        pool_tokens(np.zeros((0, 4)), 2)
    with pytest.raises(ValueError, match="positive"):
        pool_tokens(np.ones((3, 4)), 0)
    with pytest.raises(ValueError, match="NaN"):
        pool_tokens(np.full((3, 4), np.nan), 2)
