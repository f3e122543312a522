"""A table model's grid filled with the page's whole words.

PyMuPDF's table model finds a table's rows and columns, and its own text extraction then clips
the page's characters at every cell edge. A header set over two columns (a period over its
amount and percent columns, "13 Weeks Ended" over two periods) is cut wherever a column edge
crosses it: "(Unaudited)" comes out as "(Unaudi" | "ted)", "January 28, 2023" as
"January 2023" | "28,". Those cells are the labels that answers and row chunks quote.

:func:`fill_grid` keeps the model's grid and puts the words back whole. In a header row, a
run of words set together on one line (a phrase: gaps no wider than half the line's height, as
a space is) goes, as one piece, into the column it overlaps most, so a spanning label stays one
label. A row that holds a value ("$ 3,226,773", "10 %", "—") is a data row: there each word goes
on its own into the column it overlaps most, as the model's clipping put it but never cut, so
values set close together stay in their cells. Every piece goes into the row holding its middle.
It returns ``None`` where it cannot do better than the model's own text (no words, or a fill
whose characters do not match the model's), and the caller keeps the model's text.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from pagesight.ingestion.table_periods import CURRENCY
from pagesight.ingestion.tables import is_data_value, is_value

#: ``page.get_text("words")``: x0, y0, x1, y1, text, block, line, word number
Word = tuple[float, float, float, float, str, int, int, int]
Rect = Sequence[float]

#: A gap between two words of one line wider than this share of the line's height starts a
#: new phrase: a space is ~0.25-0.3 of it, a column gap ~0.7 and more.
PHRASE_GAP = 0.5
_CURRENCY_SIGN = re.compile(CURRENCY)
_PERCENT = ("%", "％")
#: The fill only regroups the model's characters: when the two disagree on more than this
#: share of them (text outside the clip, rotated text), the model's text is kept.
MAX_CHAR_MISMATCH = 0.02


@dataclass(frozen=True)
class Phrase:
    """Words set together on one line, with their joint box."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    words: tuple[Word, ...]

    def split(self) -> list[Phrase]:
        """Each of its words as a phrase of its own."""
        return [_joined([word]) for word in self.words]


def phrases(words: Sequence[Word]) -> list[Phrase]:
    """``words`` joined into phrases: consecutive words of one line, no wider apart than
    :data:`PHRASE_GAP` of the line's height, a value not joined to a value before it nor a
    currency sign to what precedes it (so each value of a row is a phrase that reads as one:
    what tells a data row from a header row)."""
    lines: dict[tuple[int, int], list[Word]] = defaultdict(list)
    for word in words:
        lines[(word[5], word[6])].append(word)
    out: list[Phrase] = []
    for line in lines.values():
        line.sort(key=lambda w: w[0])  # by position: word numbers follow the content stream
        run = [line[0]]
        for word in line[1:]:
            if _starts_phrase(run[-1], word):
                out.append(_joined(run))
                run = []
            run.append(word)
        out.append(_joined(run))
    return out


def _starts_phrase(before: Word, word: Word) -> bool:
    """Whether ``word`` starts a new phrase after ``before`` on their line: a gap wider than a
    space, a currency sign (it leads the number after it: "(1.53) $ 0.12"), or a value after
    a value ("1,234 5,678", "10 % 90 %"; "28, 2023" is one date)."""
    height = max(before[3] - before[1], word[3] - word[1])
    if word[0] - before[2] > PHRASE_GAP * height:
        return True
    if _CURRENCY_SIGN.fullmatch(word[4]):
        return True
    ends_value = before[4] in _PERCENT or (is_value(before[4]) and not before[4].endswith(","))
    return ends_value and is_value(word[4])


def _is_data_row(pieces: Sequence[Phrase]) -> bool:
    """A row with a value in it (a phrase that is a number or a printed nil, not a period),
    as the table grids tell data rows from header rows."""
    return any(is_data_value(p.text) for p in pieces)


def _joined(run: list[Word]) -> Phrase:
    return Phrase(
        min(w[0] for w in run),
        min(w[1] for w in run),
        max(w[2] for w in run),
        max(w[3] for w in run),
        " ".join(w[4] for w in run),
        tuple(run),
    )


def _edges(grid: Sequence[Sequence[Rect | None]], axis: int) -> list[tuple[float, float]]:
    """Each column's (``axis`` 0) or row's (1) extent over the grid's cells."""
    count = max(len(row) for row in grid) if axis == 0 else len(grid)
    low = [float("inf")] * count
    high = [float("-inf")] * count
    for r, row in enumerate(grid):
        for c, rect in enumerate(row):
            if rect is None:
                continue
            index = c if axis == 0 else r
            low[index] = min(low[index], rect[axis])
            high[index] = max(high[index], rect[axis + 2])
    return list(zip(low, high, strict=True))


def _column(phrase: Phrase, columns: list[tuple[float, float]]) -> int | None:
    overlaps = [min(phrase.x1, x1) - max(phrase.x0, x0) for x0, x1 in columns]
    best = max(range(len(columns)), key=overlaps.__getitem__)
    return best if overlaps[best] > 0 else None


def _row(phrase: Phrase, rows: list[tuple[float, float]]) -> int | None:
    middle = (phrase.y0 + phrase.y1) / 2
    for index, (y0, y1) in enumerate(rows):
        if y0 <= middle <= y1:
            return index
    return None


def _chars(texts: Sequence[Sequence[object]]) -> Counter[str]:
    return Counter(
        ch for row in texts for cell in row for ch in str(cell or "") if not ch.isspace()
    )


def fill_grid(
    grid: Sequence[Sequence[Rect | None]],
    words: Sequence[Word],
    model_text: Sequence[Sequence[object]],
) -> list[list[str]] | None:
    """The rows of cell texts of ``grid`` (the model's cell rectangles, ``None`` where a
    spanning cell covers one) filled with ``words`` (the page's, or those clipped to the
    table), or ``None`` to keep ``model_text`` (the model's clipped text of the same grid)."""
    if not grid or not words or not any(grid):
        return None
    columns, rows = _edges(grid, 0), _edges(grid, 1)
    if any(x0 > x1 for x0, x1 in columns) or any(y0 > y1 for y0, y1 in rows):
        return None  # a column or row with no cell of its own
    in_row: dict[int, list[Phrase]] = defaultdict(list)
    for phrase in phrases(words):
        row = _row(phrase, rows)
        if row is not None:
            in_row[row].append(phrase)
    placed: dict[tuple[int, int], list[Phrase]] = defaultdict(list)
    for row, row_phrases in in_row.items():
        pieces = row_phrases
        if _is_data_row(row_phrases):
            pieces = [word for phrase in row_phrases for word in phrase.split()]
        cells = grid[row]
        for piece in pieces:
            column = _column(piece, columns)
            if column is None:
                continue
            while column > 0 and (column >= len(cells) or cells[column] is None):
                column -= 1  # into the spanning cell that covers this one
            placed[(row, column)].append(piece)
    filled = [
        [
            " ".join(p.text for p in sorted(placed[(r, c)], key=lambda p: (round(p.y0), p.x0)))
            for c in range(len(columns))
        ]
        for r in range(len(rows))
    ]
    before, after = _chars(model_text), _chars(filled)
    total = max(sum(before.values()), 1)
    if sum(((before - after) + (after - before)).values()) > MAX_CHAR_MISMATCH * total:
        return None
    return filled
