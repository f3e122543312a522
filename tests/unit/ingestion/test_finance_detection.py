"""The finance pack's detector (pagesight.ingestion.finance_statements, .domains): statement pages
read from their content, and whether a document carries primary financial statements.

The shared-corpus tests read each page's text layer (what the text-layer parser sees of it;
a full parse of 2,300 pages is the benchmark's job) and pick filings by what the questions
say of their documents (their source benchmark of SEC filings, their ``doc_type``), never by
file name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pagesight.core.types import BBox, Element, ElementKind, Page, StructureSection
from pagesight.ingestion.domains import chunk_page_texts, detect_domains, element_page_texts
from pagesight.ingestion.finance_statements import detect_finance, statement_page

INCOME = """ACME HOLDINGS, INC.
CONSOLIDATED STATEMENTS OF OPERATIONS
(In millions, except per share data)
Year Ended December 31,
| | 2022 | 2021 | 2020 |
| Net sales | $ 12,345 | $ 11,234 | $ 10,123 |
| Cost of sales | 7,100 | 6,500 | 6,000 |
| Gross profit | 5,245 | 4,734 | 4,123 |
| Operating income | 1,245 | 1,034 | 923 |
| Income before income taxes | 1,100 | 950 | 800 |
| Net income | $ 880 | $ 760 | $ 640 |
| Diluted earnings per share | $ 2.10 | $ 1.80 | $ 1.50 |
"""
BALANCE = """ACME HOLDINGS, INC.
CONSOLIDATED BALANCE SHEETS
As of December 31,
| | 2022 | 2021 |
| Cash and cash equivalents | $ 1,874 | $ 2,936 |
| Inventories | 5,140 | 5,965 |
| Total current assets | 8,802 | 9,921 |
| Total assets | 15,803 | 17,504 |
| Total current liabilities | 8,979 | 10,674 |
| Retained earnings | 2,430 | 2,100 |
"""
SELECTED = """Item 6. Selected Financial Data
The following selected consolidated financial data should be read with Item 7.
Consolidated Statements of Operations
| | 2022 | 2021 | 2020 | 2019 | 2018 |
| Net sales | 12,345 | 11,234 | 10,123 | 9,876 | 9,000 |
| Operating income | 1,245 | 1,034 | 923 | 900 | 850 |
| Net income | 880 | 760 | 640 | 600 | 580 |
| Diluted earnings per share | 2.10 | 1.80 | 1.50 | 1.40 | 1.30 |
"""
INDEX = """Item 8. Financial Statements and Supplementary Data
Consolidated Statements of Operations 45
Consolidated Statements of Comprehensive Income 46
Consolidated Balance Sheets 47
Consolidated Statements of Cash Flows 48
Consolidated Statements of Shareholders' Equity 49
Notes to Consolidated Financial Statements 50
"""
MDNA = """Results of Operations
The following table presents our results for the years 2022 and 2021.
| | 2022 | 2021 | Change |
| Net sales | 12,345 | 11,234 | 10% |
| Gross profit | 5,245 | 4,734 | 11% |
| Operating income | 1,245 | 1,034 | 20% |
"""


def test_a_capitalised_title_under_a_company_line_is_a_statement_page() -> None:
    page = statement_page(INCOME)
    assert page is not None
    assert (page.label, page.title) == ("income", "CONSOLIDATED STATEMENTS OF OPERATIONS")
    assert page.confidence >= 0.9
    balance = statement_page(BALANCE)
    assert balance is not None and balance.label == "balance" and balance.confidence >= 0.9


def test_a_title_without_period_columns_or_line_items_is_weak() -> None:
    page = statement_page("Consolidated Statements of Cash Flows\nSee the accompanying notes.")
    assert page is not None and page.label == "cash_flows"
    assert page.confidence < 0.7


@pytest.mark.parametrize("text", [SELECTED, INDEX])
def test_selected_financial_data_and_an_item_8_index_are_never_a_statement(text: str) -> None:
    page = statement_page(text)
    assert page is None or page.confidence <= 0.1


def test_an_mdna_table_is_no_statement_page() -> None:
    assert statement_page(MDNA) is None


def test_two_statements_make_a_document_carry_statements() -> None:
    mark = detect_finance({3: MDNA, 40: SELECTED, 55: INCOME, 57: BALANCE})
    assert mark.detected and mark.content
    assert [(p.page_number, p.label) for p in mark.pages if p.confidence >= 0.7] == [
        (55, "income"),
        (57, "balance"),
    ]
    assert {p.page_number: p.confidence for p in mark.pages}[40] <= 0.1


def test_one_stray_statement_does_not() -> None:
    assert not detect_finance({3: MDNA, 40: SELECTED, 55: INCOME}).detected
    assert not detect_finance({1: "A survey of household income\nPew Research Center"}).detected


def test_without_page_text_the_section_titles_decide() -> None:
    sections = [
        StructureSection(title="Consolidated Statements of Income", page_start=5, page_end=5),
        StructureSection(title="Consolidated Balance Sheets", page_start=6, page_end=6),
    ]
    mark = detect_finance({}, sections)
    assert mark.detected and not mark.content
    assert not detect_finance({}, sections[:1]).detected


def _element(page: int, text: str, kind: ElementKind = ElementKind.TEXT) -> Element:
    return Element(
        element_id=f"e{page}-{len(text)}",
        doc_id="d",
        kind=kind,
        text=text,
        page_number=page,
        seq=0,
        bbox=BBox(x0=0, y0=0, x1=10, y1=10),
    )


def test_page_texts_from_elements_put_the_margin_lines_first() -> None:
    """A statement title printed as a running head is a margin line, not an element."""
    body = INCOME.split("\n", 2)[2]
    pages = [
        Page(doc_id="d", page_number=4, width=1, height=1, margin_text=[
            "CONSOLIDATED STATEMENTS OF OPERATIONS"
        ])
    ]  # fmt: skip
    texts = element_page_texts([_element(4, body, ElementKind.TABLE)], pages)
    assert texts[4].startswith("CONSOLIDATED STATEMENTS OF OPERATIONS\n")
    found = statement_page(texts[4])
    assert found is not None and found.label == "income" and found.confidence >= 0.9


def test_page_texts_from_stored_chunks_follow_spans_and_headings() -> None:
    """An index built before detection: chunks in ``seq`` order, split onto pages by their
    spans, the heading a chunk opens under first (the chunk's text does not repeat it)."""
    notes = "the last note ends here"
    table = "| Net sales | 1,234 | 1,100 |"
    payloads = [
        {"seq": 1, "page_numbers": [9], "text": table, "spans": [[0, len(table), 9, 0, 0, 1, 1]],
         "section_path": ["Item 8", "CONSOLIDATED STATEMENTS OF INCOME"]},
        {"seq": 0, "page_numbers": [8], "text": notes, "spans": [[0, len(notes), 8, 0, 0, 1, 1]],
         "section_path": ["Item 8"]},
        {"seq": 2, "unit": "table_row", "page_numbers": [9], "text": "Net sales | 1,234",
         "spans": [], "section_path": ["Item 8"]},
    ]  # fmt: skip
    texts = chunk_page_texts(payloads)
    assert texts == {
        8: "Item 8\nthe last note ends here",
        9: f"CONSOLIDATED STATEMENTS OF INCOME\n{table}",
    }


def test_a_failing_detector_leaves_its_pack_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from pagesight.ingestion import domains

    def broken(*_: object) -> None:
        raise RuntimeError("detector bug")

    monkeypatch.setitem(domains.DETECTORS, "finance", broken)
    (mark,) = detect_domains({1: INCOME, 2: BALANCE})
    assert (mark.name, mark.detected) == ("finance", False)


# --- the shared corpus -----------------------------------------------------------------------

#: Benchmarks whose documents are SEC filings (10-K, 10-Q, earnings releases on 8-K).
FILING_SOURCES = ("patronus-ai/financebench", "qinchuanhui/UDA-Benchmark")


def _documents(eval_dir: Path) -> tuple[list[str], list[str]]:
    """(filings, documents of no financial kind) by what the questions say of them."""
    sources: dict[str, set[str]] = {}
    for line in (eval_dir / "questions.jsonl").read_text().splitlines():
        question = json.loads(line)
        kind = question.get("doc_type") or (
            "filing" if str(question.get("source", "")).startswith(FILING_SOURCES) else "?"
        )
        sources.setdefault(question["doc"], set()).add(kind)
    listed = [
        json.loads(line)["doc"] for line in (eval_dir / "docs.jsonl").read_text().splitlines()
    ]
    filings = [d for d in listed if "filing" in sources.get(d, ())]
    other = [
        d for d in listed if sources.get(d) and not sources[d] & {"filing", "Financial report"}
    ]
    return filings, other


def _mark_of(path: Path) -> bool:
    import pymupdf

    with pymupdf.open(path) as pdf:
        texts = {page.number + 1: page.get_text("text") for page in pdf}
    return detect_finance(texts).detected


@pytest.mark.slow
def test_the_pack_fires_on_every_shared_filing(eval_dir: Path) -> None:
    filings, _ = _documents(eval_dir)
    assert len(filings) >= 10
    missed = [name for name in filings if not _mark_of(eval_dir / "pdfs" / name)]
    assert missed == []


@pytest.mark.slow
def test_the_pack_never_fires_on_a_shared_document_that_is_no_filing(eval_dir: Path) -> None:
    _, other = _documents(eval_dir)
    assert len(other) >= 15
    fired = [name for name in other if _mark_of(eval_dir / "pdfs" / name)]
    assert fired == []


_NEVER_A_STATEMENT = re.compile(
    r"selected\s+(?:consolidated\s+)?financial\s+data|index\s+to\s+(?:the\s+)?consolidated"
    r"\s+financial\s+statements",
    re.IGNORECASE,
)


@pytest.mark.slow
def test_no_selected_financial_data_or_item_8_index_page_of_a_filing_is_taken(
    eval_dir: Path,
) -> None:
    """Every page of the shared filings whose top lines say "Selected Financial Data" or
    "Index to Consolidated Financial Statements" (the pages a title-only reading sent income,
    balance-sheet and cash-flow questions to) is no confident statement page."""
    import pymupdf

    filings, _ = _documents(eval_dir)
    seen = 0
    for name in filings:
        with pymupdf.open(eval_dir / "pdfs" / name) as pdf:
            for page in pdf:
                text = page.get_text("text")
                top = "\n".join([line for line in text.splitlines() if line.strip()][:8])
                if not _NEVER_A_STATEMENT.search(top):
                    continue
                seen += 1
                found = statement_page(text)
                assert found is None or found.confidence <= 0.1, (name, page.number + 1)
    assert seen >= 4
