"""How bench/eval_answers.py scores answers and bench/calibrate_abstain.py picks a threshold:
the numbers the README reports are only as good as these rules."""

from __future__ import annotations

import pytest

from bench.calibrate_abstain import choose_threshold, roc_auc
from bench.eval_answers import answer_matches, normalise, numbers_in


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
