"""How bench/answer_scoring.py and bench/eval_answers.py score answers and
bench/calibrate_abstain.py picks a threshold: the numbers the README reports are only as good as
these rules. The MMLongBench-style cases are worked by hand from that benchmark's rules."""

from __future__ import annotations

from typing import Any

import pytest

from bench.answer_scoring import (
    NOT_ANSWERABLE,
    ScoredAnswer,
    accuracy,
    anls,
    extract_value,
    f1,
    resolve_format,
    score_value,
    scored_answer,
    sentences,
)
from bench.calibrate_abstain import choose_threshold, roc_auc
from bench.eval_answers import answer_matches, normalise, numbers_in, score_answer, summarise


def score_text(gold: str, answer_text: str, declared: str | None) -> float:
    """Extract, then score, by the format the gold resolves to (as eval_answers does)."""
    fmt = resolve_format(gold, declared)
    return score_value(gold, extract_value(answer_text, fmt), fmt)


# -- Int ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "answer", "expected"),
    [
        ("3", "There are 3 pie charts.", 1.0),
        ("3", "There are three pie charts.", 1.0),  # spelled out, no digits
        ("8980", "In total 8,980 items were used.", 1.0),
        ("41", "In 2019, 41 respondents answered.", 1.0),  # the year is skipped
        ("2013", "The company was founded in 2013.", 1.0),  # a year alone is the number
        ("5", "It lists 4 items [5].", 0.0),  # a citation marker is not a number
        ("12", "It has 12 pages. Section 2 adds 5.", 1.0),  # the first sentence decides
        ("3", "3.9", 0.0),  # the benchmark would truncate to 3; we do not
    ],
)
def test_int_is_the_first_number_of_the_first_sentence(
    gold: str, answer: str, expected: float
) -> None:
    assert score_text(gold, answer, "Int") == expected


def test_quoting_a_whole_table_row_is_not_a_correct_number() -> None:
    row = "Revenue 2019 2020 100 200 300"
    assert extract_value(row, "Int") == "100"  # years skipped, then the first figure
    assert score_text("200", row, "Int") == 0.0
    assert answer_matches("200", row, "Int") is True  # what the old rule rewarded
    table_row = "| Revenue | 2019 | 2020 | 100 | 200 | 300 |"
    assert score_text("200", table_row, "Int") == 0.0


# -- Float -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "predicted", "expected"),
    [
        ("0.125", "12.5%", 1.0),  # gold * 100
        ("12.5", "12.5%", 1.0),
        ("12.5%", "0.125", 1.0),  # gold / 100
        ("12.5", "12.8", 0.0),  # 2.4 % off, and apart at 2 decimals
        ("100", "100.9", 1.0),  # 0.9 % relative: within 1 %
        ("100", "101.5", 0.0),  # 1.5 %
        ("0.833", "0.83", 1.0),  # 0.36 %
        ("0.833", "0.8", 0.0),  # 4 %, and 0.80 != 0.83
        ("0.023", "0.02", 1.0),  # 13 % off, but equal rounded to 2 decimals (benchmark rule)
        ("$1577.00", "1577", 1.0),
        ("-3.65%", "-3.65", 1.0),
        ("29%", "92%", 0.0),
    ],
)
def test_float_tolerance_and_percentage_variants(
    gold: str, predicted: str, expected: float
) -> None:
    assert score_value(gold, predicted, "Float") == expected


def test_float_extraction_keeps_the_percent_sign_and_skips_years() -> None:
    assert extract_value("In 2020, 29 % of Germans said so.", "Float") == "29%"
    assert extract_value("Net sales were $ 1,234.5 million.", "Float") == "1234.5"
    assert extract_value("The share fell to -3.65%.", "Float") == "-3.65%"
    assert extract_value("No figure is given here", "Float") is None
    assert score_text("0.125", "The rate was 12.5%.", "Float") == 1.0


# -- Str ---------------------------------------------------------------------------------------


def test_anls_above_and_below_the_threshold() -> None:
    gold = "Berlin School of Experimental Psychology"
    # "psychologie" vs "psychology": 2 edits over 41 characters.
    assert score_value(gold, "Berlin School of Experimental Psychologie", "Str") == pytest.approx(
        1 - 2 / 41
    )
    assert score_value("Europe", "Asia", "Str") == 0.0
    assert anls("ab", "ac") == 0.0  # exactly 0.5 counts as 0
    assert anls("abcd", "abce") == pytest.approx(0.75)


def test_str_extraction_drops_lead_ins_and_case_and_punctuation() -> None:
    assert score_text("Eating out", "The answer is eating out.", "Str") == 1.0
    assert score_text("H@10", "h@10 [2]", "Str") == 1.0
    assert score_text("Yes", "Yes, the margins have been consistent.", None) == 1.0
    assert (
        extract_value("According to the report, Europe led. Asia followed.", "Str") == "Europe led"
    )
    # Verbose answers do not reduce to the gold phrase (no LLM extraction step).
    assert score_text("Europe", "Most participants came from Europe.", "Str") == 0.0


def test_str_exact_match_kinds() -> None:
    assert score_value("2015-2016", "2015-2017", "Str") == 0.0  # ANLS would give 0.89
    assert score_value("15", "15.0", "Str") == 1.0  # plain numbers compare as numbers
    assert score_value("Mr. S.V. Shanbhag", "Mr. S.V. Shanbhag", "Str") == 1.0
    assert extract_value("Mr. S.V. Shanbhag signed it. Later on", "Str") == (
        "Mr. S.V. Shanbhag signed it"
    )


# -- List --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "answer", "expected"),
    [
        ("['Circle', 'Rectangle']", "Rectangle and circle", 1.0),  # order-insensitive
        ("['2006', '2007']", "The years are 2006 and 2007.", 1.0),
        ("['2006', '2007']", "2006", 0.0),  # lengths differ
        ("['2006', '2007']", "2006, 2007 and 2008", 0.0),
        ("['90%', '42%', '39%']", "39%, 42% and 90%.", 1.0),
        ("[1500, 8000]", "They were 1,500 and 8,000.", 1.0),  # thousands separators kept whole
        ("['2006', '2007']", "['2007', '2006']", 1.0),  # a list literal in the answer
        ("['UK', 'Israel', 'China']", "The partners:\n- China\n- UK\n- Israel", 1.0),
        ("['71.02', '75.38']", "71.02 and 75.39", 0.0),  # numbers exactly
    ],
)
def test_list(gold: str, answer: str, expected: float) -> None:
    assert score_text(gold, answer, "List") == expected


def test_list_scores_the_worst_element_by_anls() -> None:
    gold = "['yellow', 'black and white']"
    assert score_value(gold, ["yelow", "Black and white"], "List") == pytest.approx(1 - 1 / 6)
    assert score_value(gold, ["blue", "black and white"], "List") == 0.0


# -- None (unanswerable) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "The documents do not contain this.",
        "Not answerable.",
        "This cannot be determined from the chart.",
        "The document does not mention Chinese respondents [1].",
        "The report doesn't say.",
        "There is no information about Japan in the survey.",
    ],
)
def test_abstention_phrases_are_not_answerable(answer: str) -> None:
    assert extract_value(answer, "None") == NOT_ANSWERABLE
    assert score_text("Not answerable", answer, None) == 1.0
    assert score_text("29%", answer, "Float") == 0.0  # abstaining on an answerable question


def test_an_answer_to_an_unanswerable_question_scores_zero() -> None:
    assert score_text("Not answerable", "About 29% of them.", None) == 0.0
    assert score_value("Not answerable", "29", "None") == 0.0
    assert score_value("Not answerable", None, "None") == 0.0


# -- formats -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "declared", "expected"),
    [
        ("3", None, "Int"),
        ("1,251", None, "Int"),
        ("12.5%", None, "Float"),
        ("$9068.00", None, "Float"),
        ("['a', 'b']", None, "List"),
        ("Not answerable", None, "None"),
        ("Yes, the margins have been consistent.", None, "Str"),
        ("$ 17966 million", None, "Str"),
        ("14:04 CET", "Int", "Str"),  # labelled Int, not a number
        ("3.5", "Int", "Float"),
        ("Europe", "Str", "Str"),
    ],
)
def test_resolve_format(gold: str, declared: str | None, expected: str) -> None:
    assert resolve_format(gold, declared) == expected


def test_sentences_keep_decimals_abbreviations_and_initials() -> None:
    text = "It rose 12.5 points, e.g. in Q4. Mr. Smith left!\nNext line"
    assert sentences(text) == ["It rose 12.5 points, e.g. in Q4.", "Mr. Smith left!", "Next line"]


# -- accuracy and F1 ---------------------------------------------------------------------------


def test_accuracy_and_f1_on_a_hand_computed_set() -> None:
    items = [
        scored_answer("3", "3", 1.0),  # answerable, answered, right
        scored_answer("Europe", "Europe", 1.0),
        scored_answer("29%", "92%", 0.0),  # answered, wrong
        scored_answer("12", NOT_ANSWERABLE, 0.0),  # abstained on an answerable question
        scored_answer(NOT_ANSWERABLE, NOT_ANSWERABLE, 1.0),  # abstained, rightly
        scored_answer(NOT_ANSWERABLE, "7", 0.0),  # answered an unanswerable question
        scored_answer(NOT_ANSWERABLE, "Asia", 0.0),
    ]
    assert [item.answered for item in items] == [True, True, True, False, False, True, True]
    assert accuracy(items) == pytest.approx(3 / 7)
    # recall = 2 / 4 answerable; precision = 2 / 5 answered; F1 = 2 * 0.5 * 0.4 / 0.9
    assert f1(items) == pytest.approx(4 / 9)


def test_f1_edge_cases() -> None:
    assert accuracy([]) is None
    assert f1([ScoredAnswer(answerable=False, answered=False, score=1.0)]) is None
    assert f1([ScoredAnswer(answerable=True, answered=False, score=0.0)]) == 0.0
    assert f1([ScoredAnswer(answerable=True, answered=True, score=1.0)]) == 1.0


# -- eval_answers wiring -----------------------------------------------------------------------


def _row(
    question: dict[str, Any], answer: str, abstained: bool, answerable: bool
) -> dict[str, Any]:
    """A row as eval_answers builds it, the earlier rule (``correct``) included."""
    fmt = str(question.get("answer_format"))
    return {
        "answerable": answerable,
        "kind": question["kind"],
        "abstained": abstained,
        "with_evidence": not abstained,
        "correct": answer_matches(str(question["answer"]), answer, fmt)
        if answerable and fmt in ("Int", "Float", "Str")
        else None,
        "citations_in_context": True,
        "ms": 10.0,
        **score_answer(question, answer, abstained),
    }


def test_summarise_reports_accuracy_f1_by_kind_and_format() -> None:
    table_row = "Revenue 2019 2020 100 200 300"
    rows = [
        _row({"answer": "200", "answer_format": "Int", "kind": "table"}, table_row, False, True),
        _row({"answer": "12.5%", "kind": "chart"}, "It was 0.125 overall.", False, True),
        _row({"answer": NOT_ANSWERABLE, "kind": "unanswerable"}, "", True, False),
        _row({"answer": NOT_ANSWERABLE, "kind": "unanswerable"}, "About 7.", False, False),
    ]
    assert rows[1]["scored_format"] == "Float"  # inferred: no answer_format
    result = summarise(rows)
    assert result["answer_accuracy"] == 1.0  # the old rule: 200 is in the row (n = 1)
    assert result["accuracy"] == 0.5  # (0 + 1 + 1 + 0) / 4
    # recall = 1 / 2 answerable; precision = 1 / 3 answered; F1 = 2 * (1/2) * (1/3) / (5/6)
    assert result["f1"] == pytest.approx(0.4)
    assert result["scored_n"] == 4
    assert result["unanswerable_abstention_rate"] == 0.5
    assert result["by_kind"]["table"]["accuracy"] == 0.0
    assert result["by_kind"]["chart"]["accuracy"] == 1.0
    assert result["by_format"]["None"] == {"n": 2, "accuracy": 0.5, "f1": None}
    assert result["by_format"]["Int"] == {"n": 1, "accuracy": 0.0, "f1": 0.0}


# -- the earlier rule (answer_accuracy) and the abstain calibration -----------------------------


@pytest.mark.parametrize(
    ("gold", "answer", "fmt", "expected"),
    [
        ("29%", "The share was 29 % in the west.", "Float", True),
        ("29%", "The share was 92 % in the west.", "Float", False),
        ("8980", "In total 8,980 items were used.", "Int", True),
        ("0.833", "The hit rate reached 0.83.", "Float", True),  # within 1 %
        ("0.833", "The hit rate reached 0.8.", "Float", False),
        ("14:04 CET", "It passed 200,000 at 14:04 CET.", "Int", True),  # not a number: contains
        ("Europe", "Most participants came from europe.", "Str", True),
        ("Berlin School of Experimental Psychology", "It began in Berlin.", "Str", False),
    ],
)
def test_answer_matches(gold: str, answer: str, fmt: str, expected: bool) -> None:
    assert answer_matches(gold, answer, fmt) is expected


def test_normalise_and_numbers() -> None:
    assert normalise("  H@10,  Recall! ") == "h 10 recall"
    assert numbers_in("from 1,250 to -3.5 and 7%") == [1250.0, -3.5, 7.0]


def test_roc_auc() -> None:
    assert roc_auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert roc_auc([0.5], [0.5]) == 0.5
    assert roc_auc([], [0.1]) is None


def test_threshold_keeps_false_abstentions_within_the_budget() -> None:
    answerable = [0.1, 0.5, 0.6, 0.7, 0.8, 0.9, 0.9, 0.95, 0.97, 0.99]
    unanswerable = [0.2, 0.3, 0.4, 0.55]
    t = choose_threshold(answerable, unanswerable, max_false_abstain=0.10)
    assert t == 0.5  # abstains below 0.5: 1 of 10 answerable, 3 of 4 unanswerable
    assert choose_threshold(answerable, unanswerable, max_false_abstain=0.0) == 0.1
