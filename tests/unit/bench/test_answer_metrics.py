"""How bench/answer_metrics.py and bench/eval_answers.py measure an extractive answer's lead and
its quotes (issue 31): which gold values count as printed on a page, when a quote is on the page
it cites, what the lead is (today's first quote in the baseline), how its value scores, and the
abstention trade-off curve. Hand-made inputs only: no index, no model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.answer_metrics import (
    count_words,
    find_printed,
    index_page_texts,
    lead_of,
    lead_value_score,
    percentile,
    quote_on_page,
    quote_pieces,
    quotes_of,
    tradeoff,
)
from bench.eval_answers import PageTexts, lead_fields, report
from pagesight.core.types import AnswerResponse, AnswerSentence, AnswerUnit, Citation, QuotePart

# -- printable: the gold value printed as a whole token with its unit or sign -------------------

MGM = (
    "MGM Resorts International Reports Fourth Quarter\n"
    "Consolidated net revenues of $3.6 billion, an increase of 23%\n"
    "Net revenues  $\n3,600  $ 2,900\n"
    "FY2022 Q4 segment 7\n"
)


@pytest.mark.parametrize(
    ("gold", "line"),
    [
        ("$3.6 billion", "Consolidated net revenues of $3.6 billion, an increase of 23%"),
        ("23%", "Consolidated net revenues of $3.6 billion, an increase of 23%"),
        ("23 %", "Consolidated net revenues of $3.6 billion, an increase of 23%"),
        ("$3,600", "Consolidated net revenues of $3.6 billion, an increase of 23%"),  # its scale
        ("$ 2900 million", "3,600 $ 2,900"),  # a table in millions, separators, "$" a line up
        ("$2.9 billion", "3,600 $ 2,900"),
        ("Net revenues", "Consolidated net revenues of $3.6 billion, an increase of 23%"),
    ],
)
def test_printed_with_unit_and_scale(gold: str, line: str) -> None:
    found = find_printed(gold, {1: MGM})
    assert found is not None and found.page == 1
    assert found.line.endswith(line)


@pytest.mark.parametrize(
    "gold",
    [
        "7",  # a bare integer under 10: on every page
        "4",  # ... and "Q4" is no token anyway
        "2022",  # only inside "FY2022"
        "23",  # printed as "23%": the gold has no unit, so "23%" counts ...
        "$23",  # ... but not with a currency the page does not print
        "3.6%",  # the page's 3.6 has no %
        "24%",  # another value
        "3,601",
        "Yes",  # not a printed value
    ],
)
def test_not_printed(gold: str) -> None:
    found = find_printed(gold, {1: MGM})
    if gold == "23":
        assert found is not None  # the unit the gold lacks may be printed
    else:
        assert found is None


def test_bare_small_integer_refused_but_with_a_unit_kept() -> None:
    page = {2: "Of the 9 regions, 5% grew. Chart 3"}
    assert find_printed("9", page) is None
    assert find_printed("3", page) is None
    assert find_printed("5%", page) is not None
    assert find_printed("12", {1: "12 of them"}) is not None  # 10 and more: counted


def test_signs() -> None:
    assert find_printed("-3.65%", {1: "change of (3.65)% versus last year"}) is not None
    assert find_printed("-3.65%", {1: "change of (3.65%) versus last year"}) is not None
    assert find_printed("-3.65%", {1: "change of −3.65% versus last year"}) is not None
    assert find_printed("-3.65%", {1: "change of 3.65% versus last year"}) is None
    assert find_printed("3.65%", {1: "change of -3.65% versus last year"}) is None


def test_whole_tokens_only() -> None:
    assert find_printed("240", {1: "Operate on 100-240V AC"}) is None
    assert find_printed("07", {1: "dated 2009-07"}) is None
    assert find_printed("10", {1: "Form 10-K and the 10K filing"}) is None
    assert find_printed("1.5", {1: "version 11.5 and 1.55"}) is None
    assert find_printed("$3.6 billion", {1: "revenue of US$3.6bn"}) is not None


def test_fractions_and_percentages() -> None:
    assert find_printed("0.052", {1: "a rate of 5.2 %"}) is not None
    assert find_printed("0.052", {1: "a rate of 0.052"}) is not None
    assert find_printed("16.7%", {1: "16.7 percent of adults"}) is not None
    assert find_printed("73.0", {1: "accuracy 73 overall"}) is not None


def test_cjk_units_and_full_width_digits() -> None:
    page = {4: "売上高は１，２３４億円（前年比５．２％増）となった。\n職員数は3万人"}
    found = find_printed("1,234億円", page)
    assert found is not None and found.page == 4 and "1,234億円" in found.line
    assert find_printed("5.2%", page) is not None
    assert find_printed("12.34兆円", page) is None  # another value
    assert find_printed("1,234円", page) is None  # 1,234 億円 is not 1,234 円
    assert find_printed("30000人", page) is not None  # 3万人
    assert find_printed("1,234億円", {4: "売上高（億円）は1,234となった"}) is None  # no unit


def test_strings_and_the_line_across_a_break() -> None:
    pages = {3: "nothing here", 5: "The Berlin School of\nExperimental Psychology was"}
    found = find_printed("Berlin School of Experimental Psychology", pages)
    assert found is not None and found.page == 5
    assert found.line == "The Berlin School of / Experimental Psychology was"
    assert find_printed("red", {1: "the bored child"}) is None  # inside a word
    assert find_printed("令和6年度", {1: "令和6\n年度の予算"}) is not None


def test_first_evidence_page_in_order() -> None:
    found = find_printed("35%", {8: "35%", 7: "35 %"})
    assert found is not None and found.page == 8


# -- exact citations ---------------------------------------------------------------------------


def test_quote_pieces() -> None:
    assert quote_pieces("| Net revenues | $ 3,600 | |") == ["Net revenues", "$ 3,600"]
    assert quote_pieces("First one. … Second one.") == ["First one.", "Second one."]
    assert quote_pieces("a|b stays one") == ["a|b stays one"]


def test_table_cell_quote_checked_cell_by_cell() -> None:
    page = "Consolidated\nNet revenues\n$\n3,600\n$\n2,900\n"
    assert quote_on_page("Net revenues | $3,600", page)
    assert quote_on_page("NET   REVENUES | $ 3,600", page)  # case and whitespace
    assert not quote_on_page("Net revenues | $3,700", page)  # a cell not printed
    assert quote_on_page("Net revenues $3,600", page)  # whitespace (line breaks) ignored
    assert not quote_on_page("Consolidated revenues", page)  # characters in another order
    assert not quote_on_page("", page)


def test_multi_line_cells_and_chart_labels_read_line_by_line() -> None:
    # the text layer reads a table's header row across its columns, line by line
    page = (
        "Total stores open\nNumber of stores\nat beginning of the\nopened during the\n"
        "Fiscal 2022\nquarter\nquarter\n1st Quarter\n1,308\n10\n"
    )
    quote = "| Fiscal 2022 | Total stores open at beginning of the quarter | 1,308 |"
    assert quote_on_page(quote, page)
    assert quote_on_page("Number of stores opened during the quarter", page)
    assert not quote_on_page("Total stores closed during the quarter", page)
    assert not quote_on_page("Number of stores at the end", page)


def test_line_end_hyphen_may_be_dropped() -> None:
    page = "an increase in contribution from lower-\nmargin non-gaming outlets"
    assert quote_on_page("contribution from lowermargin non-gaming outlets", page)
    assert quote_on_page("contribution from lower-margin non-gaming outlets", page)
    assert not quote_on_page("contribution from lowermargin nongaming outlets", page)


def test_quote_across_cjk_line_break() -> None:
    assert quote_on_page("令和６年１～３月は3.2％", "令和６年\n１～３月は3.2％")
    assert not quote_on_page("令和６年４～６月", "令和６年\n１～３月は3.2％")


# -- the lead ----------------------------------------------------------------------------------


def citation(n: int, page: int, quote: str, parts: list[tuple[int, str]] | None = None) -> Citation:
    return Citation(
        n=n,
        doc_id="doc-1",
        page_number=page,
        chunk_id=f"c{n}",
        page_image_url=f"/p/{page}",
        quote=quote,
        parts=[QuotePart(page_number=p, text=t) for p, t in parts or []],
    )


def response(**fields: Any) -> AnswerResponse:
    base: dict[str, Any] = {
        "answer": "",
        "abstained": False,
        "confidence": 0.8,
        "mode": "extractive",
        "trace_id": "t",
    }
    return AnswerResponse(**{**base, **fields})


def lead_response() -> AnswerResponse:
    return response(
        answer="Net revenues — Q4 2022: $3.6 billion [2]",
        lead=AnswerUnit(
            text="Net revenues — Q4 2022: $3.6 billion",
            kind="table_cell",
            value="$3.6 billion",
            citations=[2],
        ),
        supporting=[AnswerUnit(text="Revenue grew 23%.", citations=[1])],
        citations=[
            citation(1, 1, "Revenue grew 23%."),
            citation(
                2, 7, "Net revenues | $3.6 billion", [(7, "Net revenues"), (8, "$3.6 billion")]
            ),
        ],
    )


def test_lead_pages_are_those_of_all_its_citation_parts() -> None:
    lead = lead_of(lead_response(), "Float", baseline=False)
    assert lead is not None
    assert lead.kind == "table_cell" and lead.value == "$3.6 billion"
    assert lead.pages == (("doc-1", 7), ("doc-1", 8))  # not page 1: a supporting quote


def test_baseline_lead_is_the_first_quote_with_its_first_citation() -> None:
    today = response(
        answer="In 2019, 35 % said so. [3] Another [1]",
        sentences=[
            AnswerSentence(text="In 2019, 35 % said so.", citations=[3, 1]),
            AnswerSentence(text="Another", citations=[1]),
        ],
        citations=[citation(1, 2, "Another"), citation(3, 8, "In 2019, 35 % said so.")],
    )
    lead = lead_of(today, "Float", baseline=True)
    assert lead is not None and lead.from_sentence
    assert lead.value == "35%" and lead.pages == (("doc-1", 8),)
    assert lead_of(today, "Float", baseline=False) is None  # lead mode: no lead, no stand-in
    assert lead_value_score("35%", "Float", lead) == 1.0
    assert lead_value_score("36%", "Float", lead) == 0.0


@pytest.mark.parametrize(
    ("gold", "fmt", "value", "expected"),
    [
        ("3.6", "Float", "$3.6 billion", 1.0),  # the verbatim value read as the scorer reads
        ("29%", "Float", "29 percent", 1.0),
        ("0.29", "Float", "29%", 1.0),
        ("1874", "Float", "1,874", 1.0),
        ("12", "Int", "12 pie charts", 1.0),
        ("12", "Int", "13", 0.0),
        ("Europe", "Str", "Europe", 1.0),
        ("Europe", "Str", "Asia", 0.0),
        ("12", "Int", "No. 13 of 12", 0.0),  # the first number of the value, not any
    ],
)
def test_lead_value_scored_as_answer_scoring_scores(
    gold: str, fmt: str, value: str, expected: float
) -> None:
    lead = lead_of(response(lead=AnswerUnit(text=value, value=value)), fmt, baseline=False)
    assert lead_value_score(gold, fmt, lead) == expected


def test_abstention_and_missing_value_score_zero() -> None:
    abstained = response(abstained=True, related=[citation(1, 3, "nearest passage")])
    assert lead_of(abstained, "Int", baseline=True) is None
    assert lead_value_score("12", "Int", None) == 0.0
    no_value = lead_of(
        response(lead=AnswerUnit(text="There were 12 of them.", value=None)), "Int", False
    )
    assert lead_value_score("12", "Int", no_value) == 0.0  # never "a number in the unit"
    # related passages are quotes too
    assert [(q.page, q.related) for q in quotes_of(abstained)] == [(3, True)]


def test_quotes_of_parts_and_plain_citations() -> None:
    quotes = quotes_of(lead_response())
    assert [(q.n, q.page, q.text) for q in quotes] == [
        (1, 1, "Revenue grew 23%."),
        (2, 7, "Net revenues"),
        (2, 8, "$3.6 billion"),
    ]


# -- words, percentiles, the OCR layer ---------------------------------------------------------


def test_count_words() -> None:
    assert count_words("Net revenues of $3.6 billion") == 5
    assert count_words("売上高は増加した") == 4  # 8 CJK characters
    assert count_words("GDPは3.2%増") == 3  # GDP, は (0.5), 3.2%, 増 (0.5)
    assert count_words("| Net revenues | — | $3.6 |") == 3  # pipes and dashes are no words
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile([], 0.9) is None


def test_index_page_texts() -> None:
    payloads = [
        {"seq": 1, "unit": "chunk", "text": "Slide two text", "page_numbers": [2]},
        {"seq": 0, "unit": "chunk", "text": "Slide one", "page_numbers": [1]},
        {"seq": 2, "unit": "table_row", "text": "Header: row", "page_numbers": [2]},
        {
            "seq": 3,
            "unit": "chunk",
            "text": "end of three start of four",
            "page_numbers": [3, 4],
            "spans": [
                {"start": 0, "end": 12, "page_number": 3},
                {"start": 13, "end": 26, "page_number": 4},
            ],
        },
    ]
    texts = index_page_texts(payloads)
    assert texts[1] == "Slide one"
    assert texts[2] == "Slide two text"  # the table_row unit is left out
    assert texts[3] == "end of three" and texts[4] == "start of four"
    assert index_page_texts([{"text": "both", "page_numbers": [5, 6]}]) == {5: "both", 6: "both"}


# -- the trade-off curve -----------------------------------------------------------------------


def test_tradeoff_curve() -> None:
    rows: list[dict[str, Any]] = [
        {"answerable": False, "abstained": True, "coverage": 0.3},  # abstained for coverage
        {"answerable": False, "abstained": True, "coverage": None},  # another reason: stays
        {"answerable": False, "abstained": False, "coverage": 0.6},
        {"answerable": True, "abstained": False, "coverage": 0.9},
        {"answerable": True, "abstained": False, "coverage": None},  # not judged: answers
    ]
    curve = {p["min_coverage"]: p for p in tradeoff(rows, min_coverage=0.5)}
    assert len(curve) == 11 and min(curve) == 0.0 and max(curve) == 1.0
    assert curve[0.0]["abstain_rate_unanswerable"] == pytest.approx(1 / 3, abs=1e-4)
    assert curve[0.3]["abstain_rate_unanswerable"] == pytest.approx(1 / 3, abs=1e-4)
    assert curve[0.4]["abstain_rate_unanswerable"] == pytest.approx(2 / 3, abs=1e-4)
    assert curve[0.7]["abstain_rate_unanswerable"] == 1.0
    assert curve[0.9]["abstain_rate_answerable"] == 0.0
    assert curve[1.0]["abstain_rate_answerable"] == 0.5


# -- eval_answers wiring -----------------------------------------------------------------------


class FixedPages(PageTexts):
    """Page texts given by hand instead of read from PDFs and the index."""

    def __init__(self, docs: dict[str, dict[int, str]]) -> None:
        super().__init__({}, None)
        self._docs = docs


def test_lead_fields_and_report() -> None:
    pages = FixedPages(
        {
            "mgm.pdf": {
                1: "Revenue grew 23%.",
                7: "Net revenues",
                8: "$3.6 billion in total",
            }
        }
    )
    q = {"id": "q1", "doc": "mgm.pdf", "answer": "$3.6 billion", "evidence_pages": [8]}
    names = {"doc-1": "mgm.pdf"}
    printable = {"page": 8, "line": "$3.6 billion in total"}
    fields = lead_fields(
        q,
        lead_response(),
        None,
        baseline=False,
        answerable=True,
        printable=printable,
        name_of=names,
        pages=pages,
    )
    assert fields["value_scored"] and fields["lead_value_score"] == 1.0
    assert fields["lead_on_evidence"]  # the value's part is on page 8
    assert fields["lead_words"] == 6  # the dash is no word
    assert all(q["exact"] for q in fields["quotes"])

    wrong_page = response(
        sentences=[AnswerSentence(text="Revenue grew 23%.", citations=[1])],
        citations=[citation(1, 2, "Revenue grew 23%.")],  # printed on page 1
    )
    other = lead_fields(
        q,
        wrong_page,
        None,
        baseline=True,
        answerable=True,
        printable=printable,
        name_of=names,
        pages=pages,
    )
    assert other["lead_value_score"] == 0.0 and not other["lead_on_evidence"]
    rows = [
        {"id": "q1", "kind": "table", "answerable": True, "abstained": False, **fields},
        {"id": "q2", "kind": "table", "answerable": True, "abstained": False, **other},
    ]
    for row in rows:
        row.update(
            with_evidence=True,
            correct=None,
            citations_in_context=True,
            ms=10.0,
            scored_format="Str",
            prediction="x",
            score=0.0,
        )
    result = report(rows, min_coverage=0.5)
    assert result["lead_value_accuracy"] == 0.5 and result["lead_value_n"] == 2
    assert result["printable_n"] == 2 and result["lead_value_accuracy_printable"] == 0.5
    assert result["lead_evidence_rate"] == 0.5
    assert result["quotes_n"] == 4 and result["citation_page_exact_rate"] == 0.75
    assert result["inexact_quotes"] == [
        {"id": "q2", "doc": "mgm.pdf", "page": 2, "n": 1, "quote": "Revenue grew 23%."}
    ]
    assert result["halves"]["a"]["answerable"] + result["halves"]["b"]["answerable"] == 2
    assert result["by_kind"]["table"]["lead_value_accuracy"] == 0.5
    assert [p["min_coverage"] for p in result["tradeoff"]][:2] == [0.0, 0.1]


def test_page_texts_of_an_unknown_document_are_empty(tmp_path: Path) -> None:
    assert PageTexts({}, None).text("missing.pdf", 1) == ""
