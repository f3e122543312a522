"""A table's cells (``Element.cells``) are its source: the markdown is rendered from them, and
grids and row units come from them, with the markdown read only for a table that has none.

The grids built from cells must be exactly those built from reading the rendered markdown
back (what the chunker did before cells were kept), so that re-parsing a document changes no
chunk and an element stored before cells were kept gives the same rows as a fresh one.
"""

from __future__ import annotations

from types import SimpleNamespace

import pymupdf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pagesight.core.ids import element_id
from pagesight.core.settings import ChunkOptions
from pagesight.core.types import (
    BBox,
    Document,
    Element,
    ElementKind,
    Page,
    ParsedDocument,
)
from pagesight.ingestion.chunk import Chunker
from pagesight.ingestion.parse.blocks import ElementAssembler, RawBlock
from pagesight.ingestion.parse.pdf import LayoutPageParser
from pagesight.ingestion.tables import (
    element_tables,
    markdown_table_rows,
    parse_markdown_tables,
    table_cells,
    table_to_markdown,
    tables_from_rows,
)

# Amazon 2017 10-K, page 40, as PyMuPDF's table model extracts it (None for an empty cell,
# line breaks inside cells, "$" set apart from its number).
EXTRACT: list[list[str | None]] = [
    [None, "Decem", "ber 31,"],
    [None, "2016", "2017"],
    ["ASSETS", None, None],
    ["Current assets:", None, None],
    ["Cash and cash\nequivalents", "$ 19,334", "$ 20,522"],
    ["Marketable securities", "6,647", "10,464"],
    ["Inventories", "11,461", "16,047"],
    ["Total current assets", "45,781", "60,197"],
]


def test_cells_are_the_rows_found_padded_with_text_collapsed() -> None:
    cells = table_cells([["a", None], ["x\n y", "1", "2"], [None, "  "], ["b |c"]])
    assert cells == [["a", "", ""], ["x y", "1", "2"], ["b |c", "", ""]]
    assert table_cells([]) == [] and table_cells([[None, ""]]) == []


def test_markdown_is_rendered_from_cells() -> None:
    assert table_to_markdown([["Item", "Value"], ["a|b", None], ["c\nd", "1"]]) == (
        "| Item | Value |\n|---|---|\n| a\\|b |  |\n| c d | 1 |"
    )
    assert table_to_markdown([]) == "" and table_to_markdown([[None]]) == ""
    # Rendering the raw rows or their cells is one thing.
    assert table_to_markdown(EXTRACT) == table_to_markdown(table_cells(EXTRACT))


def test_a_statement_table_gives_the_same_grids_from_cells_as_from_its_markdown() -> None:
    cells = table_cells(EXTRACT)
    from_cells = tables_from_rows(cells)
    assert from_cells == parse_markdown_tables(table_to_markdown(cells))
    (grid,) = from_cells
    assert grid.columns == ["", "December 31, 2016", "December 31, 2017"]
    assert [row.line_item for row in grid.rows][:2] == [
        "Current assets: Cash and cash equivalents",
        "Current assets: Marketable securities",
    ]
    assert grid.rows[0].cells[1:] == ["$19,334", "$20,522"]


def test_the_markdown_reader_reads_rows_of_cells() -> None:
    text = "Intro\n| A | B \\| C |\n|---|---|\n| 1 | 2 |\n\n| x | y |\n|---|---|\n| 3 | 4 |"
    # Cells as written, "\\|" read as "|"; a second rule starts a table headed by the row
    # above it.
    assert markdown_table_rows(text) == [
        [[" A ", " B | C "], [" 1 ", " 2 "]],
        [[" x ", " y "], [" 3 ", " 4 "]],
    ]


def test_a_row_of_hyphens_is_a_rule_either_way() -> None:
    # In markdown "| - | - | - |" is a rule line; the row above it then heads a second table.
    rows = [
        ["", "2018", "2017"],
        ["Net sales", "1,234", "1,100"],
        ["Cost of sales", "700", "650"],
        ["-", "-", "-"],
        ["", "2016", "2015"],
        ["Net sales", "1,000", "900"],
    ]
    from_cells = tables_from_rows(rows)
    assert from_cells == parse_markdown_tables(table_to_markdown(rows))
    assert [[row.label for row in grid.rows] for grid in from_cells] == [
        ["Net sales"],
        ["Cost of sales"],  # the row above the rule heads a table of its own
        ["Net sales"],
    ]
    assert "-" not in [row.label for grid in from_cells for row in grid.rows]


_ATOMS = st.sampled_from(
    [
        "", " ", "-", "--", ":-", "-:", "|", "\\", "\\|", "<br>", "<BR />", "**", "**x**", "$",
        "%", "1,234", "(5)", "2018", "2017", "Total", "Net sales", "—", "\n", "\t", "a",
        "Decem", "ber 31,", "(in millions)", "\u00a0", "\u2028", "x|y", "Current assets:",
        "inventories",
    ]
)  # fmt: skip
_CELL = st.one_of(st.none(), st.lists(_ATOMS, max_size=4).map("".join))
_ROWS = st.lists(st.lists(_CELL, max_size=5), max_size=9)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(_ROWS)
def test_any_rows_give_the_grids_their_markdown_gives(rows: list[list[str | None]]) -> None:
    """Escaped pipes, line breaks and <br> in cells, empty cells and rows, ragged rows, rows of
    hyphens: the grid builder gets from cells exactly what it got from the markdown."""
    markdown = table_to_markdown(rows)
    assert tables_from_rows(table_cells(rows)) == parse_markdown_tables(markdown)
    assert tables_from_rows(rows) == parse_markdown_tables(markdown)


def _element(text: str, cells: list[list[str]] | None, seq: int = 0) -> Element:
    return Element(
        element_id=element_id("d", "v", 1, seq),
        doc_id="d",
        kind=ElementKind.TABLE,
        text=text,
        page_number=1,
        seq=seq,
        bbox=BBox(x0=10, y0=10, x1=500, y1=300),
        section_path=["Balance sheet"],
        caption="Consolidated Balance Sheets (in millions)",
        cells=cells,
    )


def test_consumers_read_cells_and_markdown_only_without_them() -> None:
    cells = table_cells(EXTRACT)
    markdown = table_to_markdown(cells)
    assert element_tables(_element(markdown, cells)) == parse_markdown_tables(markdown)
    # The cells are the source: markdown that says otherwise is not read.
    assert element_tables(_element("| a | b |\n|---|---|\n| 1 | 2 |", cells)) == (
        tables_from_rows(cells)
    )
    assert element_tables(_element(markdown, None)) == parse_markdown_tables(markdown)


def test_an_element_stored_before_cells_loads_and_chunks_the_same() -> None:
    cells = table_cells(EXTRACT)
    fresh = _element(table_to_markdown(cells), cells)
    stored = fresh.model_dump(mode="json")
    del stored["cells"]
    old = Element.model_validate(stored)
    assert old.cells is None
    assert Element.model_validate_json(fresh.model_dump_json()) == fresh

    def chunks(element: Element) -> list[dict[str, object]]:
        parsed = ParsedDocument(
            document=Document(doc_id="d", version="v", source_uri="file:///d.pdf", page_count=1),
            pages=[Page(doc_id="d", page_number=1, width=612, height=792)],
            elements=[element],
        )
        chunker = Chunker(ChunkOptions(table_rows=True))
        return [c.model_dump() for c in chunker(parsed)]

    new_chunks = chunks(fresh)
    assert new_chunks == chunks(old)
    rows = [c for c in new_chunks if c["unit"] == "table_row"]
    assert len(rows) == 4
    assert rows[0]["text"] == (
        "Consolidated Balance Sheets (in millions)\n"
        "Current assets: Cash and cash equivalents | December 31, 2016: $19,334 | 2017: $20,522 "
        "(in millions)"
    )


def test_the_layout_parser_keeps_the_table_models_grid() -> None:
    box = SimpleNamespace(
        boxclass="table", x0=10.0, y0=20.0, x1=300.0, y1=200.0, table={"extract": EXTRACT}
    )
    blank = pymupdf.open().new_page()
    block = LayoutPageParser()._block(box, blank)
    assert block is not None and block.kind == ElementKind.TABLE
    assert block.cells == table_cells(EXTRACT)
    assert block.text == table_to_markdown(EXTRACT)
    empty = SimpleNamespace(
        boxclass="table", x0=10.0, y0=20.0, x1=300.0, y1=200.0, table={"extract": [[None]]}
    )
    assert LayoutPageParser()._block(empty, blank) is None

    (element,) = ElementAssembler().assemble("d", "v", [(1, [block])])
    assert element.cells == block.cells and element.text == block.text
    markdown_only = RawBlock(ElementKind.TABLE, block.text, block.bbox, "vlm:model")
    (element,) = ElementAssembler().assemble("d", "v", [(1, [markdown_only])])
    assert element.cells is None
