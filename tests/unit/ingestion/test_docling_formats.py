"""DOCX, HTML and Markdown through Docling's model-free pipeline, mapped onto PageSight elements."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docx
import pytest

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.ids import content_version, element_id, make_doc_id
from pagesight.core.settings import ChunkOptions, ParseOptions
from pagesight.core.types import Document, ElementKind, ParsedDocument, SourceFormat
from pagesight.ingestion.chunk import Chunker
from pagesight.ingestion.parse.docling_formats import DoclingPdfParser, parse_with_docling
from pagesight.ingestion.tables import element_tables, parse_markdown_tables, tables_from_rows

TITLE, TEXT, LIST, TABLE = ElementKind.TITLE, ElementKind.TEXT, ElementKind.LIST, ElementKind.TABLE


def _document_for(path: Path) -> Document:
    return Document(
        doc_id=make_doc_id("acme", path.as_uri()),
        version=content_version(path.read_bytes()),
        tenant="acme",
        source_uri=path.as_uri(),
    )


def _parse(path: Path) -> ParsedDocument:
    return parse_with_docling(path, _document_for(path))


@pytest.fixture
def docx_path(tmp_path: Path) -> Path:
    document = docx.Document()
    document.add_heading("Annual report", level=1)
    document.add_paragraph("Revenue grew by 12% in 2024.")
    document.add_heading("Segments", level=2)
    document.add_paragraph("Cloud services", style="List Bullet")
    document.add_paragraph("Devices", style="List Bullet")
    table = document.add_table(rows=3, cols=3)
    cells = [["Segment", "2023", "2024"], ["Cloud", "10", "14"], ["Devices", "7", "6"]]
    for r, row in enumerate(cells):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    path = tmp_path / "report.docx"
    document.save(str(path))
    return path


@pytest.fixture
def html_path(tmp_path: Path) -> Path:
    path = tmp_path / "page.html"
    path.write_text(
        """<!doctype html><html><head><title>ignored</title></head><body>
        <h1>Product guide</h1>
        <p>This guide covers installation.</p>
        <table><caption>Table 1: Supported systems</caption>
          <tr><th>System</th><th>Version</th></tr>
          <tr><td>Linux_x86</td><td>6.1</td></tr>
        </table>
        <ul><li>Download the package</li><li>Run the installer</li></ul>
        <figure><img src="https://example.invalid/arch.png" alt="diagram">
          <figcaption>Figure 1: Architecture overview</figcaption></figure>
        </body></html>""",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def markdown_path(tmp_path: Path) -> Path:
    path = tmp_path / "notes.md"
    path.write_text(
        """# Release notes

The release fixes three bugs.

## Benchmarks

| Model | Score |
|-------|-------|
| small | 71.5  |
| large | 80.2  |

## Usage

```python
print("hello")
```
""",
        encoding="utf-8",
    )
    return path


def _summary(parsed: ParsedDocument) -> list[tuple[ElementKind, list[str]]]:
    return [(e.kind, e.section_path) for e in parsed.elements]


def test_docx_headings_paragraph_list_and_table(docx_path: Path) -> None:
    parsed = _parse(docx_path)

    report, segments = ["Annual report"], ["Annual report", "Segments"]
    assert _summary(parsed) == [
        (TITLE, report),
        (TEXT, report),
        (TITLE, segments),
        (LIST, segments),
        (LIST, segments),
        (TABLE, segments),
    ]
    assert [e.text for e in parsed.elements[:5]] == [
        "Annual report",
        "Revenue grew by 12% in 2024.",
        "Segments",
        "Cloud services",
        "Devices",
    ]
    table = parsed.elements[5].text
    assert table.splitlines()[0] == "| Segment | 2023 | 2024 |"
    for cell in ("Cloud", "14", "Devices", "6"):
        assert f"| {cell} " in table
    assert parsed.elements[5].cells == [
        ["Segment", "2023", "2024"],
        ["Cloud", "10", "14"],
        ["Devices", "7", "6"],
    ]
    assert all(e.cells is None for e in parsed.elements[:5])
    assert parsed.document.source_format == SourceFormat.DOCX


def test_a_table_keeps_docling_s_grid_as_its_markdown_shows_it(tmp_path: Path) -> None:
    """Cells are the rows of the markdown Docling writes: two header rows joined into one, a
    spanning cell repeated, a line break in a cell a space; grids from them are those read
    out of that markdown, but for a "|" in a cell, which the markdown writes "&#124;"."""
    path = tmp_path / "segments.html"
    path.write_text(
        """<!doctype html><html><body><h1>Results</h1>
        <table>
          <tr><th rowspan="2">Segment</th><th colspan="2">Year ended December 31,</th></tr>
          <tr><th>2023</th><th>2024</th></tr>
          <tr><td>Cloud</td><td>$ 1,234</td><td>$ 1,500</td></tr>
          <tr><td>Edge<br>devices</td><td>700</td><td>650</td></tr>
          <tr><td>Licences</td><td>12</td><td>14</td></tr>
          <tr><td>Total</td><td>1,946</td><td>2,164</td></tr>
        </table>
        <table>
          <tr><th>Plan</th><th>Price</th></tr>
          <tr><td>Basic | Pro</td><td>10</td></tr>
          <tr><td>Team</td><td>20</td></tr>
        </table>
        </body></html>""",
        encoding="utf-8",
    )
    parsed = _parse(path)
    segments, plans = (e for e in parsed.elements if e.kind == TABLE)
    assert segments.cells is not None and plans.cells is not None
    header = segments.cells[0]
    assert segments.text.splitlines()[0] == "| " + " | ".join(header) + " |"
    assert header[1:] == ["Year ended December 31, - 2023", "Year ended December 31, - 2024"]
    assert len(segments.cells) == 5
    assert tables_from_rows(segments.cells) == parse_markdown_tables(segments.text)
    assert [r.label for r in element_tables(segments)[0].rows] == [
        "Cloud",
        "Edge devices",
        "Licences",
        "Total",
    ]
    assert plans.cells[1][0] == "Basic | Pro" and "Basic &#124; Pro" in plans.text
    assert [r.label for r in element_tables(plans)[0].rows] == ["Basic | Pro", "Team"]


def test_html_caption_travels_with_its_table_and_figure(html_path: Path) -> None:
    parsed = _parse(html_path)

    guide = ["Product guide"]
    assert _summary(parsed) == [
        (TITLE, guide),
        (TEXT, guide),
        (TABLE, guide),
        (LIST, guide),
        (LIST, guide),
        (ElementKind.FIGURE, guide),
    ]
    table, figure = parsed.elements[2], parsed.elements[5]
    assert table.caption == "Table 1: Supported systems"
    assert "Supported systems" not in table.text  # said once, by the chunk that carries it
    assert "| Linux_x86 | 6.1 |" in table.text  # neither "_" nor padding escaped/added
    assert figure.caption == figure.text == "Figure 1: Architecture overview"
    assert not any(e.kind == ElementKind.CAPTION for e in parsed.elements)
    assert parsed.document.title == "Product guide"


def test_markdown_headings_table_and_code(markdown_path: Path) -> None:
    parsed = _parse(markdown_path)

    notes = ["Release notes"]
    assert _summary(parsed) == [
        (TITLE, notes),
        (TEXT, notes),
        (TITLE, [*notes, "Benchmarks"]),
        (TABLE, [*notes, "Benchmarks"]),
        (TITLE, [*notes, "Usage"]),
        (ElementKind.CODE, [*notes, "Usage"]),
    ]
    table = parsed.elements[3].text
    for cell in ("Model", "Score", "small", "71.5", "large", "80.2"):
        assert cell in table
    assert parsed.elements[5].text == 'print("hello")'
    assert parsed.document.source_format == SourceFormat.MARKDOWN


def test_elements_are_docling_parsed_on_one_page_without_geometry(markdown_path: Path) -> None:
    parsed = _parse(markdown_path)
    doc = parsed.document

    assert len(parsed.pages) == 1 and doc.page_count == 1
    page = parsed.pages[0]
    assert (page.page_number, page.width, page.height) == (1, 0.0, 0.0)
    assert page.has_text_layer and page.parser == "docling"
    for seq, element in enumerate(parsed.elements):
        assert element.element_id == element_id(doc.doc_id, doc.version, 1, seq)
        assert (element.page_number, element.seq, element.bbox) == (1, seq, None)
        assert element.parser == "docling"
        assert element.doc_id == doc.doc_id


@pytest.mark.parametrize("fixture", ["docx_path", "html_path", "markdown_path"])
def test_parsing_twice_gives_identical_output(fixture: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(fixture)

    assert _parse(path).model_dump() == _parse(path).model_dump()


def test_caller_title_and_ids_are_kept(html_path: Path) -> None:
    document = _document_for(html_path).model_copy(update={"title": "From the catalogue"})

    parsed = parse_with_docling(html_path, document)

    assert parsed.document.title == "From the catalogue"
    assert (parsed.document.doc_id, parsed.document.version, parsed.document.tenant) == (
        document.doc_id,
        document.version,
        "acme",
    )


def test_document_format_wins_over_the_suffix(tmp_path: Path) -> None:
    path = tmp_path / "upload.bin"
    path.write_text("# Heading\n\nBody text.\n", encoding="utf-8")
    document = _document_for(path).model_copy(update={"source_format": SourceFormat.MARKDOWN})

    parsed = parse_with_docling(path, document)

    assert [e.kind for e in parsed.elements] == [TITLE, TEXT]


def test_parsed_docx_chunks_keep_heading_with_its_body(docx_path: Path) -> None:
    chunks = Chunker(ChunkOptions(max_chars=400, min_chars=0))(_parse(docx_path))

    assert [c.text.split("\n")[0] for c in chunks] == [
        "Annual report",
        "Segments",
        "| Segment | 2023 | 2024 |",
    ]
    assert chunks[0].text == "Annual report\nRevenue grew by 12% in 2024."
    assert chunks[1].section_path == ["Annual report", "Segments"]
    assert chunks[2].kinds == [TABLE]


def test_unsupported_suffix_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "slides.pptx"
    path.write_bytes(b"PK\x03\x04")

    with pytest.raises(PageSightError) as caught:
        _parse(path)

    assert (caught.value.code, caught.value.stage) == (ErrorCode.UNSUPPORTED_FORMAT, Stage.PARSE)


def test_corrupt_docx_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.docx"
    path.write_bytes(b"this is not a zip archive")

    with pytest.raises(PageSightError) as caught:
        _parse(path)

    assert caught.value.code == ErrorCode.CORRUPT
    assert "broken.docx" in caught.value.message


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    path = tmp_path / "gone.md"
    document = Document(doc_id="d", version="0" * 64, source_uri=path.as_uri())

    with pytest.raises(PageSightError) as caught:
        parse_with_docling(path, document)

    assert caught.value.code == ErrorCode.NOT_FOUND


def test_importing_the_module_does_not_import_docling() -> None:
    code = (
        "import sys, pagesight.ingestion.parse.docling_formats; "
        "sys.exit(1 if 'docling' in sys.modules or 'docling_core' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --- the optional PDF pipeline ----------------------------------------------------------------


def test_pdf_parser_needs_an_artifacts_path() -> None:
    with pytest.raises(PageSightError) as caught:
        DoclingPdfParser(ParseOptions())

    assert (caught.value.code, caught.value.stage) == (ErrorCode.UNSUPPORTED_FORMAT, Stage.PARSE)
    assert "PAGESIGHT_PARSE__DOCLING_ARTIFACTS_PATH" in caught.value.message
    assert "docling-slim[format-pdf,models-local]" in caught.value.message


def test_pdf_parser_rejects_a_missing_artifacts_directory(tmp_path: Path) -> None:
    with pytest.raises(PageSightError, match="is not a directory"):
        DoclingPdfParser(ParseOptions(docling_artifacts_path=tmp_path / "absent"))


def test_pdf_parser_without_packages_or_weights_fails_clearly_on_warm_up(tmp_path: Path) -> None:
    parser = DoclingPdfParser(ParseOptions(docling_artifacts_path=tmp_path))

    with pytest.raises(PageSightError) as caught:
        parser.warm_up()

    assert caught.value.code == ErrorCode.UNSUPPORTED_FORMAT
    assert "docling-slim[format-pdf,models-local]" in caught.value.message
