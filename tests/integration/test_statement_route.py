"""Route ``statement`` end to end on a real filing: a ratio question lands on the statements.

"What is Best Buy's return on equity for fiscal 2023?" names no page and no statement, and
the words it has ("return", "equity", "fiscal 2023") are on every page of a 10-K's MD&A and
notes. A reader computes it from net earnings (the statement of earnings) and shareholders'
equity (the balance sheet); the finance pack (:mod:`pagesight.query.domains.finance`) knows
that, finds both statements by the titles the filing prints (sections found at ingest) and by
their pages' content, and ranks them above the look-alikes. The pack acts because ingest
detected the filing's statements (``DocumentStructure.domains``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pagesight.core.types import AccessFilter, RouteName
from pagesight.services.stack import LocalStack
from tests.conftest import ingested_pages

pytestmark = pytest.mark.integration

SOURCE = "BESTBUY_2023_10K.pdf"
#: MD&A (results, liquidity, debt), the balance sheet (p. 39), the statement of earnings
#: (p. 40), cash flows (p. 42), equity (p. 43), and notes on debt and shareholders' equity.
PAGES = [23, 25, 29, 31, 39, 40, 42, 43, 57, 63]
BALANCE, EARNINGS, CASH_FLOWS = (PAGES.index(p) + 1 for p in (39, 40, 42))


@pytest.fixture(scope="module")
def filing(
    tmp_path_factory: pytest.TempPathFactory, eval_dir: Path
) -> Iterator[tuple[LocalStack, str]]:
    with ingested_pages(eval_dir, SOURCE, PAGES, tmp_path_factory.mktemp("statements")) as found:
        yield found


def _top(stack: LocalStack, query: str, k: int = 2) -> list[int]:
    result = stack.search(query, AccessFilter(tenant="default"), RouteName.TEXT, 10)
    return [hit.page_number for hit in result.hits[:k]]


def test_a_ratio_lands_on_the_statements_it_is_computed_from(
    filing: tuple[LocalStack, str],
) -> None:
    stack, doc_id = filing
    query = "What is Best Buy's return on equity for fiscal 2023?"
    assert set(_top(stack, query)) == {EARNINGS, BALANCE}
    result = stack.search(query, AccessFilter(tenant="default"), RouteName.TEXT, 10)
    implied = [r for r in result.trace.references if r.reference.kind == "domain"]
    assert [(r.reference.value, r.reference.inferred) for r in implied] == [
        ("income", True),
        ("balance", True),
    ]
    assert implied[0].pages == [(doc_id, EARNINGS)]
    assert "statement" in {route.route for route in result.trace.routes}

    weights = stack.retriever.options.weights
    saved = weights["statement"]
    weights["statement"] = 0.0
    try:
        assert set(_top(stack, query)) != {EARNINGS, BALANCE}  # the words alone lead elsewhere
    finally:
        weights["statement"] = saved


def test_a_named_statement_is_a_reference(filing: tuple[LocalStack, str]) -> None:
    stack, doc_id = filing
    query = "How much did Best Buy spend on property and equipment, per the cash flow statement?"
    assert _top(stack, query, 1) == [CASH_FLOWS]
    result = stack.search(query, AccessFilter(tenant="default"), RouteName.TEXT, 10)
    named = [r for r in result.trace.references if not r.reference.inferred]
    assert [(r.reference.kind, r.reference.value) for r in named] == [("domain", "cash_flows")]
    assert named[0].pages == [(doc_id, CASH_FLOWS)]


#: An unseen-style 10-K: the Item 8 index (every statement's title, with page numbers), then
#: the statements, titled in capitals ("CONSOLIDATED STATEMENTS OF INCOME").
INDEXED = "AMERICANEXPRESS_2022_10K.pdf"
INDEXED_PAGES = [95, 96, 98]
INDEX_PAGE, INCOME_PAGE, BALANCE_PAGE = 1, 2, 3


@pytest.fixture(scope="module")
def indexed_filing(
    tmp_path_factory: pytest.TempPathFactory, eval_dir: Path
) -> Iterator[tuple[LocalStack, str]]:
    with ingested_pages(
        eval_dir, INDEXED, INDEXED_PAGES, tmp_path_factory.mktemp("indexed")
    ) as found:
        yield found


def test_ingest_marks_the_filing_and_the_index_page_is_never_the_statement(
    indexed_filing: tuple[LocalStack, str],
) -> None:
    stack, doc_id = indexed_filing
    structure = stack.structures.structure_of(AccessFilter(tenant="default"), doc_id)
    assert structure is not None
    mark = structure.domain("finance")
    assert mark is not None and mark.detected and mark.content
    confidence = {(p.page_number, p.label): p.confidence for p in mark.pages}
    assert confidence[(INCOME_PAGE, "income")] >= 0.9
    assert confidence[(BALANCE_PAGE, "balance")] >= 0.9
    assert all(c <= 0.1 for (page, _), c in confidence.items() if page == INDEX_PAGE)

    query = "What was American Express's operating income in 2022, per the income statement?"
    result = stack.search(query, AccessFilter(tenant="default"), RouteName.TEXT, 10)
    (named,) = [r for r in result.trace.references if r.reference.kind == "domain"]
    assert named.pages == [(doc_id, INCOME_PAGE)]
    assert named.confidence is not None and named.confidence >= 0.9
    assert result.hits[0].page_number == INCOME_PAGE


def test_switched_off_the_pack_reads_no_statement(
    indexed_filing: tuple[LocalStack, str],
) -> None:
    stack, _ = indexed_filing
    options = stack.retriever.options
    saved = options.domains
    options.domains = saved.model_copy(update={"finance": "off"})
    try:
        result = stack.search(
            "Total assets per the balance sheet", AccessFilter(tenant="default"), RouteName.TEXT, 10
        )
    finally:
        options.domains = saved
    assert [r for r in result.trace.references if r.reference.kind == "domain"] == []
    assert "statement" not in {route.route for route in result.trace.routes}
