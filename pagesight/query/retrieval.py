"""Candidate retrieval: routes, page-level fusion, evidence.

Routes (DESIGN.md section 4): ``keyword`` = BM25 over chunks; ``text`` = dense + BM25;
``visual`` = ColQwen2 page MaxSim (two-stage); ``hybrid`` = visual and text; ``auto`` picks one
per query. Each of those names runs a set of candidate routes, kept as a registry
(:mod:`pagesight.query.routes`: ``keyword``, ``page``, ``row``, ``dense``, ``visual`` and the
routes that follow the document, ``reference``, ``statement`` and ``section``, the last three
when a structure source is configured). Each route yields a ranking of pages (chunk routes: a
page ranks where its best chunk ranks), and the rankings are fused by weighted reciprocal rank
fusion. Every fused page then carries its best chunks (snippet, element ids, boxes) — visual-only
pages are mapped back to their chunks too — and, for visual hits, evidence boxes where the page
matched the query.

Access filters (tenant, ACL, validity) travel inside every index query. A dense model that does
not cover the query's language (all-MiniLM is English-only) is skipped for that query rather
than allowed to add noise, and the trace says so.

Every trace says where the time went (``RetrievalTrace.stages_ms``, ms): each route that was
computed under its own name (``keyword``, ``page``, ``row``, ``dense``, ``visual``,
``reference``, ``statement``, ``section``; a route that had nothing to do for the query is
listed too, at ~0), the query embeddings inside them (``embed_dense``, ``embed_visual``), the
structure look-ups inside the structure routes (``structure_lookup``), the fusion the
structure routes read (``structure_prefuse``), the final fusion (``fuse``), the passages of the
returned pages (``passages``; of it, ``page_text``: the text of pages only a page-level route
found) and the visual evidence boxes (``evidence``).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
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
from pagesight.index.vectors import PAGE_VECTOR
from pagesight.query.document_route import DocumentRoute
from pagesight.query.evidence import evidence_boxes
from pagesight.query.fusion import weighted_rrf_ranks
from pagesight.query.routes import (
    Leading,
    Route,
    RouteContext,
    RouteResult,
    default_routes,
    page_item,
    pages_of,
)
from pagesight.query.routing import choose_route
from pagesight.query.snippets import snippet
from pagesight.query.structure_cache import CachedStructures
from pagesight.query.structure_search import StructureRoutes


@dataclass
class _Candidates:
    """What the routes of one search found, as fusion and the trace need it."""

    traces: list[RouteTrace] = field(default_factory=list)
    weights: dict[str, float] = field(default_factory=dict)
    #: chunk route -> chunk id -> rank
    chunk_ranks: dict[str, dict[str, int]] = field(default_factory=dict)
    #: every route -> page -> rank
    page_ranks: dict[str, dict[PageKey, int]] = field(default_factory=dict)
    #: route -> page -> its best raw score
    page_raw: dict[str, dict[PageKey, float]] = field(default_factory=dict)
    #: chunk id -> candidate payload
    chunks: dict[str, dict[str, Any]] = field(default_factory=dict)
    visual_pages: dict[PageKey, ScoredPoint] = field(default_factory=dict)
    references: list[ResolvedReference] = field(default_factory=list)
    query_rows: np.ndarray | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, weight: float, found: RouteResult) -> None:
        """Record one route's result (a skipped route: in the trace only, at weight 0)."""
        if found.skipped is not None:
            self.traces.append(RouteTrace(route=name, weight=0.0, skipped=found.skipped))
            return
        self.weights[name] = weight
        self.traces.append(RouteTrace(route=name, weight=weight, candidates=found.listed()))
        if found.chunks is not None:
            self.chunk_ranks[name] = {h.id: rank for rank, h in enumerate(found.chunks, start=1)}
            self.chunks.update((h.id, h.payload) for h in found.chunks)
        self.chunks.update(found.payloads)
        self.page_ranks[name] = found.ranks or {
            key: rank for rank, (key, _) in enumerate(found.pages, start=1)
        }
        self.page_raw[name] = dict(found.pages)
        self.references.extend(found.references)
        for key, page_point in found.page_points.items():
            self.visual_pages.setdefault(key, page_point)
        if found.query_rows is not None:
            self.query_rows = found.query_rows


class Retriever:
    """All routes over the chunk index and (when configured) the page index.

    ``routes`` is the registry (:mod:`pagesight.query.routes`), in the order the routes run
    and break fusion ties; :meth:`register` adds one.
    """

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
        #: the stack's structure cache, which also knows which chunks lie on each page
        self.structure_cache = structures if isinstance(structures, CachedStructures) else None
        self.structure_routes = (
            StructureRoutes(
                structures,
                documents=self.options.structure_documents,
                tail_documents=self.options.reference_confirm_documents,
            )
            if structures is not None
            else None
        )
        self.routes: list[Route] = default_routes(
            chunk_store, embedder, sparse, page_store, page_embedder, self.structure_routes
        )
        if self.structure_cache is not None:
            # first of the routes that read the fusion: the others resolve in what it names
            at = next((i for i, r in enumerate(self.routes) if r.reads_fusion), len(self.routes))
            self.routes.insert(at, DocumentRoute(chunk_store, self.structure_cache))

    @property
    def visual_available(self) -> bool:
        return self.page_store is not None and self.page_embedder is not None

    def register(self, route: Route) -> None:
        """Add ``route`` to every later search. A route that reads the fused ranking of the
        others (``reads_fusion``) goes last; any other goes before the first such route, so
        that the structure routes see its pages (registry order is also fusion's tie order)."""
        if any(r.name == route.name for r in self.routes):
            raise ValueError(f"a route named {route.name!r} is already registered")
        if route.reads_fusion:
            self.routes.append(route)
            return
        at = next((i for i, r in enumerate(self.routes) if r.reads_fusion), len(self.routes))
        self.routes.insert(at, route)

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
        chosen = self._chosen(query, route)
        found = self._candidates(query, access, chosen)
        stages_ms = found.stages_ms
        since = time.perf_counter()
        fused = self._fuse(found.page_ranks, found.weights)
        chunk_order = [
            item
            for item, _ in weighted_rrf_ranks(found.chunk_ranks, found.weights, self.options.rrf_k)
        ]
        ranked = set(chunk_order)
        chunk_order += [c for c in found.chunks if c not in ranked]
        stages_ms["fuse"] = _ms_since(since)
        since = time.perf_counter()
        hits_out = self._pages(
            fused[:top_k],
            chunk_order,
            found.chunks,
            found.visual_pages,
            found.page_raw,
            access,
            stages_ms,
        )
        stages_ms["passages"] = _ms_since(since)
        if found.query_rows is not None:
            since = time.perf_counter()
            for page_hit in hits_out:
                point = found.visual_pages.get((page_hit.doc_id, page_hit.page_number))
                if point is not None:
                    page_hit.bboxes = self._evidence(point, found.query_rows)
            stages_ms["evidence"] = _ms_since(since)
        trace = RetrievalTrace(
            trace_id=trace_id or uuid.uuid4().hex,
            query=query,
            requested_route=route,
            route=chosen,
            routes=found.traces,
            fused=[(page_item(key), score) for key, score in fused[: max(top_k * 5, 50)]],
            references=found.references,
            index_version=self.chunk_store.collection,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            stages_ms=stages_ms,
            doc_ids=sorted(
                {str(p["doc_id"]) for p in found.chunks.values() if "doc_id" in p}
                | {doc_id for doc_id, _ in found.visual_pages}
            ),
        )
        return SearchResult(hits=hits_out, trace=trace)

    def _chosen(self, query: str, route: RouteName) -> RouteName:
        """The route name a search runs: ``auto`` picks one; one this retriever cannot serve
        is an error."""
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
        return chosen

    def _candidates(self, query: str, access: AccessFilter, chosen: RouteName) -> _Candidates:
        """Every route ``chosen`` runs, in registry order, each timed under its name."""
        found = _Candidates()
        context = RouteContext(
            query, access, chosen, self.options, ranks=found.page_ranks, stages_ms=found.stages_ms
        )
        for candidate in self.routes:
            if chosen not in candidate.serves:
                continue
            if candidate.reads_fusion:
                # The structure routes read words (references, titles): they follow the
                # routes before them, fused once here, and never run with 'visual' alone.
                if not found.page_ranks:
                    continue
                if context.leading is None:
                    since = time.perf_counter()
                    page_order = [key for key, _ in self._fuse(found.page_ranks, found.weights)]
                    context.leading = Leading.of(page_order, access, self.options)
                    found.stages_ms["structure_prefuse"] = _ms_since(since)
            if not candidate.enabled(self.options):
                continue
            since = time.perf_counter()
            result = candidate.search(context)
            found.stages_ms[candidate.name] = _ms_since(since)
            if result is not None:
                found.add(candidate.name, candidate.weight(self.options), result)
        return found

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
        stages_ms: dict[str, float] | None = None,
    ) -> list[PageHit]:
        """The fused pages as hits, each with its chunk candidates (best fused chunk first:
        it gives the snippet) and each route's raw score of its best candidate there."""
        on_page: dict[PageKey, list[str]] = {}
        for chunk_id in chunk_order:
            for key in pages_of(chunks[chunk_id]):
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
            since = time.perf_counter()
            found = self._chunks_of_pages(bare, access)
            for hit in hits:
                for payload in found.get((hit.doc_id, hit.page_number), []):
                    self._add_chunk(hit, payload, hit.page_number)
            if stages_ms is not None:
                stages_ms["page_text"] = _ms_since(since)
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

    def _chunks_of_pages(
        self, keys: list[PageKey], access: AccessFilter
    ) -> dict[PageKey, list[dict[str, Any]]]:
        """The text of hits no chunk route found: the chunks on each page (whatever their ACL
        or validity, as ``points_of_document`` reads them), in reading order. With the stack's
        cache, only those chunks are read, by id (the cache knows which points lie on each
        page); else the whole document once."""
        wanted = set(keys)
        out: dict[PageKey, list[dict[str, Any]]] = {}
        for doc_id in dict.fromkeys(doc for doc, _ in keys):
            for payload in self._document_chunks(access.tenant, doc_id, wanted):
                for n in payload.get("page_numbers") or []:
                    if (doc_id, int(n)) in wanted:
                        out.setdefault((doc_id, int(n)), []).append(payload)
        for payloads in out.values():
            payloads.sort(key=lambda payload: payload.get("seq", 0))
        return out

    def _document_chunks(
        self, tenant: str, doc_id: str, wanted: set[PageKey]
    ) -> list[dict[str, Any]]:
        """The payloads of the document's chunks on any ``wanted`` page (and, without a page
        map, its other chunks too), in the index's order."""
        cache = self.structure_cache
        pages = cache.page_chunks(tenant, doc_id) if cache is not None else None
        if cache is not None and pages is not None:
            ids = pages.ids_on(n for doc, n in wanted if doc == doc_id)
            found = self.chunk_store.retrieve(ids) if ids else {}
            if len(found) == len(ids):
                return [found[i] for i in ids]
            cache.forget_pages(tenant, doc_id)  # a point is gone: read the document
        return [p.payload for p in self.chunk_store.points_of_document(tenant, doc_id)]

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


def _ms_since(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)
