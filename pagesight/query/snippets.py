"""What a search hit shows of its best chunk: the text on one line, cut to a length, with
table rows given as their cells rather than markdown pipes.

``| Net revenues | $3.6 | $3.1 |`` reads ``Net revenues · $3.6 · $3.1``; a rule row
(``|---|---|``) is dropped, empty cells are left out, and the rows of one table are separated by
``; ``. A table-row unit (``Chunk.unit == "table_row"``: "Net revenue | FY2019: 1,234 | FY2020:
1,456") is given the same way.
"""

from __future__ import annotations

import re

CELL_SEPARATOR = " · "
ROW_SEPARATOR = "; "

_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")
_RULE_CELL = re.compile(r"^:?-{1,}:?$")


def table_row_cells(line: str) -> list[str] | None:
    """The non-empty cells of a markdown table row (``| a | | b |`` -> ``["a", "b"]``; an
    escaped ``\\|`` is a pipe inside a cell), ``[]`` for a rule row (``|---|:--:|``), ``None``
    when the line is no table row."""
    row = line.strip()
    if len(row) < 2 or not row.startswith("|") or not row.endswith("|") or row.endswith("\\|"):
        return None
    cells = [" ".join(c.replace("\\|", "|").split()) for c in _UNESCAPED_PIPE.split(row[1:-1])]
    filled = [c for c in cells if c]
    if filled and all(_RULE_CELL.match(c) for c in filled):
        return []
    return filled


def readable_text(text: str, *, table_row: bool = False) -> str:
    """``text`` on one line: whitespace collapsed, markdown table rows as their cells (see the
    module docstring); ``table_row``: the text is a table-row unit, whose ``|`` separate cells."""
    parts: list[str] = []
    rows: list[str] = []
    for line in text.splitlines():
        cells = table_row_cells(line)
        if cells is None and table_row and "|" in line:
            cells = [c for c in (" ".join(p.split()) for p in _UNESCAPED_PIPE.split(line)) if c]
        if cells is None:
            if rows:
                parts.append(ROW_SEPARATOR.join(rows))
                rows = []
            parts.append(line)
        elif cells:
            rows.append(CELL_SEPARATOR.join(cells))
    if rows:
        parts.append(ROW_SEPARATOR.join(rows))
    return " ".join(" ".join(parts).split())


def snippet(text: str, limit: int, *, table_row: bool = False) -> str:
    """:func:`readable_text`, cut at a word to at most ``limit`` characters (an ellipsis marks
    the cut)."""
    text = readable_text(text, table_row=table_row)
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"
