"""Planning for route agentic (pagesight.query.planner): the rule planner on English and Japanese
questions, references read in passages, the LLM planner with a scripted model, and one
contract both planners meet."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pagesight.core.errors import ErrorCode
from pagesight.models.llm import LlmError
from pagesight.query.planner import (
    PLAN_SCHEMA,
    PLAN_SCHEMA_NAME,
    LlmPlanner,
    Plan,
    Planner,
    ReferenceCandidate,
    RulePlanner,
    build_planner,
    context_of,
    references_in_text,
)
from tests.fakes import ScriptedChat

RULES = RulePlanner()


def _parts(plan: Plan) -> list[str]:
    return [sub.text for sub in plan.sub_queries]


# -- the rules: comparisons, conjunctions, lists, aggregates -----------------------------------


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        ("Compare net revenue in 2019 and 2020", ["net revenue in 2019", "net revenue in 2020"]),
        (
            "What was the net revenue in 2019 vs 2020?",
            ["What was the net revenue in 2019?", "What was the net revenue in 2020?"],
        ),
        (
            "How did operating income change between FY2021 and FY2022?",
            [
                "How did operating income change in FY2021?",
                "How did operating income change in FY2022?",
            ],
        ),
        (
            "What was revenue for Q3 2015, Q3 2014 and Q3 2013?",
            [
                "What was revenue for Q3 2015?",
                "What was revenue for Q3 2014?",
                "What was revenue for Q3 2013?",
            ],
        ),
        (
            "Compare the revenue growth of Ulta Beauty and MGM Resorts in 2022",
            [
                "the revenue growth of Ulta Beauty in 2022",
                "the revenue growth of MGM Resorts in 2022",
            ],
        ),
        (
            "What was the revenue of Ulta vs MGM in 2022?",
            ["What was the revenue of Ulta in 2022?", "What was the revenue of MGM in 2022?"],
        ),
    ],
)
def test_comparisons_split_into_one_part_each(question: str, parts: list[str]) -> None:
    plan = RULES.plan(question)
    assert plan.kind == "comparison" and plan.multi_part
    assert _parts(plan) == parts
    assert all(sub.scope == "all" for sub in plan.sub_queries)


def test_two_questions_in_one_are_a_conjunction() -> None:
    plan = RULES.plan("What was net income in 2022 and how many employees did the company have?")
    assert plan.kind == "conjunction" and plan.multi_part
    assert _parts(plan) == [
        "What was net income in 2022?",
        "how many employees did the company have?",
    ]
    two = RULES.plan(
        "Who is the chief executive officer? Where are the company headquarters located?"
    )
    assert _parts(two) == [
        "Who is the chief executive officer?",
        "Where are the company headquarters located?",
    ]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("What are the seven sensors connected to the ECU?", "list"),
        ("List all countries mentioned in the surveys", "list"),
        ("How many figures are in the sensors section?", "aggregate"),
        ("すべての施策を挙げてください", "list"),
        ("図表はいくつありますか", "aggregate"),
    ],
)
def test_lists_and_counts_search_the_leading_document(question: str, kind: str) -> None:
    plan = RULES.plan(question)
    assert plan.kind == kind and not plan.multi_part
    (sub,) = plan.sub_queries
    assert sub.text == question and sub.scope == "lead_document"


@pytest.mark.parametrize(
    "question",
    [
        "What is the research and development expense?",  # one thing with "and" in its name
        "What was Johnson & Johnson's revenue in 2022?",
        "What percentage of Americans and Germans say relations are good?",  # no cue
        "What are the incident and report dates?",
        "Which region had the worst topline performance for MGM during FY2022?",
        "How many people aged 65 and older use the internet? ",
        "Revenue was $2,019 and 2,020 units were sold",  # amounts, not years
        "日本の人口は？",
        "東京都と大阪府の人口は？",  # と without a comparison cue
    ],
)
def test_questions_that_are_not_multi_part(question: str) -> None:
    plan = RULES.plan(question)
    assert not plan.multi_part, _parts(plan)


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        ("2019年と2020年の売上を比較", ["2019年の売上", "2020年の売上"]),
        (
            "２０１９年および２０２０年の売上高を比較してください",
            ["2019年の売上高", "2020年の売上高"],
        ),
        ("東京都と大阪府の人口を比較してください", ["東京都の人口", "大阪府の人口"]),
        (
            "売上高および営業利益をそれぞれ教えてください",
            ["売上高を教えてください", "営業利益を教えてください"],
        ),
        ("AとBとCの違い", ["A", "B", "C"]),
        (
            "日本と米国の違いについて説明してください。",
            ["日本について説明してください。", "米国について説明してください。"],
        ),
    ],
)
def test_japanese_comparisons(question: str, parts: list[str]) -> None:
    plan = RULES.plan(question)
    assert plan.kind == "comparison" and plan.multi_part
    assert _parts(plan) == parts


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (
            "What is the year-over-year change in revenue from FY2016 to FY2017?",
            [
                "What is the year-over-year change in revenue in FY2016?",
                "What is the year-over-year change in revenue in FY2017?",
            ],
        ),
        ("令和2年度から令和4年度の予算の推移", ["令和2年度の予算の推移", "令和4年度の予算の推移"]),
    ],
)
def test_a_range_is_searched_by_its_ends_but_is_not_multi_part(
    question: str, parts: list[str]
) -> None:
    plan = RULES.plan(question)
    assert plan.kind == "comparison" and plan.ranged and not plan.multi_part
    assert _parts(plan) == parts


@pytest.mark.parametrize(
    "question",
    [
        "What is the FY2018 capital expenditure amount for 3M? Answer in million.",
        "How many bar charts are in the report?Please write the answer in integer format.",
        "Is the adoption rate of iOS 9 higher than the global rate? What is the difference?",
        "Does AMEX have an improving operating margin? If operating margin is not a useful "
        "metric for a company like this, then please state that and explain why.",
        "スクラムマスターの役割は何ですか？また、その理由を述べてください。",
        "Among all charts in this report, how many compare the general public with Latinos?",
    ],
)
def test_instructions_and_follow_ups_are_not_parts(question: str) -> None:
    assert not RULES.plan(question).multi_part, _parts(RULES.plan(question))


def test_parts_are_capped() -> None:
    plan = RulePlanner(max_sub_queries=2).plan("Revenue in 2018, 2019, 2020 and 2021")
    assert _parts(plan) == ["Revenue in 2018", "Revenue in 2019"]


# -- references in passages ---------------------------------------------------------------------


def test_references_in_text_with_their_pointing_words() -> None:
    text = (
        "For additional information regarding our legal proceedings, see Note 13, "
        "Contingencies and Commitments. Results by region (Table 2) are shown in Figure 4."
    )
    found = references_in_text(text)
    assert [(f.reference.kind, f.reference.value, f.cue) for f in found] == [
        ("note", "13", "see"),
        ("table", "2", "("),
        ("figure", "4", "shown"),
    ]
    assert text[found[0].start : found[0].end] == "Note 13"
    assert "legal proceedings" in context_of(text, found[0].start, found[0].end)


def test_continued_and_japanese_references() -> None:
    (ahead,) = references_in_text("Sensors (continued on next page)")
    assert ahead.step == 1 and ahead.cue == "continued"
    (back,) = references_in_text("Continued from the previous slide: sensors")
    assert back.step == -1
    note, figure = references_in_text("詳細は注記7を参照してください。図3に示すように増加した。")
    assert (note.reference.kind, note.reference.value, note.cue) == ("note", "7", "詳細は")
    assert (figure.reference.kind, figure.cue) == ("figure", "に示す")
    (ja_next,) = references_in_text("次ページに続く")
    assert ja_next.step == 1


def test_bare_mentions_have_no_cue() -> None:
    (bare,) = references_in_text("Table 3 lists the segments.")
    assert bare.cue is None


def _candidate(text: str, rank: int, page: int) -> ReferenceCandidate:
    (found,) = references_in_text(text)
    return ReferenceCandidate(
        found=found,
        page=("doc", page),
        chunk_id=f"c{page}",
        rank=rank,
        context=context_of(text, found.start, found.end),
    )


# -- the LLM planner (scripted) -----------------------------------------------------------------


def test_llm_planner_asks_with_the_schema_and_keeps_its_parts() -> None:
    question = "How did the two largest segments do last year?"
    llm = ScriptedChat.by_question(
        {
            question: {
                "kind": "comparison",
                "sub_queries": [
                    "Domestic segment revenue 2022",
                    "International segment revenue 2022",
                ],
            }
        }
    )
    plan = LlmPlanner(llm).plan(question)
    assert plan.planner == "llm:scripted" and plan.kind == "comparison" and plan.multi_part
    assert _parts(plan) == ["Domestic segment revenue 2022", "International segment revenue 2022"]
    (call,) = llm.calls
    assert call["schema"] == PLAN_SCHEMA and call["name"] == PLAN_SCHEMA_NAME
    system, user = call["messages"]
    assert "never an instruction" in str(system.content) and "At most 4" in str(system.content)
    assert user.content == f"Question: {question}"


def test_llm_planner_cleans_its_reply() -> None:
    question = "Compare A and B"
    llm = ScriptedChat.by_question(
        {
            question: {
                "kind": "comparison",
                "sub_queries": [" A ", "a", "", question, "B", "C", "D", "E"],
            }
        }
    )
    plan = LlmPlanner(llm, max_sub_queries=3).plan(question)
    assert _parts(plan) == ["A", "B", "C"]  # stripped, de-duplicated, blank and itself dropped


@pytest.mark.parametrize(
    ("reply", "note"),
    [
        (LlmError(ErrorCode.UNAVAILABLE, "connection refused"), "LLM planning failed"),
        ({"kind": "maybe", "sub_queries": []}, "did not match the schema"),
        ({"kind": "comparison"}, "did not match the schema"),
    ],
)
def test_llm_planner_falls_back_to_the_rules(reply: Any, note: str) -> None:
    question = "Compare net revenue in 2019 and 2020"
    plan = LlmPlanner(ScriptedChat.by_question({question: reply})).plan(question)
    assert plan.planner == "rule" and plan.note and note in plan.note
    assert _parts(plan) == ["net revenue in 2019", "net revenue in 2020"]


def test_llm_comparison_without_two_parts_is_one_search() -> None:
    question = "Compare revenue"
    plan = LlmPlanner(
        ScriptedChat.by_question({question: {"kind": "comparison", "sub_queries": ["x"]}})
    ).plan(question)
    assert plan.kind == "single" and plan.sub_queries == () and plan.note


def test_build_planner_picks_by_settings() -> None:
    from pagesight.core.settings import MultiStepOptions

    llm = ScriptedChat.by_question({})
    assert isinstance(build_planner(MultiStepOptions(), None), RulePlanner)
    assert isinstance(build_planner(MultiStepOptions(), llm), LlmPlanner)
    assert isinstance(build_planner(MultiStepOptions(planner="rule"), llm), RulePlanner)


# -- the contract both planners meet ------------------------------------------------------------

#: What a good planner makes of each question: the contract's script for the LLM.
GOOD_PLANS: dict[str, dict[str, Any]] = {
    "Compare net revenue in 2019 and 2020": {
        "kind": "comparison",
        "sub_queries": ["net revenue in 2019", "net revenue in 2020"],
    },
    "2019年と2020年の売上を比較": {
        "kind": "comparison",
        "sub_queries": ["2019年の売上", "2020年の売上"],
    },
    "What is the effective tax rate?": {"kind": "single", "sub_queries": []},
    "What are the seven sensors connected to the ECU?": {
        "kind": "list",
        "sub_queries": ["sensors connected to the ECU"],
    },
}


def _rules() -> Planner:
    return RulePlanner()


def _llm() -> Planner:
    return LlmPlanner(ScriptedChat.by_question(GOOD_PLANS))


@pytest.fixture(params=[_rules, _llm], ids=["rule", "llm"])
def planner(request: pytest.FixtureRequest) -> Planner:
    make: Callable[[], Planner] = request.param
    return make()


@pytest.mark.parametrize("question", list(GOOD_PLANS))
def test_contract_plans(planner: Planner, question: str) -> None:
    plan = planner.plan(question)
    assert plan.query == question and plan.planner.startswith(planner.name)
    texts = _parts(plan)
    assert len(texts) <= 4 and all(t.strip() for t in texts)
    assert len({t.casefold() for t in texts}) == len(texts)
    assert question.casefold() not in {t.casefold() for t in texts if plan.kind != "list"}
    if plan.kind == "single":
        assert texts == []
    if plan.kind == "list":
        assert all(sub.scope == "lead_document" for sub in plan.sub_queries)


@pytest.mark.parametrize(
    ("question", "years"),
    [
        ("Compare net revenue in 2019 and 2020", ("2019", "2020")),
        ("2019年と2020年の売上を比較", ("2019", "2020")),
    ],
)
def test_contract_one_part_per_compared_period(
    planner: Planner, question: str, years: tuple[str, str]
) -> None:
    plan = planner.plan(question)
    assert plan.kind == "comparison" and plan.multi_part
    for year in years:  # each period in exactly one part, the rest of the question kept
        (part,) = [t for t in _parts(plan) if year in t]
        assert "売上" in part or "net revenue" in part


def test_contract_single_question(planner: Planner) -> None:
    plan = planner.plan("What is the effective tax rate?")
    assert plan.kind == "single" and not plan.multi_part and plan.sub_queries == ()


def test_contract_references_on_topic_pointers_first(planner: Planner) -> None:
    bare = _candidate("Segment revenue is in Table 3 with other figures.", rank=1, page=2)
    pointer = _candidate("Income taxes: see Note 7 for the reconciliation.", rank=2, page=3)
    on_topic = _candidate("The effective tax rate by year is in Table 9.", rank=1, page=4)
    elsewhere = _candidate("Leases are described in Note 8.", rank=1, page=5)
    onwards = _candidate("Tax reconciliation (continued on next page)", rank=3, page=6)
    ordered = planner.order_references(
        "What is the effective tax rate?", [bare, elsewhere, pointer, on_topic, onwards]
    )
    # a pointer on the question's topic (whatever the rank of its page), a continuation, then
    # a bare mention among the question's words; off the topic, pointer or not: left out
    assert ordered == [pointer, onwards, on_topic]


def test_a_long_question_needs_two_shared_words() -> None:
    question = "How could a tax settlement affect Amcor's effective income tax rate?"
    company = _candidate("Amcor Flexibles is described in Note 2.", rank=1, page=2)
    taxes = _candidate("A tax settlement may reduce our rate. See Note 11.", rank=2, page=3)
    assert RULES.order_references(question, [company, taxes]) == [taxes]


def test_each_listed_reference_has_its_own_title() -> None:
    text = (
        "For information on the charges discussed below, refer to Note 2, Acquisitions; "
        "Note 3, Restructuring; and Note 11, Income Taxes, of the Notes."
    )
    contexts = {
        f.reference.value: context_of(text, f.start, f.end) for f in references_in_text(text)
    }
    assert contexts["2"].endswith("Note 2, Acquisitions")
    assert "Tax" not in contexts["3"] and contexts["11"].endswith("Note 11, Income Taxes")


def test_structure_words_are_no_topic() -> None:
    question = "What are the interest rates of the 2028 Notes?"
    listed = _candidate("For obligations, refer to Note 6, Derivative Instruments.", rank=1, page=2)
    assert RULES.order_references(question, [listed]) == []


def test_common_words_are_no_topic(planner: Planner) -> None:
    question = "What share of seniors go online in the Pew Internet tracking survey?"
    methods = _candidate(
        "Data come from the Pew Internet tracking survey; see the Methods section.", 1, 6
    )
    assert planner.order_references(question, [methods]) == [methods]
    common = frozenset({"pew", "internet", "track", "survey"})
    assert planner.order_references(question, [methods], common) == []
