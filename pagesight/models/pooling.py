"""First-stage vectors for ColPali-style page multi-vectors: mean pooling over the patch grid.

A ColQwen2 page is ~750 vectors of 128 (one per merged image patch, plus a few prompt tokens).
Scoring a query against every page's full set (MaxSim) costs ``query rows x page rows`` dot
products per page, so a large index first ranks pages on a much smaller *pooled* multi-vector
and reranks only the best few hundred on the full one
(pagesight.index.base.VectorStore.query_two_stage).

Qdrant's recipe for ColPali is mean pooling along the two axes of the page's patch grid: a page of
``rows x cols`` patches gives ``rows`` row means (each a horizontal band: a line of text, a table
row) and ``cols`` column means (a vertical band: a column of a layout), ``rows + cols`` vectors in
all (55 instead of 750 for a 25 x 30 grid). Bands keep *where* content sits along one axis,
which a single page mean loses, so a query token that matches one region of the page still
finds a pooled vector dominated by that region's patches.

:func:`pool_blocks` is the 2-D variant (means over rectangular blocks of patches), for when the
first stage must be smaller still: a 4 x 5 tiling gives 20 vectors, and the engine's first stage
ran ~3x faster on them than on 55 rows + columns. On bench/bench_maxsim.py's synthetic pages
(made of rectangular regions, which blocks fit well) it also recalled more, so ingestion uses
20 blocks (``pagesight.ingestion.ingest.first_stage_rows``). Whether that holds for real ColQwen2
pages, where text lines span the page width as row bands do, is not measured yet: re-check it on the
golden set once real weights are available.

Only image patches are pooled: prompt tokens (``<|im_start|>user ... Describe the image.``) carry
no layout and are the same on every page, so they would only pull every pooled vector towards a
shared direction. Every pooled vector is L2-normalised (the first stage is scored by cosine /
dot product like the full vectors); a band whose mean is exactly zero stays zero instead of NaN.

Pure numpy, no model imports: ingestion calls it on the embedder's output, the bench on
synthetic pages.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: The pooling method names stamped into an index schema (a change means a re-index).
ROWS_COLS = "mean-rows-cols"


def image_patch_grid(
    vectors: npt.ArrayLike, image_mask: npt.ArrayLike, grid: tuple[int, int]
) -> npt.NDArray[np.float32]:
    """The image-patch rows of ``vectors`` as a ``[rows, cols, dim]`` float32 grid.

    ``vectors`` is ``[n, dim]`` (any float dtype); ``image_mask`` is ``[n]`` bool, True for the
    rows that are image patches, which must be exactly ``rows * cols`` and in raster order
    (left to right, then top to bottom), as the vision tower emits them. Raises ValueError when
    the shapes disagree or a value is not finite, because a mis-sized grid would silently pool
    patches of different lines together.
    """
    matrix = np.asarray(vectors)
    mask = np.asarray(image_mask)
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise ValueError(f"vectors must be a non-empty [n, dim] matrix, got shape {matrix.shape}")
    if mask.dtype != np.bool_ or mask.shape != (matrix.shape[0],):
        raise ValueError(
            f"image_mask must be a bool array of shape ({matrix.shape[0]},), "
            f"got {mask.dtype} {mask.shape}"
        )
    rows, cols = grid
    if rows < 1 or cols < 1:
        raise ValueError(f"grid must have positive rows and cols, got {grid}")
    patches = int(mask.sum())
    if patches != rows * cols:
        raise ValueError(
            f"image_mask selects {patches} rows, but a {rows} x {cols} grid has {rows * cols}"
        )
    image = matrix[mask].astype(np.float32, copy=False)
    if not np.isfinite(image).all():
        raise ValueError("image patch vectors contain NaN or infinite values")
    return image.reshape(rows, cols, matrix.shape[1])


def pool_rows_cols(
    vectors: npt.ArrayLike, image_mask: npt.ArrayLike, grid: tuple[int, int]
) -> npt.NDArray[np.float32]:
    """Mean-pool a page's image patches per grid row and per grid column.

    Returns ``[rows + cols, dim]`` float32, L2-normalised: first the ``rows`` row means (top to
    bottom), then the ``cols`` column means (left to right). Non-image rows of ``vectors``
    (prompt tokens, ``image_mask`` False) are left out. See :func:`image_patch_grid` for the
    input contract.
    """
    patches = image_patch_grid(vectors, image_mask, grid)
    row_means = patches.mean(axis=1)
    col_means = patches.mean(axis=0)
    return l2_normalise(np.concatenate([row_means, col_means], axis=0))


def pool_blocks(
    vectors: npt.ArrayLike,
    image_mask: npt.ArrayLike,
    grid: tuple[int, int],
    blocks: tuple[int, int],
) -> npt.NDArray[np.float32]:
    """Mean-pool a page's image patches over a ``blocks[0] x blocks[1]`` tiling of its grid.

    Each block is a near-equal rectangle of patches (``np.array_split`` boundaries, so a grid
    that does not divide evenly gets blocks differing by one line). Returns
    ``[blocks[0] * blocks[1], dim]`` float32, L2-normalised, blocks in raster order. Fewer pooled
    vectors than :func:`pool_rows_cols` make the first stage proportionally cheaper.
    """
    patches = image_patch_grid(vectors, image_mask, grid)
    block_rows, block_cols = blocks
    rows, cols = grid
    if not (1 <= block_rows <= rows and 1 <= block_cols <= cols):
        raise ValueError(f"blocks {blocks} must be between (1, 1) and the grid {grid}")
    means = [
        band_block.mean(axis=(0, 1))
        for band in np.array_split(patches, block_rows, axis=0)
        for band_block in np.array_split(band, block_cols, axis=1)
    ]
    return l2_normalise(np.stack(means))


def l2_normalise(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length; an all-zero row stays zero (no division by zero, no NaN)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    safe = np.where(norms > 0, norms, 1.0).astype(np.float32)
    return (matrix / safe).astype(np.float32, copy=False)


def query_centroids(
    rows: npt.ArrayLike, count: int, iterations: int = 10
) -> npt.NDArray[np.float32]:
    """``count`` k-means centroids of a query's rows (cosine), L2-normalised: a query summary.

    Stage 0 of the two-stage search (``VectorStore.query_two_stage(coarse_query=...)``) scores
    every page's pooled rows against these few directions instead of all ~20 query rows: the
    scan over the whole collection gets ``rows / count`` times cheaper, and the full query
    still ranks the pages stage 0 keeps. A query's rows cluster by the content they ask for
    (a few words about one table, one chart), so a handful of centroids keep its main
    directions; bench/bench_maxsim.py measures the recall this costs.

    Deterministic (no random start, so one query always keeps the same pages): the centroids
    start as the means of ``count`` contiguous runs of rows (a query's tokens come in reading
    order, so a run is roughly a phrase), then ``iterations`` Lloyd steps assign rows by cosine.
    On bench_maxsim.py's 10k pages (3 centroids, 1,000 pages kept, prefetch 50) that start
    recalled 0.988 of the exact top 10; farthest-point seeding, which starts on outlier rows,
    0.968, and a seeded random start 0.984. ``count`` at least the number of rows returns the
    rows themselves, normalised.
    """
    matrix = np.asarray(rows, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ValueError(f"rows must be a non-empty [n, dim] matrix, got shape {matrix.shape}")
    matrix = l2_normalise(matrix)
    if count < 1:
        raise ValueError(f"count must be positive, got {count}")
    if count >= matrix.shape[0]:
        return matrix
    centroids = l2_normalise(np.stack([run.mean(axis=0) for run in np.array_split(matrix, count)]))
    for _ in range(iterations):
        assigned = np.argmax(matrix @ centroids.T, axis=1)
        for j in range(count):
            members = matrix[assigned == j]
            if len(members):
                centroids[j] = members.mean(axis=0)
        centroids = l2_normalise(centroids)
    return centroids


def pool_tokens(vectors: npt.ArrayLike, factor: int) -> npt.NDArray[np.float32]:
    """Hierarchical token pooling: a page's rows merged into ``ceil(n / factor)`` clusters of
    near-duplicate vectors (Ward linkage), each replaced by its L2-normalised mean.

    The "hierarchical pooling" of Clavié et al. (2024) for ColPali-style pages, where runs of
    white margin or repeated body text give many near-identical patches; ``factor`` 3 kept
    97.8 % of their retrieval quality. Pooled rows lose which patch sat where, so a store of
    pooled rows cannot feed the evidence boxes (``pagesight.query.evidence``), and on
    bench_maxsim.py's synthetic pages, whose patches carry independent noise, MaxSim on pooled
    rows recalled only 0.93 (factor 2) and 0.91 (factors 3, 4) of the exact top 10 over 800
    pages (bench/maxsim_token_pooling.py), so no page layout stores pooled rows; pooling
    quality on real pages is unmeasured here.
    """
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ValueError(f"vectors must be a non-empty [n, dim] matrix, got shape {matrix.shape}")
    if factor < 1:
        raise ValueError(f"factor must be positive, got {factor}")
    if not np.isfinite(matrix).all():
        raise ValueError("vectors contain NaN or infinite values")
    clusters = -(-matrix.shape[0] // factor)
    if factor == 1 or matrix.shape[0] < 2:
        return l2_normalise(matrix.copy())
    from scipy.cluster.hierarchy import fcluster, linkage  # only the pooling bench needs it

    labels = fcluster(linkage(matrix, method="ward"), clusters, criterion="maxclust")
    means = [matrix[labels == label].mean(axis=0) for label in np.unique(labels)]
    return l2_normalise(np.stack(means))
