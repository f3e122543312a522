"""Counting questions (pagesight.query.counting, counting_questions): what a question counts,
in English and Japanese; what a small built structure counts; the ``count`` route returning
every counted page; the answer step's structure count; and a query with no counting cue
never reaching the counter.

The structure is built by hand (eight pages, two sections) and the chunk index is a fake that
serves the payloads ingestion writes (kinds, text, parser, page numbers), so each count is
known exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from pagesight.api.models import AnswerRequest
from pagesight.core.settings import AnswerOptions, RetrievalOptions
from pagesight.core.types import (
    AccessFilter,
    DocumentStructure,
    Passage,
    RouteName,
    StructureItem,
    StructurePage,
    StructureSection,
)
from pagesight.index.base import StoredPoint, VectorStore
from pagesight.models.reranker import FusedScoreRanker
from pagesight.query.answer import AnswerPipeline
from pagesight.query.counting import (
    StructureCounter,
    count_question,
    count_sentence,
    structure_answer,
)
from pagesight.query.counting_questions import has_count_cue
from pagesight.query.routes import CountRoute, Leading, RouteContext, counter_of, default_routes
from pagesight.query.structure_cache import StructureView
from tests.fakes import TableSearch

ACCESS = AccessFilter(tenant="t")
DOC = "report"


# -- the question ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How many figures are in the report?", {"target": "figure", "noun": "figures"}),
        ("How many slides are in the deck?", {"target": "page", "noun": "slides"}),
        ("How many pages does the report have?", {"target": "page", "noun": "pages"}),
        ("How many pages contain tables?", {"target": "table", "per_page": True}),
        ("how many slides have bar charts?", {"target": "chart", "per_page": True}),
        ("How many pie charts are there?", {"target": "chart", "kinds": ("pie",)}),
        ("count the equations", {"target": "equation"}),
        ("What is the number of images in the brochure?", {"target": "image"}),
        ("List all tables in Section 3", {"target": "table", "listing": True}),
        ("which slides mention Airbus?", {"target": "page", "listing": True}),
        ("How many charts show sales over the years?", {"over_years": True}),
        ("How many figures are related to Airbus?", {"terms": ("airbus",)}),
        ('How many tables include "F1" as a metric?', {"quoted": True}),
        ("How many figures in the first 10 pages?", {"edge": 10}),
        ("How many figures are on the last 3 slides?", {"edge": -3}),
        ("図はいくつありますか", {"target": "figure"}),
        ("何枚のスライドがありますか", {"target": "page", "noun": "slides"}),
        ("表の数は？", {"target": "table"}),
        ("表があるページはいくつ", {"target": "table", "per_page": True}),
        ("棒グラフはいくつ", {"target": "chart", "kinds": ("bar",)}),
        ("表を一覧にしてください", {"target": "table", "listing": True}),
        ("このレポートは何ページありますか", {"target": "page"}),
        ("Airbusに関する図はいくつ", {"target": "figure", "terms": ("airbus",)}),
    ],
)
def test_counting_questions(query: str, expected: dict[str, Any]) -> None:
    question = count_question(query)
    assert question is not None, query
    for name, value in expected.items():
        assert getattr(question, name) == value, (query, name, question)


@pytest.mark.parametrize(
    "query",
    [
        "How many employees does the company have?",
        "What tables show revenue by region?",
        "How many pages for the hatom data type in the Structured Markup?",
        "What does Figure 3 show?",
        "What was the revenue in 2023?",
        "図は何ページにありますか",  # which page, not how many
        "図3の数値は？",
        "売上高の推移を教えてください",
    ],
)
def test_not_counting_questions(query: str) -> None:
    assert count_question(query) is None


def test_scopes_are_read() -> None:
    section = count_question("How many tables are in Section 2?")
    assert section is not None and section.scope is not None
    assert (section.scope.kind, section.scope.value) == ("section", "2")
    pages = count_question("How many charts are between pages 5 and 10?")
    assert pages is not None and pages.scope is not None
    assert (pages.scope.kind, pages.scope.value, pages.scope.end) == ("page", "5", "10")
    chapter = count_question("第2章の図の数")
    assert chapter is not None and chapter.scope is not None and chapter.scope.kind == "chapter"
    # an instruction after the question is not what is counted
    told = count_question("How many bar charts are in the report?Please answer in integers.")
    assert told is not None and told.terms == ()


def test_the_cue_test_is_a_substring_test() -> None:
    assert not has_count_cue("What was the operating margin in 2022?")
    assert has_count_cue("How many figures?") and has_count_cue("図はいくつ")
    assert not has_count_cue("how many figures? " * 500)  # too long to be a question


# -- a small built structure -------------------------------------------------------------------


def _payload(page: int, kinds: list[str], text: str, parser: str = "text-layer") -> dict[str, Any]:
    return {
        "doc_id": DOC,
        "page_numbers": [page],
        "kinds": kinds,
        "text": text,
        "chunk_id": f"c{page}-{kinds[0]}-{len(text)}",
        "element_ids": [f"e{page}-{kinds[0]}"],
        "bboxes": [[page, [10.0, 20.0, 200.0, 220.0]]],
        "parser": [parser],
        "unit": "chunk",
    }


PAYLOADS = [
    _payload(1, ["title", "text"], "Annual review 2023. Welcome to the annual review."),
    _payload(2, ["figure", "caption"], "Figure 1: Our new headquarters in Toulouse"),
    _payload(2, ["text"], "The company moved to new offices."),
    _payload(3, ["table"], "Table 1: Revenue by region\n| Region | 2022 | 2023 |\n|---|---|---|"),
    _payload(4, ["text"], "Section 2 discusses markets and Airbus orders."),
    _payload(5, ["figure"], "Figure 2: Orders over time 2019 2020 2021 2022 2023 120 140 160"),
    _payload(6, ["table"], "| Segment | Share | F1 |\n|---|---|---|\n| A | 40% | 0.9 |"),
    {**_payload(6, ["table"], "Revenue | 2023: 12 (row)"), "unit": "table_row"},
    _payload(7, ["figure", "caption"], "Figure 3: Bar chart of Airbus deliveries 10 20 30"),
    _payload(8, ["text"], "Scanned appendix page", parser="tesseract"),
]
STRUCTURE = DocumentStructure(
    doc_id=DOC,
    version="v1",
    pages=[StructurePage(page_number=n) for n in range(1, 9)],
    sections=[
        StructureSection(title="1 Company", number="1", page_start=1, page_end=3),
        StructureSection(title="2 Markets", number="2", page_start=4, page_end=8),
    ],
    items=[
        StructureItem(kind="figure", number="1", caption="Figure 1", page_number=2,
                      element_id="e2-figure"),
        # a caption whose picture carries no words: no chunk, still a figure on page 4
        StructureItem(kind="figure", number="4", caption="Figure 4: Map of plants",
                      page_number=4, element_id="e4-caption"),
    ],
)  # fmt: skip


class Index:
    """The chunk index as the counter reads it: one document's payloads, reads counted."""

    collection = "chunks__v1"

    def __init__(self, payloads: Sequence[dict[str, Any]]) -> None:
        self.payloads = list(payloads)
        self.reads = 0

    def points_of_document(
        self, tenant: str, doc_id: str, fields: Sequence[str] | None = None
    ) -> list[StoredPoint]:
        self.reads += 1
        return [StoredPoint(f"p{i}", dict(p)) for i, p in enumerate(self.payloads)]


class Views:
    """One view per document, kept (as the structure cache keeps it per version)."""

    def __init__(self, structure: DocumentStructure) -> None:
        self.view = StructureView(structure)

    def view_of(self, access: AccessFilter, doc_id: str) -> StructureView | None:
        return self.view if doc_id == self.view.doc_id else None


def _counter(
    payloads: Sequence[dict[str, Any]] = PAYLOADS, structure: DocumentStructure = STRUCTURE
) -> tuple[StructureCounter, Index]:
    index = Index(payloads)
    return StructureCounter(Views(structure), cast(VectorStore, index)), index


def _count(counter: StructureCounter, query: str) -> Any:
    question = count_question(query)
    assert question is not None, query
    found = counter.count_in(question, ACCESS, [DOC])
    assert found is not None
    return found


def test_counts_on_a_built_structure() -> None:
    counter, index = _counter()
    figures = _count(counter, "How many figures are in the report?")
    assert figures.pages == [2, 4, 5, 7] and len(figures.items) == 4
    assert figures.unknown == [8]  # read by OCR alone: not counted, and said so
    assert [i.number for i in figures.items] == ["1", "4", None, None]

    tables = _count(counter, "How many pages contain tables?")
    assert tables.pages == [3, 6] and len(tables.items) == 2  # the table row is no table
    assert _count(counter, "How many charts are there?").pages == [5, 7]
    assert _count(counter, "How many bar charts are there?").pages == [7]
    assert _count(counter, "How many charts show orders over the years?").pages == [5]
    assert _count(counter, "How many figures are related to Airbus?").pages == [7]
    assert _count(counter, 'How many tables include "F1"?').pages == [6]
    assert _count(counter, "How many figures are in Section 2?").pages == [4, 5, 7]
    assert _count(counter, "How many figures in the first 4 pages?").pages == [2, 4]
    assert _count(counter, "which pages mention Airbus?").pages == [4, 7]
    assert _count(counter, "How many pages does the report have?").pages == list(range(1, 9))
    # the inventory is built once, by one read of the index, for every question
    assert counter.built == 1 and index.reads == 2  # + one read of the pages' words


def test_what_the_count_says() -> None:
    counter, _ = _counter()
    said = count_sentence(_count(counter, "How many figures are in the report?"))
    assert said.startswith("Structure count: 4 pages in the parsed structure show figures")
    assert "(4 in all): p. 2, 4, 5, 7" in said
    assert "p. 8 have no figure or table layout" in said
    bars = count_sentence(_count(counter, "How many pie charts are there?"))
    assert "no caption or label in the parsed structure says 'pie'" in bars
    assert "p. 5, 7" in bars  # every chart, said to be every chart
    section = count_sentence(_count(counter, "How many pages does Section 2 span?"))
    assert section == "Structure count: Section 2 spans 5 pages: p. 4–8."
    nowhere = count_sentence(_count(counter, "How many tables are in Section 9?"))
    assert nowhere.startswith("Structure count not available: no Section 9")


def test_pages_without_structure_are_not_counted() -> None:
    scanned = [_payload(n, ["text"], f"slide {n} words", parser="tesseract") for n in (1, 2, 3)]
    structure = DocumentStructure(
        doc_id=DOC, version="v1", pages=[StructurePage(page_number=n) for n in (1, 2, 3)]
    )
    counter, _ = _counter(scanned, structure)
    found = _count(counter, "How many charts are in the deck?")
    assert not found.available and found.unknown == [1, 2, 3]
    said = count_sentence(found)
    assert said.startswith("Structure count not available")
    assert "cannot count charts" in said
    # pages are always countable
    assert _count(counter, "How many slides are in the deck?").available


# -- the route ---------------------------------------------------------------------------------


def _context(query: str, doc_ids: list[str] | None = None) -> RouteContext:
    access = AccessFilter(tenant="t", doc_ids=doc_ids)
    context = RouteContext(query, access, RouteName.TEXT, RetrievalOptions())
    ranked = [(DOC, 7), ("other", 1), (DOC, 2)]
    context.leading = Leading.of(ranked, access, RetrievalOptions())
    return context


def test_the_route_returns_every_counted_page() -> None:
    counter, _ = _counter()
    route = CountRoute(counter)
    found = route.search(_context("How many figures are in the report?"))
    assert found is not None
    # those the other routes ranked first, in their order, then page order
    assert [key for key, _ in found.pages] == [(DOC, 7), (DOC, 2), (DOC, 4), (DOC, 5)]
    scoped = route.search(_context("List the tables", doc_ids=[DOC]))
    assert scoped is not None and [k for k, _ in scoped.pages] == [(DOC, 3), (DOC, 6)]
    # a whole-document page count has no page to point at
    assert route.search(_context("How many pages does the report have?")) is None


class Spy(StructureCounter):
    """A counter that records being asked."""

    def __init__(self) -> None:
        counter, self.index = _counter()
        super().__init__(counter.views, counter.chunk_store)
        self.asked = 0

    def count_in(self, *args: Any, **kwargs: Any) -> Any:
        self.asked += 1
        return super().count_in(*args, **kwargs)


def test_a_query_without_a_counting_cue_never_reaches_the_counter() -> None:
    spy = Spy()
    route = CountRoute(spy)
    for query in ("What was revenue in 2023?", "Figure 3 on page 5", "売上高は？"):
        assert route.search(_context(query)) is None
    assert spy.asked == 0 and spy.index.reads == 0
    assert route.search(_context("How many tables are there?")) is not None
    assert spy.asked == 1


def test_the_route_is_registered_with_its_weight() -> None:
    from pagesight.query.structure_search import StructureRoutes

    structures = StructureRoutes(cast(Any, Views(STRUCTURE)))
    structures.views = Views(STRUCTURE)
    routes = default_routes(
        cast(VectorStore, Index(PAYLOADS)), cast(Any, None), cast(Any, None), None, None, structures
    )
    (route,) = [r for r in routes if r.name == "count"]
    assert route.reads_fusion and route.weight(RetrievalOptions()) == 3.0
    assert counter_of(routes) is cast(CountRoute, route).counter
    assert not route.enabled(RetrievalOptions(weights={"count": 0.0}))


# -- the answer --------------------------------------------------------------------------------

PASSAGE = Passage(
    chunk_id="c1", doc_id=DOC, page_number=7, text="Airbus deliveries rose.", score=0.9,
    title="Annual review", source_name="review.pdf",
)  # fmt: skip


def _pipeline(counter: StructureCounter) -> AnswerPipeline:
    return AnswerPipeline(
        TableSearch(default=[PASSAGE]), FusedScoreRanker(), None, AnswerOptions(), counter=counter
    )


def test_the_answer_is_a_structure_count_with_a_citation_per_page() -> None:
    spy = Spy()
    answered = _pipeline(spy).answer(
        AnswerRequest(query="How many figures are in the report?"), ACCESS, "trace-1"
    )
    assert answered.answer.startswith("Structure count: 4 pages in the parsed structure")
    assert not answered.abstained and answered.lead is not None and answered.lead.value == "4"
    assert [c.page_number for c in answered.citations] == [2, 4, 5, 7]
    assert answered.citations[0].quote.startswith("Figure 1: Our new headquarters")
    assert answered.citations[0].title == "Annual review"
    assert answered.sentences[0].citations == [1, 2, 3, 4]
    assert answered.confidence == pytest.approx(7 / 8)  # page 8 is unknown

    listed = _pipeline(spy).answer(AnswerRequest(query="List the tables"), ACCESS, "trace-2")
    assert listed.answer.startswith("Structure list: 2 pages")
    assert [u.text.split(":")[0] for u in listed.supporting] == ["table, p. 3", "table, p. 6"]


def test_the_answer_step_asks_the_counter_only_for_counting_questions() -> None:
    spy = Spy()
    answered = _pipeline(spy).answer(
        AnswerRequest(query="Who delivers to Airbus?"), ACCESS, "trace-1"
    )
    assert not answered.answer.startswith("Structure")
    assert spy.asked == 0 and spy.index.reads == 0


def test_no_structure_the_answer_says_so() -> None:
    scanned = [_payload(n, ["text"], "Airbus deliveries rose.", parser="tesseract") for n in (7,)]
    structure = DocumentStructure(doc_id=DOC, version="v1", pages=[StructurePage(page_number=7)])
    counter, _ = _counter(scanned, structure)
    answer, note = structure_answer(
        counter, "How many charts are there?", ACCESS, [PASSAGE], "t", "extractive"
    )
    assert answer is None and note is not None and note.startswith("Structure count not")
    answered = _pipeline(counter).answer(
        AnswerRequest(query="How many charts are there?"), ACCESS, "trace-1"
    )
    assert answered.reason is not None and answered.reason.startswith("Structure count not")
