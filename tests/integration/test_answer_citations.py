"""Extractive answers on real pages of ../shared/eval/pdfs (issue 31): a quote from a chunk that
runs across a page break is cited on the page its characters are printed on, and a question
about one line item of a statement table leads with that table cell."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest

from pagesight.core.ids import point_id
from pagesight.core.settings import Settings
from pagesight.core.types import AccessFilter, AnswerResponse, Question, RouteName
from pagesight.services.engine import build_answer_pipeline
from pagesight.services.stack import LocalStack
from tests.conftest import extract_pages

pytestmark = pytest.mark.integration

TENANT = "acme"


def _squeeze(text: str) -> str:
    return re.sub(r"[\W_]+", "", text).casefold()


@pytest.fixture(scope="module")
def corpus(
    eval_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalStack, dict[str, Path]]]:
    """The Pew report's pages 7-8 (a chunk runs across them) and the MGM release's pages 1
    and 11 (prose, and the consolidated statement of operations), ingested into one index."""
    tmp = tmp_path_factory.mktemp("answers")
    wanted = {
        "PG_2020.03.09_US-Germany_FINAL.pdf": [7, 8],
        "MGMRESORTS_2022Q4_EARNINGS.pdf": [1, 11],
    }
    pdfs = {}
    for doc, pages in wanted.items():
        source = eval_dir / "pdfs" / doc
        if not source.is_file():
            pytest.skip(f"{doc} is not in the evaluation corpus")
        pdfs[doc] = extract_pages(source, pages, tmp / doc)
    with LocalStack(Settings(data_dir=tmp / "var")) as stack:
        jobs = stack.ingestor.ingest(
            [stack.request(path, tenant=TENANT) for path in pdfs.values()], progress=None
        )
        assert [job.state.value for job in jobs] == ["READY", "READY"]
        yield stack, pdfs


def _ask(stack: LocalStack, query: str) -> AnswerResponse:
    pipeline = build_answer_pipeline(stack.settings, stack)
    question = Question(query=query, route=RouteName.TEXT)
    return pipeline.run(question, AccessFilter(tenant=TENANT), uuid.uuid4().hex).response


def _page_texts(pdf: Path) -> dict[int, str]:
    with pymupdf.open(pdf) as opened:
        return {n + 1: _squeeze(opened[n].get_text()) for n in range(opened.page_count)}


def test_quotes_across_a_page_break_are_cited_where_they_are_printed(
    corpus: tuple[LocalStack, dict[str, Path]],
) -> None:
    stack, pdfs = corpus
    answer = _ask(
        stack,
        "Are Republicans and Republican-leaning independents more likely than Democrats "
        "to say European allies should increase defense spending?",
    )
    assert not answer.abstained and answer.lead is not None
    pages = _page_texts(pdfs["PG_2020.03.09_US-Germany_FINAL.pdf"])
    quoted = [(c, part) for c in answer.citations for part in c.parts]
    assert quoted
    for citation, part in quoted:
        assert citation.page_number == citation.parts[0].page_number
        assert part.bboxes, "every part has the boxes of its lines"
        # the characters of each part are printed on the page it names (cells one by one)
        for piece in part.text.split(" | "):
            assert _squeeze(piece) in pages[part.page_number], (part.page_number, piece)
    # the cited chunk is the one across the break: its spans name both pages
    access = AccessFilter(tenant=TENANT)
    ids = [point_id(TENANT, c.chunk_id) for c in answer.citations]
    payloads = stack.store.retrieve(ids, access)
    assert any(len({span[2] for span in p.get("spans", [])}) > 1 for p in payloads.values())


def test_a_line_item_question_leads_with_the_table_cell(
    corpus: tuple[LocalStack, dict[str, Path]],
) -> None:
    stack, pdfs = corpus
    answer = _ask(
        stack,
        "What was MGM Resorts' operating income in the twelve months ended December 31, 2022?",
    )
    assert not answer.abstained and answer.lead is not None
    lead = answer.lead
    assert lead.kind == "table_cell", lead
    assert lead.value and re.search(r"\d", lead.value)
    assert lead.text.lower().startswith("operating income")
    (citation,) = [c for c in answer.citations if c.n == lead.citations[0]]
    pages = _page_texts(pdfs["MGMRESORTS_2022Q4_EARNINGS.pdf"])
    for part in citation.parts:
        for piece in part.text.split(" | "):
            assert _squeeze(piece) in pages[part.page_number]
