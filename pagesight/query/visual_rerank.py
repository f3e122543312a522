"""Visual rerank: exact ColQwen2 MaxSim for candidate pages, whichever route found them.

The visual route already ends in exact MaxSim, but answer candidates also come from the text
routes (BM25, dense), whose pages were never looked at: a chart page that BM25 found through its
caption ranks only by its caption. :class:`VisualPageReranker` scores a given list of candidate
pages by exact MaxSim of the query against each page's stored multi-vector (the sum over query
tokens of the best page row: in float32 numpy, or by the index over just those pages), and
:func:`fuse_visual_ranking` folds that page ranking into a passage ranking by weighted
reciprocal rank fusion, so passages on visually strong pages move up.

Candidates are known by page (doc_id, page_number), but a page's point id also needs the
document's version (``pagesight.ingestion.ingest``: tenant + doc_id + version + page). Rather than
derive ids from a version the caller may not have (or have stale, mid-replace), the reranker asks
the page index which of the candidates' pages the caller may see
(:meth:`pagesight.index.base.VectorStore.visible_points`, one access-filtered read narrowed to the
candidates' documents), then reads or scores only those pages, access-filtered again. Another
tenant's page, a page outside the caller's ACL or an expired one is never read nor scored.

Pages without a visible stored vector (documents indexed before visual indexing was on, pages
without an image, invisible pages) keep their relative order after the scored ones, with score
``None``: the reranker reorders what it is given and never drops a candidate.

When visual indexing is off the caller simply does not construct a reranker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt

from pagesight.core.protocols import PageEmbedder
from pagesight.core.types import AccessFilter, PageKey, PageScore
from pagesight.index.base import VectorStore
from pagesight.index.vectors import PAGE_VECTOR
from pagesight.query.fusion import weighted_rrf_ranks

T = TypeVar("T")

#: One reranked page: its key and exact MaxSim, or ``None`` when it has no visible vector.

#: Payload fields the page lookup reads: enough to map a point back to its page.
_PAGE_FIELDS = ("doc_id", "page_number")

#: Weight of the visual ranking against the text ranking (1.0) in :func:`fuse_visual_ranking`.
#: The retriever's default visual route weight: with a model that knows nothing the visual
#: vote costs little, with a good one it gains (tests/unit/query/test_fusion_quality.py).
DEFAULT_VISUAL_WEIGHT = 0.7


class VisualPageReranker:
    """Scores candidate pages by exact MaxSim of a query against their stored page vectors.

    ``page_store`` is the page collection (``pagesight.index.vectors.PAGE_COLLECTION``) and
    ``page_embedder`` the model that wrote it; ``vector_name`` is the full (not pooled)
    multi-vector. Construction checks that the two agree and reads nothing.

    ``scoring``: ``"numpy"`` reads the pages' rows
    (:meth:`~pagesight.index.base.VectorStore.vectors_of`) and computes MaxSim here in float32
    (:func:`maxsim`); ``"index"`` has the index compute the same exact MaxSim over just those pages
    (``query_multivector(ids=...)``) and ships back scores instead of rows. Both give the index's
    scores (to float16-storage rounding, ~1e-4); on the embedded engine ``"index"`` is far cheaper,
    because reading rows back converts every value into a Python float (30 pages of 790 x 128 rows,
    two cores: ~7 ms against ~500 ms).
    """

    def __init__(
        self,
        page_store: VectorStore,
        page_embedder: PageEmbedder,
        vector_name: str = PAGE_VECTOR,
        scoring: Literal["numpy", "index"] = "numpy",
    ) -> None:
        spec = page_store.schema.multivector.get(vector_name)
        if spec is None or spec.pooled_from is not None:
            raise ValueError(
                f"index {page_store.collection} has no full multi-vector {vector_name!r} "
                f"(it has {sorted(page_store.schema.multivector)})"
            )
        if spec.dim != page_embedder.dim:
            raise ValueError(
                f"page embedder {page_embedder.model_id!r} makes {page_embedder.dim}-d rows, "
                f"but {vector_name!r} of index {page_store.collection} holds {spec.dim}-d rows"
            )
        if spec.distance == "euclid":
            raise ValueError(f"MaxSim over euclidean distances ({vector_name!r}) is not supported")
        self.page_store = page_store
        self.page_embedder = page_embedder
        self.vector_name = vector_name
        self.scoring = scoring
        # The index scores cosine multi-vectors on unit rows (it normalises both sides); doing
        # the same to the query keeps our score equal to its score, whatever the embedder does.
        self._unit_query = spec.distance == "cosine"

    @property
    def model_id(self) -> str:
        """Names the scorer in traces."""
        return self.page_embedder.model_id

    def rerank(
        self,
        query: str,
        pages: Iterable[PageKey],
        access: AccessFilter,
        *,
        query_rows: npt.NDArray[np.float32] | None = None,
    ) -> list[PageScore]:
        """``(page, MaxSim)`` for every distinct candidate page, best first.

        Equal scores keep candidate order; pages without a visible vector follow, in candidate
        order, with score ``None``. ``query_rows``: the query's page-embedder rows when the
        caller already has them (the visual route embedded the same query); otherwise the
        query is embedded once here, and only if some candidate page is in the index.
        """
        candidates = list(dict.fromkeys((str(doc_id), int(number)) for doc_id, number in pages))
        if not candidates:
            return []
        scores = self.page_scores(query, candidates, access, query_rows=query_rows)
        position = {page: i for i, page in enumerate(candidates)}
        scored = sorted(scores, key=lambda page: (-scores[page], position[page]))
        return [(page, scores[page]) for page in scored] + [
            (page, None) for page in candidates if page not in scores
        ]

    def page_scores(
        self,
        query: str,
        pages: Sequence[PageKey],
        access: AccessFilter,
        *,
        query_rows: npt.NDArray[np.float32] | None = None,
    ) -> dict[PageKey, float]:
        """Exact MaxSim of the query for each of ``pages`` that has a vector ``access`` may
        see; absent pages have none. A page stored under two versions (a replace caught
        between writing the new points and deleting the old) takes the better score."""
        point_pages = self._point_pages(pages, access)
        if not point_pages:
            return {}
        if query_rows is None:
            query_rows = self.page_embedder.embed_queries([query])[0]
        rows = self._query_matrix(query_rows)
        scoped = self._narrowed(access, pages)
        ids = list(point_pages)
        point_scores: dict[str, float]
        if self.scoring == "index":
            hits = self.page_store.query_multivector(
                self.vector_name, rows.tolist(), scoped, limit=len(ids), ids=ids
            )
            point_scores = {hit.id: hit.score for hit in hits}
        else:
            vectors = self.page_store.vectors_of(ids, self.vector_name, scoped)
            read = list(vectors)
            scores = maxsim(rows, [vectors[i] for i in read]).tolist()
            point_scores = dict(zip(read, scores, strict=True))
        out: dict[PageKey, float] = {}
        for point, score in point_scores.items():
            page = point_pages[point]
            out[page] = max(score, out.get(page, score))
        return out

    def _point_pages(self, pages: Sequence[PageKey], access: AccessFilter) -> dict[str, PageKey]:
        """Point id -> page for the candidates' page points that ``access`` may see."""
        wanted = set(pages)
        found = self.page_store.visible_points(self._narrowed(access, pages), _PAGE_FIELDS)
        out: dict[str, PageKey] = {}
        for point in found:
            doc_id, number = point.payload.get("doc_id"), point.payload.get("page_number")
            if not isinstance(doc_id, str) or not isinstance(number, int):
                continue
            if (doc_id, number) in wanted:
                out[point.id] = (doc_id, number)
        return out

    @staticmethod
    def _narrowed(access: AccessFilter, pages: Sequence[PageKey]) -> AccessFilter:
        """``access`` limited to the candidates' documents (and still to its own doc_ids)."""
        docs = sorted({doc_id for doc_id, _ in pages})
        if access.doc_ids is not None:
            allowed = set(access.doc_ids)
            docs = [doc_id for doc_id in docs if doc_id in allowed]
        return access.model_copy(update={"doc_ids": docs})

    def _query_matrix(self, query_rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        rows = np.asarray(query_rows, dtype=np.float32)
        dim = self.page_embedder.dim
        if rows.ndim != 2 or rows.shape[0] == 0 or rows.shape[1] != dim:
            raise ValueError(f"query rows must be a [tokens, {dim}] matrix, got {rows.shape}")
        if not np.isfinite(rows).all():
            raise ValueError("query rows contain NaN or infinite values")
        if self._unit_query:
            norms = np.linalg.norm(rows, axis=1, keepdims=True)
            rows = (rows / np.maximum(norms, np.float32(1e-30))).astype(np.float32, copy=False)
        return rows


def maxsim(
    query: npt.NDArray[np.float32], pages: Sequence[npt.NDArray[np.float32]]
) -> npt.NDArray[np.float32]:
    """Late-interaction score of ``query`` [m, d] against each page [n_i, d], in float32:
    the sum over query rows of the best dot product with any of the page's rows.

    One matrix product over every page's rows at once (a single BLAS call instead of one per
    page), then a per-page maximum over each page's run of columns.
    """
    if not pages:
        return np.zeros(0, dtype=np.float32)
    stacked = np.concatenate(pages, axis=0).astype(np.float32, copy=False)
    starts = np.cumsum([0, *(len(page) for page in pages[:-1])])
    similarities = query @ stacked.T  # [m, sum(n_i)]
    best = np.maximum.reduceat(similarities, starts, axis=1)  # [m, pages]
    scores: npt.NDArray[np.float32] = best.sum(axis=0, dtype=np.float32)
    return scores


def fuse_visual_ranking(
    ranked: Sequence[T],
    page_of: Callable[[T], PageKey],
    visual: Sequence[PageScore],
    *,
    visual_weight: float = DEFAULT_VISUAL_WEIGHT,
    text_weight: float = 1.0,
    k: float = 60.0,
) -> list[tuple[T, float]]:
    """``ranked`` (passages, best first) reordered by weighted RRF with the page ranking.

    Every passage takes its text rank and its page's visual rank (passages map to pages by
    ``page_of``, e.g. ``lambda p: (p.doc_id, p.page_number)``), the way the retriever fuses a
    page-level route with chunk-level ones (:func:`pagesight.query.fusion.weighted_rrf_ranks`).
    Pages :meth:`VisualPageReranker.rerank` could not score (``None``) share the rank after
    the last scored page: a missing vector says nothing about relevance, so it should cost
    no more than being the visually weakest page, not the whole visual vote.

    Returns every passage once with its fused score (on the RRF scale, not a probability),
    best first; ties keep ``ranked`` order. With ``k`` = 60 ranks barely differ in weight,
    so a passage passes a text neighbour only when its page's visual lead, times
    ``visual_weight``, exceeds its text deficit; a smaller ``k`` lets the visual vote weigh more.
    """
    if text_weight <= 0 or visual_weight < 0:
        raise ValueError("text_weight must be positive and visual_weight not negative")
    page_rank: dict[PageKey, int] = {}
    for page, score in visual:
        if score is not None:
            page_rank.setdefault(page, len(page_rank) + 1)
    unscored_rank = len(page_rank) + 1
    text_ranks = {str(i): i + 1 for i in range(len(ranked))}
    visual_ranks = {
        str(i): page_rank.get(page_of(item), unscored_rank) for i, item in enumerate(ranked)
    }
    fused = weighted_rrf_ranks(
        {"text": text_ranks, "visual": visual_ranks},
        {"text": text_weight, "visual": visual_weight},
        k,
    )
    return [(ranked[int(i)], score) for i, score in fused]
