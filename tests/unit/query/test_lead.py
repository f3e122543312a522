"""Extractive leads: answer units, answer types, periods, per-page quoting, coverage."""

from __future__ import annotations

from pagesight.core.types import BBox, TextSpan
from pagesight.query.answer_units import (
    answer_type,
    fiscal_equivalents,
    period_agreement,
    periods_in,
    split_units,
    values_in,
)
from pagesight.query.context import ContextBlock
from pagesight.query.lead import choose_lead, window
from pagesight.query.quotes import find_quote, quote_parts

RELEASE = (
    "Fourth Quarter 2022 Financial Highlights:\n"
    "Consolidated net revenues of $3.6 billion, an increase of 18% compared to the prior year "
    "quarter. Net income attributable to the company of $1.4 billion.\n"
    "• Strip resorts net revenues of $2.1 billion, up 11%;\n"
    "• Regional net revenues of $927 million.\n"
    "| | Three months ended December 31, | |\n"
    "|---|---|---|\n"
    "| | 2022 | 2021 |\n"
    "| Net revenues | $ 3,586,843 | $ 3,032,016 |\n"
    "| Operating income | 1,193 | (21) |"
)


def block(text: str, n: int = 1, page: int = 1, **fields: object) -> ContextBlock:
    values: dict[str, object] = {
        "n": n,
        "chunk_id": f"c{n}",
        "doc_id": "doc",
        "page_number": page,
        "text": text,
        "score": 0.5,
    }
    values.update(fields)
    return ContextBlock.model_validate(values)


# -- units -------------------------------------------------------------------------------------


def test_units_are_sentences_list_items_and_table_cells_with_headers() -> None:
    units = split_units(RELEASE)
    shown = [(u.kind, u.text) for u in units]
    assert ("sentence", "Fourth Quarter 2022 Financial Highlights:") in shown
    assert (
        "sentence",
        "Consolidated net revenues of $3.6 billion, an increase of 18% compared to the prior "
        "year quarter.",
    ) in shown
    assert ("list_item", "Strip resorts net revenues of $2.1 billion, up 11%;") in shown
    assert ("list_item", "Regional net revenues of $927 million.") in shown
    cells = [u for u in units if u.kind == "table_cell"]
    # a two-line header: the spanning head is carried over both year columns
    assert [u.text for u in cells] == [
        "Net revenues — Three months ended December 31, 2022: $ 3,586,843",
        "Net revenues — Three months ended December 31, 2021: $ 3,032,016",
        "Operating income — Three months ended December 31, 2022: 1,193",
        "Operating income — Three months ended December 31, 2021: (21)",
    ]
    # every quoted range is verbatim text: the label cell and the value cell
    first = cells[0]
    assert [RELEASE[a:b] for a, b in first.quote_ranges] == ["Net revenues", "$ 3,586,843"]
    for unit in units:
        for a, b in unit.quote_ranges:
            assert " ".join(RELEASE[a:b].split()) in unit.text


def test_a_head_set_over_a_later_column_names_the_columns_around_it() -> None:
    """An earnings table: "13 Weeks Ended" sits over the percent column of its period, as the
    grid keeps it; the amount column to its left is in its span too (the table grid's rule)."""
    table = (
        "|  |  | 13 Weeks Ended |  |  |\n|---|---|---|---|---|\n"
        "|  | January 28, 2023 |  | January 29, 2022 |  |\n"
        "| Net sales | $ 3,226,773 | 100.0% | $ 2,729,388 | 100.0% |"
    )
    cells = [u.text for u in split_units(table) if u.kind == "table_cell"]
    assert cells == [
        "Net sales — 13 Weeks Ended January 28, 2023: $ 3,226,773",
        "Net sales — 13 Weeks Ended January 28, 2023: 100.0%",
        "Net sales — 13 Weeks Ended January 29, 2022: $ 2,729,388",
        "Net sales — 13 Weeks Ended January 29, 2022: 100.0%",
    ]


def test_a_sentence_broken_by_a_page_break_stays_one_unit() -> None:
    text = "The share of Americans who say\nallies should spend more was 35% in 2019.\nNext."
    units = split_units(text)
    assert [u.text for u in units] == [
        "The share of Americans who say allies should spend more was 35% in 2019.",
        "Next.",
    ]


def test_japanese_units_and_bullets() -> None:
    units = split_units(
        "人口は1億2000万人です。出生数は減少した。\n・高齢化率 29.1％\n・出生率 1.26"
    )
    assert [(u.kind, u.text) for u in units] == [
        ("sentence", "人口は1億2000万人です。"),
        ("sentence", "出生数は減少した。"),
        ("list_item", "高齢化率 29.1％"),
        ("list_item", "出生率 1.26"),
    ]


# -- answer types and values -------------------------------------------------------------------


def test_answer_types_in_english_and_japanese() -> None:
    assert answer_type("What were the net revenues in the fourth quarter of 2022?") == "amount"
    assert answer_type("What percentage of adults say allies should spend more?") == "percent"
    assert answer_type("How many stores did the company open?") == "count"
    assert answer_type("In what year was the company founded?") == "year"
    assert answer_type("Who is the chief executive officer?") == "name"
    assert answer_type("令和4年度の予算はいくらですか") == "amount"
    assert answer_type("高齢化率の割合は") == "percent"
    assert answer_type("利用者は何人ですか") == "count"
    assert answer_type("Describe the methodology.") is None


def test_values_are_verbatim_and_of_the_asked_type() -> None:
    text = "Net revenues of $3.6 billion, up 18%, at 1,234 stores since 2019; 3,500億円。"
    assert [v.text for v in values_in(text, "amount")] == ["$3.6 billion", "3,500億円"]
    assert [v.text for v in values_in(text, "percent")] == ["18%"]
    assert [v.text for v in values_in(text, "year")] == ["2019"]
    # a number the question itself names is not its answer
    assert "2019" not in [v.text for v in values_in(text, "count", "stores since 2019")]


# -- periods -----------------------------------------------------------------------------------


def test_periods_in_their_spellings() -> None:
    assert periods_in("fourth quarter of 2022").quarters == {4}
    assert periods_in("Q4 FY2022").years == {2022} and periods_in("Q4 FY2022").quarters == {4}
    assert periods_in("fiscal 2022").fiscal == {2022}
    assert periods_in("令和4年度 第3四半期").years == {2022}
    assert periods_in("令和4年度 第3四半期").quarters == {3}
    assert periods_in("2022年度").fiscal == {2022}


def test_period_agreement_honours_the_documents_fiscal_year() -> None:
    text = "Net sales for fiscal 2022, the fiscal year ended January 28, 2023, rose."
    equivalents = fiscal_equivalents(text)
    assert equivalents == {2022: 2023}
    asked = periods_in("net sales in fiscal 2022")
    assert (
        period_agreement(asked, periods_in("Fifty-two weeks ended January 28, 2023"), equivalents)
        == 1
    )
    # in that document a header dated January 29, 2022 is fiscal 2021
    assert period_agreement(asked, periods_in("weeks ended January 29, 2022"), equivalents) == 0
    assert period_agreement(asked, periods_in("fiscal 2022"), equivalents) == 1
    assert period_agreement(periods_in("in Q4"), periods_in("fourth quarter"), {}) == 1
    assert period_agreement(periods_in("no period"), periods_in("2019"), {}) == 1


# -- quoting on the page the characters are printed on ------------------------------------------


PAGE_BREAK = (
    "Half of Americans say spending should stay the same. The share who say\n"
    "allies should increase spending was 35% in 2019."
)
LINE_7 = BBox(x0=50, y0=700, x1=500, y1=712)
LINE_8 = BBox(x0=50, y0=60, x1=480, y1=72)


def page_break_spans() -> list[TextSpan]:
    cut = PAGE_BREAK.index("\n")
    return [
        TextSpan(start=0, end=52, page_number=7, bbox=BBox(x0=50, y0=680, x1=500, y1=692)),
        TextSpan(start=53, end=cut, page_number=7, bbox=LINE_7),
        TextSpan(start=cut + 1, end=len(PAGE_BREAK), page_number=8, bbox=LINE_8),
    ]


def test_a_quote_is_cited_on_each_page_it_is_printed_on() -> None:
    spans = page_break_spans()
    whole = find_quote(
        PAGE_BREAK, "The share who say allies should increase spending was 35% in 2019."
    )
    assert whole is not None
    parts = quote_parts(PAGE_BREAK, [whole], spans, fallback_page=7)
    assert [(p.page_number, p.text, p.bboxes) for p in parts] == [
        (7, "The share who say", [LINE_7]),
        (8, "allies should increase spending was 35% in 2019.", [LINE_8]),
    ]
    # a quote wholly on page 8 is cited there, though the passage was read from page 7
    on_8 = find_quote(PAGE_BREAK, "35% in 2019.")
    assert on_8 is not None
    (part,) = quote_parts(PAGE_BREAK, [on_8], spans, fallback_page=7)
    assert (part.page_number, part.bboxes) == (8, [LINE_8])


def test_without_spans_a_quote_stays_on_the_passage_page() -> None:
    (part,) = quote_parts(PAGE_BREAK, [(0, 10)], [], fallback_page=7, fallback_boxes=[LINE_7])
    assert (part.page_number, part.text, part.bboxes) == (7, "Half of Am", [LINE_7])


# -- choosing the lead -------------------------------------------------------------------------


def test_the_lead_is_the_unit_with_the_asked_value_for_the_asked_measure() -> None:
    choice = choose_lead(
        "What were the consolidated net revenues?",
        [block(RELEASE)],
        min_coverage=0.5,
        max_supporting=2,
    )
    assert choice.lead is not None and choice.answer_type == "amount"
    assert choice.lead.value is not None and choice.lead.value.text == "$3.6 billion"
    assert len(choice.supporting) <= 2


def test_the_lead_is_the_table_cell_of_the_period_asked() -> None:
    choice = choose_lead(
        "What was operating income in the three months ended December 31, 2021?",
        [block(RELEASE)],
        min_coverage=0.5,
        max_supporting=2,
    )
    assert choice.lead is not None and choice.lead.unit.kind == "table_cell"
    assert choice.lead.unit.text == "Operating income — Three months ended December 31, 2021: (21)"


def test_abstains_when_the_measure_is_absent_and_offers_related_passages() -> None:
    choice = choose_lead(
        "What dividend per share was paid in 2022?",
        [block(RELEASE), block("Stores opened in 2022 numbered 12.", n=2)],
        min_coverage=0.5,
        max_supporting=2,
    )
    assert choice.lead is None and choice.reason and "dividend" in choice.reason
    assert choice.related  # somewhere to look


def test_abstains_when_no_unit_is_about_the_period_named() -> None:
    choice = choose_lead(
        "What were net revenues in 2015?", [block(RELEASE)], min_coverage=0.3, max_supporting=1
    )
    assert choice.lead is None and choice.reason and "2015" in choice.reason


def test_strict_needs_a_value_of_the_kind_asked() -> None:
    text = "Net revenues grew strongly across every segment this year."
    question = "What were net revenues this year?"
    standard = choose_lead(question, [block(text)], min_coverage=0.5, max_supporting=0)
    strict = choose_lead(question, [block(text)], min_coverage=0.5, max_supporting=0, strict=True)
    assert standard.lead is not None and standard.lead.value is None
    assert strict.lead is None and strict.reason and "strict" in strict.reason


def test_a_long_unit_is_quoted_as_a_window_around_its_value() -> None:
    words = " ".join(f"word{i}" for i in range(60))
    text = f"{words} net revenues were $3.6 billion {words}."
    (unit,) = split_units(text)
    choice = choose_lead(
        "What were net revenues?", [block(text)], min_coverage=0.5, max_supporting=0
    )
    assert choice.lead is not None
    shown, ranges = window(unit, text, choice.lead.value, 40)
    assert len(shown.split()) <= 42 and "$3.6 billion" in shown
    assert shown.startswith("… ") and shown.endswith(" …")
    ((a, b),) = ranges
    assert " ".join(text[a:b].split()) in shown


def test_a_year_before_a_comma_is_a_year() -> None:
    assert periods_in("moved 4.2 million parcels in 2024, a record").years == {2024}
    assert periods_in("a total of 12,2024 units").years == set()


def test_japanese_count_lead_states_its_value() -> None:
    question = "令和4年度の訪日外国人旅行者数は何人ですか"
    text = "令和4年度の訪日外国人旅行者数は383万人であった。前年度は25万人。"
    choice = choose_lead(question, [block(text)], min_coverage=0.5, max_supporting=1)
    assert choice.lead is not None and choice.lead.value is not None
    assert choice.lead.value.text == "383万人"
