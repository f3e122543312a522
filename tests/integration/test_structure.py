"""Document structure captured at ingest: printed page labels (PDF /PageLabels) reach the
catalog and the structure API; documents without labels have none."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from pagesight.core.settings import Settings
from pagesight.ingestion import samples
from pagesight.services.stack import LocalStack

pytestmark = pytest.mark.integration


def _labelled_pdf(path: Path) -> Path:
    """Front matter numbered i, ii; the body from 1 (a report's usual page-label table)."""
    with pymupdf.open() as doc:
        for n in range(4):
            doc.new_page().insert_text((72, 72), f"Page body {n}")
        doc.set_page_labels(
            [
                {"startpage": 0, "prefix": "", "style": "r", "firstpagenum": 1},
                {"startpage": 2, "prefix": "", "style": "D", "firstpagenum": 1},
            ]
        )
        doc.save(path)
    return path


def test_page_labels_reach_the_catalog_structure(settings: Settings, tmp_path: Path) -> None:
    with LocalStack(settings) as stack:
        labelled, plain = stack.ingestor.ingest(
            [
                stack.request(_labelled_pdf(tmp_path / "report.pdf")),
                stack.request(samples.text_pdf(tmp_path / "plain.pdf")),
            ]
        )
        structure = stack.catalog.structure(stack.catalog.document("default", labelled.doc_id))
        assert [(p.page_number, p.label) for p in structure.pages] == [
            (1, "i"),
            (2, "ii"),
            (3, "1"),
            (4, "2"),
        ]
        unlabelled = stack.catalog.structure(stack.catalog.document("default", plain.doc_id))
        assert [p.label for p in unlabelled.pages] == [None]


def test_reingest_reparses_a_document_indexed_under_older_structure_rules(
    tmp_path: Path,
) -> None:
    """The re-index path: a document whose ``structure_version`` is older than today's is
    parsed again when its (unchanged) file is ingested again, and points the older parse made
    beyond what the new one makes are deleted, not left behind."""
    from pagesight.ingestion.structure import STRUCTURE_VERSION

    pdf = samples.table_pdf(tmp_path / "table.pdf")
    rows = Settings(data_dir=tmp_path / "var")
    rows.chunk.table_rows = True  # the first parse also indexes table rows
    with LocalStack(rows) as stack:
        (first,) = stack.ingestor.ingest([stack.request(pdf)])
        before = len(stack.store.points_of_document("default", first.doc_id))
        document = stack.catalog.document("default", first.doc_id)
        assert document is not None and document.structure_version == STRUCTURE_VERSION
        old = document.model_copy(update={"structure_version": STRUCTURE_VERSION - 1})
        stack.catalog.put_document(old, stack.catalog.pages("default", first.doc_id))

    whole = Settings(data_dir=tmp_path / "var")
    whole.chunk.table_rows = False  # the second makes fewer points
    with LocalStack(whole) as stack:
        (again,) = stack.ingestor.ingest([stack.request(pdf)])
        assert again.state.value == "READY" and not again.unchanged
        points = stack.store.points_of_document("default", again.doc_id)
        assert len(points) == again.chunks < before
        document = stack.catalog.document("default", again.doc_id)
        assert document is not None and document.structure_version == STRUCTURE_VERSION
        (third,) = stack.ingestor.ingest([stack.request(pdf)])
        assert third.unchanged  # now current: nothing is parsed again
