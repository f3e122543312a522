"""The candidate routes of a search, as a registry of small components.

A route is one way of ranking pages for a query (BM25 over chunks, a dense model, the page
model, the document's own structure, ...). :class:`pagesight.query.retrieval.Retriever` keeps an
ordered list of them (:func:`default_routes`), runs those the chosen route name serves
(``keyword``/``text``/``visual``/``hybrid``; ``auto`` has picked one of these by then) and that
their weights leave on, records each one's candidates into the trace, and fuses their page
rankings by weighted RRF (:mod:`pagesight.query.fusion`). Why a registry: a new signal is one
class (:class:`Route`) and one :meth:`~pagesight.query.retrieval.Retriever.register` call,
not another branch of a long ``search``, and every route is traced and weighted the same way.

The routes, in registry order (which is also fusion's tie order):

- ``keyword``: BM25 over chunks (:class:`KeywordRoute`).
- ``page``: the keyword candidates summed per page (:class:`PageRoute`).
- ``row``: table-row units that confirm a page the keyword routes found (:class:`RowRoute`).
- ``dense``: the dense text model over chunks (:class:`DenseRoute`).
- ``visual``: ColQwen2 page MaxSim, two-stage (:class:`VisualRoute`).
- ``reference``, ``statement``, ``section``: the routes that follow the document
  (:mod:`pagesight.query.structure_search`); they read the fused ranking of the routes before
  them (:attr:`RouteContext.leading`), so they come last. ``statement`` is the ``finance``
  domain pack's route (:class:`DomainRoute`, :mod:`pagesight.query.domains`).

Each route's ``__init__`` only keeps references to its stores and models: a route is built
with every :class:`Retriever` and must cost nothing until a search asks it for candidates. A
route reads the options (weights, limits) from :class:`RouteContext` at search time, never at
construction, so a changed ``RetrievalOptions.weights`` applies to the next search.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pagesight.core.protocols import PageEmbedder, SparseEncoder, TextEmbedder
from pagesight.core.settings import RetrievalOptions
from pagesight.core.types import (
    AccessFilter,
    PageKey,
    ResolvedReference,
    RouteName,
    StructuralReference,
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
from pagesight.query.counting import COUNT_ROUTE, StructureCounter, count_question
from pagesight.query.domains import PACKS
from pagesight.query.domains.finance import FINANCE, STATEMENT_ROUTE
from pagesight.query.structure_search import (
    PAGE_ROUTE,
    REFERENCE_ROUTE,
    SECTION_ROUTE,
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
#: Route names, as traces and ``RetrievalOptions.weights`` spell them (the structure routes'
#: are in :mod:`pagesight.query.structure_search`).
KEYWORD_ROUTE = "keyword"
DENSE_ROUTE = "dense"
VISUAL_ROUTE = "visual"
#: Route of the table-row units: their own ranking, so that rows never crowd whole chunks out
#: of the keyword and dense candidates (a filing has thousands of rows).
ROW_ROUTE = "row"

#: The route names whose searches read words: every route but the page model's.
WORD_SEARCHES = frozenset({RouteName.KEYWORD, RouteName.TEXT, RouteName.HYBRID})
#: The route names that use the dense text model.
DENSE_SEARCHES = frozenset({RouteName.TEXT, RouteName.HYBRID})
#: The route names that use the page model.
VISUAL_SEARCHES = frozenset({RouteName.VISUAL, RouteName.HYBRID})


@dataclass
class Leading:
    """The fused ranking of the routes that ran before the first route reading it: what the
    structure routes resolve references and section titles against (the documents the words
    found most relevant), and the candidates they confirm pages among."""

    pages: list[PageKey]
    #: Page -> 1-based rank in :attr:`pages`.
    rank: dict[PageKey, int]
    #: Documents to resolve in, most relevant first (only the one a one-document search names).
    documents: list[str]

    @classmethod
    def of(cls, pages: list[PageKey], access: AccessFilter, options: RetrievalOptions) -> Leading:
        documents = (
            list(access.doc_ids)
            if access.doc_ids is not None and len(access.doc_ids) == 1
            else document_order(pages, options.structure_documents)
        )
        return cls(
            pages=pages,
            rank={key: rank for rank, key in enumerate(pages, start=1)},
            documents=documents,
        )


@dataclass(eq=False)
class RouteContext:
    """One search, as every route sees it: the query, who asks, the chosen route name, the
    options, and what earlier routes left for later ones.

    The hand-overs are explicit fields rather than a second index query: ``page`` and ``row``
    aggregate the keyword route's one BM25 query (:attr:`keyword_pool`, :attr:`keyword_rows`),
    ``row`` confirms only pages already ranked (:attr:`ranks`), and the structure routes read
    the fused ranking so far (:attr:`leading`, set by the retriever before the first of them).
    """

    query: str
    access: AccessFilter
    route: RouteName
    options: RetrievalOptions
    #: Every route recorded so far -> its page ranking (page -> 1-based rank).
    ranks: dict[str, dict[PageKey, int]] = field(default_factory=dict)
    leading: Leading | None = None
    #: The keyword route's whole chunks, best first (more than it ranks itself: the page route
    #: sums ``page_candidates`` of them), and its table-row units; None until it ran.
    keyword_pool: list[ScoredPoint] | None = None
    keyword_rows: list[ScoredPoint] = field(default_factory=list)
    #: The keyword route's encoded query, which later BM25 queries reuse (``document``).
    sparse_query: Any = None
    #: The documents the query names (route ``document``): references resolve in them only.
    named_documents: list[str] = field(default_factory=list)
    #: The trace's stage times (ms): a route adds the parts of its own time worth telling
    #: apart (``embed_dense``, ``structure_lookup``, ...; :meth:`add_time`).
    stages_ms: dict[str, float] = field(default_factory=dict)
    _references: list[StructuralReference] | None = field(default=None, repr=False)

    @property
    def limit(self) -> int:
        """Candidates per route, before fusion."""
        return self.options.candidates

    def add_time(self, stage: str, ms: float) -> None:
        """Count ``ms`` more to ``stage`` in the trace."""
        self.stages_ms[stage] = round(self.stages_ms.get(stage, 0.0) + ms, 2)

    def structural_references(self) -> list[StructuralReference]:
        """The places and statements the query names or implies, parsed once for the routes
        that share them (``reference`` takes the named ones, ``statement`` the inferred)."""
        if self._references is None:
            self._references = StructureRoutes.references_in(
                self.query, self.options.domains.as_map()
            )
        return self._references


@dataclass
class RouteResult:
    """One route's candidates: its page ranking (best first, with the route's raw score of
    each page), what the trace lists, and what the retriever keeps for the returned pages."""

    pages: list[tuple[PageKey, float]] = field(default_factory=list)
    #: (candidate id, raw score) as the trace lists them; None: the pages, as ``page:doc#n``.
    candidates: list[tuple[str, float]] | None = None
    #: A chunk route's ranked chunks: they also fuse as chunks (the order of a page's chunks).
    chunks: list[ScoredPoint] | None = None
    #: Chunks kept, unranked, for the text of the pages they are on.
    payloads: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    references: list[ResolvedReference] = field(default_factory=list)
    #: Page-index points behind the pages (label, evidence boxes) and the query's page-model
    #: rows that the evidence boxes are computed with.
    page_points: dict[PageKey, ScoredPoint] = field(default_factory=dict)
    query_rows: np.ndarray | None = None
    #: Why the route did not run (the trace says so, with weight 0).
    skipped: str | None = None
    #: Explicit 1-based fusion ranks of :attr:`pages` (None: their order): a page a route is
    #: less sure of ranks further down than its place (:func:`confidence_ranks`).
    ranks: dict[PageKey, int] | None = None

    def listed(self) -> list[tuple[str, float]]:
        """The candidates as the trace lists them."""
        if self.candidates is None:
            return [(page_item(key), score) for key, score in self.pages]
        return self.candidates

    @classmethod
    def of_chunks(cls, hits: list[ScoredPoint]) -> RouteResult:
        """A chunk ranking: a page ranks where its best chunk ranks."""
        return cls(
            pages=best_per_page(hits),
            candidates=[(h.id, h.score) for h in hits],
            chunks=hits,
        )

    @classmethod
    def skip(cls, reason: str) -> RouteResult:
        return cls(skipped=reason)


class Route(Protocol):
    """One candidate route; see the module doc. ``search`` returns None when the route has
    nothing to say for this query (then the trace does not list it)."""

    @property
    def name(self) -> str:
        """As traces and ``RetrievalOptions.weights`` spell it."""
        ...

    @property
    def serves(self) -> frozenset[RouteName]:
        """The route names (``keyword``, ``text``, ``visual``, ``hybrid``) that run it."""
        ...

    @property
    def reads_fusion(self) -> bool:
        """True when it reads the fused ranking of the routes before it (``leading``)."""
        ...

    def weight(self, options: RetrievalOptions) -> float:
        """Its weight in fusion under ``options``."""
        ...

    def enabled(self, options: RetrievalOptions) -> bool:
        """Whether it is computed at all under ``options``."""
        ...

    def search(self, context: RouteContext) -> RouteResult | None: ...


class BaseRoute:
    """Defaults of :class:`Route`: weight ``weights[name]`` (1 if absent) unless
    ``model_weights`` names the model serving the route; a weight of 0 turns the route off
    entirely (it is not computed); serves the routes that read words."""

    name: str = ""
    serves: frozenset[RouteName] = WORD_SEARCHES
    reads_fusion: bool = False

    @property
    def model_id(self) -> str:
        """Whose entry in ``model_weights`` sets the weight: the model's id for a model route,
        so that a weight tuned for one model does not carry over to another."""
        return self.name

    def weight(self, options: RetrievalOptions) -> float:
        return options.model_weights.get(self.model_id, options.weights.get(self.name, 1.0))

    def enabled(self, options: RetrievalOptions) -> bool:
        return options.weights.get(self.name, 1.0) > 0

    def search(self, context: RouteContext) -> RouteResult | None:
        raise NotImplementedError


class KeywordRoute(BaseRoute):
    """BM25 over chunks: one sparse query for ``max(candidates, page_candidates)`` chunks, of
    which it ranks the first ``candidates`` whole chunks and hands the rest (and the table-row
    units) to ``page`` and ``row``."""

    name = KEYWORD_ROUTE

    def __init__(self, chunk_store: VectorStore, sparse: SparseEncoder) -> None:
        self.chunk_store = chunk_store
        self.sparse = sparse

    @property
    def model_id(self) -> str:
        return self.sparse.model_id

    def enabled(self, options: RetrievalOptions) -> bool:
        """Always computed: ``page`` and ``row`` aggregate its candidates, so a weight of 0
        only keeps its own ranking out of fusion."""
        return True

    def search(self, context: RouteContext) -> RouteResult:
        limit = context.limit
        sparse_query = self.sparse.encode_query(context.query)
        context.sparse_query = sparse_query
        pool, rows = split_rows(
            self.chunk_store.query_sparse(
                SPARSE_VECTOR,
                sparse_query,
                context.access,
                max(limit, context.options.page_candidates),
                CANDIDATE_FIELDS,
            )
        )
        context.keyword_pool, context.keyword_rows = pool, rows
        return RouteResult.of_chunks(pool[:limit])


class PageRoute(BaseRoute):
    """The page-aggregated keyword signal (:func:`~pagesight.query.structure_search.page_ranking`):
    a page whose evidence is split over several chunks ranks as a whole page would. Its
    chunks are kept for the text of the pages it ranks."""

    name = PAGE_ROUTE

    def search(self, context: RouteContext) -> RouteResult | None:
        pool = context.keyword_pool
        if pool is None:
            return None
        return RouteResult(
            pages=page_ranking(pool)[: context.limit],
            payloads=[(h.id, h.payload) for h in pool],
        )


class RowRoute(BaseRoute):
    """Rows confirm: a page the keyword routes found rises when one of its table rows matches;
    rows alone bring no page, and they never take a whole chunk's place among the keyword and
    dense candidates."""

    name = ROW_ROUTE

    def search(self, context: RouteContext) -> RouteResult | None:
        rows = context.keyword_rows
        if not rows:
            return None
        seen = (
            context.ranks.get(KEYWORD_ROUTE, {}).keys() | context.ranks.get(PAGE_ROUTE, {}).keys()
        )
        confirmed = [(k, v) for k, v in best_per_page(rows) if k in seen]
        return RouteResult(
            pages=confirmed[: context.limit],
            payloads=[(h.id, h.payload) for h in rows if pages_of(h.payload)[0] in seen],
        )


class DenseRoute(BaseRoute):
    """The dense text model over chunks. A model that does not cover the query's language
    (all-MiniLM is English-only) is skipped for that query rather than allowed to add noise,
    and the trace says so."""

    name = DENSE_ROUTE
    serves = DENSE_SEARCHES

    def __init__(self, chunk_store: VectorStore, embedder: TextEmbedder) -> None:
        self.chunk_store = chunk_store
        self.embedder = embedder

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    def enabled(self, options: RetrievalOptions) -> bool:
        """Computed whatever its weight: at 0 it leaves fusion but the trace still lists its
        candidates, which is how a weight is tuned."""
        return True

    def skip_reason(self, query: str) -> str | None:
        supported = self.embedder.languages
        language = language_of(query)
        if supported is None or language is None or language in supported:
            return None
        return f"{self.embedder.model_id} does not cover language {language!r}"

    def search(self, context: RouteContext) -> RouteResult:
        skip = self.skip_reason(context.query)
        if skip:
            return RouteResult.skip(skip)
        since = time.perf_counter()
        vector = self.embedder.embed_query(context.query).tolist()
        context.add_time("embed_dense", _ms_since(since))
        # Twice the candidates: table-row units are dropped from this ranking.
        hits, _ = split_rows(
            self.chunk_store.query_dense(
                DENSE_VECTOR, vector, context.access, 2 * context.limit, CANDIDATE_FIELDS
            )
        )
        return RouteResult.of_chunks(hits[: context.limit])


class VisualRoute(BaseRoute):
    """ColQwen2 page MaxSim, in two stages (the query's centroids against the pooled rows, the
    pooled first stage, then exact MaxSim); it keeps the query's rows, which the evidence boxes
    of its pages are computed with."""

    name = VISUAL_ROUTE
    serves = VISUAL_SEARCHES

    def __init__(self, page_store: VectorStore, page_embedder: PageEmbedder) -> None:
        self.page_store = page_store
        self.page_embedder = page_embedder

    @property
    def model_id(self) -> str:
        return self.page_embedder.model_id

    def enabled(self, options: RetrievalOptions) -> bool:
        """Computed whatever its weight, like ``dense``; its pages also give the evidence
        boxes and page labels of the hits."""
        return True

    def search(self, context: RouteContext) -> RouteResult:
        options = context.options
        since = time.perf_counter()
        query_rows = self.page_embedder.embed_queries([context.query])[0]
        context.add_time("embed_visual", _ms_since(since))
        prefetch = options.visual_prefetch
        hits = self.page_store.query_two_stage(
            PAGE_VECTOR,
            PAGE_POOLED_VECTOR,
            query_rows.tolist(),
            context.access,
            context.limit,
            prefetch=prefetch,
            coarse_query=query_centroids(query_rows, options.visual_coarse_centroids).tolist(),
            coarse_limit=max(options.visual_coarse, prefetch),
        )
        points: dict[PageKey, ScoredPoint] = {}
        for hit in hits:
            points.setdefault((hit.payload["doc_id"], int(hit.payload["page_number"])), hit)
        return RouteResult(
            pages=[(key, hit.score) for key, hit in points.items()],
            candidates=[(h.id, h.score) for h in hits],
            page_points=points,
            query_rows=query_rows,
        )


class ReferenceRoute(BaseRoute):
    """The pages a query's "page 17"/"Figure 3"/"Note 7"/"the balance sheet" resolve to
    (:meth:`~pagesight.query.structure_search.StructureRoutes.reference_pages`), in the leading
    documents and, confirmed by the other routes' candidates, in the rest."""

    name = REFERENCE_ROUTE
    reads_fusion = True
    #: Which of the query's references this route takes: the named ones.
    inferred = False

    def __init__(self, structures: StructureRoutes) -> None:
        self.structures = structures

    def _confirm(self, leading: Leading) -> dict[PageKey, int] | None:
        return leading.rank

    def search(self, context: RouteContext) -> RouteResult | None:
        leading = context.leading
        if leading is None:
            return None
        group = [r for r in context.structural_references() if self._takes(r)]
        if not group:
            return None
        modes = context.options.domains.as_map()
        confidence: dict[PageKey, float]
        if context.named_documents:  # the query names its documents: resolve there only
            ranking = self.structures.reference_pages(
                group, context.named_documents, context.access, None, modes
            )
            confidence = ranking.confidence
        else:
            ranking = self.structures.reference_pages(
                group, leading.documents, context.access, self._confirm(leading), modes
            )
            decay = 0.0 if self.inferred else context.options.reference_document_decay
            confidence = by_document_rank(ranking.pages, ranking.confidence, leading, decay)
        context.add_time("structure_lookup", ranking.lookup_ms)
        return RouteResult(
            pages=by_rank(ranking.pages),
            references=ranking.references,
            ranks=confidence_ranks(ranking.pages, confidence, context.options.rrf_k),
        )

    def _takes(self, reference: StructuralReference) -> bool:
        return reference.inferred == self.inferred


class DomainRoute(ReferenceRoute):
    """A domain pack's route (:mod:`pagesight.query.domains`): what the query's terms imply in
    the pack's domain, weighted on its own (``weights[pack.route]``), in the documents the
    pack acts on; only in the leading documents. The ``finance`` pack's is ``statement``:
    the financial statements a query's terms imply ("capex": the cash flow statement), every
    filing prints one, and a question about one names its company. Off with its pack
    (``RetrievalOptions.domains``) or at weight 0."""

    inferred = True

    def __init__(self, structures: StructureRoutes, pack: str, name: str) -> None:
        super().__init__(structures)
        self.pack = pack
        self.name = name

    def enabled(self, options: RetrievalOptions) -> bool:
        return super().enabled(options) and options.domains.as_map().get(self.pack) != "off"

    def _takes(self, reference: StructuralReference) -> bool:
        return reference.inferred and reference.domain == self.pack

    def _confirm(self, leading: Leading) -> dict[PageKey, int] | None:
        return None


class StatementRoute(DomainRoute):
    """The ``finance`` pack's route, ``statement`` (:class:`DomainRoute`)."""

    def __init__(self, structures: StructureRoutes) -> None:
        super().__init__(structures, FINANCE, STATEMENT_ROUTE)


class SectionRoute(BaseRoute):
    """Pages of the sections whose titles match the query, among the candidates the other
    routes found (:meth:`~pagesight.query.structure_search.StructureRoutes.section_pages`);
    listed only when some section matched."""

    name = SECTION_ROUTE
    reads_fusion = True

    def __init__(self, structures: StructureRoutes) -> None:
        self.structures = structures

    def search(self, context: RouteContext) -> RouteResult | None:
        leading = context.leading
        if leading is None:
            return None
        ranking = self.structures.section_pages(
            context.query, leading.documents, context.access, leading.rank
        )
        context.add_time("structure_lookup", ranking.lookup_ms)
        if not ranking.pages:
            return None
        return RouteResult(pages=by_rank(ranking.pages))


class CountRoute(BaseRoute):
    """Every page a counting question counts ("how many figures ...", "表の数";
    :mod:`pagesight.query.counting`), in the document the search is scoped to, else the one
    the query names, else the leading one: evidence recall, not one hit. A query with no
    counting cue returns at once, before the counter is asked anything."""

    name = COUNT_ROUTE
    reads_fusion = True

    def __init__(self, counter: StructureCounter) -> None:
        self.counter = counter

    def search(self, context: RouteContext) -> RouteResult | None:
        leading = context.leading
        if leading is None:
            return None
        question = count_question(context.query)
        if question is None:
            return None
        since = time.perf_counter()
        documents = [*context.named_documents, *leading.documents][:1]
        found = self.counter.count_in(question, context.access, documents)
        context.add_time("structure_lookup", _ms_since(since))
        if found is None:
            return None
        pages = found.route_pages(leading.rank, context.options.count_pages)
        return RouteResult(pages=by_rank(pages)) if pages else None


def counter_of(routes: list[Route]) -> StructureCounter | None:
    """The counter of the ``count`` route among ``routes`` (the answer step counts with the
    same one, and so with the same inventories), else None."""
    return next((r.counter for r in routes if isinstance(r, CountRoute)), None)


def default_routes(
    chunk_store: VectorStore,
    embedder: TextEmbedder,
    sparse: SparseEncoder,
    page_store: VectorStore | None = None,
    page_embedder: PageEmbedder | None = None,
    structures: StructureRoutes | None = None,
) -> list[Route]:
    """Every route the configured stores and models allow, in registry order: the visual
    route with a page index and model, the structure routes with a structure source."""
    routes: list[Route] = [
        KeywordRoute(chunk_store, sparse),
        PageRoute(),
        RowRoute(),
        DenseRoute(chunk_store, embedder),
    ]
    if page_store is not None and page_embedder is not None:
        routes.append(VisualRoute(page_store, page_embedder))
    if structures is not None:
        routes += [
            ReferenceRoute(structures),
            # one route per domain pack (the finance pack's: 'statement')
            *(DomainRoute(structures, pack.name, pack.route) for pack in PACKS.values()),
            SectionRoute(structures),
            CountRoute(StructureCounter(structures.views, chunk_store)),
        ]
    return routes


def split_rows(hits: list[ScoredPoint]) -> tuple[list[ScoredPoint], list[ScoredPoint]]:
    """(whole chunks, table-row units), each in rank order."""
    rows = [h for h in hits if h.payload.get("unit") == "table_row"]
    return [h for h in hits if h.payload.get("unit") != "table_row"], rows


def best_per_page(hits: list[ScoredPoint]) -> list[tuple[PageKey, float]]:
    """Pages in the order of their best hit, with that hit's score."""
    best: dict[PageKey, float] = {}
    for hit in hits:
        for key in pages_of(hit.payload):
            best.setdefault(key, hit.score)
    return list(best.items())


def pages_of(payload: dict[str, Any]) -> list[PageKey]:
    return [(str(payload["doc_id"]), int(n)) for n in payload.get("page_numbers") or [1]]


def by_document_rank(
    pages: list[PageKey], confidence: dict[PageKey, float], leading: Leading, decay: float
) -> dict[PageKey, float]:
    """``confidence`` of each page times ``1 / (1 + i) ** decay``, ``i`` its document's place
    among the documents the other routes rank (0: the best): a reference that names no
    document ("page 17") weighs most in the document the question's words found best, and
    less in each one after, rather than alike in all of them (issue 34)."""
    if decay <= 0:
        return confidence
    order = {doc: i for i, doc in enumerate(document_order(leading.pages, len(leading.pages)))}
    worst = len(order)
    return {
        key: confidence.get(key, 1.0) / (1 + order.get(key[0], worst)) ** decay for key in pages
    }


def confidence_ranks(
    pages: list[PageKey], confidence: dict[PageKey, float], k: float
) -> dict[PageKey, int] | None:
    """Fusion ranks for ``pages`` (best first) that weigh each page by its confidence: RRF
    gives rank r ``w / (k + r)``; a page of confidence c gets the rank whose share is c times
    that, ``(k + r) / c - k``. None when every page is fully believed (their order is their
    rank)."""
    if not any(confidence.get(key, 1.0) < 1.0 for key in pages):
        return None
    ranks: dict[PageKey, int] = {}
    for rank, key in enumerate(pages, start=1):
        believed = max(confidence.get(key, 1.0), 0.01)
        ranks[key] = max(rank, round((k + rank) / believed - k))
    return ranks


def by_rank(pages: list[PageKey]) -> list[tuple[PageKey, float]]:
    """A route that ranks without scores: 1/rank stands in as its raw score."""
    return [(key, 1.0 / rank) for rank, key in enumerate(pages, start=1)]


def page_item(key: PageKey) -> str:
    """How a page (rather than a chunk) appears among fused candidates."""
    return f"page:{key[0]}#{key[1]}"


def _ms_since(since: float) -> float:
    return (time.perf_counter() - since) * 1000
