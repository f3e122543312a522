"""The routes that follow the document: page aggregation, reference and section rankings."""

from __future__ import annotations

from pagesight.core.types import (
    AccessFilter,
    DocumentStructure,
    DomainMark,
    StructureItem,
    StructurePage,
    StructureSection,
)
from pagesight.index.base import ScoredPoint
from pagesight.query.structure_search import (
    StructureRoutes,
    document_order,
    page_ranking,
    section_match,
)


def _hit(doc: str, pages: list[int], score: float) -> ScoredPoint:
    return ScoredPoint(
        id=f"{doc}{pages}{score}", score=score, payload={"doc_id": doc, "page_numbers": pages}
    )


def test_page_ranking_sums_a_pages_chunks_with_decay() -> None:
    hits = [
        _hit("a", [1], 10.0),  # one strong chunk
        _hit("a", [2], 6.0),  # three medium ones: 6 + 3 + 1.5 = 10.5 beats 10
        _hit("a", [2], 6.0),
        _hit("a", [2], 6.0),
        _hit("b", [5, 6], 4.0),  # a chunk over two pages counts on both
    ]
    ranked = page_ranking(hits)
    assert [key for key, _ in ranked] == [("a", 2), ("a", 1), ("b", 5), ("b", 6)]
    assert ranked[0][1] == 10.5


def test_document_order_keeps_first_appearances() -> None:
    pages = [("b", 3), ("a", 1), ("b", 4), ("c", 1), ("d", 9)]
    assert document_order(pages, 3) == ["b", "a", "c"]


def _structure(doc_id: str, pages: int, labels: dict[int, str] | None = None) -> DocumentStructure:
    return DocumentStructure(
        doc_id=doc_id,
        version="v1",
        pages=[
            StructurePage(page_number=n, label=(labels or {}).get(n)) for n in range(1, pages + 1)
        ],
        sections=[
            StructureSection(title="Leadership program", page_start=4, page_end=6),
            StructureSection(title="Financial statements", page_start=7, page_end=pages),
            StructureSection(title="Program", level=2, page_start=2, page_end=2),
        ],
        items=[StructureItem(kind="figure", number="3", page_number=5)],
    )


class _Structures:
    """A StructureSource over a dict; 'hidden' documents read as missing."""

    def __init__(self, *structures: DocumentStructure, hidden: frozenset[str] = frozenset()):
        self.by_id = {s.doc_id: s for s in structures}
        self.hidden = hidden

    def structure_of(self, access: AccessFilter, doc_id: str) -> DocumentStructure | None:
        return None if doc_id in self.hidden else self.by_id.get(doc_id)


def test_references_resolve_document_major_and_report_what_is_missing() -> None:
    routes = StructureRoutes(
        _Structures(_structure("a", 8, {3: "1", 4: "2"}), _structure("b", 8)), documents=2
    )
    access = AccessFilter(tenant="t")
    found = routes.references_in("Compare page 2 with Figure 3, and page 40")
    ranking = routes.reference_pages(found, ["b", "a"], access)
    # b (the more relevant) first: its page 2 is the second sheet; a prints "2" on sheet 4
    assert ranking.pages == [("b", 2), ("b", 5), ("a", 4), ("a", 5)]
    page2, figure3, page40 = ranking.references
    assert page2.pages == [("b", 2), ("a", 4)] and figure3.unresolved is None
    assert page40.pages == [] and page40.unresolved and "40" in page40.unresolved


def test_a_reference_counts_beyond_the_leading_documents_only_where_words_found_it() -> None:
    structures = [_structure(d, 20) for d in "abcde"]
    routes = StructureRoutes(
        _Structures(*structures, hidden=frozenset({"e"})), documents=1, tail_documents=4
    )
    found = routes.references_in("the chart on page 14 about family time")
    # the other routes' candidates: c's page 14 and (hidden) e's page 14 were found, b's was
    # not; d is beyond tail_documents
    page_rank = {("a", 2): 1, ("b", 3): 2, ("c", 14): 3, ("e", 14): 4, ("d", 14): 5}
    access = AccessFilter(tenant="t")
    ranking = routes.reference_pages(found, ["a"], access, page_rank)
    assert ranking.pages == [("a", 14), ("c", 14)]
    assert ranking.references[0].pages == [("a", 14), ("c", 14)]
    # without the candidates, the leading document only
    assert routes.reference_pages(found, ["a"], access).pages == [("a", 14)]
    # two references leading to the same page there: the page once, in both traces
    both = routes.references_in("page 14 and slide 14")
    ranking = routes.reference_pages(both, ["a"], access, page_rank)
    assert ranking.pages == [("a", 14), ("c", 14)]
    assert [r.pages for r in ranking.references] == [[("a", 14), ("c", 14)]] * 2
    # statements are not confirmed elsewhere: every filing prints one
    (statement,) = routes.references_in("per the balance sheet")
    assert routes.reference_pages([statement], ["a"], access, page_rank).pages == []


def test_a_statement_resolves_in_the_first_leading_document_that_prints_it() -> None:
    def filing(doc_id: str, page: int) -> DocumentStructure:
        return DocumentStructure(
            doc_id=doc_id,
            version="v1",
            pages=[StructurePage(page_number=n) for n in range(1, 60)],
            sections=[
                StructureSection(
                    title="Consolidated Balance Sheets", page_start=page, page_end=page
                )
            ],
            # ingest found the filing's statements: the finance pack acts on it
            domains=[DomainMark(name="finance", detected=True, content=False)],
        )

    routes = StructureRoutes(_Structures(_structure("paper", 9), filing("x", 40), filing("y", 50)))
    (balance,) = routes.references_in("per the balance sheet")
    ranking = routes.reference_pages([balance], ["paper", "x", "y"], AccessFilter(tenant="t"))
    assert ranking.pages == [("x", 40)]  # not y's too


def test_references_in_a_hidden_document_resolve_nowhere() -> None:
    routes = StructureRoutes(_Structures(_structure("a", 8), hidden=frozenset({"a"})))
    found = routes.references_in("what is on page 2")
    ranking = routes.reference_pages(found, ["a"], AccessFilter(tenant="t"))
    assert ranking.pages == []
    assert ranking.references[0].unresolved == "no document to resolve it in"


def test_section_titles_select_spans_ranked_by_the_other_routes() -> None:
    routes = StructureRoutes(_Structures(_structure("a", 9)), pages_per_section=2, sections=1)
    ranking = routes.section_pages(
        "How did the leadership program train graduates?",
        ["a"],
        AccessFilter(tenant="t"),
        page_rank={("a", 6): 1, ("a", 1): 2, ("a", 4): 3},
    )
    # the span's pages the text routes found, in their order; page 5 (found by none) is not
    # added, nor page 1 (outside the span)
    assert ranking.pages == [("a", 6), ("a", 4)]


def test_section_match_needs_most_of_the_title() -> None:
    leadership = StructureSection(title="Leadership program", page_start=1, page_end=2)
    assert section_match({"leadership", "program", "goal"}, leadership) > 0
    assert section_match({"program"}, leadership) == 0  # one word of two
    wide = StructureSection(title="Leadership program", page_start=1, page_end=200)
    assert section_match({"leadership", "program"}, wide) < section_match(
        {"leadership", "program"}, leadership
    )
