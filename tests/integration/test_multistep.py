"""Route agentic (pagesight.query.multistep) end to end on a real filing: an answer reached only by
following a cross-reference.

Best Buy's fiscal 2023 10-K (eval corpus) answers "Item 3. Legal Proceedings" with one
sentence: "For additional information regarding our legal proceedings, see Note 13,
Contingencies and Commitments, of the Notes to Consolidated Financial Statements". What Best
Buy discloses sits in Note 13, on page 62, whose text the question barely shares ("We are
involved in a number of legal proceedings. Where appropriate, we have made accruals ..."):
among twelve pages of the filing, route text ranks page 20 (Item 3) first and Note 13's page
below its top five, behind pages that talk about litigation risk, debt and accounting
policies. Route agentic reads page 20's passage, resolves "Note 13" in the document's
structure (the notes' numbered headings, found at ingest) and puts page 62 right after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pagesight.core.types import AccessFilter, Question, RouteName
from pagesight.services.engine import build_answer_pipeline
from pagesight.services.stack import LocalStack
from tests.conftest import ingested_pages

pytestmark = pytest.mark.integration

SOURCE = "BESTBUY_2023_10K.pdf"
#: Item 3 (p. 20), other pages on litigation, debt, taxes and policies, the start of the notes
#: (p. 44, which gives the notes their context) and Notes 11 to 14 (pp. 60-62).
PAGES = [19, 20, 30, 36, 44, 50, 51, 56, 59, 60, 61, 62]
ITEM_3, NOTE_13 = PAGES.index(20) + 1, PAGES.index(62) + 1
QUESTION = "What does Best Buy disclose under Item 3, Legal Proceedings?"


@pytest.fixture(scope="module")
def filing(
    tmp_path_factory: pytest.TempPathFactory, eval_dir: Path
) -> Iterator[tuple[LocalStack, str]]:
    with ingested_pages(eval_dir, SOURCE, PAGES, tmp_path_factory.mktemp("multistep")) as found:
        yield found


def test_the_answer_is_reached_by_following_see_note_13(filing: tuple[LocalStack, str]) -> None:
    stack, doc_id = filing
    access = AccessFilter(tenant="default")
    text = stack.search(QUESTION, access, RouteName.TEXT, 10)
    ranked = [h.page_number for h in text.hits]
    assert ranked[0] == ITEM_3
    assert NOTE_13 not in ranked[:2]  # the question's words lead elsewhere first

    agentic = stack.search(QUESTION, access, RouteName.AGENTIC, 10)
    assert [h.page_number for h in agentic.hits[:2]] == [ITEM_3, NOTE_13]
    note = agentic.hits[1]
    assert "followed" in note.route_scores and note.chunk_ids and note.page_label == "62"
    trace = agentic.trace
    assert trace.route == RouteName.AGENTIC and trace.multistep is not None
    first = trace.multistep.steps[0]
    assert first.action == "search" and first.sub_query == QUESTION
    (followed,) = [r for r in first.references if r.followed]
    assert followed.reference.kind == "note" and followed.reference.value == "13"
    assert followed.found_on == (doc_id, ITEM_3) and followed.cue == "see"
    assert followed.pages == [(doc_id, NOTE_13)]
    assert (doc_id, NOTE_13) in first.new_pages
    assert trace.multistep.stop_reason in ("no_new_evidence", "plan_done")
    assert sum(s.elapsed_ms for s in trace.multistep.steps) <= trace.elapsed_ms


def test_the_answer_pipeline_takes_route_agentic(filing: tuple[LocalStack, str]) -> None:
    stack, _ = filing
    pipeline = build_answer_pipeline(stack.settings, stack)
    answered = pipeline.run(
        Question(query=QUESTION, route=RouteName.AGENTIC), AccessFilter(tenant="default"), "t1"
    )
    assert answered.trace.route == RouteName.AGENTIC and answered.trace.multistep is not None
    assert answered.trace.answer is not None and answered.trace.answer.candidates > 0
    pages = {c.page_number for c in answered.response.citations}
    assert not answered.response.abstained and pages & {ITEM_3, NOTE_13}
