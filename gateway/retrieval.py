"""Candidate retrieval over chunks: routes, fusion, and the collapse from chunks to pages.

Routes (DESIGN.md section 4): ``keyword`` = BM25 over chunks; ``text`` = dense + BM25 fused by
weighted RRF; ``auto`` picks one per query. Access filters (tenant, ACL, validity) travel inside
every index query. A dense model that does not cover the query's language (all-MiniLM is
English-only) is skipped for that query rather than allowed to add noise, and the trace says so.
"""

from __future__ import annotations

import re
import time
import uuid

from core.protocols import SparseEncoder, TextEmbedder
from core.settings import RetrievalOptions
from core.types import (
    AccessFilter,
    BBox,
    PageHit,
    RetrievalTrace,
    RouteName,
    RouteTrace,
    SearchResult,
)
from gateway.fusion import weighted_rrf
from index.base import ScoredPoint, VectorStore
from ingestion.ingest import DENSE_VECTOR, SPARSE_VECTOR
from models.text import language_of

# Identifiers, codes and quoted strings are found by exact terms, not by meaning.
_CODE_TOKEN = re.compile(
    r"\b(?=[A-Za-z0-9_./-]*\d)(?=[A-Za-z0-9_./-]*[A-Za-z])[A-Za-z0-9_./-]{4,}\b"
)
_QUOTED = re.compile(r"\"[^\"]{2,}\"|「[^」]{2,}」")


def choose_text_route(query: str) -> RouteName:
    """``auto`` for the text side: codes, ids and quoted phrases lean keyword; the rest text."""
    words = query.split()
    if _QUOTED.search(query) or (_CODE_TOKEN.search(query) and len(words) <= 4):
        return RouteName.KEYWORD
    return RouteName.TEXT


class TextRetriever:
    """Keyword and dense+keyword retrieval over the chunk index, returning ranked pages."""

    def __init__(
        self,
        store: VectorStore,
        embedder: TextEmbedder,
        sparse: SparseEncoder,
        options: RetrievalOptions | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.sparse = sparse
        self.options = options or RetrievalOptions()

    def search(
        self,
        query: str,
        access: AccessFilter,
        route: RouteName = RouteName.AUTO,
        top_k: int = 10,
    ) -> SearchResult:
        started = time.perf_counter()
        chosen = choose_text_route(query) if route == RouteName.AUTO else route
        if chosen not in (RouteName.TEXT, RouteName.KEYWORD):
            raise ValueError(f"route {chosen.value!r} is not served by the text retriever")
        traces: list[RouteTrace] = []
        rankings: dict[str, list[str]] = {}
        points: dict[str, ScoredPoint] = {}

        def run(name: str, hits: list[ScoredPoint]) -> None:
            rankings[name] = [h.id for h in hits]
            for h in hits:
                points.setdefault(h.id, h)
            traces.append(
                RouteTrace(
                    route=name,
                    weight=self.options.weights.get(name, 1.0),
                    candidates=[(h.id, h.score) for h in hits],
                )
            )

        limit = self.options.candidates
        run(
            "keyword",
            self.store.query_sparse(SPARSE_VECTOR, self.sparse.encode_query(query), access, limit),
        )
        if chosen == RouteName.TEXT:
            skip = self._dense_skip_reason(query)
            if skip:
                traces.append(RouteTrace(route="dense", weight=0.0, skipped=skip))
            else:
                vector = self.embedder.embed_query(query).tolist()
                run("dense", self.store.query_dense(DENSE_VECTOR, vector, access, limit))
        route_scores = {t.route: dict(t.candidates) for t in traces if not t.skipped}
        fused = weighted_rrf(rankings, self.options.weights, self.options.rrf_k)
        hits = self._pages(fused, points, route_scores, top_k)
        trace = RetrievalTrace(
            trace_id=uuid.uuid4().hex,
            query=query,
            requested_route=route,
            route=chosen,
            routes=traces,
            fused=fused[: max(top_k * 5, 50)],
            index_version=self.store.schema.fingerprint(),
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )
        return SearchResult(hits=hits, trace=trace)

    def _dense_skip_reason(self, query: str) -> str | None:
        supported = self.embedder.languages
        language = language_of(query)
        if supported is None or language is None or language in supported:
            return None
        return f"{self.embedder.model_id} does not cover language {language!r}"

    def _pages(
        self,
        fused: list[tuple[str, float]],
        points: dict[str, ScoredPoint],
        route_scores: dict[str, dict[str, float]],
        top_k: int,
    ) -> list[PageHit]:
        """Collapse ranked chunks to pages: a page ranks where its best chunk ranks."""
        pages: dict[tuple[str, int], PageHit] = {}
        for point_id, score in fused:
            payload = points[point_id].payload
            for page_number in payload.get("page_numbers") or [1]:
                key = (payload["doc_id"], int(page_number))
                hit = pages.get(key)
                if hit is None:
                    if len(pages) >= top_k:
                        continue
                    hit = pages[key] = PageHit(
                        doc_id=payload["doc_id"],
                        page_number=int(page_number),
                        rank=len(pages) + 1,
                        score=score,
                        route_scores={
                            route: scores[point_id]
                            for route, scores in route_scores.items()
                            if point_id in scores
                        },
                        snippet=_snippet(payload.get("text", ""), self.options.snippet_chars),
                        title=payload.get("title"),
                        source_uri=payload.get("source_uri"),
                    )
                hit.chunk_ids.append(payload.get("chunk_id", point_id))
                hit.element_ids.extend(payload.get("element_ids", []))
                hit.kinds.extend(k for k in payload.get("kinds", []) if k not in hit.kinds)
                hit.bboxes.extend(
                    BBox.of(box) for page, box in payload.get("bboxes", []) if page == page_number
                )
        return sorted(pages.values(), key=lambda h: h.rank)


def _snippet(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"
