"""The file name shown next to a document's title: documents, search hits and the API's hits."""

from __future__ import annotations

import pytest

from pagesight.api.models import SearchHit
from pagesight.core.types import Document, PageHit, source_name


@pytest.mark.parametrize(
    ("uri", "name"),
    [
        ("file:///data/Annual%20Report.pdf", "Annual Report.pdf"),
        ("upload:q3.pdf", "q3.pdf"),
        ("https://example.org/docs/report.pdf?download=1", "report.pdf"),
        ("s3://bucket/inbox/", "inbox"),
        ("C:\\docs\\plan.pdf", "plan.pdf"),
        ("", None),
        (None, None),
    ],
)
def test_source_name(uri: str | None, name: str | None) -> None:
    assert source_name(uri) == name


def test_documents_and_hits_carry_the_file_name_beside_the_uri() -> None:
    document = Document(doc_id="d", version="v", source_uri="file:///in/pew%20report.pdf")
    dumped = document.model_dump(mode="json")
    assert dumped["source_name"] == "pew report.pdf" and dumped["source_uri"]
    assert Document.model_validate_json(document.model_dump_json()) == document  # round trip

    hit = PageHit(doc_id="d", page_number=1, rank=1, score=0.5, source_uri="upload:q3.pdf")
    api = SearchHit(**hit.model_dump(exclude={"bboxes"}), page_image_url="/x")
    assert (hit.source_name, api.model_dump()["source_name"]) == ("q3.pdf", "q3.pdf")
