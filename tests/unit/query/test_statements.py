"""The finance pack's query half: financial statements named or implied by a query, and the pages
that print them by their section titles (pagesight.query.domains.finance)."""

from __future__ import annotations

import pytest

from pagesight.core.types import DocumentStructure, StructurePage, StructureSection
from pagesight.query.domains.finance import (
    statement_pages,
    statement_references,
    title_statement,
)
from pagesight.query.references import resolve_reference


@pytest.mark.parametrize(
    ("title", "kind"),
    [
        ("CONSOLIDATED STATEMENTS OF CASH FLOWS", "cash_flows"),
        ("3M Company and Subsidiaries Consolidated Statement of Incom e Years ended", "income"),
        ("The Boeing Company and Subsidiaries Consolidated Statements of Operations", "income"),
        ("Consolidated Statements of Earnings", "income"),
        ("Profit and loss account for the year ended March 31, 2003", "income"),
        ("Consolidated Balance Shee t At December 31", "balance"),
        ("Consolidated Statements of Financial Position", "balance"),
        ("Consolidated Statements of Comprehensive Income", "comprehensive"),
        ("Consolidated Statements of Changes in Shareholders' Equity", "equity"),
        ("CASH FLOW STATEMENT FOR THE YEAR ENDED MARCH 31, 2003", "cash_flows"),
        ("【連結貸借対照表】", "balance"),
        ("連結損益及び包括利益計算書", "income"),
        ("連結キャッシュ・フロー計算書", "cash_flows"),
        ("連結株主資本等変動計算書", "equity"),
        ("(連結貸借対照表関係)", None),
        # about a statement, not the statement
        ("Off-Balance Sheet Arrangements", None),
        ("NOTE 6. Supplemental Income Statement Information", None),
        ("ANALYSIS OF THE CONSOLIDATED STATEMENTS OF INCOME", None),
        ("O. Cash Equivalents and Statement of Cash Flows", None),
        ("Index to Financial Statements", None),
        ("Income taxes", None),
        ("Leadership program", None),
    ],
)
def test_title_statement(title: str, kind: str | None) -> None:
    assert title_statement(title) == kind


def _structure(sections: list[tuple[str, int, int]], pages: int = 120) -> DocumentStructure:
    return DocumentStructure(
        doc_id="d",
        version="v1",
        pages=[StructurePage(page_number=n) for n in range(1, pages + 1)],
        sections=[StructureSection(title=t, page_start=a, page_end=b) for t, a, b in sections],
    )


FILING = _structure(
    [
        ("Balance Sheet:", 44, 44),  # an MD&A subheading before the statement
        ("Index to Financial Statements", 52, 52),
        ("Consolidated Statement of Income", 56, 56),
        ("Consolidated Balance Sheet", 58, 58),
        ("Consolidated Statement of Cash Flows", 60, 60),
        ("Consolidated Statement of Cash Flows (continued)", 61, 61),
        ("Notes to Consolidated Financial Statements", 62, 110),
        ("Parent Company - Condensed Statements of Income", 111, 111),
    ]
)


def test_statement_pages_are_the_consolidated_statement_and_its_continuation() -> None:
    assert statement_pages("income", FILING) == [56]
    assert statement_pages("balance", FILING) == [58]
    assert statement_pages("cash_flows", FILING) == [60, 61]
    assert statement_pages("equity", FILING) == []


def test_a_long_section_is_not_a_statement() -> None:
    structure = _structure([("Consolidated Statements of Income and Notes", 10, 40)])
    assert statement_pages("income", structure) == []


def _kinds(query: str) -> list[tuple[str | None, bool]]:
    return [(r.value, r.inferred) for r in statement_references(query)]


def test_named_statements() -> None:
    assert _kinds("What is 3M's FY2018 capex, based on the cash flow statement?") == [
        ("cash_flows", False)
    ]
    assert _kinds("Net PPNE shown in the balance sheet?") == [("balance", False)]
    assert _kinds("per the consolidated statements of operations") == [("income", False)]
    assert _kinds("from the P&L") == [("income", False)]
    assert _kinds("連結キャッシュ・フロー計算書の設備投資額は？") == [("cash_flows", False)]
    assert _kinds("貸借対照表の総資産") == [("balance", False)]


def test_implied_statements_come_after_named_ones_once_each() -> None:
    assert _kinds("Amazon's FY2017 return on equity?") == [("income", True), ("balance", True)]
    assert _kinds("Has the quick ratio improved?") == [("balance", True)]
    assert _kinds("EBITDA using D&A from the cash flow statement") == [
        ("cash_flows", False),
        ("income", True),
    ]


@pytest.mark.parametrize(
    "query",
    [
        "How many pie charts are there in the paper?",
        "What is the color of the line in figure 5?",
        "",
        "a cash register and a sheet of paper",
    ],
)
def test_no_statement(query: str) -> None:
    assert statement_references(query) == []


def test_a_long_query_gives_each_statement_once() -> None:
    """A repeated query yields at most what its one phrase yields, each statement once (no
    timing is asserted here: search latency is measured by bench/eval_retrieval.py)."""
    repeated = [
        (r.value, r.inferred)
        for r in statement_references("return on " * 5000 + "cash flow statement " * 500)
    ]
    once = {(r.value, r.inferred) for r in statement_references("return on cash flow statement")}
    assert len(repeated) == len(set(repeated))
    assert set(repeated) <= once


def test_resolution_through_the_reference_resolver() -> None:
    (named,) = statement_references("the cash flow statement")
    assert resolve_reference(named, FILING).pages == [60, 61]
    equity, balance = statement_references("the statement of shareholders' equity")
    assert (balance.value, balance.inferred) == ("balance", True)  # equity is on it too
    resolution = resolve_reference(equity, FILING)
    assert resolution.pages == []
    assert resolution.reason == "no statement of equity"
