"""Element kinds on real pages of ../shared/eval/pdfs (each page copied into its own PDF)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight.core.settings import Settings
from pagesight.core.types import ElementKind, ParsedDocument
from pagesight.ingestion.pipeline import DocumentParser
from tests.conftest import extract_pages

pytestmark = pytest.mark.integration


def _parse_page(
    eval_dir: Path, tmp_path: Path, settings: Settings, doc: str, page: int
) -> ParsedDocument:
    single = extract_pages(eval_dir / "pdfs" / doc, [page], tmp_path / f"{page}.pdf")
    return DocumentParser(settings).parse(single)


def test_table_page_gives_markdown_table(
    eval_dir: Path, tmp_path: Path, settings: Settings
) -> None:
    parsed = _parse_page(eval_dir, tmp_path, settings, "ULTABEAUTY_2023Q4_EARNINGS.pdf", 1)
    tables = [e for e in parsed.elements if e.kind == ElementKind.TABLE]
    assert tables, "the results table on page 1 should be a table element"
    table = tables[0].text
    lines = table.splitlines()
    assert lines[1].startswith("|---|")
    assert all(line.startswith("|") and line.endswith("|") for line in lines)
    assert "Net sales" in table and "3,226.8" in table
    assert tables[0].bbox is not None and tables[0].bbox.width > 300


def test_table_captions_are_attached(eval_dir: Path, tmp_path: Path, settings: Settings) -> None:
    parsed = _parse_page(eval_dir, tmp_path, settings, "2303.05039v2.pdf", 4)
    captions = {e.caption for e in parsed.elements if e.kind == ElementKind.TABLE}
    assert "Table 3: Statistics of the three datasets used in our study." in captions
    assert "Table 1: An example of Receptiviti score for a specific, anonymized user." in captions
    # A caption merged into its table is not repeated as an element of its own.
    assert not any(
        e.text.startswith("Table 3: Statistics")
        for e in parsed.elements
        if e.kind == ElementKind.CAPTION
    )


def test_chart_page_gives_figure_with_caption(
    eval_dir: Path, tmp_path: Path, settings: Settings
) -> None:
    parsed = _parse_page(eval_dir, tmp_path, settings, "PG_2020.03.09_US-Germany_FINAL.pdf", 4)
    figures = [e for e in parsed.elements if e.kind == ElementKind.FIGURE]
    assert len(figures) == 1, "icons are dropped, the chart is kept"
    chart = figures[0]
    assert (
        chart.caption
        == "Americans and Germans diverge sharply in their views of bilateral relations"
    )
    assert chart.bbox is not None and chart.bbox.height > 100
    titles = [e.text for e in parsed.elements if e.kind == ElementKind.TITLE]
    assert titles[0].startswith("Americans and Germans Differ in Their Views")


def test_image_only_page_gives_ocr_text(eval_dir: Path, tmp_path: Path, settings: Settings) -> None:
    doc = "germanwingsdigitalcrisisanalysis-150403064828-conversion-gate01_95.pdf"
    parsed = _parse_page(eval_dir, tmp_path, settings, doc, 3)
    page = parsed.pages[0]
    assert not page.has_text_layer
    assert page.parser in ("tesseract", "rapidocr")
    text = " ".join(e.text for e in parsed.elements).lower()
    for word in ("germanwings", "analysis", "hours", "crash"):
        assert word in text
    assert all(e.parser == page.parser for e in parsed.elements)
    assert all(e.confidence is not None for e in parsed.elements)


def test_section_path_follows_headings(eval_dir: Path, tmp_path: Path, settings: Settings) -> None:
    parsed = _parse_page(eval_dir, tmp_path, settings, "2303.05039v2.pdf", 4)
    by_text = {e.text: e for e in parsed.elements}
    methods = by_text["4.1 Neural Collaborative Filtering (NCF)"]
    assert methods.section_path[-2:] == ["4 METHODS", "4.1 Neural Collaborative Filtering (NCF)"]
    ncf = next(e for e in parsed.elements if e.text.startswith("NCF [8] is the first"))
    assert ncf.section_path == methods.section_path
