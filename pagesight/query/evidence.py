"""Evidence boxes: where on a page a visual hit matched the query.

ColQwen2 scores a page by MaxSim: each query token picks its most similar page patch. The same
similarities say which patches carried the match. We score each image patch by its best
similarity to any query token, keep the strongest patches, join neighbouring ones into
connected regions on the patch grid, and return the strongest regions as boxes in PDF points.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pagesight.core.types import BBox


def patch_relevance(
    query: npt.NDArray[np.float32], patches: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Per patch: its best similarity to any query token ([n_patches])."""
    sims = patches.astype(np.float32) @ query.astype(np.float32).T
    return np.asarray(sims.max(axis=1), dtype=np.float32)


def _components(mask: npt.NDArray[np.bool_]) -> list[list[tuple[int, int]]]:
    """4-connected components of a boolean grid, each as a list of (row, col) cells."""
    rows, cols = mask.shape
    seen = np.zeros_like(mask)
    out: list[list[tuple[int, int]]] = []
    for r0 in range(rows):
        for c0 in range(cols):
            if not mask[r0, c0] or seen[r0, c0]:
                continue
            stack = [(r0, c0)]
            seen[r0, c0] = True
            cells = []
            while stack:
                r, c = stack.pop()
                cells.append((r, c))
                for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                    if 0 <= nr < rows and 0 <= nc < cols and mask[nr, nc] and not seen[nr, nc]:
                        seen[nr, nc] = True
                        stack.append((nr, nc))
            out.append(cells)
    return out


def evidence_boxes(
    query: npt.NDArray[np.float32],
    patches: npt.NDArray[np.float32],
    grid: tuple[int, int],
    page_size: tuple[float, float],
    max_boxes: int = 3,
    top_fraction: float = 0.03,
) -> list[BBox]:
    """Up to ``max_boxes`` boxes (PDF points) around the patches that best match ``query``.

    ``patches`` are the page's image-patch rows in raster order over ``grid`` = (rows, cols);
    each cell covers an equal share of the page (the model's processor resizes the whole page).
    The strongest ``top_fraction`` of patches (at least 2) seed the regions; regions rank by
    their summed relevance.
    """
    rows, cols = grid
    if rows * cols != len(patches) or len(patches) == 0:
        raise ValueError(f"{len(patches)} patch rows do not fill a {rows}x{cols} grid")
    relevance = patch_relevance(query, patches).reshape(rows, cols)
    keep = max(2, round(top_fraction * rows * cols))
    threshold = np.partition(relevance.ravel(), -keep)[-keep]
    components = _components(relevance >= threshold)
    ranked = sorted(components, key=lambda cells: -sum(relevance[r, c] for r, c in cells))
    width, height = page_size
    cell_w, cell_h = width / cols, height / rows
    boxes = []
    for cells in ranked[:max_boxes]:
        r_min = min(r for r, _ in cells)
        r_max = max(r for r, _ in cells)
        c_min = min(c for _, c in cells)
        c_max = max(c for _, c in cells)
        boxes.append(
            BBox(
                x0=c_min * cell_w,
                y0=r_min * cell_h,
                x1=min(width, (c_max + 1) * cell_w),
                y1=min(height, (r_max + 1) * cell_h),
            )
        )
    return boxes
