"""Search-hit snippets (pagesight.query.snippets): table rows as cells, not markdown pipes."""

from __future__ import annotations

import pytest

from pagesight.query.snippets import readable_text, snippet, table_row_cells


@pytest.mark.parametrize(
    ("row", "cells"),
    [
        ("| Net revenues | $3.6 | $3.1 |", ["Net revenues", "$3.6", "$3.1"]),
        ("|  | Q4 |  |  |", ["Q4"]),
        ("| a \\| b | c |", ["a | b", "c"]),
        ("|---|---|---|", []),
        ("| :--- | ---: | :-: |", []),
        ("Net revenues were $3.6 billion", None),
        ("| not closed", None),
        ("|", None),
    ],
)
def test_table_row_cells(row: str, cells: list[str] | None) -> None:
    assert table_row_cells(row) == cells


def test_a_markdown_table_reads_as_cells_rows_apart() -> None:
    text = (
        "Consolidated results\n"
        "| ($ in millions) | Q4 2022 | Q4 2021 |\n"
        "|---|---|---|\n"
        "| Net revenues | $3.6 | $3.1 |\n"
        "| Operating income |  | $0.4 |\n"
        "All figures unaudited."
    )
    assert readable_text(text) == (
        "Consolidated results ($ in millions) · Q4 2022 · Q4 2021; Net revenues · $3.6 · $3.1; "
        "Operating income · $0.4 All figures unaudited."
    )


def test_a_table_row_unit_reads_as_cells() -> None:
    text = "Statements of Income > Table 4\nNet revenue | FY2019: 1,234 | FY2020: 1,456"
    assert readable_text(text, table_row=True) == (
        "Statements of Income > Table 4 Net revenue · FY2019: 1,234 · FY2020: 1,456"
    )
    assert "|" in readable_text("a | b")  # prose keeps its pipes


def test_snippet_is_one_line_cut_at_a_word() -> None:
    text = "| Net revenues | $3.6 | $3.1 |\n|---|---|---|\n" + "word " * 100
    got = snippet(text, 40)
    assert got.startswith("Net revenues · $3.6 · $3.1") and "|" not in got
    assert len(got) <= 40 and got.endswith("…")
    assert snippet("short   text\n here", 40) == "short text here"
