"""The split of bench/structural_refs.py: generic self-references count, look-alikes do not."""

from __future__ import annotations

import pytest

from bench.structural_refs import has_structural_reference


@pytest.mark.parametrize(
    "question",
    [
        "What does the chart on page 14 show?",
        "Summarise pp. 3-5.",
        "How many bars are in Fig. 4b?",
        "Which rows of Table 2.1 exceed 10%?",
        "What is said in Appendix B?",
        "What does Note 7 say about income taxes?",
        "What is on the second last page?",
        "Who is on the cover?",
        'In the "Leadership program" section, who leads?',
        "3ページの表の合計は？",
        "第2章の結論は？",
        "図3の凡例は？",
    ],
)
def test_references_are_found(question: str) -> None:
    assert has_structural_reference(question)


@pytest.mark.parametrize(
    "question",
    [
        "Do seniors own a tablet computer?",
        "How many tables include F1 as a metric?",
        "What figures did revenue reach in 2020?",
        "Does the policy cover flood damage?",
        "令和6年の景気動向は？",
    ],
)
def test_look_alikes_are_not(question: str) -> None:
    assert not has_structural_reference(question)
