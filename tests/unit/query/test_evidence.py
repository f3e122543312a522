"""Evidence boxes land on the region a planted query came from, inside the page."""

from __future__ import annotations

import numpy as np
import pytest

from pagesight.query.evidence import evidence_boxes


def _page(rng: np.random.Generator, rows: int, cols: int, dim: int = 32) -> np.ndarray:
    base = rng.normal(size=(rows * cols, dim)).astype(np.float32)
    return base / np.linalg.norm(base, axis=1, keepdims=True)


def test_boxes_cover_the_planted_region_and_stay_on_the_page() -> None:
    rng = np.random.default_rng(0)
    rows, cols = 20, 15
    page = _page(rng, rows, cols)
    # Plant a query on a 3x4 block of patches at rows 12-14, cols 2-5.
    block = [r * cols + c for r in range(12, 15) for c in range(2, 6)]
    query = page[block] + 0.05 * rng.normal(size=(len(block), page.shape[1])).astype(np.float32)
    width, height = 612.0, 792.0
    boxes = evidence_boxes(query, page, (rows, cols), (width, height), top_fraction=0.04)
    assert 1 <= len(boxes) <= 3
    best = boxes[0]
    assert 0 <= best.x0 < best.x1 <= width and 0 <= best.y0 < best.y1 <= height
    cell_w, cell_h = width / cols, height / rows
    assert best.x0 >= 2 * cell_w - 1e-6 and best.x1 <= 6 * cell_w + 1e-6
    assert best.y0 >= 12 * cell_h - 1e-6 and best.y1 <= 15 * cell_h + 1e-6
    assert best.area >= 6 * cell_w * cell_h


def test_grid_mismatch_is_an_error() -> None:
    rng = np.random.default_rng(1)
    page = _page(rng, 4, 4)
    with pytest.raises(ValueError, match="5x4"):
        evidence_boxes(page[:2], page, (5, 4), (100.0, 100.0))
