"""Candidate retrieval: routes, page-level fusion, evidence.

Routes (DESIGN.md section 4): ``keyword`` = BM25 over chunks; ``text`` = dense + BM25;
``visual`` = ColQwen2 page MaxSim (two-stage); ``hybrid`` = visual and text; ``auto`` picks one
per query. Each route yields a ranking of pages (chunk routes: a page ranks where its best chunk
ranks), and the rankings are fused by weighted reciprocal rank fusion. Every fused page then
carries its best chunks (snippet, element ids, boxes) — visual-only pages are mapped back to
their chunks too — and, for visual hits, evidence boxes where the page matched the query.

Access filters (tenant, ACL, validity) travel inside every index query. A dense model that does
not cover the query's language (all-MiniLM is English-only) is skipped for that query rather
than allowed to add noise, and the trace says so.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np

from core.errors import ErrorCode, PageSightError, Stage
from core.protocols import PageEmbedder, SparseEncoder, TextEmbedder
from core.settings import RetrievalOptions
from core.types import (
    AccessFilter,
    BBox,
    PageHit,
    PageKey,
    RetrievalTrace,
    RouteName,
    RouteTrace,
    SearchResult,
)
from index.base import ScoredPoint, VectorStore
from index.vectors import (
    DENSE_VECTOR,
    PAGE_POOLED_VECTOR,
    PAGE_VECTOR,
    SPARSE_VECTOR,
)
from models.pooling import query_centroids
from models.text import language_of
from query.evidence import evidence_boxes
from query.fusion import weighted_rrf_ranks
from query.routing import choose_route

#: What fusion needs of a chunk candidate; texts, boxes and element ids are fetched afterwards,
#: only for the chunks that end up on a returned page.
CANDIDATE_FIELDS = ("doc_id", "page_numbers", "chunk_id", "title", "source_uri")


class Retriever:
    """All routes over the chunk index and (when configured) the page index."""

    def __init__(
        self,
        chunk_store: VectorStore,
        embedder: TextEmbedder,
        sparse: SparseEncoder,
        options: RetrievalOptions | None = None,
        page_store: VectorStore | None = None,
        page_embedder: PageEmbedder | None = None,
    ) -> None:
        self.chunk_store = chunk_store
        self.embedder = embedder
        self.sparse = sparse
        self.options = options or RetrievalOptions()
        self.page_store = page_store
        self.page_embedder = page_embedder

    @property
    def visual_available(self) -> bool:
        return self.page_store is not None and self.page_embedder is not None

    def search(
        self,
        query: str,
        access: AccessFilter,
        route: RouteName = RouteName.AUTO,
        top_k: int = 10,
        trace_id: str | None = None,
    ) -> SearchResult:
        """The best ``top_k`` pages for ``query`` that ``access`` may see, and the trace
        (under ``trace_id`` when the caller has one, e.g. the HTTP request's)."""
        started = time.perf_counter()
        stages_ms: dict[str, float] = {}
        chosen = choose_route(query, self.visual_available) if route == RouteName.AUTO else route
        if chosen in (RouteName.VISUAL, RouteName.HYBRID) and not self.visual_available:
            raise PageSightError(
                ErrorCode.ROUTE_UNAVAILABLE,
                Stage.QUERY,
                f"route {chosen.value!r} needs a page model: set PAGESIGHT_VISUAL__MODEL to a "
                "local ColQwen2 directory (and re-ingest), or use route 'text'",
            )
        traces: list[RouteTrace] = []
        ranks: dict[str, dict[str, int]] = {}
        weights: dict[str, float] = {}
        chunks: dict[str, dict[str, Any]] = {}  # candidate id -> chunk payload
        visual_pages: dict[PageKey, ScoredPoint] = {}
        query_rows: np.ndarray | None = None
        limit = self.options.candidates

        def record(name: str, model_id: str, hits: list[ScoredPoint], since: float) -> None:
            stages_ms[name] = round((time.perf_counter() - since) * 1000, 2)
            weights[name] = self.options.model_weights.get(
                model_id, self.options.weights.get(name, 1.0)
            )
            traces.append(
                RouteTrace(
                    route=name, weight=weights[name], candidates=[(h.id, h.score) for h in hits]
                )
            )

        if chosen in (RouteName.KEYWORD, RouteName.TEXT, RouteName.HYBRID):
            since = time.perf_counter()
            sparse_query = self.sparse.encode_query(query)
            hits = self.chunk_store.query_sparse(
                SPARSE_VECTOR, sparse_query, access, limit, CANDIDATE_FIELDS
            )
            record("keyword", self.sparse.model_id, hits, since)
            ranks["keyword"] = {h.id: rank for rank, h in enumerate(hits, start=1)}
            chunks.update((h.id, h.payload) for h in hits)
        if chosen in (RouteName.TEXT, RouteName.HYBRID):
            skip = self._dense_skip_reason(query)
            if skip:
                traces.append(RouteTrace(route="dense", weight=0.0, skipped=skip))
            else:
                since = time.perf_counter()
                vector = self.embedder.embed_query(query).tolist()
                hits = self.chunk_store.query_dense(
                    DENSE_VECTOR, vector, access, limit, CANDIDATE_FIELDS
                )
                record("dense", self.embedder.model_id, hits, since)
                ranks["dense"] = {h.id: rank for rank, h in enumerate(hits, start=1)}
                chunks.update((h.id, h.payload) for h in hits)
        if chosen in (RouteName.VISUAL, RouteName.HYBRID):
            assert self.page_store is not None and self.page_embedder is not None
            since = time.perf_counter()
            query_rows = self.page_embedder.embed_queries([query])[0]
            prefetch = self.options.visual_prefetch
            hits = self.page_store.query_two_stage(
                PAGE_VECTOR,
                PAGE_POOLED_VECTOR,
                query_rows.tolist(),
                access,
                limit,
                prefetch=prefetch,
                coarse_query=query_centroids(
                    query_rows, self.options.visual_coarse_centroids
                ).tolist(),
                coarse_limit=max(self.options.visual_coarse, prefetch),
            )
            record("visual", self.page_embedder.model_id, hits, since)
            ranks["visual"] = self._visual_ranks(hits, chunks, visual_pages)

        since = time.perf_counter()
        fused = weighted_rrf_ranks(ranks, weights, self.options.rrf_k)
        hits_out = self._pages(fused, chunks, visual_pages, ranks, traces, access, top_k)
        stages_ms["fuse"] = round((time.perf_counter() - since) * 1000, 2)
        if query_rows is not None:
            since = time.perf_counter()
            for hit in hits_out:
                point = visual_pages.get((hit.doc_id, hit.page_number))
                if point is not None:
                    hit.bboxes = self._evidence(point, query_rows)
            stages_ms["evidence"] = round((time.perf_counter() - since) * 1000, 2)
        trace = RetrievalTrace(
            trace_id=trace_id or uuid.uuid4().hex,
            query=query,
            requested_route=route,
            route=chosen,
            routes=traces,
            fused=fused[: max(top_k * 5, 50)],
            index_version=self.chunk_store.collection,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            stages_ms=stages_ms,
            doc_ids=sorted(
                {str(p["doc_id"]) for p in chunks.values() if "doc_id" in p}
                | {doc_id for doc_id, _ in visual_pages}
            ),
        )
        return SearchResult(hits=hits_out, trace=trace)

    @staticmethod
    def _visual_ranks(
        hits: list[ScoredPoint],
        chunks: dict[str, dict[str, Any]],
        visual_pages: dict[PageKey, ScoredPoint],
    ) -> dict[str, int]:
        """Map ranked pages back to chunks: each text candidate on a hit page takes the page's
        rank; a page no text route found stands in as ``page:<doc>#<n>``."""
        page_rank: dict[PageKey, int] = {}
        for rank, hit in enumerate(hits, start=1):
            key = (hit.payload["doc_id"], int(hit.payload["page_number"]))
            page_rank.setdefault(key, rank)
            visual_pages.setdefault(key, hit)
        ranks: dict[str, int] = {}
        for chunk_id, payload in chunks.items():
            pages_of_chunk = [(payload["doc_id"], int(n)) for n in payload.get("page_numbers", [])]
            found = [page_rank[p] for p in pages_of_chunk if p in page_rank]
            if found:
                ranks[chunk_id] = min(found)
        for key, rank in page_rank.items():
            ranks[f"page:{key[0]}#{key[1]}"] = rank
        return ranks

    def _pages(
        self,
        fused: list[tuple[str, float]],
        chunks: dict[str, dict[str, Any]],
        visual_pages: dict[PageKey, ScoredPoint],
        ranks: dict[str, dict[str, int]],
        traces: list[RouteTrace],
        access: AccessFilter,
        top_k: int,
    ) -> list[PageHit]:
        """Collapse fused candidates to pages: a page ranks where its best candidate ranks."""
        raw = {t.route: dict(t.candidates) for t in traces if not t.skipped}
        out: dict[PageKey, PageHit] = {}
        shown: list[tuple[PageHit, str, int]] = []  # (page, chunk candidate, page number)
        for item, score in fused:
            if item.startswith("page:"):
                doc_id, number = item[len("page:") :].rsplit("#", 1)
                keys = [(doc_id, int(number))]
                payload: dict[str, Any] | None = None
            else:
                payload = chunks[item]
                keys = [(payload["doc_id"], int(n)) for n in payload.get("page_numbers") or [1]]
            for key in keys:
                hit = out.get(key)
                if hit is None:
                    if len(out) >= top_k:
                        continue
                    visual = visual_pages.get(key)
                    hit = out[key] = PageHit(
                        doc_id=key[0],
                        page_number=key[1],
                        rank=len(out) + 1,
                        score=score,
                        title=(payload or (visual.payload if visual else {})).get("title"),
                        source_uri=(payload or (visual.payload if visual else {})).get(
                            "source_uri"
                        ),
                    )
                    if visual is not None:
                        hit.route_scores["visual"] = raw["visual"][visual.id]
                if payload is None:
                    continue
                for route in ("keyword", "dense"):
                    if item in ranks.get(route, {}):
                        hit.route_scores.setdefault(route, raw[route][item])
                shown.append((hit, item, key[1]))
        full = self.chunk_store.retrieve([item for _, item, _ in shown], access) if shown else {}
        for hit, item, page_number in shown:
            self._add_chunk(hit, full.get(item, chunks[item]), page_number)
        for key, hit in out.items():
            if not hit.chunk_ids:  # a page only the visual route found: map it to its chunks
                for payload in self._chunks_of_page(key, access):
                    self._add_chunk(hit, payload, key[1])
        return sorted(out.values(), key=lambda h: h.rank)

    def _add_chunk(self, hit: PageHit, payload: dict[str, Any], page_number: int) -> None:
        if not hit.chunk_ids:
            hit.snippet = _snippet(payload.get("text", ""), self.options.snippet_chars)
            hit.bboxes = [
                BBox.of(box) for page, box in payload.get("bboxes", []) if page == page_number
            ]
        hit.chunk_ids.append(payload.get("chunk_id", ""))
        hit.element_ids.extend(payload.get("element_ids", []))
        hit.kinds.extend(k for k in payload.get("kinds", []) if k not in hit.kinds)

    def _dense_skip_reason(self, query: str) -> str | None:
        supported = self.embedder.languages
        language = language_of(query)
        if supported is None or language is None or language in supported:
            return None
        return f"{self.embedder.model_id} does not cover language {language!r}"

    def _chunks_of_page(self, key: PageKey, access: AccessFilter) -> list[dict[str, Any]]:
        """A visual-only hit's text: the chunks on that page, in reading order."""
        points = self.chunk_store.points_of_document(access.tenant, key[0])
        on_page = [p.payload for p in points if key[1] in (p.payload.get("page_numbers") or [])]
        return sorted(on_page, key=lambda payload: payload.get("seq", 0))

    def _evidence(self, point: ScoredPoint, query_rows: np.ndarray) -> list[BBox]:
        assert self.page_store is not None
        payload = point.payload
        stored = self.page_store.multivectors([point.id], PAGE_VECTOR).get(point.id)
        if stored is None:
            return []
        start, count = payload["image_rows"]
        rows, cols = payload["grid"]
        patches = np.asarray(stored[start : start + count], dtype=np.float32)
        return evidence_boxes(
            query_rows,
            patches,
            (rows, cols),
            (payload["width"], payload["height"]),
            max_boxes=self.options.evidence_boxes,
        )


def _snippet(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"
