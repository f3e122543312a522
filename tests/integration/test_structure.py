"""Document structure captured at ingest: printed page labels (PDF /PageLabels) reach the
catalog and the structure API; documents without labels have none."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from core.settings import Settings
from ingestion import samples
from services.stack import LocalStack

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
