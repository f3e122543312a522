"""Route ``statement`` end to end on a real filing: a ratio question lands on the statements.

"What is Best Buy's return on equity for fiscal 2023?" names no page and no statement, and
the words it has ("return", "equity", "fiscal 2023") are on every page of a 10-K's MD&A and
notes. A reader computes it from net earnings (the statement of earnings) and shareholders'
equity (the balance sheet); :mod:`pagesight.query.statements` knows that, finds both statements by
the titles the filing prints (sections found at ingest), and ranks them above the look-alikes.
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
    implied = [r for r in result.trace.references if r.reference.kind == "statement"]
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
    assert [(r.reference.kind, r.reference.value) for r in named] == [("statement", "cash_flows")]
    assert named[0].pages == [(doc_id, CASH_FLOWS)]
