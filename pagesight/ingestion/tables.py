"""Tables as typed grids: header labels per column, one labelled row per line item.

A parser that finds a table's grid (PyMuPDF's table model, docling) keeps it in
``Element.cells`` (rows of cell texts, first row = header) and renders ``Element.text`` from it as
GitHub-style markdown; PyMuPDF tables with :func:`table_to_markdown`, the one renderer here. A
table that arrives as markdown (a VLM's reply) has no cells, nor has an element stored before
cells were kept: for those, :func:`markdown_table_rows` reads the rows of cells out of the
markdown, and nothing else does (:func:`element_tables` picks).

Markdown is good for reading but not for finding one number: a filing has dozens of look-alike
statement tables and a question asks for one line item in one year, which a whole-table chunk
dilutes in BM25 and in a dense embedding. This module builds a :class:`TableGrid` from a
table's rows (:func:`tables_from_rows`) so that

* the chunker can index a statement table row by row (:func:`row_texts`, rule 5 of
  :mod:`pagesight.ingestion.chunk`), each row spelled out with its column headers and unit, and
* answers can later look a value up by line item and period (:meth:`TableGrid.periods`,
  :meth:`TableGrid.unit`) instead of re-reading markdown.

What real extractions look like, and what is done about it (3M and Amazon 10-Ks, PyMuPDF layout):

* Multi-row headers ("December 31," above "2018"): rows under the first one that hold no numbers
  (years and dates do not count as numbers) are header rows too; one label per column is the
  column's header cells joined with a space.
* Spanning headers set in one cell of an upper header row ("| | | 2018 | | | 2017 |") cover the
  empty cells around them (each empty cell takes the nearest label, the left one on a tie), and
  a label the extractor broke over cells ("| Y | ear Ended December | 31, |") is joined first.
* Currency and percent signs in cells of their own ("| $ | 1,234 |", "| 22.4 | % |", "1,560 $")
  join the number they belong to; columns left empty are dropped, and a header over an empty
  column moves to the column that holds its numbers.
* A cell that only states the unit ("(in millions)", "(Dollars in millions, except per share
  amounts)", "(百万円)") is the table's unit, not a column label.
* Label-only rows ("Current assets:") are groups: they prefix the rows below them up to the next
  group or "Total ..." row; a label-only row whose next row's label starts in lower case is a
  label broken over two lines and joins it instead.
* Stacked tables in one grid (a second header row after data rows) are split into separate
  grids (:func:`tables_from_rows`).

Numbers stay as printed ("(1,234)", "—", "22.4%"): the BM25 tokenizer normalises them and the
page shows them that way; only the spaces an extractor puts between a sign and its number go.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from pagesight.core.types import Element
from pagesight.ingestion.table_periods import CURRENCY as _CURRENCY
from pagesight.ingestion.table_periods import FISCAL_SHORT as _FISCAL_SHORT
from pagesight.ingestion.table_periods import QUARTER_YEAR_SHORT as _QUARTER_YEAR_SHORT
from pagesight.ingestion.table_periods import YEAR as _YEAR
from pagesight.ingestion.table_periods import Period, detect_period, detect_unit

#: Wider tables are cut: no real statement has more columns, and it bounds the work per row.
MAX_COLUMNS = 64
#: Row units per table and characters per row unit (defaults of :func:`row_texts`).
MAX_ROWS_PER_TABLE = 80
MAX_ROW_TEXT_CHARS = 600
#: At most this much of a row text is caption/section context; the row itself gets the rest.
_MAX_CONTEXT_CHARS = 200
#: Header rows beyond the first; more than this is body text that happens to hold no numbers.
_MAX_EXTRA_HEADER_ROWS = 4

_SEPARATOR = re.compile(r"^\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?$")
#: A cell of a rule row ("|---|:--:|"): a row of such cells reads as a rule, not as data.
_RULE_CELL = re.compile(r":?-+:?")
_CURRENCY_CELL = re.compile(rf"^{_CURRENCY}$")
_SIGN_BEFORE_NUMBER = re.compile(rf"({_CURRENCY})\s+(?=[\d(.\-−–—])")
_SPACE_BEFORE_PERCENT = re.compile(r"(?<=[\d)])\s+%")
# A number as printed, once currency signs, percent signs, spaces and unit suffixes are gone:
# "1,234", "(1,234)", "-0.25", "12.5", "△120" (Japanese minus).
_NUMBER = re.compile(r"^[(（]?[+\-−–△▲]?[(（]?\d(?:[\d,，.]*\d)?[)）]?$")
_NUMBER_SUFFIX = re.compile(
    r"(?:%|％|x|bps|bp|pts?|pp|mn|bn|million|billion|thousand|[MBK]|円|万円|百万円|億円|千円|ドル|倍)$",
    re.IGNORECASE,
)
_NIL_VALUES = frozenset(
    {"—", "–", "-", "−", "--", "——", "―", "‐", "－", "n/a", "na", "nm", "n/m", "n.m.", "nil", "*"}
)
_FOOTNOTE = re.compile(r"(?:\s*\*+|\s*\(\d\)|\s*\([a-z]\))+$")


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH_END = re.compile(r"\b(?:" + "|".join(_MONTHS) + r")[a-z]*\.?,?$", re.IGNORECASE)
_DAY_START = re.compile(r"^\d{1,2}\b")
_MONTH_DIGIT_END = re.compile(r"\b(?:" + "|".join(_MONTHS) + r")[a-z]*\.?\s+\d$", re.IGNORECASE)
# Words a header cell may hold and still be only a period ("Three Months Ended December 31,").
_PERIOD_WORDS = _word_set(
    "fy fiscal year years ended ending end month months week weeks three six nine "
    "twelve quarter quarters first second third fourth half vs versus and as of at to "
    "through q h ytd qtd ltm ttm 年 月 日 期 度 第 四半期 通期 上期 下期 末 現在"
)
# Words that start a header cell on their own; a cut word's second half is not one of them.
_HEADER_WORDS = _word_set(
    "ended ending months month weeks year years quarter and or of in to as at for the "
    "through except per from on by with"
)
_PAGE_HEADER = re.compile(r"\bpages?\b|ページ|頁", re.IGNORECASE)


@dataclass
class TableRow:
    """One line item: its label, its cells aligned with :attr:`TableGrid.columns`, its group."""

    label: str  #: the label cells joined ("Net sales"); "" when the row has none
    cells: list[str]  #: one per column, the label cells included; "" where empty
    group: str | None = None  #: the label-only row above it ("Current assets:"), if any

    @property
    def line_item(self) -> str:
        """The label qualified by its group: "Current assets: Inventories"."""
        if not self.group:
            return self.label
        group = self.group.rstrip(" :：")
        return f"{group}: {self.label}" if self.label else group


@dataclass
class TableGrid:
    """A parsed table: one header label per column and its data rows (group rows folded in)."""

    columns: list[str]  #: one label per column; header rows joined with ' '
    rows: list[TableRow]
    header_rows: int = 1  #: how many markdown rows formed the header
    label_columns: int = 1  #: leading columns that hold the row labels, not values
    units: list[str] = field(default_factory=list)  #: unit-only header cells, as printed
    #: each column's header cells top to bottom (``columns`` joins them); lets a row text
    #: name "2018" once for "2018 Net Sales", "2018 % of Total", ...
    headers: list[list[str]] = field(default_factory=list)

    @property
    def value_columns(self) -> range:
        return range(self.label_columns, len(self.columns))

    def periods(self) -> list[Period | None]:
        """The period of each column (None for label columns and non-period columns)."""
        return [
            detect_period(label) if index >= self.label_columns else None
            for index, label in enumerate(self.columns)
        ]

    def unit(self, caption: str | None = None) -> str | None:
        """The table's unit as printed: the caption's, else a header's ("in millions", "%")."""
        # Not the value columns' labels: "(Millions)" over one column is that column's unit.
        for text in (caption or "", *self.units, *self.columns[: self.label_columns]):
            unit = detect_unit(text)
            if unit:
                return unit
        return None

    def numeric_columns(self) -> list[int]:
        """Value columns whose filled cells are mostly numbers (at least two real ones)."""
        numeric: list[int] = []
        for index in self.value_columns:
            filled = [row.cells[index] for row in self.rows if row.cells[index]]
            numbers = sum(1 for cell in filled if is_number(cell))
            nils = sum(1 for cell in filled if is_nil(cell))
            if numbers >= 2 and numbers + nils >= 0.6 * len(filled):
                numeric.append(index)
        return numeric


# --- cells ----------------------------------------------------------------------------------


def is_nil(cell: str) -> bool:
    """A printed "nothing" ("—", "n/a", "$ —", "— %"): a value, but not a number."""
    stripped = re.sub(rf"{_CURRENCY}|[%％\s]", "", cell).lower()
    return stripped in _NIL_VALUES


def is_number(cell: str) -> bool:
    """A number as printed: "1,234", "$ (1,234)", "22.4 %", "-0.25%", "3.5x", "1,234百万円"."""
    text = _strip_footnote(cell.strip())
    text = re.sub(rf"{_CURRENCY}|\s", "", text)
    text = _NUMBER_SUFFIX.sub("", text).rstrip("%％")
    return bool(_NUMBER.match(text))


def is_value(cell: str) -> bool:
    """A printed number or nil: what a data cell holds."""
    return is_number(cell) or is_nil(cell)


def is_data_value(cell: str) -> bool:
    """A value that is data, not a period ("2018", "December 31, 2017" head columns): what
    tells a data row from a header row."""
    return is_value(cell) and not is_period_text(cell)


def is_period_text(cell: str) -> bool:
    """A header cell that only names a period: "2018", "2018*", "December 31, 2018", "FY20"."""
    text = _strip_footnote(cell.strip())
    has_period = bool(
        _YEAR.search(text) or _FISCAL_SHORT.search(text) or _QUARTER_YEAR_SHORT.search(text)
    )
    if not has_period:
        return False
    for token in re.findall(r"[A-Za-z]+|\d+|[^\W\d_]+", text):
        lowered = token.lower()
        if token.isdigit():
            if len(token) > 4:
                return False
            continue
        if lowered in _PERIOD_WORDS or lowered.rstrip(".")[:3] in _MONTHS:
            continue
        if re.fullmatch(r"(?:fy|q|h)\d*|\d*q", lowered):
            continue
        if all(part in _PERIOD_WORDS for part in re.findall(r"四半期|[^\W\d_]", token)):
            continue
        return False
    return True


def _strip_footnote(text: str) -> str:
    """Without a trailing marker ("2018*", "1,234 (2)"); "(5)" and "$ (5)" are minus five."""
    match = _FOOTNOTE.search(text)
    if match and re.search(r"\d", text[: match.start()]):
        return text[: match.start()]
    return text


def cell_text(cell: object) -> str:
    """A cell's text as ``Element.cells`` keeps it: whitespace collapsed (a line break in a cell
    is where the extractor wrapped a line), ``None`` (any false value) empty."""
    return " ".join(str(cell or "").split())


def table_cells(rows: Sequence[Sequence[object]]) -> list[list[str]]:
    """The rows a parser found, as ``Element.cells``: each cell's :func:`cell_text`, every row
    padded to the widest, rows without any text dropped (the first one left is the header)."""
    width = max((len(row) for row in rows), default=0)
    padded = [[cell_text(cell) for cell in row] + [""] * (width - len(row)) for row in rows]
    return [row for row in padded if any(row)]


def table_to_markdown(rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-style markdown table of ``rows`` (their :func:`table_cells`): the first row is
    the header, a ``|`` in a cell is written ``\\|``; "" for rows without any text."""
    cells = table_cells(rows)
    if not cells:
        return ""
    lines = [_markdown_row(cells[0]), "|" + "---|" * len(cells[0])]
    lines += [_markdown_row(row) for row in cells[1:]]
    return "\n".join(lines)


def _markdown_row(row: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"


def _clean_cell(cell: str) -> str:
    """A cell as grids read it: a ``<br>`` a space, whitespace collapsed, ``**bold**`` unmarked
    (VLM markdown); the same whether the cell came from ``cells`` or from markdown."""
    text = re.sub(r"<br\s*/?>", " ", cell, flags=re.IGNORECASE)
    text = " ".join(text.split())
    if len(text) >= 4 and text.startswith("**") and text.endswith("**"):
        text = text[2:-2].strip()
    return text


def _tidy_value(cell: str) -> str:
    """Drop the spaces extractors put between a sign and its number ("$ 1,234", "22.4 %")."""
    if not is_value(cell):
        return cell
    return _SPACE_BEFORE_PERCENT.sub("%", _SIGN_BEFORE_NUMBER.sub(r"\1", cell))


def _split_row(line: str) -> list[str]:
    """A markdown row's cells, ``\\|`` read as ``|`` (not yet cleaned)."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [cell.replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


def _merge_split_signs(row: list[str]) -> None:
    """Join "$" | "1,234" and "22.4" | "%" cells that an extractor split apart, in place."""
    for index, cell in enumerate(row):
        if not cell:
            continue
        nxt = row[index + 1] if index + 1 < len(row) else ""
        prev = row[index - 1] if index > 0 else ""
        if _CURRENCY_CELL.match(cell) and nxt and is_value(nxt):
            row[index + 1] = cell + nxt
            row[index] = ""
            continue
        trailing = re.match(rf"^(.*\S)\s+({_CURRENCY})$", cell)
        if trailing and nxt and is_value(nxt) and not re.match(_CURRENCY, nxt):
            row[index] = trailing.group(1)  # "1,560 $" | "1,604": that sign is the next number's
            row[index + 1] = trailing.group(2) + nxt
            cell = row[index]
        leading = re.match(r"^(%|％|\)%|\))(?:\s+(.*))?$", cell)
        if leading and prev and is_number(prev):
            row[index - 1] = prev + leading.group(1)
            row[index] = leading.group(2) or ""
    for index, cell in enumerate(row):
        row[index] = _tidy_value(cell)


# --- rows -----------------------------------------------------------------------------------


def _values(row: list[str]) -> list[str]:
    return row[1:]


def _has_numbers(row: list[str]) -> bool:
    """Real numbers in the value cells; periods ("2018", "December 31, 2017") do not count."""
    return any(is_number(c) and not is_period_text(c) for c in _values(row) if c)


def _is_header_like(row: list[str]) -> bool:
    """No numbers and some text among the value cells: a header row, not data or a group."""
    values = [c for c in _values(row) if c]
    return bool(values) and not any(is_data_value(c) for c in values)


def _starts_new_table(rows: list[list[str]], index: int) -> bool:
    """A header-like row after data rows, with numbers right after its header run."""
    row = rows[index]
    values = [c for c in _values(row) if c]
    if not _is_header_like(row):
        return False
    if len(values) < 2 and not all(is_period_text(c) for c in values):
        return False
    following = index + 1
    limit = index + 1 + _MAX_EXTRA_HEADER_ROWS
    while following < min(len(rows), limit) and (
        _is_header_like(rows[following]) or not any(_values(rows[following]))
    ):
        following += 1  # header rows, then group rows ("Deferred tax assets:")
    return following < len(rows) and _has_numbers(rows[following])


def _stacked(entries: Iterable[list[str] | None]) -> tuple[list[list[list[str]]], bool]:
    """Rows (``None`` for a rule row, "|---|---|") grouped into tables: a second rule with rows
    above it starts a new table, headed by the row right above it. Also: whether any rule was
    seen."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    separated = False
    for entry in entries:
        if entry is None:
            if separated and len(current) > 1:
                header = current.pop()  # a second rule: the row above heads a new table
                tables.append(current)
                current = [header]
            separated = True
            continue
        current.append(entry)
    if current:
        tables.append(current)
    return tables, separated


def markdown_table_rows(text: str) -> list[list[list[str]]]:
    """The markdown tables in ``text``, each as its rows of cells (``\\|`` read as ``|``); lines
    without a pipe are skipped, a rule line under data rows starts a new table.

    Only for a table that arrives as markdown (a VLM's reply) or an element stored before
    ``Element.cells`` was kept: a parser that has a table's grid keeps it in ``cells``.
    """
    entries: list[list[str] | None] = []
    for line in text.splitlines():
        stripped = line.strip()
        if "|" not in stripped:
            continue
        if _SEPARATOR.match(stripped) and "-" in stripped:
            entries.append(None)
        else:
            entries.append(_split_row(stripped))
    tables, separated = _stacked(entries)
    if not separated:
        # No "|---|" line: only lines that look like table rows, and at least two of them.
        tables = [t for t in tables if len(t) >= 2 and all(len(r) >= 2 for r in t)]
    return [t for t in tables if t and max(len(r) for r in t) >= 2]


def _is_rule(row: list[str]) -> bool:
    return all(_RULE_CELL.fullmatch(cell) for cell in row)


def _rectangular(rows: list[list[str]]) -> list[list[str]]:
    """Rows padded to one width (ragged rows are common in OCR output); empty rows and columns
    dropped."""
    width = min(max(len(r) for r in rows), MAX_COLUMNS)
    padded = [(r + [""] * (width - len(r)))[:width] for r in rows if any(r)]
    used = [i for i in range(width) if any(r[i] for r in padded)]
    return [[r[i] for i in used] for r in padded] if used else []


def _split_blocks(rows: list[list[str]]) -> list[tuple[int, list[list[str]]]]:
    """(header row count, rows) per stacked table: a header after data rows starts a new one."""
    blocks: list[tuple[int, list[list[str]]]] = []
    start = 0
    while start < len(rows):
        header = _header_count(rows, start)
        index = start + header
        seen_data = False
        while index < len(rows):
            if seen_data and _starts_new_table(rows, index):
                break
            seen_data = seen_data or _has_numbers(rows[index])
            index += 1
        blocks.append((header, rows[start:index]))
        start = index
    return blocks


def _header_count(rows: list[list[str]], start: int) -> int:
    """Header rows at ``start``: the first row unless it holds numbers, then number-free rows."""
    first = rows[start]
    if _has_numbers(first):
        return 0
    if not any(_has_numbers(r) for r in rows[start + 1 : start + 40]):
        return 1  # a text-only table: one header row, as markdown says
    count = 1
    while (
        start + count < len(rows)
        and count <= _MAX_EXTRA_HEADER_ROWS
        and _is_header_like(rows[start + count])
    ):
        count += 1
    return count


# --- headers --------------------------------------------------------------------------------


def _broken_apart(left: str, right: str) -> bool:
    """Two neighbouring header cells that are one label an extractor cut ("Decem" | "ber 31,")."""
    if not left or not right:
        return False
    if left[-1].isalpha() and right[0].islower():
        return True
    if left.endswith("-") or right.startswith(("-", ",", ".")):
        return True
    if _MONTH_END.search(left) and _DAY_START.match(right):
        return True
    return bool(_MONTH_DIGIT_END.search(left) and right[0].isdigit())  # "December 3" | "1,"


def _join(left: str, right: str) -> str:
    """Rejoin a cut label: no space inside a cut word ("Decem" + "ber"), one before a word."""
    first_word = right.split()[0].lower() if right.split() else ""
    whole_word = first_word.strip(",.") in _HEADER_WORDS
    if (right[0].islower() and not whole_word) or left.endswith("-") or right[0] in "-,.":
        return left + right
    if right[0].isdigit() and _MONTH_DIGIT_END.search(left):
        return left + right
    return f"{left} {right}"


def spread_spanning_labels(
    row: list[str], first: int, *, join_neighbours: bool = True
) -> list[str]:
    """An upper header row with each label spread over the empty cells nearest to it (cells
    before ``first``, the row labels, are left as they are). Answers label values by the same
    rule (:mod:`pagesight.query.answer_units`), with ``join_neighbours`` off: they read cells
    filled with whole words, where neighbouring cells are separate labels unless one is a word
    cut in two."""
    # With empty cells in the row, labels are spread over spans, and where an extractor clipped
    # the text at cell edges, neighbouring cells are usually pieces of one ("| | Year | Ended
    # Decemb | er 31, | |"): join_neighbours joins them, and a yearless piece with the label
    # after it that ends in a year (below); two years stay apart.
    has_gaps = join_neighbours and not all(row[first:])
    spans: list[tuple[int, int, str]] = []
    for index in range(first, len(row)):
        cell = row[index]
        if not cell:
            continue
        previous = spans[-1][2] if spans else ""
        joins = _broken_apart(previous, cell) or (
            has_gaps and bool(previous) and not (_YEAR.search(previous) and _YEAR.search(cell))
        )
        if spans and spans[-1][1] == index - 1 and joins:
            start, _, text = spans[-1]
            spans[-1] = (start, index, _join(text, cell))
        else:
            spans.append((index, index, cell))
    if not spans:
        return row
    if join_neighbours and any(_YEAR.search(text) for _, _, text in spans):
        # Where labels end in years, a yearless piece just before one is its start:
        # "| Year | Ended December 31, 2015 | Year Ended December 31, 2016 |".
        merged: list[tuple[int, int, str]] = []
        for start, end, text in spans:
            last = merged[-1] if merged else None
            if last and last[1] == start - 1 and not _YEAR.search(last[2]) and _YEAR.search(text):
                merged[-1] = (last[0], end, _join(last[2], text))
            else:
                merged.append((start, end, text))
        spans = merged
    nearest_span = [
        min(
            range(len(spans)),
            key=lambda s: (max(spans[s][0] - index, index - spans[s][1], 0), spans[s][0]),
        )
        for index in range(first, len(row))
    ]
    filled = list(row)
    for number, (start, end, text) in enumerate(spans):
        region = [first + i for i, s in enumerate(nearest_span) if s == number]
        left, right = start - region[0], region[-1] - end
        # A label set over the middle of its columns spans them; one pushed to an edge with
        # many empty cells on its other side ("| | | ... | Earnings |") names its own column.
        centred = abs(left - right) <= max(1, len(region) // 3)
        for index in region if centred else range(start, end + 1):
            filled[index] = text
    return filled


def _column_headers(header: list[list[str]], width: int) -> list[list[str]]:
    """Each column's header cells top to bottom, spanning labels spread, repeats dropped."""
    rows = [spread_spanning_labels(r, 1) for r in header[:-1]] + header[-1:]
    headers: list[list[str]] = []
    for index in range(width):
        pieces: list[str] = []
        for row in rows:
            cell = row[index]
            if cell and (not pieces or pieces[-1] != cell):
                pieces.append(cell)
        headers.append(pieces)
    return headers


def _unit_only(cell: str) -> bool:
    unit = detect_unit(cell)
    if unit is None:
        return False
    rest = cell.replace(unit, "")
    return not re.sub(r"[\s()（）:：,]", "", rest)


def _take_units(header: list[list[str]]) -> tuple[list[list[str]], list[str]]:
    """Header rows with unit-only cells blanked (rows left empty dropped), and those units.

    A unit cut over cells ("| (in mill | ions, except per sha | re data) |") is read whole.
    """
    units: list[str] = []
    kept: list[list[str]] = []
    for row in header:
        joined = ""
        for cell in row:
            if cell:
                joined = _join(joined, cell) if joined else cell
        if joined and _unit_only(joined):
            units.append(joined)
            continue
        cleaned = list(row)
        for index, cell in enumerate(row):
            if cell and _unit_only(cell):
                units.append(cell)
                cleaned[index] = ""
        if any(cleaned) or not kept:
            kept.append(cleaned)
    return kept, units


def _drop_empty_columns(headers: list[list[str]], body: list[list[str]]) -> list[int]:
    """Kept column indexes; a header over a column without data moves to its data neighbour
    ("| 2018 | |" over "| | 23.4% |"), unless that one has a header of its own."""
    width = len(headers)
    has_data = [index == 0 or any(r[index] for r in body) for index in range(width)]
    for index in range(1, width):
        if has_data[index] or not headers[index]:
            continue
        for neighbour in (index + 1, index - 1):
            if 0 < neighbour < width and has_data[neighbour]:
                if not headers[neighbour]:
                    headers[neighbour] = headers[index]
                break
        headers[index] = []
    return [index for index in range(width) if has_data[index] or (not body and headers[index])]


def _label_column_count(body: list[list[str]], width: int) -> int:
    """Leading text columns ("Item 1A." | "Risk Factors"); at least one, never all."""
    count = 1
    while count < width - 1:
        filled = [r[count] for r in body if r[count]]
        if not filled or sum(1 for c in filled if is_value(c)) > 0.2 * len(filled):
            break
        count += 1
    return count


# --- grids ----------------------------------------------------------------------------------


def _grid(header_count: int, rows: list[list[str]]) -> TableGrid:
    width = len(rows[0])
    header, body = rows[:header_count], rows[header_count:]
    header, units = _take_units(header)
    headers = _column_headers(header, width) if header else [[] for _ in range(width)]
    keep = _drop_empty_columns(headers, body)
    headers = [headers[i] for i in keep]
    body = [[r[i] for i in keep] for r in body]
    label_columns = _label_column_count(body, len(keep)) if len(keep) > 1 else 1
    grid = TableGrid(
        columns=[" ".join(pieces) for pieces in headers],
        rows=[],
        header_rows=header_count,
        label_columns=label_columns,
        units=units,
        headers=headers,
    )
    group: str | None = None
    carry = ""  # a label broken over two lines, waiting for its second half
    for position, row in enumerate(body):
        label = " ".join(c for c in row[:label_columns] if c)
        if carry:
            label, carry = f"{carry} {label}".strip(), ""
        if not any(row[label_columns:]):
            if not label:
                continue
            if _unit_only(label):  # "（単位：百万円）" on a row of its own
                grid.units.append(label)
                continue
            following = body[position + 1] if position + 1 < len(body) else None
            next_label = " ".join(c for c in following[:label_columns] if c) if following else ""
            if following and any(following[label_columns:]) and next_label[:1].islower():
                carry = label
            else:
                group = label
            continue
        grid.rows.append(TableRow(label=label, cells=row, group=group))
        if label.lower().startswith(("total", "合計", "計")):
            group = None
    return grid


def tables_from_rows(rows: Sequence[Sequence[object]]) -> list[TableGrid]:
    """The grids of one table given as rows of cell texts, first row the header: a table
    element's ``cells``, or one table of :func:`markdown_table_rows`. Stacked tables (a header
    after data rows) are split apart; a table less than two columns wide gives none.

    A row whose every cell is a run of hyphens ("| - | -- |") is a rule, as it is when the
    table is rendered to markdown and read back: one table gives the same grids whether its rows
    come from ``cells`` or from its markdown (an element stored before cells were kept).
    """
    filled = table_cells(rows)
    if not filled or len(filled[0]) < 2:
        return []
    # As rendered: the header row, the rule under it, the other rows.
    marked = [None if _is_rule(row) else row for row in filled]
    entries = [marked[0], None, *marked[1:]]
    grids: list[TableGrid] = []
    for table in _stacked(entries)[0]:
        cleaned = _rectangular([[_clean_cell(cell) for cell in row] for row in table])
        if not cleaned:
            continue
        for row in cleaned:
            _merge_split_signs(row)
        for header_count, block in _split_blocks(cleaned):
            grids.append(_grid(header_count, block))
    return grids


def parse_markdown_tables(text: str) -> list[TableGrid]:
    """Every table in a markdown text (:func:`markdown_table_rows`), stacked tables split apart."""
    return [grid for rows in markdown_table_rows(text) for grid in tables_from_rows(rows)]


def element_tables(element: Element) -> list[TableGrid]:
    """The grids of a table element: built from its ``cells``; read out of its markdown
    ``text`` only when it has none (a VLM's table, an element stored before cells were kept)."""
    if element.cells is not None:
        return tables_from_rows(element.cells)
    return parse_markdown_tables(element.text)


def parse_markdown_table(text: str) -> TableGrid | None:
    """The first table of a markdown text; None when there is no table in it.

    A markdown block holding stacked tables gives only the first here; the chunker reads all
    of a table element's grids with :func:`element_tables`.
    """
    grids = parse_markdown_tables(text)
    return grids[0] if grids else None


# --- retrieval units ------------------------------------------------------------------------


def is_statement_table(grid: TableGrid) -> bool:
    """Worth indexing row by row: 3+ data rows, a numeric column, rows labelled with words.

    A table of contents (its only numbers are page numbers) is not: a row "Risk Factors | 12"
    would compete with the section it points to.
    """
    if len(grid.rows) < 3:
        return False
    numeric = grid.numeric_columns()
    if not numeric:
        return False
    if all(_PAGE_HEADER.search(grid.columns[i]) or _page_numbers(grid, i) for i in numeric):
        return False
    labelled = sum(1 for row in grid.rows if re.search(r"[^\W\d_]", row.label))
    return labelled >= max(3, len(grid.rows) / 2)


def _short_label(grid: TableGrid, index: int, previous: list[str]) -> str:
    """The column's label without the upper header cells the previous value already named."""
    pieces = grid.headers[index] if index < len(grid.headers) else []
    if not pieces:
        return grid.columns[index]
    shared = 0
    while shared < min(len(pieces), len(previous)) - 1 and pieces[shared] == previous[shared]:
        shared += 1
    return " ".join(pieces[shared:])


def _page_numbers(grid: TableGrid, index: int) -> bool:
    """A column of small plain integers that never decrease: a table of contents' pages."""
    values = [row.cells[index] for row in grid.rows if row.cells[index]]
    if not values or not all(re.fullmatch(r"\d{1,4}", v) for v in values):
        return False
    numbers = [int(v) for v in values]
    return all(a <= b for a, b in pairwise(numbers))


def row_texts(
    grid: TableGrid,
    caption: str | None = None,
    section_path: Sequence[str] = (),
    *,
    max_rows: int = MAX_ROWS_PER_TABLE,
    max_chars: int = MAX_ROW_TEXT_CHARS,
) -> list[str]:
    """One text per data row, headed by the table's context, e.g.::

        Consolidated Statements of Income > Table 4
        Net revenue | FY2019: 1,234 | FY2020: 1,456 (in millions)

    The context line is the section path and the caption (cut to 200 characters); the row line
    is the line item (with its group) and each filled value as ``column label: value``, then the
    unit. Rows without any label are skipped: "| 1,234 |" alone finds nothing. At most
    ``max_rows`` texts of at most ``max_chars`` characters each.
    """
    parts = [" ".join(p.split()) for p in (*section_path, caption or "") if p and p.strip()]
    context_parts: list[str] = []
    for part in parts:
        if not context_parts or context_parts[-1].lower() != part.lower():
            context_parts.append(part)
    context = " > ".join(context_parts)[:_MAX_CONTEXT_CHARS].rstrip()
    unit = grid.unit(caption)
    suffix = f" ({unit})" if unit else ""
    texts: list[str] = []
    for row in grid.rows:
        if len(texts) >= max_rows:
            break
        head = row.line_item
        if not head:
            continue
        budget = max_chars - (len(context) + 1 if context else 0)
        line = head[:budget]
        previous: list[str] = []
        for index in grid.value_columns:
            value = row.cells[index]
            if not value:
                continue
            label = _short_label(grid, index, previous)
            previous = grid.headers[index] if index < len(grid.headers) else []
            piece = f" | {label}: {value}" if label else f" | {value}"
            if len(line) + len(piece) > budget:
                break
            line += piece
        if len(line) + len(suffix) <= budget:
            line += suffix
        texts.append(f"{context}\n{line}" if context else line)
    return texts
