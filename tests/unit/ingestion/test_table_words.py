"""A table model's grid is filled with whole words (pagesight.ingestion.parse.table_words).

PyMuPDF's table model clips a table's characters at its cell edges, which cuts spanning headers
apart ("(Unaudi" | "ted)", "January 2023" | "28,"); the grid is kept and the words put back
whole, while a row's values stay in their own cells.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pymupdf
import pytest

from pagesight.core.types import ElementKind
from pagesight.ingestion.parse.pdf import LayoutPageParser
from pagesight.ingestion.parse.table_words import Word, fill_grid, phrases
from tests.conftest import extract_pages

#: column edges 60 | 280 | 400 | 450 | 510 | 550, three rows 100-112-124-136
COLUMNS = [(60, 280), (280, 400), (400, 450), (450, 510), (510, 550)]
ROWS = [(100, 112), (112, 124), (124, 136)]
GRID = [[(x0, y0, x1, y1) for x0, x1 in COLUMNS] for y0, y1 in ROWS]


def _words(*placed: tuple[float, float, str], line: int = 0) -> list[Word]:
    """Words at (x0, row top, text), 5 pt a character, 9 pt high; one line a row top."""
    out: list[Word] = []
    for number, (x0, top, text) in enumerate(placed):
        out.append((x0, top + 1, x0 + 5 * len(text), top + 10, text, 0, int(top) + line, number))
    return out


def test_a_word_and_a_spanning_header_stay_whole_in_the_column_they_overlap_most() -> None:
    words = _words(
        (415, 100, "13"), (427, 100, "Weeks"), (455, 100, "Ended"),  # 415-480: columns 2 and 3
        (360, 112, "January"), (397, 112, "28,"),  # crosses 400, mostly column 1
        (365, 124, "(Unaudited)"),  # 365-420: one word over the edge at 400
    )  # fmt: skip
    clipped = [
        ["", "", "13 Weeks", "Ended", ""],
        ["", "January", "28,", "", ""],
        ["", "(Unaudi", "ted)", "", ""],
    ]
    assert fill_grid(GRID, words, clipped) == [
        ["", "", "13 Weeks Ended", "", ""],
        ["", "January 28,", "", "", ""],
        ["", "(Unaudited)", "", "", ""],
    ]


def test_a_data_rows_words_stay_where_they_lie_each_whole() -> None:
    # A row with values: each word goes to the column it overlaps most, never cut; the
    # label crossing the edge at 280 goes whole to column 0, "$" (401) to column 2
    words = _words(
        (200, 100, "Adjusted"), (243, 100, "EPS"), (262, 100, "(basic)"),
        (350, 100, "$"), (357, 100, "(1.53)"), (401, 100, "$"), (408, 100, "0.12"),
        (480, 100, "1,234"), (507, 100, "5,678"),
    )  # fmt: skip
    model = [["Adjusted EPS (ba", "sic) $ (1.53)", "$ 0.12", "1,234", "5,678"]]
    assert fill_grid(GRID[:1], words, model) == [
        ["Adjusted EPS (basic)", "$ (1.53)", "$ 0.12", "1,234", "5,678"]
    ]


def test_signs_and_values_start_phrases_however_close() -> None:
    words = _words(
        (357, 100, "(1.53)"), (389, 100, "$"), (396, 100, "0.12"),
        (420, 100, "10"), (431, 100, "%"), (438, 100, "90"), (449, 100, "%"),
        (480, 100, "1,234"), (507, 100, "5,678"),
        (540, 100, "December"), (583, 100, "31,"), (600, 100, "2022"),
    )  # fmt: skip
    assert [p.text for p in phrases(words)] == [
        "(1.53)", "$ 0.12", "10 %", "90 %", "1,234", "5,678", "December 31, 2022"
    ]  # fmt: skip


def test_headers_a_column_gap_apart_are_two_phrases() -> None:
    # 7 pt apart on 9 pt type: wider than a space, so "Liabilities" is its column's own header
    words = _words((405, 100, "Assets"), (442, 100, "Liabilities"))
    model = [["", "", "Assets", "Liabilities", ""]]
    assert fill_grid(GRID[:1], words, model) == [["", "", "Assets", "Liabilities", ""]]


def test_a_date_is_one_header_phrase_and_lines_of_a_cell_read_top_down() -> None:
    words = _words((290, 100, "December"), (333, 100, "31,"), (350, 100, "2022"))
    words += _words((300, 110, "(Unaudited)"), line=50)
    cell = [[(280, 100, 400, 124)]]
    assert fill_grid(cell, words, [["December 31, 2022 (Unaudited)"]]) == [
        ["December 31, 2022 (Unaudited)"]
    ]


def test_a_covered_cell_gives_its_words_to_the_spanning_cell_on_its_left() -> None:
    grid = [[GRID[0][0], GRID[0][1], None, GRID[0][3], GRID[0][4]], GRID[1]]
    words = _words((410, 100, "Total"))  # inside column 2, which column 1's cell spans
    model = [["", "", "Total", "", ""], ["", "", "", "", ""]]
    assert fill_grid(grid, words, model) == [["", "Total", "", "", ""], ["", "", "", "", ""]]


def test_the_model_text_is_kept_when_the_words_do_not_match_it() -> None:
    words = _words((290, 100, "Revenue"))
    assert fill_grid(GRID[:1], words, [["", "Net income", "", "", ""]]) is None
    assert fill_grid(GRID[:1], [], [["", "Revenue", "", "", ""]]) is None
    assert fill_grid([], words, [["Revenue"]]) is None


def test_the_layout_parser_fills_the_models_grid_from_the_page() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((365, 130), "(Unaudited)", fontsize=9)
    page.insert_text((70, 146), "Net sales", fontsize=9)
    page.insert_text((330, 146), "3,226,773", fontsize=9)
    page.insert_text((415, 146), "100.0%", fontsize=9)
    grid = [[(60, 118, 280, 134), (280, 118, 400, 134), (400, 118, 450, 134)],
            [(60, 134, 280, 150), (280, 134, 400, 150), (400, 134, 450, 150)]]  # fmt: skip
    clipped = [[None, "(Unaudi", "ted)"], ["Net sales", "3,226,773", "100.0%"]]
    table = {"bbox": (60, 118, 450, 150), "cells": grid, "extract": clipped}
    box = SimpleNamespace(boxclass="table", x0=60, y0=118, x1=450, y1=150, table=table)
    block = LayoutPageParser()._block(box, page)
    assert block is not None and block.kind == ElementKind.TABLE
    assert block.cells == [["", "(Unaudited)", ""], ["Net sales", "3,226,773", "100.0%"]]
    assert "(Unaudited)" in block.text


@pytest.mark.slow
def test_an_earnings_release_keeps_its_period_headers_whole(eval_dir: Path, tmp_path: Path) -> None:
    """A real statement: the period headers span an amount and a percent column each."""
    source = eval_dir / "pdfs" / "ULTABEAUTY_2023Q4_EARNINGS.pdf"
    if not source.exists():
        pytest.skip("the earnings release is not in this evaluation corpus")
    doc = pymupdf.open(extract_pages(source, [6], tmp_path / "p6.pdf"))
    blocks = LayoutPageParser().parse(doc, [1])[1]
    headers = [cell for b in blocks if b.cells for row in b.cells[:3] for cell in row]
    assert "(Unaudited)" in headers and "January 28, 2023" in headers
    assert not any(cell.endswith("Unaudi") or cell.startswith("ted)") for cell in headers)
