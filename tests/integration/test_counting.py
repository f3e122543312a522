"""A counting question on a real report (../shared/eval/pdfs): the ``count`` route returns every
page the structure counts, a search ranks all of them first, and the answer is the structure
count naming those same pages (pagesight.query.counting).

Four pages of a Pew report: a text page, then three pages with one or two charts each (their
labels and values are in the text layer), so the count is known: three pages of charts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight.core.types import AccessFilter, Question, RouteName
from pagesight.services.engine import build_answer_pipeline
from tests.conftest import ingested_pages

pytestmark = pytest.mark.integration

REPORT = "PG_2020.03.09_US-Germany_FINAL.pdf"


def test_an_aggregate_question_returns_every_page_it_counts(eval_dir: Path, tmp_path: Path) -> None:
    with ingested_pages(eval_dir, REPORT, [3, 6, 7, 8], tmp_path) as (stack, doc_id):
        access = AccessFilter(tenant="default")
        query = "How many charts are in the report?"
        result = stack.search(query, access, RouteName.AUTO, top_k=5)
        (count,) = [r for r in result.trace.routes if r.route == "count"]
        counted = sorted(int(item.rsplit("#", 1)[1]) for item, _ in count.candidates)
        assert counted == [2, 3, 4], counted  # the text page has no chart
        top = [(hit.doc_id, hit.page_number) for hit in result.hits[: len(counted)]]
        assert sorted(top) == [(doc_id, n) for n in counted]  # evidence recall, not one hit
        assert "count" in result.trace.stages_ms

        pipeline = build_answer_pipeline(stack.settings, stack)
        answer = pipeline.answer(Question(query=query), access, "trace-count")
        assert answer.answer.startswith("Structure count: 3 pages in the parsed structure show")
        assert "p. 2, 3, 4" in answer.answer or "p. 2–4" in answer.answer
        assert [c.page_number for c in answer.citations] == counted
        assert all(c.doc_id == doc_id and c.quote for c in answer.citations)

        # a question with no counting cue: the route is not listed, the answer is quoted
        plain = stack.search("defense spending in Germany", access, RouteName.AUTO, top_k=5)
        assert "count" not in {r.route for r in plain.trace.routes}
