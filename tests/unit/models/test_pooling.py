"""Mean pooling of a page's patch grid into the first-stage multi-vector
(pagesight.models.pooling)."""

from __future__ import annotations

import numpy as np
import pytest

from pagesight.index.base import IndexSchema, pooled_vector_name
from pagesight.models.pooling import (
    ROWS_COLS,
    l2_normalise,
    pool_blocks,
    pool_rows_cols,
    query_centroids,
)


def unit_rows(rng: np.random.Generator, n: int, dim: int = 8) -> np.ndarray:
    rows = rng.normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def with_prompt(patches: np.ndarray, before: int, after: int, rng: np.random.Generator):
    """Prompt-token rows around the image rows, as ColQwen2 emits them, and the image mask."""
    dim = patches.shape[1]
    vectors = np.concatenate([unit_rows(rng, before, dim), patches, unit_rows(rng, after, dim)])
    mask = np.zeros(len(vectors), dtype=bool)
    mask[before : before + len(patches)] = True
    return vectors, mask


def test_rows_then_columns_of_the_raster_grid() -> None:
    # Patch (r, c) of a 2 x 3 grid is e_r + 10 e_(2+c): row means isolate e_r, column means e_(2+c).
    rows, cols, dim = 2, 3, 8
    patches = np.zeros((rows * cols, dim), dtype=np.float32)
    for r in range(rows):
        for c in range(cols):
            patches[r * cols + c, r] = 1.0
            patches[r * cols + c, 2 + c] = 10.0
    pooled = pool_rows_cols(patches, np.ones(rows * cols, dtype=bool), (rows, cols))
    assert pooled.shape == (rows + cols, dim) and pooled.dtype == np.float32
    grid = patches.reshape(rows, cols, dim)
    expected = np.concatenate([grid.mean(axis=1), grid.mean(axis=0)])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(pooled, expected, atol=1e-6)
    # Row 0 carries e_0 and no e_1; column 2 carries e_4 only among the column dims.
    assert pooled[0, 0] > 0 and pooled[0, 1] == 0
    assert pooled[rows + 2, 4] > 0 and pooled[rows + 2, 2] == pooled[rows + 2, 3] == 0


def test_prompt_rows_are_left_out() -> None:
    rng = np.random.default_rng(0)
    patches = unit_rows(rng, 4 * 5)
    alone = pool_rows_cols(patches, np.ones(20, dtype=bool), (4, 5))
    vectors, mask = with_prompt(patches, before=3, after=7, rng=rng)
    assert np.allclose(pool_rows_cols(vectors, mask, (4, 5)), alone, atol=1e-6)
    # Interleaving does not matter either, only the order of the image rows.
    shuffled = np.concatenate([patches[:10], unit_rows(rng, 2), patches[10:]])
    shuffled_mask = np.ones(22, dtype=bool)
    shuffled_mask[10:12] = False
    assert np.allclose(pool_rows_cols(shuffled, shuffled_mask, (4, 5)), alone, atol=1e-6)


def test_pooled_rows_are_unit_length_and_float16_input_is_accepted() -> None:
    rng = np.random.default_rng(1)
    patches = unit_rows(rng, 25 * 30, dim=128).astype(np.float16)
    pooled = pool_rows_cols(patches, np.ones(750, dtype=bool), (25, 30))
    assert pooled.shape == (55, 128) and pooled.dtype == np.float32
    assert np.allclose(np.linalg.norm(pooled, axis=1), 1.0, atol=1e-5)


def test_a_zero_mean_stays_zero_instead_of_nan() -> None:
    patches = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], dtype=np.float32)
    pooled = pool_rows_cols(patches, np.ones(4, dtype=bool), (2, 2))
    assert np.isfinite(pooled).all()
    assert np.array_equal(pooled[0], [0.0, 0.0])  # row 0: (1, 0) and (-1, 0) cancel out
    assert np.allclose(l2_normalise(np.zeros((2, 3), dtype=np.float32)), 0.0)


def test_blocks_tile_the_grid() -> None:
    rng = np.random.default_rng(2)
    rows, cols = 5, 7
    patches = unit_rows(rng, rows * cols)
    mask = np.ones(rows * cols, dtype=bool)
    grid = patches.reshape(rows, cols, -1)
    blocks = pool_blocks(patches, mask, (rows, cols), (2, 3))
    assert blocks.shape == (6, patches.shape[1])
    # np.array_split: rows 0-2 | 3-4, columns 0-2 | 3-4 | 5-6, blocks in raster order.
    expected = grid[3:5, 3:5].mean(axis=(0, 1))
    assert np.allclose(blocks[4], expected / np.linalg.norm(expected), atol=1e-6)
    whole = pool_blocks(patches, mask, (rows, cols), (1, 1))[0]
    mean = patches.mean(axis=0)
    assert np.allclose(whole, mean / np.linalg.norm(mean), atol=1e-6)
    single = pool_blocks(patches, mask, (rows, cols), (rows, cols))
    assert np.allclose(single, patches, atol=1e-6)  # one patch per block: the patches themselves


def test_pooling_keeps_the_best_page_first_for_a_query_from_one_region() -> None:
    # Why pooling works as a first stage: rows/columns crossing a page region stay close to it.
    rng = np.random.default_rng(3)
    dim, grid = 32, (6, 8)
    pages = []
    for _ in range(20):
        left, right = unit_rows(rng, 2, dim)
        patches = np.empty((*grid, dim), dtype=np.float32)
        patches[:, :4], patches[:, 4:] = left, right
        patches += 0.2 * rng.normal(size=patches.shape).astype(np.float32) / np.sqrt(dim)
        pages.append(patches.reshape(-1, dim))
    query = pages[7].reshape(*grid, dim)[1:4, 5]  # three patches of page 7's right half
    mask = np.ones(grid[0] * grid[1], dtype=bool)
    pooled_scores = [(query @ pool_rows_cols(p, mask, grid).T).max(axis=1).sum() for p in pages]
    assert int(np.argmax(pooled_scores)) == 7


@pytest.mark.parametrize(
    ("vectors", "mask", "grid", "message"),
    [
        (np.ones((6, 4)), np.ones(6, dtype=bool), (2, 2), "selects 6 rows"),
        (np.ones((6, 4)), np.ones(5, dtype=bool), (2, 3), "image_mask must be"),
        (np.ones((6, 4)), np.ones(6, dtype=int), (2, 3), "image_mask must be"),
        (np.ones(6), np.ones(6, dtype=bool), (2, 3), r"\[n, dim\]"),
        (np.full((6, 4), np.nan), np.ones(6, dtype=bool), (2, 3), "NaN"),
        (np.ones((6, 4)), np.ones(6, dtype=bool), (0, 6), "positive"),
    ],
)
def test_bad_inputs_are_refused(
    vectors: np.ndarray, mask: np.ndarray, grid: tuple[int, int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        pool_rows_cols(vectors, mask, grid)


def test_blocks_must_fit_the_grid() -> None:
    with pytest.raises(ValueError, match="blocks"):
        pool_blocks(np.ones((6, 4)), np.ones(6, dtype=bool), (2, 3), (3, 1))


def test_the_page_schema_stamps_this_pooling() -> None:
    schema = IndexSchema.for_pages(name="page-colqwen", dim=128, model_id="vidore/colqwen2")
    pooled = schema.multivector[pooled_vector_name("page-colqwen")]
    assert pooled_vector_name("page-colqwen") == "page-colqwen-pooled"
    assert pooled.pooling == ROWS_COLS and pooled.pooled_from == "page-colqwen"
    assert schema.multivector["page-colqwen"].pooled_from is None


def test_query_centroids_find_the_directions_a_query_asks_about() -> None:
    """Rows drawn around 3 directions (a query about three things): 3 centroids land on those
    directions, whichever order the rows come in, and are unit length."""
    rng = np.random.default_rng(5)
    topics = unit_rows(rng, 3, dim=32)
    rows = np.concatenate([topic + 0.15 * rng.normal(size=(7, 32)) for topic in topics])
    centroids = query_centroids(rows, 3)
    assert centroids.shape == (3, 32) and centroids.dtype == np.float32
    assert np.allclose(np.linalg.norm(centroids, axis=1), 1.0, atol=1e-5)
    assert sorted(np.argmax(centroids @ topics.T, axis=1)) == [0, 1, 2]
    assert (np.max(centroids @ topics.T, axis=1) > 0.9).all()
    shuffled = query_centroids(rows[rng.permutation(len(rows))], 3)
    assert np.allclose(
        np.sort(shuffled @ topics.T, axis=None), np.sort(centroids @ topics.T, axis=None), atol=1e-5
    )


def test_query_centroids_are_deterministic_and_keep_short_queries_whole() -> None:
    rng = np.random.default_rng(6)
    rows = unit_rows(rng, 20)
    assert np.array_equal(query_centroids(rows, 3), query_centroids(rows.tolist(), 3))
    assert np.allclose(query_centroids(rows[:2] * 3.0, 3), rows[:2], atol=1e-6)
    with pytest.raises(ValueError, match="count"):
        query_centroids(rows, 0)
    with pytest.raises(ValueError, match="non-empty"):
        query_centroids(np.zeros((0, 8)), 3)
    with pytest.raises(ValueError, match="non-empty"):
        query_centroids(np.ones(8), 3)
