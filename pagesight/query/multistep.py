"""Multi-step search (route ``agentic``): evidence gathered across pages, bounded and traced.

Why: a single search answers a question whose evidence is in one place. Many questions about
long documents need more (issue 17): "compare net revenue in 2019 and 2020" needs a page for
each year; "what are the seven sensors connected to the ECU?" needs every slide of the list;
a passage that says "see Note 13" or "continued on page 12" has its answer where it points,
on a page whose words the question may not share at all, so no search ranks it.

:class:`MultiStepSearch` runs a bounded loop over the ordinary :class:`~pagesight.query.retrieval.
Retriever` (route ``auto`` by default, ``MultiStepOptions.step_route``: each step searched
the way a plain search of its words would be):

1. **Plan** (:mod:`pagesight.query.planner`): the question's parts, e.g. one sub-query per compared
   year, or for a list or a count one search inside the leading document.
2. **Search** the question itself first (so the route never loses what ``text`` finds), then
   each planned part, one step each.
3. **Read** the passages of each search's best pages (``read_pages``) and **follow** the
   references in them ("see Note 7", "as shown in Figure 2", "continued on page 12", "refer
   to Section 3.4"), parsed by :func:`pagesight.query.references.parse_references` and resolved by
   :func:`pagesight.query.references.resolve_reference` against the document's structure (the
   retriever's :class:`~pagesight.core.protocols.StructureSource`): one hop per step, at most
   ``follow_per_step`` references, the first ``pages_per_reference`` pages of each. When the
   planned parts are done, a step reads the pages reached by the last hop and follows their
   references one more hop.
4. **Stop** when a step adds no new evidence page (its first ``sub_query_top_k`` pages and its
   followed pages are all known), after ``max_steps`` steps, or when ``time_budget_ms`` is spent
   (checked before each step; planning counts).
5. **Merge** into one ranked list of pages: the searches' rankings round-robin (the question's
   first, then each part's), so each part of a comparison has a page in the top few rather
   than one part's runners-up crowding out the other part; a followed page goes right after
   the page that referenced it.

The result is an ordinary :class:`~pagesight.core.types.SearchResult` (pages), so everything that
ranks pages (the evaluation, the answer pipeline through
:class:`~pagesight.query.passages.PassageSearch`) takes route ``agentic`` unchanged;
:attr:`RetrievalTrace.multistep` records the plan, every step's sub-query, the references found and
followed, the new pages, the time, and the stop reason. Route ``auto`` is sent here only for clearly
multi-part questions (:attr:`~pagesight.query.planner.Plan.multi_part`, decided by the rules, never
by an LLM call), so its latency stays that of one search for everything else.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pagesight.core.ids import point_id
from pagesight.core.settings import MultiStepOptions
from pagesight.core.types import (
    AccessFilter,
    BBox,
    FollowedReference,
    MultiStepTrace,
    PageHit,
    PageKey,
    RetrievalTrace,
    RouteName,
    SearchResult,
    SearchStep,
    StopReason,
)
from pagesight.models.text import tokenize
from pagesight.query.planner import (
    Planner,
    ReferenceCandidate,
    RulePlanner,
    SubQuery,
    context_of,
    references_in_text,
)
from pagesight.query.retrieval import Retriever
from pagesight.query.snippets import snippet
from pagesight.query.structure_cache import StructureView

#: ``PageHit.route_scores`` key of a page reached by following a reference.
FOLLOWED_ROUTE = "followed"
#: References recorded per step at most (a page of a 10-K can name dozens of notes).
MAX_RECORDED_REFERENCES = 20
#: A question term on more than this share of a document's pages says nothing about what a
#: reference in it is about (pagesight.query.planner's ``common``) ...
COMMON_SHARE = 0.25
#: ... in a document of at least this many pages (a short one has too few to tell).
COMMON_MIN_PAGES = 8
#: Documents whose page frequencies are kept between searches.
DF_CACHE_SIZE = 64


@dataclass
class _Run:
    """The state of one multi-step search."""

    query: str
    access: AccessFilter
    top_k: int
    hits: dict[PageKey, PageHit] = field(default_factory=dict)
    rankings: list[list[PageKey]] = field(default_factory=list)
    after: dict[PageKey, list[PageKey]] = field(default_factory=dict)
    evidence: set[PageKey] = field(default_factory=set)
    frontier: list[PageKey] = field(default_factory=list)
    first: SearchResult | None = None
    doc_ids: set[str] = field(default_factory=set)
    searched: set[tuple[str, tuple[str, ...] | None]] = field(default_factory=set)
    seen_references: set[tuple[Any, ...]] = field(default_factory=set)
    structures: dict[str, StructureView | None] = field(default_factory=dict)
    pages: dict[str, dict[int, list[dict[str, Any]]]] = field(default_factory=dict)
    #: the chunks of single pages read by id (documents not read whole)
    page_chunks: dict[PageKey, list[dict[str, Any]]] = field(default_factory=dict)
    #: the stage times of the steps' searches, summed
    stages_ms: dict[str, float] = field(default_factory=dict)

    @property
    def lead_document(self) -> str | None:
        return self.rankings[0][0][0] if self.rankings and self.rankings[0] else None


class MultiStepSearch:
    """Route ``agentic`` over a :class:`~pagesight.query.retrieval.Retriever` (module doc); every
    other route goes to the retriever unchanged, so this is the one search entry point of a stack.

    ``planner`` plans the parts (default: the rules); route ``auto`` asks the rules only.
    ``clock`` is injectable so the time budget can be tested without sleeping.
    """

    def __init__(
        self,
        retriever: Retriever,
        planner: Planner | None = None,
        options: MultiStepOptions | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.retriever = retriever
        self.options = options or MultiStepOptions()
        self.rules = RulePlanner(self.options.max_sub_queries)
        self.planner: Planner = planner or self.rules
        self.clock = clock
        self._frequencies: OrderedDict[tuple[str, str, str], tuple[int, dict[str, int]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    @property
    def visual_available(self) -> bool:
        return self.retriever.visual_available

    def chooses(self, query: str) -> bool:
        """Whether route ``auto`` sends ``query`` here: only a clearly multi-part question
        (a comparison or several questions in one), by the rules."""
        return self.options.auto_route and self.rules.plan(query).multi_part

    def search(
        self,
        query: str,
        access: AccessFilter,
        route: RouteName = RouteName.AUTO,
        top_k: int = 10,
        trace_id: str | None = None,
    ) -> SearchResult:
        """:meth:`run` for route ``agentic`` (and ``auto`` when :meth:`chooses`), else the
        retriever's own search."""
        if route == RouteName.AGENTIC or (route == RouteName.AUTO and self.chooses(query)):
            return self.run(query, access, top_k, trace_id, requested=route)
        return self.retriever.search(query, access, route, top_k, trace_id)

    def run(
        self,
        query: str,
        access: AccessFilter,
        top_k: int = 10,
        trace_id: str | None = None,
        requested: RouteName = RouteName.AGENTIC,
    ) -> SearchResult:
        """The loop of the module doc: the best ``top_k`` pages and the trace of every step."""
        options = self.options
        started = self.clock()
        plan = self.planner.plan(query)
        plan_ms = _ms(self.clock() - started)
        run = _Run(query=query, access=access, top_k=top_k)
        todo: list[SubQuery] = [SubQuery(query), *plan.sub_queries]
        steps: list[SearchStep] = []
        stages_ms: dict[str, float] = {"plan": plan_ms}
        stop: StopReason | None = None
        while stop is None:
            todo = [sub for sub in todo if self._scope(run, sub) is not None]
            if not todo and not run.frontier:
                stop = "plan_done"
            elif len(steps) >= options.max_steps:
                stop = "max_steps"
            elif _ms(self.clock() - started) >= options.time_budget_ms:
                stop = "time_budget"
            else:
                number = len(steps) + 1
                step = (
                    self._search_step(run, number, todo.pop(0))
                    if todo
                    else self._follow_step(run, number)
                )
                steps.append(step)
                stages_ms[f"step{number}"] = step.elapsed_ms
                if not step.new_pages:
                    stop = "no_new_evidence"
        since = self.clock()
        order = _merge(run.rankings, run.after)
        hits = [
            run.hits[key].model_copy(update={"rank": rank, "score": 1.0 / rank})
            for rank, key in enumerate(order[:top_k], start=1)
        ]
        stages_ms["fuse"] = _ms(self.clock() - since)
        for stage, ms in run.stages_ms.items():  # where the steps' searches spent their time
            stages_ms[stage] = round(stages_ms.get(stage, 0.0) + ms, 2)
        first = run.first
        trace = RetrievalTrace(
            trace_id=trace_id or uuid.uuid4().hex,
            query=query,
            requested_route=requested,
            route=RouteName.AGENTIC,
            routes=first.trace.routes if first else [],
            fused=[
                (f"page:{doc}#{page}", 1.0 / rank)
                for rank, (doc, page) in enumerate(order[: max(top_k * 5, 50)], start=1)
            ],
            references=first.trace.references if first else [],
            index_version=self.retriever.chunk_store.collection,
            elapsed_ms=_ms(self.clock() - started),
            stages_ms=stages_ms,
            doc_ids=sorted(run.doc_ids | {doc for doc, _ in order}),
            multistep=MultiStepTrace(
                planner=plan.planner,
                plan_kind=plan.kind,
                sub_queries=[sub.text for sub in plan.sub_queries],
                plan_note=plan.note,
                plan_ms=plan_ms,
                steps=steps,
                stop_reason=stop,
                max_steps=options.max_steps,
                time_budget_ms=options.time_budget_ms,
            ),
        )
        return SearchResult(hits=hits, trace=trace)

    # -- steps ---------------------------------------------------------------------------------

    def _scope(self, run: _Run, sub: SubQuery) -> AccessFilter | None:
        """The access a planned search runs with; None when it would repeat a search already
        made (the same words in the same documents) or names a leading document there is
        none of."""
        access = run.access
        if sub.scope == "lead_document":
            lead = run.lead_document
            if lead is None:
                return None if run.rankings else access  # known after the first search
            access = access.model_copy(update={"doc_ids": [lead]})
        return None if (_norm(sub.text), _docs(access)) in run.searched else access

    def _search_step(self, run: _Run, number: int, sub: SubQuery) -> SearchStep:
        since = self.clock()
        access = self._scope(run, sub)
        assert access is not None  # the loop drops the searches it would skip
        run.searched.add((_norm(sub.text), _docs(access)))
        route = RouteName(self.options.step_route)
        result = self.retriever.search(sub.text, access, route, run.top_k)
        for stage, ms in result.trace.stages_ms.items():
            run.stages_ms[stage] = run.stages_ms.get(stage, 0.0) + ms
        if run.first is None:
            run.first = result
        run.doc_ids.update(result.trace.doc_ids)
        ranking: list[PageKey] = []
        for hit in result.hits:
            key = (hit.doc_id, hit.page_number)
            ranking.append(key)
            run.hits.setdefault(key, hit)
        run.rankings.append(ranking)
        counted = ranking[: self.options.sub_query_top_k]
        new = [key for key in counted if key not in run.evidence]
        run.evidence.update(new)
        candidates = self._read_hits(run, result.hits[: self.options.read_pages])
        references, followed = self._follow(run, candidates)
        return SearchStep(
            step=number,
            action="search",
            sub_query=sub.text,
            scope=sub.scope,
            pages=counted,
            new_pages=new + followed,
            references=references,
            elapsed_ms=_ms(self.clock() - since),
        )

    def _follow_step(self, run: _Run, number: int) -> SearchStep:
        """One more hop: the references on the pages the previous hop reached."""
        since = self.clock()
        pages, run.frontier = run.frontier, []
        candidates: list[ReferenceCandidate] = []
        for rank, key in enumerate(pages, start=1):
            for payload in self._page_chunks(run, key):
                candidates.extend(_candidates(payload, key, rank))
        references, followed = self._follow(run, candidates)
        return SearchStep(
            step=number,
            action="follow",
            pages=pages,
            new_pages=followed,
            references=references,
            elapsed_ms=_ms(self.clock() - since),
        )

    def _read_hits(self, run: _Run, hits: Sequence[PageHit]) -> list[ReferenceCandidate]:
        """The references in the chunks each hit was found by (their full text, by id)."""
        ids: dict[str, tuple[PageKey, int]] = {}
        for rank, hit in enumerate(hits, start=1):
            for chunk_id in hit.chunk_ids:
                if chunk_id:
                    pid = point_id(run.access.tenant, chunk_id)
                    ids.setdefault(pid, ((hit.doc_id, hit.page_number), rank))
        payloads = self.retriever.chunk_store.retrieve(list(ids), run.access) if ids else {}
        candidates: list[ReferenceCandidate] = []
        for pid, (key, rank) in ids.items():  # hit order, then the page's chunk order
            if pid in payloads:
                candidates.extend(_candidates(payloads[pid], key, rank))
        return candidates

    def _follow(  # noqa: C901  # one pass over the candidates, each outcome traced in place
        self, run: _Run, candidates: Sequence[ReferenceCandidate]
    ) -> tuple[list[FollowedReference], list[PageKey]]:
        """Follow the planner's choice of ``candidates``, one hop, at most ``follow_per_step``;
        every reference read is recorded with what became of it."""
        options = self.options
        common = self._common_terms(run, {c.page[0] for c in candidates})
        chosen = self.planner.order_references(run.query, candidates, common)
        picked = {id(c) for c in chosen}
        records: list[FollowedReference] = []
        new: list[PageKey] = []
        follows = 0
        for candidate in chosen:
            key = _reference_key(candidate)
            if key in run.seen_references:
                continue
            record = _record(candidate)
            pages, reason = self._resolve(run, candidate)
            record.pages = pages
            targets = self._targets(run, candidate, pages)
            if not pages:
                record.skipped = reason or "unresolved"
            elif not targets:
                record.skipped = "its own page"
            elif follows >= options.follow_per_step:
                record.skipped = "step limit reached"  # a later step may still follow it
            else:
                follows += 1
                record.followed = True
                for target in targets:
                    if target in run.evidence:  # found already: it moves up, nothing new
                        self._link(run, candidate.page, target)
                    else:
                        self._add_followed(run, candidate.page, target)
                        new.append(target)
            if record.skipped != "step limit reached":
                run.seen_references.add(key)
            if len(records) < MAX_RECORDED_REFERENCES or record.followed:
                records.append(record)
        passed: set[tuple[Any, ...]] = set()
        for candidate in candidates:  # what the planner left out, once each
            key = _reference_key(candidate)
            if id(candidate) in picked or key in run.seen_references or key in passed:
                continue
            passed.add(key)
            if len(records) < MAX_RECORDED_REFERENCES:
                record = _record(candidate)
                record.skipped = "none of the question's words near it"
                records.append(record)
        return records, new

    def _targets(
        self, run: _Run, candidate: ReferenceCandidate, pages: Sequence[PageKey]
    ) -> list[PageKey]:
        """The pages of a resolved reference worth adding: those of its first run of
        consecutive pages (the resolver lists its best match first; a later run is another
        section that happens to share the number, e.g. an exhibit list's "3."), not the
        passage's own page, and of a longer target (a note spanning six pages, "Note 7D" read
        as Note 7) the ``pages_per_reference`` sharing most words with the question and the
        sentence that pointed there, in reading order on a tie."""
        run_pages: list[PageKey] = []
        for key in pages:
            if run_pages and (key[0] != run_pages[-1][0] or key[1] != run_pages[-1][1] + 1):
                break
            run_pages.append(key)
        others = [key for key in run_pages if key != candidate.page]
        keep = self.options.pages_per_reference
        if len(others) <= keep:
            return others
        terms = set(tokenize(run.query)) | set(tokenize(candidate.context))
        shared = {
            key: len(
                terms.intersection(
                    tokenize(" ".join(str(p.get("text", "")) for p in self._page_chunks(run, key)))
                )
            )
            for key in others
        }
        return sorted(others, key=lambda key: -shared[key])[:keep]

    def _add_followed(self, run: _Run, source: PageKey, target: PageKey) -> None:
        """``target`` joins the evidence, right after ``source`` in the merged order, and its
        references are read by the next hop."""
        run.evidence.add(target)
        run.frontier.append(target)
        run.doc_ids.add(target[0])
        if target not in run.hits:
            run.hits[target] = _page_hit(target, self._page_chunks(run, target), self.retriever)
        self._link(run, source, target)

    @staticmethod
    def _link(run: _Run, source: PageKey, target: PageKey) -> None:
        """``target`` goes right after ``source`` in the merged order (unless it ranks
        higher already); a page found by a search keeps its route scores."""
        following = run.after.setdefault(source, [])
        if target not in following:
            following.append(target)
        if target in run.hits:
            run.hits[target].route_scores[FOLLOWED_ROUTE] = 1.0

    def _resolve(
        self, run: _Run, candidate: ReferenceCandidate
    ) -> tuple[list[PageKey], str | None]:
        doc_id, page = candidate.page
        view = self._structure(run, doc_id)
        structure = view.structure if view is not None else None
        found = candidate.found
        if found.step is not None:  # "continued on the next page"
            target = page + found.step
            count = len(structure.pages) if structure is not None and structure.pages else None
            if count is None:
                count = max(self._document_pages(run, doc_id), default=0)
            if not 1 <= target <= count:
                return [], f"no page {target} ({count} pages)"
            return [(doc_id, target)], None
        if view is None:
            return [], "no structure known for the document"
        resolution = view.resolve(found.reference)
        return [(doc_id, n) for n in resolution.pages], resolution.reason

    # -- reads (cached per run) ----------------------------------------------------------------

    def _common_terms(self, run: _Run, doc_ids: set[str]) -> frozenset[str]:
        """The question's terms found on more than ``COMMON_SHARE`` of the pages of any of
        ``doc_ids`` (documents of at least ``COMMON_MIN_PAGES`` pages): a Pew report's survey
        name, a filing's company name. Page frequencies are computed once per document
        version and kept (``DF_CACHE_SIZE`` documents)."""
        terms = set(tokenize(run.query))
        common: set[str] = set()
        for doc_id in sorted(doc_ids):
            pages, frequency = self._page_frequency(run, doc_id)
            if pages >= COMMON_MIN_PAGES:
                common.update(t for t in terms if frequency.get(t, 0) > COMMON_SHARE * pages)
        return frozenset(common)

    def _page_frequency(self, run: _Run, doc_id: str) -> tuple[int, dict[str, int]]:
        view = self._structure(run, doc_id)
        key = (run.access.tenant, doc_id, view.structure.version if view is not None else "")
        with self._lock:
            cached = self._frequencies.get(key)
            if cached is not None:
                self._frequencies.move_to_end(key)
                return cached
        frequency: dict[str, int] = {}
        by_page = self._document_pages(run, doc_id)
        for payloads in by_page.values():
            for term in set(tokenize(" ".join(str(p.get("text", "")) for p in payloads))):
                frequency[term] = frequency.get(term, 0) + 1
        found = (len(by_page), frequency)
        with self._lock:
            self._frequencies[key] = found
            while len(self._frequencies) > DF_CACHE_SIZE:
                self._frequencies.popitem(last=False)
        return found

    def _structure(self, run: _Run, doc_id: str) -> StructureView | None:
        """The document's structure (once per run; a stack's cache keeps it across runs)."""
        if doc_id not in run.structures:
            routes = self.retriever.structure_routes
            view = routes.views.view_of(run.access, doc_id) if routes is not None else None
            run.structures[doc_id] = view
        return run.structures[doc_id]

    def _document_pages(self, run: _Run, doc_id: str) -> dict[int, list[dict[str, Any]]]:
        """Every chunk of a document ``access`` may read, by page, in reading order."""
        if doc_id not in run.pages:
            access = run.access.model_copy(update={"doc_ids": [doc_id]})
            by_page: dict[int, list[dict[str, Any]]] = {}
            for point in self.retriever.chunk_store.visible_points(access):
                for n in point.payload.get("page_numbers") or []:
                    by_page.setdefault(int(n), []).append(point.payload)
            for payloads in by_page.values():
                payloads.sort(key=lambda payload: payload.get("seq", 0))
            run.pages[doc_id] = by_page
        return run.pages[doc_id]

    def _page_chunks(self, run: _Run, key: PageKey) -> list[dict[str, Any]]:
        """The chunks of one page ``access`` may read, in reading order: from the whole
        document when it was read, else by id when the stack's cache knows which chunks lie
        on the page (a followed reference's page does not cost a read of its document)."""
        doc_id, page = key
        if doc_id not in run.pages and key not in run.page_chunks:
            found = self._read_page(run, key)
            if found is not None:
                run.page_chunks[key] = found
        if key in run.page_chunks:
            return run.page_chunks[key]
        return self._document_pages(run, doc_id).get(page, [])

    def _read_page(self, run: _Run, key: PageKey) -> list[dict[str, Any]] | None:
        """The page's chunks read by id (see :meth:`_page_chunks`); None without a page map,
        or when a chunk of the page cannot be read (hidden from ``access``, or gone): then
        the whole document is read, as without a cache."""
        cache = self.retriever.structure_cache
        if cache is None:
            return None
        doc_id, page = key
        pages = cache.page_chunks(run.access.tenant, doc_id)
        if pages is None:
            return None
        ids = pages.ids_on([page])
        access = run.access.model_copy(update={"doc_ids": [doc_id]})
        found = self.retriever.chunk_store.retrieve(ids, access) if ids else {}
        if len(found) < len(ids):
            return None
        payloads = [found[i] for i in ids]
        payloads.sort(key=lambda payload: payload.get("seq", 0))
        return payloads


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _docs(access: AccessFilter) -> tuple[str, ...] | None:
    return None if access.doc_ids is None else tuple(sorted(access.doc_ids))


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _candidates(payload: dict[str, Any], key: PageKey, rank: int) -> list[ReferenceCandidate]:
    text = str(payload.get("text", ""))
    chunk_id = payload.get("chunk_id")
    return [
        ReferenceCandidate(
            found=found,
            page=key,
            chunk_id=str(chunk_id) if chunk_id else None,
            rank=rank,
            context=context_of(text, found.start, found.end),
        )
        for found in references_in_text(text)
    ]


def _record(candidate: ReferenceCandidate) -> FollowedReference:
    return FollowedReference(
        reference=candidate.found.reference,
        found_on=candidate.page,
        chunk_id=candidate.chunk_id,
        cue=candidate.found.cue,
    )


def _reference_key(candidate: ReferenceCandidate) -> tuple[Any, ...]:
    """One reference per document (and, for "continued", per page): "Note 7" read on three
    pages is followed once."""
    ref = candidate.found.reference
    value = ref.value.casefold() if ref.value else None
    where = candidate.page if candidate.found.step is not None else candidate.page[0]
    return (where, ref.kind, value, ref.end, ref.position, candidate.found.step)


def _merge(
    rankings: Sequence[Sequence[PageKey]], after: dict[PageKey, list[PageKey]]
) -> list[PageKey]:
    """Round-robin over the rankings (first pages of each, then second pages, ...), each page
    once, every followed page right after the page that referenced it."""
    order: list[PageKey] = []
    placed: set[PageKey] = set()

    def emit(key: PageKey) -> None:
        if key in placed:
            return
        placed.add(key)
        order.append(key)
        for target in after.get(key, []):
            emit(target)

    for i in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if i < len(ranking):
                emit(ranking[i])
    return order


def _page_hit(key: PageKey, payloads: Sequence[dict[str, Any]], retriever: Retriever) -> PageHit:
    """A page no search ranked, as a hit: its chunks in reading order (the first gives the
    snippet), its label and boxes."""
    doc_id, page = key
    first = payloads[0] if payloads else {}
    hit = PageHit(
        doc_id=doc_id,
        page_number=page,
        page_label=(first.get("page_labels") or {}).get(str(page)),
        rank=1,
        score=0.0,
        title=first.get("title"),
        source_uri=first.get("source_uri"),
    )
    if payloads:
        hit.snippet = snippet(
            str(first.get("text", "")),
            retriever.options.snippet_chars,
            table_row=first.get("unit") == "table_row",
        )
        hit.bboxes = [BBox.of(box) for n, box in first.get("bboxes") or [] if n == page]
    for payload in payloads:
        hit.chunk_ids.append(str(payload.get("chunk_id", "")))
        hit.element_ids.extend(payload.get("element_ids") or [])
        hit.kinds.extend(k for k in payload.get("kinds") or [] if k not in hit.kinds)
    return hit
