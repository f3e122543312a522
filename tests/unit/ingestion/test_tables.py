"""Tables as grids and as retrieval units: markdown parsing, periods, units, row texts, chunking.

The markdown fixtures copy what PyMuPDF's layout model gives for real 10-K pages (3M 2018,
Amazon 2017): spanning headers cut over cells, "$" in cells of their own, units in header rows.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pagesight.core.ids import chunk_id, element_id
from pagesight.core.settings import ChunkOptions
from pagesight.core.types import BBox, Chunk, Document, Element, ElementKind, Page, ParsedDocument
from pagesight.ingestion.chunk import Chunker
from pagesight.ingestion.table_periods import Period, detect_period, detect_unit
from pagesight.ingestion.tables import (
    MAX_ROW_TEXT_CHARS,
    TableGrid,
    is_nil,
    is_number,
    is_statement_table,
    parse_markdown_table,
    parse_markdown_tables,
    row_texts,
    spread_spanning_labels,
)

PDFS = Path(__file__).resolve().parents[3].parent / "shared" / "eval" / "pdfs"

# Amazon 2017 10-K, page 40 (as extracted): a spanning header cut over two cells.
BALANCE_SHEET = """\
|  | Decem | ber 31, |
|---|---|---|
|  | 2016 | 2017 |
| ASSETS |  |  |
| Current assets: |  |  |
| Cash and cash equivalents | $ 19,334 | $ 20,522 |
| Marketable securities | 6,647 | 10,464 |
| Inventories | 11,461 | 16,047 |
| Total current assets | 45,781 | 60,197 |
| Property and equipment, net | 29,114 | 48,866 |
| Total assets | $ 83,402 | $ 131,310 |"""

# Amazon 2017 10-K, page 18: three header rows, the last one the unit cut over three cells.
SELECTED_DATA = """\
|  |  | Ye | ar Ended December | 31, |  |
|---|---|---|---|---|---|
|  | 2013 | 2014 | 2015 | 2016 | 2017 (1) |
|  |  | (in mill | ions, except per sha | re data) |  |
| Statements of Operations: |  |  |  |  |  |
| Net sales | $ 74,452 | $ 88,988 | $ 107,006 | $ 135,987 | $ 177,866 |
| Operating income | $ 745 | $ 178 | $ 2,233 | $ 4,186 | $ 4,106 |
| Net income (loss) | $ 274 | $ (241) | $ 596 | $ 2,371 | $ 3,033 |"""

# 3M 2018 10-K, page 22: a group label over three columns per year, then a stacked table.
SEGMENTS = """\
|  |  | 2018 |  |  | 2017 |  |
|---|---|---|---|---|---|---|
| (Millions) | Net Sales | % of Total | Oper. Income | Net Sales | % of Total | Oper. Income |
| Business Segments |  |  |  |  |  |  |
| Industrial | $ 12,267 | 37.4 % | $ 2,737 | $ 11,866 | 37.5 % | $ 2,490 |
| Safety and Graphics | 6,827 | 20.8 | 1,720 | 6,235 | 19.7 | 2,066 |
| Health Care | 6,021 | 18.4 | 1,799 | 5,853 | 18.5 | 1,764 |
| Total Company | $ 32,765 | 100.0 % | $ 7,207 | $ 31,657 | 100.0 % | $ 7,692 |
|  |  |  | Year ended December 31, 2018 |  |  |  |
| Worldwide Sales Change | Organic sales |  | Acquisitions |  | Translation |  |
| Industrial | 3.2 % |  | — % |  | 0.3 % |  |
| Health Care | 2.6 |  | — |  | 0.3 |  |
| Consumer | 1.5 |  | — |  | (0.1) |  |"""


def _grid(text: str) -> TableGrid:
    grid = parse_markdown_table(text)
    assert grid is not None
    return grid


def _row(grid: TableGrid, label: str) -> list[str]:
    return next(row.cells for row in grid.rows if row.label == label)


# --- parsing --------------------------------------------------------------------------------


def test_multi_row_header_joins_a_label_cut_over_cells_and_spans_it() -> None:
    grid = _grid(SELECTED_DATA)
    assert grid.header_rows == 3
    assert grid.columns[1:] == [
        "Year Ended December 31, 2013",
        "Year Ended December 31, 2014",
        "Year Ended December 31, 2015",
        "Year Ended December 31, 2016",
        "Year Ended December 31, 2017 (1)",
    ]
    assert grid.units == ["(in millions, except per share data)"]
    assert _row(grid, "Net income (loss)")[1:] == ["$274", "$(241)", "$596", "$2,371", "$3,033"]


def test_upper_header_label_spans_its_group_of_columns() -> None:
    grid = _grid(SEGMENTS)
    assert grid.columns[1:] == [
        "2018 Net Sales",
        "2018 % of Total",
        "2018 Oper. Income",
        "2017 Net Sales",
        "2017 % of Total",
        "2017 Oper. Income",
    ]
    assert grid.units == ["(Millions)"]
    industrial = grid.rows[0]
    assert industrial.group == "Business Segments"
    assert industrial.cells[1:4] == ["$12,267", "37.4%", "$2,737"]


def test_without_joining_neighbours_whole_labels_stay_apart_and_cut_words_still_join() -> None:
    """Cells filled with whole words (what answers read): neighbouring labels are separate,
    also before one that ends in a year; a word cut in two still joins, and labels spread."""
    row = ["Year", "Date of Declaration", "Total Dividend (Rs.)", "Unclaimed as on 31/03/2007", ""]
    assert spread_spanning_labels(row, 1, join_neighbours=False) == [
        "Year", "Date of Declaration", "Total Dividend (Rs.)",
        "Unclaimed as on 31/03/2007", "Unclaimed as on 31/03/2007",
    ]  # fmt: skip
    # the grid's default, for clipped cells, joins them
    assert spread_spanning_labels(row, 1)[2].endswith("(Rs.) Unclaimed as on 31/03/2007")
    cut = ["", "", "Decem", "ber 31,", ""]
    assert spread_spanning_labels(cut, 1, join_neighbours=False)[1:] == ["December 31,"] * 4
    spanning = ["", "", "13 Weeks Ended", "", ""]
    assert spread_spanning_labels(spanning, 1, join_neighbours=False)[1:] == ["13 Weeks Ended"] * 4


def test_stacked_tables_in_one_block_are_split() -> None:
    first, second = parse_markdown_tables(SEGMENTS)
    assert [r.label for r in first.rows] == [
        "Industrial",
        "Safety and Graphics",
        "Health Care",
        "Total Company",
    ]
    assert second.columns == [
        "Worldwide Sales Change",
        "Year ended December 31, 2018 Organic sales",
        "Year ended December 31, 2018 Acquisitions",
        "Year ended December 31, 2018 Translation",
    ]
    assert _row(second, "Consumer") == ["Consumer", "1.5", "—", "(0.1)"]


def test_currency_and_percent_cells_join_their_numbers_and_empty_columns_go() -> None:
    text = """\
|  |  | 2019 |  | 2020 |  |
|---|---|---|---|---|---|
| Net revenue |  $ | 1,234 | $ | 1,456 |  |
| Margin |  | 22.4 | % | 23.0 % |  |
| Costs |  | 100 |  | 120 |  |"""
    grid = _grid(text)
    assert grid.columns == ["", "2019", "2020"]
    assert _row(grid, "Net revenue") == ["Net revenue", "$1,234", "$1,456"]
    assert _row(grid, "Margin") == ["Margin", "22.4%", "23.0%"]
    # 3M page 83: each "$" printed at the end of the cell before its number.
    text = """\
| (Millions) | 2018 | 2017 | 2016 |
|---|---|---|---|
| Cash income tax payments | $ 1,560 $ | 1,604 $ | 1,888 |
| Margin | 22.4 % $ | 1,672 | 3 |"""
    grid = _grid(text)
    assert _row(grid, "Cash income tax payments")[1:] == ["$1,560", "$1,604", "$1,888"]
    assert _row(grid, "Margin")[1:] == ["22.4%", "$1,672", "3"]


def test_header_over_an_empty_column_moves_to_the_column_with_the_numbers() -> None:
    # 3M page 31: "2018" sits over an empty column, its value one column to the right.
    text = """\
| (Percent of pre-tax income) | 2018 |  | 2017 | 2016 |
|---|---|---|---|---|
| Effective tax rate |  | 23.4 % | 35.5 % | 28.3 % |"""
    grid = _grid(text)
    assert grid.columns == ["", "2018", "2017", "2016"]
    assert grid.rows[0].cells == ["Effective tax rate", "23.4%", "35.5%", "28.3%"]
    assert grid.unit() == "Percent of pre-tax income"


def test_negatives_dashes_and_numbers_stay_as_printed() -> None:
    text = """\
| (Millions) | 2018 | 2017 | 2016 |
|---|---|---|---|
| Change in short-term debt — net | $ (284) | $ 578 | $ (797) |
| Repayment of debt | (1,034) | (962) | (992) |
| Other — net | — | n/a | (42) |"""
    grid = _grid(text)
    assert _row(grid, "Change in short-term debt — net")[1:] == ["$(284)", "$578", "$(797)"]
    assert _row(grid, "Other — net")[1:] == ["—", "n/a", "(42)"]
    assert grid.numeric_columns() == [1, 2, 3]
    for cell in ["(1,234)", "$ (5)", "-0.25%", "22.4 %", "1,234 (2)", "3.5x", "1,234百万円"]:
        assert is_number(cell), cell
    for cell in ["—", "$ —", "— %", "n/a", "NM"]:
        assert is_nil(cell) and not is_number(cell), cell
    for cell in ["31,", "Net sales", "2018 vs 2017", "", "$"]:
        assert not is_number(cell), cell
    assert is_number("(5)") and is_number("$ (5)")  # minus five, not a footnote marker


def test_japanese_statement_with_fiscal_years_unit_row_and_triangle_negatives() -> None:
    text = """\
| 科目 | 2022年度 | 2023年度 |
|---|---|---|
| （単位：百万円） | | |
| 売上高 | 1,234 | 1,456 |
| 営業利益 | △120 | 98 |
| 経常利益 | 100 | ▲5 |"""
    grid = _grid(text)
    assert grid.units == ["（単位：百万円）"]
    assert [p.year if p else None for p in grid.periods()] == [None, 2022, 2023]
    assert is_statement_table(grid)
    assert row_texts(grid, "連結損益計算書")[1] == (
        "連結損益計算書\n営業利益 | 2022年度: △120 | 2023年度: 98 (単位：百万円)"
    )


def test_ragged_rows_are_padded_and_extra_cells_kept() -> None:
    text = """\
| Item | 2021 | 2022 |
|---|---|---|
| Revenue | 10 |
| Costs | 4 | 5 | 6 |
| Profit | 6 | 7 |"""
    grid = _grid(text)
    assert len(grid.columns) == 4
    assert _row(grid, "Revenue") == ["Revenue", "10", "", ""]
    assert _row(grid, "Costs") == ["Costs", "4", "5", "6"]


def test_label_broken_over_two_lines_joins_and_groups_end_at_totals() -> None:
    text = """\
|  | 2016 | 2017 |
|---|---|---|
| Current assets: |  |  |
| Cash | 1 | 2 |
| Total current assets | 3 | 4 |
| Purchases of property and equipment, net |  |  |
| of proceeds from incentives | (5) | (6) |"""
    grid = _grid(text)
    assert [(r.group, r.label) for r in grid.rows] == [
        ("Current assets:", "Cash"),
        ("Current assets:", "Total current assets"),
        (None, "Purchases of property and equipment, net of proceeds from incentives"),
    ]
    assert grid.rows[0].line_item == "Current assets: Cash"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Net revenue grew 12% to $1,234 million in 2020.",
        "a | b",
        "| only one line |",
        "Revenue | 2019\nsome prose without pipes",
    ],
)
def test_text_that_is_no_table_gives_none(text: str) -> None:
    assert parse_markdown_table(text) is None


def test_a_10000_row_table_parses_fast_and_row_texts_are_capped() -> None:
    lines = ["| Item | 2021 | 2022 |", "|---|---|---|"]
    lines += [f"| Line item {i} | {i:,} | ({i + 1:,}) |" for i in range(10_000)]
    start = time.perf_counter()
    grid = _grid("\n".join(lines))
    texts = row_texts(grid, "Big table")
    elapsed = time.perf_counter() - start
    assert len(grid.rows) == 10_000
    assert len(texts) == 80
    assert elapsed < 5.0  # about 0.3 s on one slow core
    assert texts[-1].endswith("Line item 79 | 2021: 79 | 2022: (80)")


def test_a_very_wide_table_is_cut_to_64_columns() -> None:
    header = "| Item | " + " | ".join(str(2000 + i % 30) for i in range(200)) + " |"
    row = "| Revenue | " + " | ".join("1" for _ in range(200)) + " |"
    grid = _grid("\n".join([header, "|---|", row]))
    assert len(grid.columns) == 64


# --- periods and units ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "year", "quarter", "months", "fiscal"),
    [
        ("2019", 2019, None, None, False),
        ("2018*", 2018, None, None, False),
        ("FY2020", 2020, None, None, True),
        ("FY21", 2021, None, None, True),
        ("Fiscal 2022", 2022, None, None, True),
        ("Q4 2022", 2022, 4, None, False),
        ("4Q22", 2022, 4, None, False),
        ("Fourth Quarter", None, 4, None, False),
        ("Three Months Ended December 31, 2022", 2022, None, 3, False),
        ("Nine months ended September 30, 2021", 2021, None, 9, False),
        ("Year Ended December 31, 2017", 2017, None, 12, False),
        ("December 31, 2016", 2016, None, None, False),
        ("2022年度", 2022, None, 12, True),
        ("2023年3月期", 2023, None, None, True),
        ("2023年度 第3四半期", 2023, 3, 12, True),
    ],
)
def test_period_detection(
    label: str, year: int | None, quarter: int | None, months: int | None, fiscal: bool
) -> None:
    period = detect_period(label)
    assert period == Period(text=label, year=year, quarter=quarter, months=months, fiscal=fiscal)


@pytest.mark.parametrize("label", ["", "Net Sales", "% of Total", "2018 vs 2017", "Thereafter"])
def test_labels_without_one_period_have_none(label: str) -> None:
    assert detect_period(label) is None


def test_grid_periods_are_per_column() -> None:
    periods = _grid(BALANCE_SHEET).periods()
    assert periods[0] is None
    assert [(p.year, p.text) for p in periods[1:] if p] == [
        (2016, "December 31, 2016"),
        (2017, "December 31, 2017"),
    ]


@pytest.mark.parametrize(
    ("text", "unit"),
    [
        ("(in millions)", "in millions"),
        (
            "(Dollars in millions, except per share amounts)",
            "Dollars in millions, except per share amounts",
        ),
        ("Years ended December 31 (Millions)", "Millions"),
        ("$ in thousands", "$ in thousands"),
        ("Consolidated results, in millions of dollars", "in millions of dollars"),
        ("(%)", "%"),
        ("(百万円)", "百万円"),
        ("（単位：百万円）", "単位：百万円"),
        ("単位：千円", "単位：千円"),
        ("Net Sales", None),
        ("(1)", None),
    ],
)
def test_unit_detection(text: str, unit: str | None) -> None:
    assert detect_unit(text) == unit


def test_unit_comes_from_the_caption_first_then_the_header() -> None:
    grid = _grid(SELECTED_DATA)
    assert grid.unit() == "in millions, except per share data"
    assert grid.unit("Table 4 (in thousands)") == "in thousands"
    assert _grid(BALANCE_SHEET).unit() is None


# --- statement tables and row texts ---------------------------------------------------------


def test_statement_tables_are_recognised() -> None:
    assert is_statement_table(_grid(BALANCE_SHEET))
    assert is_statement_table(_grid(SELECTED_DATA))
    assert all(is_statement_table(g) for g in parse_markdown_tables(SEGMENTS))


@pytest.mark.parametrize(
    "text",
    [
        # two data rows: a whole-table chunk is already small
        "| | 2018 | 2017 |\n|---|---|---|\n| Revenue | 1 | 2 |\n| Costs | 3 | 4 |",
        # no numbers
        "| Name | Title |\n|---|---|\n| A | CEO |\n| B | CFO |\n| C | CTO |",
        # a table of contents: its only numbers are page numbers
        "| | Item | Page |\n|---|---|---|\n| Item 1. | Business | 3 |\n"
        "| Item 1A. | Risk Factors | 6 |\n| Item 2. | Properties | 16 |\n| Item 3. | Legal | 16 |",
        "| | |\n|---|---|\n| Item 5. | 17 |\n| Item 6. | 18 |\n| Item 7. | 19 |\n| Item 8. | 35 |",
        # rows labelled only by years
        "| Year | Amount |\n|---|---|\n| 2018 | $ 377 |\n| 2019 | 337 |\n| 2020 | 258 |",
    ],
)
def test_other_tables_are_not_statement_tables(text: str) -> None:
    grid = _grid(text)
    assert not is_statement_table(grid)


def test_row_texts_spell_out_headers_group_and_unit() -> None:
    texts = row_texts(
        _grid(BALANCE_SHEET), "Consolidated Balance Sheets", ["Amazon", "Financial Statements"]
    )
    assert texts[2] == (
        "Amazon > Financial Statements > Consolidated Balance Sheets\n"
        "Current assets: Inventories | December 31, 2016: 11,461 | 2017: 16,047"
    )
    assert texts[-1].endswith("Total assets | December 31, 2016: $83,402 | 2017: $131,310")
    assert len(texts) == 6  # the group rows "ASSETS" and "Current assets:" are no rows

    selected = row_texts(_grid(SELECTED_DATA))
    assert selected[0] == (
        "Statements of Operations: Net sales | Year Ended December 31, 2013: $74,452 | "
        "2014: $88,988 | 2015: $107,006 | 2016: $135,987 | 2017 (1): $177,866 "
        "(in millions, except per share data)"
    )


def test_row_texts_name_a_shared_upper_header_once_per_run() -> None:
    first = parse_markdown_tables(SEGMENTS)[0]
    assert row_texts(first)[0] == (
        "Business Segments: Industrial | 2018 Net Sales: $12,267 | % of Total: 37.4% | "
        "Oper. Income: $2,737 | 2017 Net Sales: $11,866 | % of Total: 37.5% | "
        "Oper. Income: $2,490 (Millions)"
    )


def test_row_texts_are_capped_in_count_and_length() -> None:
    header = "| Item | " + " | ".join(f"Segment number {i} of the company" for i in range(40))
    rows = [
        f"| Line item {r} | " + " | ".join(f"{r * 1000 + i:,}" for i in range(40)) + " |"
        for r in range(5)
    ]
    grid = _grid("\n".join([header + " |", "|---|", *rows]))
    texts = row_texts(grid, "C" * 500, ["Section"], max_rows=3)
    assert len(texts) == 3
    assert all(len(t) <= MAX_ROW_TEXT_CHARS for t in texts)
    assert all(t.split("\n")[1].startswith("Line item") for t in texts)


def test_rows_without_a_label_or_group_are_skipped() -> None:
    text = (
        "| | 2018 | 2017 |\n|---|---|---|\n| A | 1 | 2 |\n| B | 3 | 4 |\n| | 4 | 6 |\n| C | 5 | 6"
    )
    grid = _grid(text)
    assert [t.split(" |")[0] for t in row_texts(grid)] == ["A", "B", "C"]


# --- chunking -------------------------------------------------------------------------------

DOC_ID = "doc-t"
VERSION = "cd" * 32


def _parsed(elements: list[Element]) -> ParsedDocument:
    pages = sorted({e.page_number for e in elements})
    return ParsedDocument(
        document=Document(doc_id=DOC_ID, version=VERSION, source_uri="file:///t.pdf"),
        pages=[Page(doc_id=DOC_ID, page_number=p, width=612.0, height=792.0) for p in pages],
        elements=elements,
    )


def _element(
    kind: ElementKind,
    text: str,
    path: list[str],
    page: int,
    seq: int,
    caption: str | None = None,
) -> Element:
    return Element(
        element_id=element_id(DOC_ID, VERSION, page, seq),
        doc_id=DOC_ID,
        kind=kind,
        text=text,
        page_number=page,
        seq=seq,
        bbox=BBox.of((50.0, 100.0 + seq, 560.0, 400.0 + seq)),
        section_path=path,
        caption=caption,
    )


def _filing() -> ParsedDocument:
    balance = ["Financial Statements", "Consolidated Balance Sheets"]
    return _parsed(
        [
            _element(ElementKind.TITLE, "Consolidated Balance Sheets", balance, 3, 0),
            _element(ElementKind.TEXT, "The balance sheets follow. " * 3, balance, 3, 1),
            _element(ElementKind.TABLE, BALANCE_SHEET, balance, 3, 2, caption="(in millions)"),
            _element(ElementKind.TEXT, "Notes on the balance sheet. " * 3, balance, 3, 3),
            _element(ElementKind.TITLE, "Segments", ["Segments"], 4, 0),
            _element(ElementKind.TABLE, SEGMENTS, ["Segments"], 4, 1),
            _element(
                ElementKind.TABLE, "| Name | Title |\n|---|---|\n| A | CEO", ["Segments"], 4, 2
            ),
        ]
    )


def test_row_chunks_follow_the_ordinary_chunks_with_continuing_seqs() -> None:
    chunks = Chunker(ChunkOptions(table_rows=True))(_filing())
    ordinary = [c for c in chunks if c.unit == "chunk"]
    rows = [c for c in chunks if c.unit == "table_row"]
    assert chunks == ordinary + rows
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    assert [c.chunk_id for c in chunks] == [chunk_id(DOC_ID, VERSION, c.seq) for c in chunks]
    # 6 balance-sheet rows, 4 + 3 segment rows; the name/title table gets none
    assert len(rows) == 13

    without = Chunker(ChunkOptions(table_rows=False))(_filing())
    assert without == ordinary  # turning rows off renumbers nothing


def test_row_chunks_point_at_their_table_and_carry_its_context() -> None:
    parsed = _filing()
    table = parsed.elements[2]
    rows = [c for c in Chunker(ChunkOptions(table_rows=True))(parsed) if c.unit == "table_row"]
    inventories = next(c for c in rows if "Inventories" in c.text)
    assert inventories.text == (
        "(in millions)\n"
        "Current assets: Inventories | December 31, 2016: 11,461 | 2017: 16,047 (in millions)"
    )
    assert inventories.element_ids == [table.element_id]
    assert inventories.page_numbers == [3]
    assert inventories.kinds == [ElementKind.TABLE]
    assert inventories.section_path == ["Financial Statements", "Consolidated Balance Sheets"]
    assert table.bbox is not None
    assert inventories.bboxes == [(3, table.bbox)]
    segment_rows = [c for c in rows if c.page_numbers == [4]]
    assert segment_rows[0].section_path == ["Segments"]
    assert segment_rows[0].text.startswith("Business Segments: Industrial | 2018 Net Sales")


def test_row_chunks_are_deterministic_and_capped_per_table() -> None:
    first = Chunker(ChunkOptions(table_rows=True))(_filing())
    again = Chunker(ChunkOptions(table_rows=True))(_filing())
    assert [c.model_dump() for c in first] == [c.model_dump() for c in again]

    capped = Chunker(ChunkOptions(table_rows=True, max_table_rows=2))(_filing())
    rows = [c for c in capped if c.unit == "table_row"]
    assert len(rows) == 4  # two per statement table, the stacked segment tables counting as one
    lines = ["| Item | 2021 | 2022 |", "|---|---|---|"]
    lines += [f"| Line item {i} | {i} | {i + 1} |" for i in range(10_000)]
    big = _parsed([_element(ElementKind.TABLE, "\n".join(lines), ["Dump"], 1, 0)])
    chunks: list[Chunk] = Chunker(ChunkOptions(table_rows=True))(big)
    assert sum(c.unit == "table_row" for c in chunks) == 80


# --- a real filing --------------------------------------------------------------------------


@pytest.mark.skipif(not PDFS.is_dir(), reason="shared eval PDFs are not on this machine")
def test_real_balance_sheet_row_holds_its_year_columns() -> None:
    pymupdf = pytest.importorskip("pymupdf")
    from pagesight.ingestion.parse.blocks import ElementAssembler
    from pagesight.ingestion.parse.pdf import LayoutPageParser

    path = PDFS / "AMAZON_2017_10K.pdf"
    if not path.is_file():
        pytest.skip("AMAZON_2017_10K.pdf is not among the eval PDFs")
    with pymupdf.open(path) as doc:
        blocks = LayoutPageParser().parse(doc, [40])
    elements = ElementAssembler().assemble(DOC_ID, VERSION, [(40, blocks[40])])
    rows = [
        c
        for c in Chunker(ChunkOptions(table_rows=True))(_parsed(elements))
        if c.unit == "table_row"
    ]
    inventories = next(c for c in rows if "Inventories |" in c.text)
    line = inventories.text.splitlines()[-1]
    assert line == "Current assets: Inventories | December 31, 2016: 11,461 | 2017: 16,047"
    total = next(c for c in rows if "Total assets |" in c.text)
    assert total.text.endswith("Total assets | December 31, 2016: $83,402 | 2017: $131,310")
    table = next(e for e in elements if e.kind == ElementKind.TABLE)
    assert inventories.element_ids == [table.element_id]
