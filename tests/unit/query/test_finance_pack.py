"""The finance domain pack (pagesight.query.domains): it acts on the documents ingest marked as
carrying primary statements, resolves a statement from page content as well as from section
titles, gives each resolution a confidence (a low one weighs less in fusion), and settings
switch it off or force it on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pytest

from pagesight.core.protocols import CatalogRepository
from pagesight.core.settings import RetrievalOptions, Settings
from pagesight.core.types import (
    AccessFilter,
    Document,
    DocumentStructure,
    DomainMark,
    DomainPage,
    Page,
    StructurePage,
    StructureSection,
)
from pagesight.index.base import StoredPoint, VectorStore
from pagesight.query import domains
from pagesight.query.domains.finance import resolve_statement, statement_references
from pagesight.query.routes import DomainRoute, confidence_ranks
from pagesight.query.structure_cache import CachedStructures
from pagesight.query.structure_search import StructureRoutes

ACCESS = AccessFilter(tenant="t")


def _structure(
    doc_id: str = "d",
    sections: Sequence[tuple[str, int, int]] = (),
    pages: Sequence[tuple[int, str, float]] | None = None,
    detected: bool = True,
) -> DocumentStructure:
    marks = None
    if pages is not None:
        marks = [
            DomainMark(
                name="finance",
                detected=detected,
                confidence=1.0 if detected else 0.0,
                pages=[DomainPage(label=k, page_number=n, confidence=c) for n, k, c in pages],
            )
        ]
    return DocumentStructure(
        doc_id=doc_id,
        version="v1",
        pages=[StructurePage(page_number=n) for n in range(1, 121)],
        sections=[StructureSection(title=t, page_start=a, page_end=b) for t, a, b in sections],
        domains=marks,
    )


def test_a_statement_absent_from_the_outline_resolves_from_its_page_content() -> None:
    """'CONSOLIDATED STATEMENTS OF OPERATIONS' under 'ACME, INC.' is no outline entry."""
    structure = _structure(
        sections=[("Item 8. Financial Statements", 50, 90)],
        pages=[(52, "balance", 1.0), (53, "income", 1.0), (55, "cash_flows", 1.0)],
    )
    found = resolve_statement("income", structure)
    assert (found.pages, found.confidences) == ([53], [1.0])


def test_a_title_pointing_at_selected_financial_data_gives_way_to_the_statement() -> None:
    """The outline's 'Consolidated Statements of Operations' is the Item 6 page (its content
    says so); the statement 23 pages later is what the question is sent to."""
    structure = _structure(
        sections=[("Consolidated Statements of Operations", 30, 30)],
        pages=[(30, "income", 0.1), (53, "income", 1.0), (54, "balance", 1.0)],
    )
    found = resolve_statement("income", structure)
    assert found.pages == [53]


def test_a_title_the_content_did_not_confirm_follows_a_confident_content_page() -> None:
    structure = _structure(
        sections=[("Consolidated Balance Sheets", 40, 40)],
        pages=[(41, "balance", 0.9), (43, "income", 1.0)],
    )
    found = resolve_statement("balance", structure)
    assert (found.pages, found.confidences) == ([41], [0.9])


def test_titles_and_content_that_agree_resolve_as_titles_always_did() -> None:
    structure = _structure(
        sections=[
            ("Consolidated Statements of Cash Flows", 60, 60),
            ("Consolidated Statements of Cash Flows (continued)", 61, 61),
        ],
        pages=[(60, "cash_flows", 1.0), (58, "income", 1.0)],
    )
    found = resolve_statement("cash_flows", structure)
    assert (found.pages, found.confidences) == ([60, 61], [1.0, 1.0])
    # without any mark (a structure from a source that cannot be read): the titles, believed
    untouched = _structure(sections=[("Consolidated Statements of Cash Flows", 60, 60)])
    assert resolve_statement("cash_flows", untouched).confidences == [1.0]


def test_a_weak_page_carries_its_low_confidence_and_a_worse_fusion_rank() -> None:
    structure = _structure(pages=[(70, "equity", 0.5), (53, "income", 1.0), (54, "balance", 1.0)])
    found = resolve_statement("equity", structure)
    assert (found.pages, found.confidences) == ([70], [0.5])
    assert resolve_statement("comprehensive", structure).reason == (
        "no statement of comprehensive income"
    )
    ranks = confidence_ranks([("d", 53), ("d", 70)], {("d", 70): 0.5}, 60.0)
    assert ranks is not None and ranks[("d", 53)] == 1
    # RRF share of rank r at k=60 is 1/(60+r): page 70's is half of what its place would give
    assert 1 / (60 + ranks[("d", 70)]) == pytest.approx(0.5 / 62, rel=0.02)
    assert confidence_ranks([("d", 53)], {}, 60.0) is None


def _views(*structures: DocumentStructure) -> StructureRoutes:
    by_id = {s.doc_id: s for s in structures}

    class Source:
        def structure_of(self, access: AccessFilter, doc_id: str) -> DocumentStructure | None:
            return by_id.get(doc_id)

    return StructureRoutes(Source())


def test_the_pack_acts_only_where_ingest_detected_statements() -> None:
    manual = _structure("manual", sections=[("Revenue", 3, 4)], pages=[], detected=False)
    filing = _structure(
        "filing",
        sections=[("Consolidated Statements of Income", 56, 56)],
        pages=[(56, "income", 1.0), (58, "balance", 1.0)],
    )
    routes = _views(manual, filing)
    references = statement_references("What was the gross margin in 2022?")
    assert [(r.kind, r.domain, r.value, r.inferred) for r in references] == [
        ("domain", "finance", "income", True)
    ]
    ranking = routes.reference_pages(references, ["manual", "filing"], ACCESS)
    assert ranking.pages == [("filing", 56)]
    assert ranking.references[0].confidence == 1.0

    only_manual = routes.reference_pages(references, ["manual"], ACCESS)
    assert only_manual.pages == []
    assert only_manual.references[0].unresolved == "the finance pack is off for this document"
    forced = routes.reference_pages(
        references, ["manual", "filing"], ACCESS, None, {"finance": "on"}
    )
    assert forced.pages == [("filing", 56)]  # the manual has no statement to resolve
    off = routes.reference_pages(references, ["filing"], ACCESS, None, {"finance": "off"})
    assert off.pages == []


def test_switched_off_the_pack_reads_nothing_in_the_query() -> None:
    query = "What is the capex according to the cash flow statement?"
    assert {r.domain for r in domains.references_in(query)} == {"finance"}
    assert domains.references_in(query, {"finance": "off"}) == []
    assert StructureRoutes.references_in(query, {"finance": "off"}) == []


def test_the_setting_and_the_registered_route(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGESIGHT_RETRIEVAL__DOMAINS__FINANCE", "off")
    options = Settings().retrieval
    assert options.domains.as_map() == {"finance": "off"}
    route = DomainRoute(_views(), "finance", "statement")
    assert not route.enabled(options)
    assert route.enabled(RetrievalOptions())
    assert route.weight(RetrievalOptions()) == 3.0
    assert "finance" in domains.PACKS and domains.PACKS["finance"].route == "statement"


def test_a_structure_without_marks_is_detected_from_its_titles_when_nothing_else_is_known() -> None:
    structure = _structure(
        sections=[
            ("Consolidated Statements of Income", 56, 56),
            ("Consolidated Balance Sheets", 58, 58),
        ]
    )
    assert structure.domains is None
    assert domains.enabled("finance", structure, None)
    assert not domains.enabled("finance", _structure(sections=[("Revenue", 3, 3)]), None)


INCOME = (
    "ACME, INC.\nCONSOLIDATED STATEMENTS OF OPERATIONS\nYear Ended December 31,\n"
    "| | 2022 | 2021 |\n| Net sales | 1,234 | 1,100 |\n| Cost of sales | 700 | 650 |\n"
    "| Gross profit | 534 | 450 |\n| Net income | 88 | 76 |\n| Diluted | 2.10 | 1.80 |"
)
BALANCE = (
    "ACME, INC.\nCONSOLIDATED BALANCE SHEETS\nAs of December 31,\n| | 2022 | 2021 |\n"
    "| Cash and cash equivalents | 1,874 | 2,936 |\n| Inventories | 5,140 | 5,965 |\n"
    "| Total current assets | 8,802 | 9,921 |\n| Total assets | 15,803 | 17,504 |"
)


class _Catalog:
    def __init__(self, structure: DocumentStructure) -> None:
        self.structure_ = structure
        self.page_reads = 0

    def document(self, tenant: str, doc_id: str) -> Document | None:
        return Document(doc_id=doc_id, version="v1", tenant=tenant, source_uri="file:///a.pdf")

    def structure(self, document: Document) -> DocumentStructure:
        return self.structure_

    def pages(self, tenant: str, doc_id: str) -> list[Page]:
        self.page_reads += 1
        return [Page(doc_id=doc_id, page_number=n, width=1, height=1) for n in (7, 8)]


class _Index:
    collection = "chunks__v1"
    writes = 0

    def __init__(self) -> None:
        self.reads = 0

    def points_of_document(
        self, tenant: str, doc_id: str, fields: Sequence[str] | None = None
    ) -> list[StoredPoint]:
        self.reads += 1
        return [
            StoredPoint(id=f"p{n}", payload={"seq": n, "page_numbers": [n], "text": text})
            for n, text in ((7, INCOME), (8, BALANCE))
        ]


def test_an_index_built_before_packs_is_detected_from_its_chunks_once() -> None:
    """No re-parse: the chunks' texts and the catalog's pages are read when the structure is
    first loaded, and the marks kept with the view."""
    catalog, index = _Catalog(_structure("a")), _Index()
    cache = CachedStructures(
        cast(CatalogRepository, catalog), cast(VectorStore, index), check_s=100.0
    )
    view = cache.view_of(ACCESS, "a")
    assert view is not None
    mark = view.structure.domain("finance")
    assert mark is not None and mark.detected and mark.content
    assert [(p.page_number, p.label) for p in mark.pages] == [(7, "income"), (8, "balance")]
    assert cache.view_of(ACCESS, "a") is view
    assert (index.reads, catalog.page_reads) == (1, 1)
    assert resolve_statement("income", view.structure).pages == [7]


def test_the_first_confident_statement_leads_not_a_later_repeat() -> None:
    """A parent-company or guarantor repeat later in the filing may print more line items;
    the consolidated statement comes first, and a confident title is kept."""
    repeat = _structure(pages=[(51, "comprehensive", 0.9), (106, "comprehensive", 1.0)])
    assert resolve_statement("comprehensive", repeat).pages == [51]
    titled = _structure(
        sections=[("Consolidated Statements of Comprehensive Income", 51, 51)],
        pages=[(51, "comprehensive", 0.9), (106, "comprehensive", 1.0)],
    )
    found = resolve_statement("comprehensive", titled)
    assert (found.pages, found.confidences) == ([51], [0.9])
