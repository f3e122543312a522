"""Route agentic (pagesight.query.multistep) over a scripted retriever: the loop's stop rules, the
cross-reference hop, the merge of the parts' rankings, scoping to the leading document, and
which routes it takes over."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from pagesight.core.ids import point_id
from pagesight.core.settings import MultiStepOptions, RetrievalOptions
from pagesight.core.types import (
    AccessFilter,
    DocumentStructure,
    PageHit,
    PageKey,
    RetrievalTrace,
    RouteName,
    SearchResult,
    StructurePage,
    StructureSection,
)
from pagesight.index.base import StoredPoint
from pagesight.query.multistep import FOLLOWED_ROUTE, MultiStepSearch
from pagesight.query.retrieval import Retriever
from pagesight.query.structure_cache import FreshViews

ACCESS = AccessFilter(tenant="t")


class Store:
    """The chunk index's reads: one chunk per page, ``texts[(doc, page)]``."""

    collection = "chunks__v1"

    def __init__(self, texts: dict[PageKey, str]) -> None:
        self.payloads = {
            point_id("t", _chunk(key)): {
                "chunk_id": _chunk(key),
                "doc_id": key[0],
                "page_numbers": [key[1]],
                "page_labels": {str(key[1]): str(key[1])},
                "seq": key[1],
                "text": text,
                "title": key[0],
            }
            for key, text in texts.items()
        }
        self.reads: list[str] = []

    def retrieve(self, ids: Sequence[str], access: AccessFilter | None = None) -> dict[str, Any]:
        self.reads.append("retrieve")
        return {i: self.payloads[i] for i in ids if i in self.payloads}

    def visible_points(self, access: AccessFilter, fields: Any = None) -> list[StoredPoint]:
        self.reads.append(f"document {access.doc_ids}")
        docs = set(access.doc_ids or [])
        return [StoredPoint(i, p) for i, p in self.payloads.items() if p["doc_id"] in docs]


class Structures:
    def __init__(self, structures: dict[str, DocumentStructure]) -> None:
        self.structures = structures

    def structure_of(self, access: AccessFilter, doc_id: str) -> DocumentStructure | None:
        return self.structures.get(doc_id)


class Routes:
    def __init__(self, structures: Structures) -> None:
        self.structures = structures
        self.views = FreshViews(structures)


class Clock:
    """Time that passes only when the scripted retriever searches."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScriptedRetriever:
    """``search`` answers from ``rankings[query]`` (pages best first), restricted to
    ``access.doc_ids``; each search takes ``search_s`` on ``clock``."""

    def __init__(
        self,
        rankings: dict[str, list[PageKey]],
        texts: dict[PageKey, str] | None = None,
        structures: dict[str, DocumentStructure] | None = None,
        clock: Clock | None = None,
        search_s: float = 0.05,
    ) -> None:
        self.rankings = rankings
        pages = {key for ranking in rankings.values() for key in ranking}
        self.chunk_store = Store({key: "" for key in pages} | (texts or {}))
        self.structure_routes = Routes(Structures(structures or {}))
        self.structure_cache = None
        self.options = RetrievalOptions()
        self.visual_available = False
        self.clock = clock or Clock()
        self.search_s = search_s
        self.calls: list[tuple[str, RouteName, list[str] | None]] = []

    def search(
        self,
        query: str,
        access: AccessFilter,
        route: RouteName = RouteName.AUTO,
        top_k: int = 10,
        trace_id: str | None = None,
    ) -> SearchResult:
        self.calls.append((query, route, access.doc_ids))
        self.clock.now += self.search_s
        ranking = [
            key
            for key in self.rankings.get(query, [])
            if access.doc_ids is None or key[0] in access.doc_ids
        ][:top_k]
        hits = [
            PageHit(
                doc_id=doc,
                page_number=page,
                rank=rank,
                score=1.0 / rank,
                chunk_ids=[_chunk((doc, page))],
                route_scores={"dense": 0.5},
            )
            for rank, (doc, page) in enumerate(ranking, start=1)
        ]
        trace = RetrievalTrace(
            trace_id="x",
            query=query,
            requested_route=route,
            route=route,
            doc_ids=sorted({doc for doc, _ in ranking}),
        )
        return SearchResult(hits=hits, trace=trace)


def _chunk(key: PageKey) -> str:
    return f"{key[0]}:{key[1]}"


def _search(retriever: ScriptedRetriever, **options: Any) -> MultiStepSearch:
    return MultiStepSearch(
        cast(Retriever, retriever), options=MultiStepOptions(**options), clock=retriever.clock
    )


def _pages(result: SearchResult) -> list[PageKey]:
    return [(h.doc_id, h.page_number) for h in result.hits]


def _report(doc: str, pages: int) -> DocumentStructure:
    """A filing whose notes section holds Note 7 on page 9 and Note 8 on page 10."""
    return DocumentStructure(
        doc_id=doc,
        version="v1",
        pages=[StructurePage(page_number=n, label=str(n)) for n in range(1, pages + 1)],
        sections=[
            StructureSection(title="Notes to the financial statements", page_start=8, page_end=10),
            StructureSection(
                title="Note 7 — Income taxes", level=2, number="Note 7", page_start=9, page_end=9
            ),
            StructureSection(
                title="Note 8 — Leases", level=2, number="Note 8", page_start=10, page_end=10
            ),
        ],
    )


TAX = "What was the effective tax rate?"


# -- a plain question and the cross-reference hop ------------------------------------------------


def test_a_plain_question_is_the_text_search() -> None:
    retriever = ScriptedRetriever({TAX: [("a", 3), ("b", 1), ("a", 4)]})
    result = _search(retriever).search(TAX, ACCESS, RouteName.AGENTIC, 10)
    assert _pages(result) == [("a", 3), ("b", 1), ("a", 4)]
    assert [h.rank for h in result.hits] == [1, 2, 3]
    assert retriever.calls == [(TAX, RouteName.AUTO, None)]
    trace = result.trace
    assert trace.route == RouteName.AGENTIC and trace.requested_route == RouteName.AGENTIC
    assert trace.multistep is not None and trace.multistep.plan_kind == "single"
    assert trace.multistep.stop_reason == "plan_done"
    (step,) = trace.multistep.steps
    assert step.action == "search" and step.sub_query == TAX
    assert step.new_pages == [("a", 3), ("b", 1), ("a", 4)]
    assert trace.stages_ms.keys() == {"plan", "step1", "fuse"}


def test_a_referenced_page_follows_the_page_that_names_it() -> None:
    retriever = ScriptedRetriever(
        {TAX: [("a", 3), ("b", 1), ("a", 4)]},
        texts={
            ("a", 3): "Our tax rate rose. For the reconciliation of the tax rate, see Note 7.",
            ("a", 9): "Note 7 — Income taxes. Statutory rate 21.0 %, effective 24.1 %.",
        },
        structures={"a": _report("a", 12)},
    )
    result = _search(retriever).search(TAX, ACCESS, RouteName.AGENTIC, 10)
    assert _pages(result)[:3] == [("a", 3), ("a", 9), ("b", 1)]
    followed = result.hits[1]
    assert followed.route_scores == {FOLLOWED_ROUTE: 1.0}
    assert followed.chunk_ids == ["a:9"] and followed.snippet.startswith("Note 7")
    trace = result.trace.multistep
    assert trace is not None
    first, hop = trace.steps
    (reference,) = first.references
    assert reference.reference.kind == "note" and reference.reference.value == "7"
    assert reference.found_on == ("a", 3) and reference.cue == "see" and reference.followed
    assert reference.pages == [("a", 9)]
    assert ("a", 9) in first.new_pages
    # the hop's page names nothing further: the next step finds nothing new, and stops
    assert hop.action == "follow" and hop.pages == [("a", 9)] and hop.new_pages == []
    assert trace.stop_reason == "no_new_evidence"


def test_a_referenced_page_already_found_moves_up() -> None:
    retriever = ScriptedRetriever(
        {TAX: [("a", 3), ("b", 1), ("b", 2), ("a", 9)]},
        texts={("a", 3): "For the reconciliation of the tax rate, see Note 7."},
        structures={"a": _report("a", 12)},
    )
    result = _search(retriever).search(TAX, ACCESS, RouteName.AGENTIC, 10)
    assert _pages(result) == [("a", 3), ("a", 9), ("b", 1), ("b", 2)]
    assert result.hits[1].route_scores == {"dense": 0.5, FOLLOWED_ROUTE: 1.0}
    trace = result.trace.multistep
    assert trace is not None
    (step,) = trace.steps  # nothing new to read: no second hop
    (reference,) = step.references
    assert reference.followed and reference.pages == [("a", 9)]
    assert step.new_pages == [("a", 3), ("b", 1), ("b", 2), ("a", 9)]
    assert trace.stop_reason == "plan_done"


def test_words_on_most_pages_of_a_document_do_not_make_a_reference_on_topic() -> None:
    question = "What does the Acme survey say about tax rate trends?"
    pages = {("a", n): f"Acme survey page {n}." for n in range(1, 13)}
    pages[("a", 3)] = "Acme survey results: see Note 7."  # shares only 'Acme', 'survey'
    retriever = ScriptedRetriever(
        {question: [("a", 3)]}, texts=pages, structures={"a": _report("a", 12)}
    )
    result = _search(retriever).search(question, ACCESS, RouteName.AGENTIC, 10)
    trace = result.trace.multistep
    assert trace is not None
    (reference,) = trace.steps[0].references
    assert not reference.followed and reference.skipped == "none of the question's words near it"
    assert _pages(result) == [("a", 3)]


def test_references_that_lead_nowhere_are_reported_not_followed() -> None:
    retriever = ScriptedRetriever(
        {TAX: [("a", 9), ("a", 3)]},
        texts={
            ("a", 9): "Note 7 — Income taxes: the tax rate. See Note 7 above and Note 31.",
            ("a", 3): "The tax rate is discussed in Table 2.",
        },
        structures={"a": _report("a", 12)},
    )
    result = _search(retriever).search(TAX, ACCESS, RouteName.AGENTIC, 10)
    trace = result.trace.multistep
    assert trace is not None
    records = {r.reference.text: r for r in trace.steps[0].references}
    assert records["Note 7"].skipped == "its own page"
    assert records["Note 31"].skipped == "no Note 31" and not records["Note 31"].followed
    assert records["Table 2"].skipped and "Table 2" in records["Table 2"].skipped
    assert _pages(result) == [("a", 9), ("a", 3)]
    assert trace.stop_reason == "plan_done"


def test_follows_are_capped_per_step_and_continued_pages_resolve() -> None:
    retriever = ScriptedRetriever(
        {TAX: [("a", 3)]},
        texts={("a", 3): "Tax rate: see Note 7 and Note 8 (continued on next page)"},
        structures={"a": _report("a", 12)},
    )
    result = _search(retriever, follow_per_step=2).search(TAX, ACCESS, RouteName.AGENTIC, 10)
    trace = result.trace.multistep
    assert trace is not None
    records = trace.steps[0].references
    followed = [(r.reference.kind, r.reference.value) for r in records if r.followed]
    assert followed == [("note", "7"), ("note", "8")]
    (limited,) = [r for r in records if not r.followed]
    assert limited.skipped == "step limit reached" and limited.pages == [("a", 4)]
    assert _pages(result) == [("a", 3), ("a", 9), ("a", 10)]


# -- comparisons: one search per part, merged fairly ---------------------------------------------


COMPARE = "Compare net revenue in 2019 and 2020"


def test_each_part_of_a_comparison_has_pages_in_the_top_five() -> None:
    retriever = ScriptedRetriever(
        {
            COMPARE: [("r", 1), ("r", 2), ("r", 3), ("r", 4), ("r", 5), ("r", 6)],
            "net revenue in 2019": [("r", 19), ("r", 1), ("r", 18)],
            "net revenue in 2020": [("r", 20), ("r", 2), ("r", 21)],
        }
    )
    result = _search(retriever).search(COMPARE, ACCESS, RouteName.AGENTIC, 10)
    assert _pages(result)[:5] == [("r", 1), ("r", 19), ("r", 20), ("r", 2), ("r", 3)]
    assert [query for query, *_ in retriever.calls] == [
        COMPARE,
        "net revenue in 2019",
        "net revenue in 2020",
    ]
    trace = result.trace.multistep
    assert trace is not None and trace.plan_kind == "comparison"
    assert trace.sub_queries == ["net revenue in 2019", "net revenue in 2020"]
    assert [s.new_pages for s in trace.steps[1:]] == [
        [("r", 19), ("r", 18)],
        [("r", 20), ("r", 21)],
    ]
    assert trace.stop_reason == "plan_done"


def test_stops_at_max_steps() -> None:
    question = "Revenue in 2018, 2019 and 2020"
    retriever = ScriptedRetriever(
        {
            question: [("r", 1)],
            "Revenue in 2018": [("r", 18)],
            "Revenue in 2019": [("r", 19)],
            "Revenue in 2020": [("r", 20)],
        }
    )
    result = _search(retriever, max_steps=3).search(question, ACCESS, RouteName.AGENTIC, 10)
    trace = result.trace.multistep
    assert trace is not None and trace.stop_reason == "max_steps" and len(trace.steps) == 3
    assert len(retriever.calls) == 3 and ("r", 20) not in _pages(result)


def test_stops_when_a_step_adds_no_new_page() -> None:
    retriever = ScriptedRetriever(
        {
            COMPARE: [("r", 1), ("r", 2)],
            "net revenue in 2019": [("r", 2), ("r", 1)],  # nothing the question did not find
            "net revenue in 2020": [("r", 20)],
        }
    )
    result = _search(retriever).search(COMPARE, ACCESS, RouteName.AGENTIC, 10)
    trace = result.trace.multistep
    assert trace is not None and trace.stop_reason == "no_new_evidence"
    assert len(trace.steps) == 2 and trace.steps[1].new_pages == []
    assert len(retriever.calls) == 2


def test_stops_when_the_time_budget_is_spent() -> None:
    retriever = ScriptedRetriever(
        {
            COMPARE: [("r", 1)],
            "net revenue in 2019": [("r", 19)],
            "net revenue in 2020": [("r", 20)],
        },
        search_s=2.0,
    )
    result = _search(retriever, time_budget_ms=3000).search(COMPARE, ACCESS, RouteName.AGENTIC)
    trace = result.trace.multistep
    # step 1 ends at 2 s, step 2 starts (2 s < 3 s) and ends at 4 s, step 3 never starts
    assert trace is not None and trace.stop_reason == "time_budget" and len(trace.steps) == 2
    assert [s.elapsed_ms for s in trace.steps] == [2000.0, 2000.0]
    assert _pages(result) == [("r", 1), ("r", 19)]


def test_an_empty_index_stops_at_once() -> None:
    result = _search(ScriptedRetriever({})).search(COMPARE, ACCESS, RouteName.AGENTIC)
    trace = result.trace.multistep
    assert result.hits == [] and trace is not None
    assert trace.stop_reason == "no_new_evidence" and len(trace.steps) == 1


# -- lists: a second search inside the leading document ------------------------------------------


def test_a_list_is_searched_again_inside_the_leading_document() -> None:
    question = "List all sensors connected to the ECU"
    retriever = ScriptedRetriever(
        {question: [("deck", 5), ("other", 2), ("deck", 6), ("other", 3), ("deck", 9)]}
    )
    result = _search(retriever).search(question, ACCESS, RouteName.AGENTIC, 5)
    assert retriever.calls == [
        (question, RouteName.AUTO, None),
        (question, RouteName.AUTO, ["deck"]),
    ]
    assert _pages(result) == [("deck", 5), ("other", 2), ("deck", 6), ("deck", 9), ("other", 3)]
    trace = result.trace.multistep
    assert trace is not None and trace.plan_kind == "list"
    assert trace.steps[1].scope == "lead_document"


def test_a_list_scoped_to_one_document_is_searched_once() -> None:
    question = "List all sensors connected to the ECU"
    retriever = ScriptedRetriever({question: [("deck", 5), ("deck", 6)]})
    scoped = ACCESS.model_copy(update={"doc_ids": ["deck"]})
    result = _search(retriever).search(question, scoped, RouteName.AGENTIC, 5)
    assert retriever.calls == [(question, RouteName.AUTO, ["deck"])]
    trace = result.trace.multistep
    assert trace is not None and trace.stop_reason == "plan_done"


# -- which routes it serves ------------------------------------------------------------------------


@pytest.mark.parametrize("route", [RouteName.TEXT, RouteName.KEYWORD, RouteName.AUTO])
def test_other_routes_go_to_the_retriever(route: RouteName) -> None:
    retriever = ScriptedRetriever({TAX: [("a", 1)]})
    result = _search(retriever).search(TAX, ACCESS, route, 10)
    assert retriever.calls == [(TAX, route, None)] and result.trace.multistep is None


def test_auto_takes_clearly_multi_part_questions_only() -> None:
    retriever = ScriptedRetriever({COMPARE: [("r", 1)], "net revenue in 2019": [("r", 19)]})
    search = _search(retriever)
    assert search.chooses(COMPARE) and not search.chooses(TAX)
    assert not search.chooses("List all sensors connected to the ECU")
    result = search.search(COMPARE, ACCESS, RouteName.AUTO, 10)
    assert result.trace.requested_route == RouteName.AUTO
    assert result.trace.route == RouteName.AGENTIC
    assert not _search(retriever, auto_route=False).chooses(COMPARE)


def test_the_step_route_is_configurable() -> None:
    retriever = ScriptedRetriever({TAX: [("a", 1)]})
    _search(retriever, step_route="keyword").search(TAX, ACCESS, RouteName.AGENTIC)
    assert retriever.calls == [(TAX, RouteName.KEYWORD, None)]
