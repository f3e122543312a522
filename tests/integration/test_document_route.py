"""Route ``document`` end to end on real filings stored under neutral names: a corpus question
that names its company lands in that company's document, a page reference resolves where the
query or the ranking puts it, and a question naming no company is left alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pagesight.core.settings import Settings
from pagesight.core.types import AccessFilter, RouteName
from pagesight.services.stack import LocalStack
from tests.conftest import extract_pages

pytestmark = pytest.mark.integration

#: Each filing's cover and a few pages, stored as doc-1.pdf ... so its name says nothing.
SOURCES = {
    "amex": ("AMERICANEXPRESS_2022_10K.pdf", [1, 2, 96]),
    "boeing": ("BOEING_2022_10K.pdf", [1, 2, 5]),
    "mgm": ("MGMRESORTS_2022Q4_EARNINGS.pdf", [1, 2, 3]),
    "jnj": ("JOHNSON_JOHNSON_2022Q4_EARNINGS.pdf", [1, 2, 3]),
}
EVERYONE = AccessFilter(tenant="default")


@pytest.fixture(scope="module")
def corpus(
    tmp_path_factory: pytest.TempPathFactory, eval_dir: Path
) -> Iterator[tuple[LocalStack, dict[str, str]]]:
    root = tmp_path_factory.mktemp("documents")
    paths = {}
    for number, (key, (source, pages)) in enumerate(sorted(SOURCES.items()), start=1):
        path = eval_dir / "pdfs" / source
        if not path.is_file():
            pytest.skip(f"{source} is not in the evaluation corpus")
        paths[key] = extract_pages(path, pages, root / f"doc-{number}.pdf")
    with LocalStack(Settings(data_dir=root / "var")) as stack:
        jobs = stack.ingestor.ingest([stack.request(p) for p in paths.values()])
        assert all(j.state.value == "READY" for j in jobs), [j.error_message for j in jobs]
        yield stack, {key: stack.doc_id_for("default", p) for key, p in paths.items()}


def _named(stack: LocalStack, query: str) -> list[str]:
    result = stack.search(query, EVERYONE, RouteName.TEXT, 5)
    routes = [r for r in result.trace.routes if r.route == "document"]
    return (
        [c.split()[0].removeprefix("doc:") for c, _ in routes[0].candidates if c.startswith("doc:")]
        if routes
        else []
    )


@pytest.mark.parametrize(
    ("query", "company"),
    [
        ("Who are the primary customers of Boeing?", "boeing"),
        ("How did JnJ's US sales growth compare to international sales growth?", "jnj"),
        ("What was MGM's Las Vegas Strip revenue in the fourth quarter?", "mgm"),
        ("Which debt securities are registered under American Express' name?", "amex"),
    ],
)
def test_a_question_naming_a_company_lands_in_its_document(
    corpus: tuple[LocalStack, dict[str, str]], query: str, company: str
) -> None:
    stack, doc_ids = corpus
    assert _named(stack, query)[0] == doc_ids[company]
    result = stack.search(query, EVERYONE, RouteName.TEXT, 5)
    assert result.hits[0].doc_id == doc_ids[company]


def test_a_question_naming_no_company_is_left_alone(
    corpus: tuple[LocalStack, dict[str, str]],
) -> None:
    stack, _ = corpus
    assert _named(stack, "What share of American workers expect higher sales?") == []


def test_a_named_document_scopes_its_page_reference(
    corpus: tuple[LocalStack, dict[str, str]],
) -> None:
    stack, doc_ids = corpus
    result = stack.search(
        "What does page 2 of the MGM release report?", EVERYONE, RouteName.TEXT, 5
    )
    (reference,) = [r for r in result.trace.references if r.reference.kind == "page"]
    assert reference.pages == [(doc_ids["mgm"], 2)]
    assert (result.hits[0].doc_id, result.hits[0].page_number) == (doc_ids["mgm"], 2)


def test_a_page_reference_naming_no_document_stays_with_the_best_ranked_one(
    corpus: tuple[LocalStack, dict[str, str]],
) -> None:
    stack, _ = corpus
    query = "What Strip EBITDAR does page 2 report?"  # words of the MGM release, no name
    result = stack.search(query, EVERYONE, RouteName.TEXT, 5)
    leading = result.hits[0].doc_id
    (reference,) = [r for r in result.trace.references if r.reference.kind == "page"]
    assert reference.pages[0] == (leading, 2)
    assert (result.hits[0].doc_id, result.hits[0].page_number) == (leading, 2)
