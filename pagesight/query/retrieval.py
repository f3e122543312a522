"""Candidate retrieval: routes, page-level fusion, evidence.

Routes (DESIGN.md section 4): ``keyword`` = BM25 over chunks; ``text`` = dense + BM25;
``visual`` = ColQwen2 page MaxSim (two-stage); ``hybrid`` = visual and text; ``auto`` picks one
per query. Each route yields a ranking of pages (chunk routes: a page ranks where its best chunk
ranks), and the rankings are fused by weighted reciprocal rank fusion. Alongside them run the
routes that follow the document (:mod:`pagesight.query.structure_search`): ``page`` (whole-page
keyword score), ``reference`` ("page 17", "Figure 3", "Note 7", "the balance sheet"), ``statement``
(the financial statements a query's terms imply: "capex", "return on equity") and ``section``
(section titles), the last three when a structure source is configured. Every fused page then
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

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.protocols import PageEmbedder, SparseEncoder, StructureSource, TextEmbedder
from pagesight.core.settings import RetrievalOptions
from pagesight.core.types import (
    AccessFilter,
    BBox,
    PageHit,
    PageKey,
    ResolvedReference,
    RetrievalTrace,
    RouteName,
    RouteTrace,
    SearchResult,
)
from pagesight.index.base import ScoredPoint, VectorStore
from pagesight.index.vectors import (
    DENSE_VECTOR,
    PAGE_POOLED_VECTOR,
    PAGE_VECTOR,
    SPARSE_VECTOR,
)
from pagesight.models.pooling import query_centroids
from pagesight.models.text import language_of
from pagesight.query.evidence import evidence_boxes
from pagesight.query.fusion import weighted_rrf_ranks
from pagesight.query.routing import choose_route
from pagesight.query.snippets import snippet
from pagesight.query.structure_search import (
    PAGE_ROUTE,
    REFERENCE_ROUTE,
    SECTION_ROUTE,
    STATEMENT_ROUTE,
    StructureRoutes,
    document_order,
    page_ranking,
)

#: What fusion needs of a chunk candidate; texts, boxes and element ids are fetched afterwards,
#: only for the chunks that end up on a returned page.
CANDIDATE_FIELDS = (
    "doc_id",
    "page_numbers",
    "page_labels",
    "chunk_id",
    "title",
    "source_uri",
    "unit",
)
#: Route of the table-row units: their own ranking, so that rows never crowd whole chunks out
#: of the keyword and dense candidates (a filing has thousands of rows).
ROW_ROUTE = "row"


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
        structures: StructureSource | None = None,
    ) -> None:
        self.chunk_store = chunk_store
        self.embedder = embedder
        self.sparse = sparse
        self.options = options or RetrievalOptions()
        self.page_store = page_store
        self.page_embedder = page_embedder
        self.structure_routes = (
            StructureRoutes(
                structures,
                documents=self.options.structure_documents,
                tail_documents=self.options.reference_confirm_documents,
            )
            if structures is not None
            else None
        )

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
        if chosen == RouteName.AGENTIC:
            raise PageSightError(
                ErrorCode.ROUTE_UNAVAILABLE,
                Stage.QUERY,
                "route 'agentic' is a loop of searches: "
                "pagesight.query.multistep.MultiStepSearch serves it (LocalStack.search), "
                "not a single retrieval",
            )
        if chosen in (RouteName.VISUAL, RouteName.HYBRID) and not self.visual_available:
            raise PageSightError(
                ErrorCode.ROUTE_UNAVAILABLE,
                Stage.QUERY,
                f"route {chosen.value!r} needs a page model: set PAGESIGHT_VISUAL__MODEL to a "
                "local ColQwen2 directory (and re-ingest), or use route 'text'",
            )
        traces: list[RouteTrace] = []
        weights: dict[str, float] = {}
        chunk_ranks: dict[str, dict[str, int]] = {}  # chunk route -> chunk id -> rank
        page_ranks: dict[str, dict[PageKey, int]] = {}  # every route -> page -> rank
        page_raw: dict[str, dict[PageKey, float]] = {}  # route -> page -> its best raw score
        chunks: dict[str, dict[str, Any]] = {}  # chunk id -> candidate payload
        visual_pages: dict[PageKey, ScoredPoint] = {}
        references: list[ResolvedReference] = []
        query_rows: np.ndarray | None = None
        limit = self.options.candidates

        def record(
            name: str, model_id: str, candidates: list[tuple[str, float]], since: float
        ) -> None:
            stages_ms[name] = round((time.perf_counter() - since) * 1000, 2)
            weights[name] = self.options.model_weights.get(
                model_id, self.options.weights.get(name, 1.0)
            )
            traces.append(RouteTrace(route=name, weight=weights[name], candidates=candidates))

        def record_chunks(name: str, model_id: str, hits: list[ScoredPoint], since: float) -> None:
            record(name, model_id, [(h.id, h.score) for h in hits], since)
            chunk_ranks[name] = {h.id: rank for rank, h in enumerate(hits, start=1)}
            chunks.update((h.id, h.payload) for h in hits)
            pages = _best_per_page(hits)  # a page ranks where its best chunk ranks
            page_ranks[name] = {key: rank for rank, (key, _) in enumerate(pages, start=1)}
            page_raw[name] = dict(pages)

        def record_pages(
            name: str,
            pages: list[tuple[PageKey, float]],
            since: float,
            model_id: str | None = None,
            candidates: list[tuple[str, float]] | None = None,
        ) -> None:
            if candidates is None:
                candidates = [(_page_item(key), score) for key, score in pages]
            record(name, model_id or name, candidates, since)
            page_ranks[name] = {key: rank for rank, (key, _) in enumerate(pages, start=1)}
            page_raw[name] = dict(pages)

        if chosen in (RouteName.KEYWORD, RouteName.TEXT, RouteName.HYBRID):
            since = time.perf_counter()
            sparse_query = self.sparse.encode_query(query)
            pool, rows = _split_rows(
                self.chunk_store.query_sparse(
                    SPARSE_VECTOR,
                    sparse_query,
                    access,
                    max(limit, self.options.page_candidates),
                    CANDIDATE_FIELDS,
                )
            )
            record_chunks("keyword", self.sparse.model_id, pool[:limit], since)
            since = time.perf_counter()
            if self._on(PAGE_ROUTE):
                chunks.update((h.id, h.payload) for h in pool)
                record_pages(PAGE_ROUTE, page_ranking(pool)[:limit], since)
            if rows and self._on(ROW_ROUTE):
                # Rows confirm: a page the keyword routes found rises when one of its table
                # rows matches; rows alone bring no page, and they never take a whole chunk's
                # place among the keyword and dense candidates.
                since = time.perf_counter()
                seen = page_ranks["keyword"].keys() | page_ranks.get(PAGE_ROUTE, {}).keys()
                confirmed = [(k, v) for k, v in _best_per_page(rows) if k in seen]
                chunks.update((h.id, h.payload) for h in rows if _pages_of(h.payload)[0] in seen)
                record_pages(ROW_ROUTE, confirmed[:limit], since)
        if chosen in (RouteName.TEXT, RouteName.HYBRID):
            skip = self._dense_skip_reason(query)
            if skip:
                traces.append(RouteTrace(route="dense", weight=0.0, skipped=skip))
            else:
                since = time.perf_counter()
                vector = self.embedder.embed_query(query).tolist()
                hits, _ = _split_rows(
                    self.chunk_store.query_dense(
                        DENSE_VECTOR, vector, access, 2 * limit, CANDIDATE_FIELDS
                    )
                )
                record_chunks("dense", self.embedder.model_id, hits[:limit], since)
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
            for hit in hits:
                visual_pages.setdefault(
                    (hit.payload["doc_id"], int(hit.payload["page_number"])), hit
                )
            record_pages(
                "visual",
                [(key, hit.score) for key, hit in visual_pages.items()],
                since,
                model_id=self.page_embedder.model_id,
                candidates=[(h.id, h.score) for h in hits],
            )

        # The structure routes read words (references, titles): they join routes that do too;
        # route 'visual' stays the page model alone.
        if self.structure_routes is not None and page_ranks and chosen != RouteName.VISUAL:
            since = time.perf_counter()
            page_order = [key for key, _ in self._fuse(page_ranks, weights)]
            doc_order = (
                list(access.doc_ids)
                if access.doc_ids is not None and len(access.doc_ids) == 1
                else document_order(page_order, self.options.structure_documents)
            )
            stages_ms["structure_prefuse"] = round((time.perf_counter() - since) * 1000, 2)
            page_rank = {key: rank for rank, key in enumerate(page_order, start=1)}
            found = self.structure_routes.references_in(query)
            for name, group, confirm in (
                (REFERENCE_ROUTE, [r for r in found if not r.inferred], page_rank),
                (STATEMENT_ROUTE, [r for r in found if r.inferred], None),
            ):
                if group and self._on(name):
                    since = time.perf_counter()
                    ranking = self.structure_routes.reference_pages(
                        group, doc_order, access, confirm
                    )
                    references.extend(ranking.references)
                    record_pages(name, _by_rank(ranking.pages), since)
            if self._on(SECTION_ROUTE):
                since = time.perf_counter()
                ranking = self.structure_routes.section_pages(query, doc_order, access, page_rank)
                if ranking.pages:
                    record_pages(SECTION_ROUTE, _by_rank(ranking.pages), since)

        since = time.perf_counter()
        fused = self._fuse(page_ranks, weights)
        chunk_order = [
            item for item, _ in weighted_rrf_ranks(chunk_ranks, weights, self.options.rrf_k)
        ]
        ranked = set(chunk_order)
        chunk_order += [c for c in chunks if c not in ranked]
        hits_out = self._pages(fused[:top_k], chunk_order, chunks, visual_pages, page_raw, access)
        stages_ms["fuse"] = round((time.perf_counter() - since) * 1000, 2)
        if query_rows is not None:
            since = time.perf_counter()
            for page_hit in hits_out:
                point = visual_pages.get((page_hit.doc_id, page_hit.page_number))
                if point is not None:
                    page_hit.bboxes = self._evidence(point, query_rows)
            stages_ms["evidence"] = round((time.perf_counter() - since) * 1000, 2)
        trace = RetrievalTrace(
            trace_id=trace_id or uuid.uuid4().hex,
            query=query,
            requested_route=route,
            route=chosen,
            routes=traces,
            fused=[(_page_item(key), score) for key, score in fused[: max(top_k * 5, 50)]],
            references=references,
            index_version=self.chunk_store.collection,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            stages_ms=stages_ms,
            doc_ids=sorted(
                {str(p["doc_id"]) for p in chunks.values() if "doc_id" in p}
                | {doc_id for doc_id, _ in visual_pages}
            ),
        )
        return SearchResult(hits=hits_out, trace=trace)

    def _on(self, route: str) -> bool:
        """A fusion route with weight 0 is not computed at all."""
        return self.options.weights.get(route, 1.0) > 0

    def _fuse(
        self, page_ranks: dict[str, dict[PageKey, int]], weights: dict[str, float]
    ) -> list[tuple[PageKey, float]]:
        """Weighted RRF of every route's page ranking."""
        return weighted_rrf_ranks(page_ranks, weights, self.options.rrf_k)

    def _pages(
        self,
        fused: list[tuple[PageKey, float]],
        chunk_order: list[str],
        chunks: dict[str, dict[str, Any]],
        visual_pages: dict[PageKey, ScoredPoint],
        page_raw: dict[str, dict[PageKey, float]],
        access: AccessFilter,
    ) -> list[PageHit]:
        """The fused pages as hits, each with its chunk candidates (best fused chunk first:
        it gives the snippet) and each route's raw score of its best candidate there."""
        on_page: dict[PageKey, list[str]] = {}
        for chunk_id in chunk_order:
            for key in _pages_of(chunks[chunk_id]):
                on_page.setdefault(key, []).append(chunk_id)
        hits: list[PageHit] = []
        shown: list[tuple[PageHit, str]] = []
        for rank, (key, score) in enumerate(fused, start=1):
            ids = on_page.get(key, [])
            payload = chunks[ids[0]] if ids else {}
            visual = visual_pages.get(key)
            meta = payload or (visual.payload if visual else {})
            hit = PageHit(
                doc_id=key[0],
                page_number=key[1],
                page_label=visual.payload.get("label") if visual else None,
                rank=rank,
                score=score,
                title=meta.get("title"),
                source_uri=meta.get("source_uri"),
                route_scores={route: raw[key] for route, raw in page_raw.items() if key in raw},
            )
            hits.append(hit)
            shown.extend((hit, chunk_id) for chunk_id in ids)
        full = self.chunk_store.retrieve([c for _, c in shown], access) if shown else {}
        for hit, chunk_id in shown:
            self._add_chunk(hit, full.get(chunk_id, chunks[chunk_id]), hit.page_number)
        bare = [(hit.doc_id, hit.page_number) for hit in hits if not hit.chunk_ids]
        if bare:  # pages only a page-level route found: map them to their chunks
            found = self._chunks_of_pages(bare, access)
            for hit in hits:
                for payload in found.get((hit.doc_id, hit.page_number), []):
                    self._add_chunk(hit, payload, hit.page_number)
        return hits

    def _add_chunk(self, hit: PageHit, payload: dict[str, Any], page_number: int) -> None:
        if not hit.chunk_ids:
            hit.snippet = snippet(
                str(payload.get("text", "")),
                self.options.snippet_chars,
                table_row=payload.get("unit") == "table_row",
            )
            labels = payload.get("page_labels") or {}
            hit.page_label = labels.get(str(page_number)) or hit.page_label
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

    def _chunks_of_pages(
        self, keys: list[PageKey], access: AccessFilter
    ) -> dict[PageKey, list[dict[str, Any]]]:
        """The text of hits no chunk route found: the chunks on each page, in reading order
        (one read per document)."""
        wanted = set(keys)
        out: dict[PageKey, list[dict[str, Any]]] = {}
        for doc_id in dict.fromkeys(doc for doc, _ in keys):
            for point in self.chunk_store.points_of_document(access.tenant, doc_id):
                for n in point.payload.get("page_numbers") or []:
                    if (doc_id, int(n)) in wanted:
                        out.setdefault((doc_id, int(n)), []).append(point.payload)
        for payloads in out.values():
            payloads.sort(key=lambda payload: payload.get("seq", 0))
        return out

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


def _split_rows(hits: list[ScoredPoint]) -> tuple[list[ScoredPoint], list[ScoredPoint]]:
    """(whole chunks, table-row units), each in rank order."""
    rows = [h for h in hits if h.payload.get("unit") == "table_row"]
    return [h for h in hits if h.payload.get("unit") != "table_row"], rows


def _best_per_page(hits: list[ScoredPoint]) -> list[tuple[PageKey, float]]:
    """Pages in the order of their best hit, with that hit's score."""
    best: dict[PageKey, float] = {}
    for hit in hits:
        for key in _pages_of(hit.payload):
            best.setdefault(key, hit.score)
    return list(best.items())


def _pages_of(payload: dict[str, Any]) -> list[PageKey]:
    return [(str(payload["doc_id"]), int(n)) for n in payload.get("page_numbers") or [1]]


def _by_rank(pages: list[PageKey]) -> list[tuple[PageKey, float]]:
    """A route that ranks without scores: 1/rank stands in as its raw score."""
    return [(key, 1.0 / rank) for rank, key in enumerate(pages, start=1)]


def _page_item(key: PageKey) -> str:
    """How a page (rather than a chunk) appears among fused candidates."""
    return f"page:{key[0]}#{key[1]}"
