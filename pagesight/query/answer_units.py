"""Answer units: the pieces of retrieved text an extractive answer may quote, and what they hold.

An extractive answer (no LLM) leads with one *unit* that answers: a sentence, a list item, or a
table cell given with its row label and column header. This module cuts a context block's text
into units, each with its character range in that text (so its page and boxes can be found from
the chunk's spans, :mod:`pagesight.query.quotes`), and reads what a question asks for:

* **Units.** Markdown table rows become one unit per value cell (row label + column header +
  cell); lines and inline runs that start with a bullet or an item number are list items; the
  rest is split into sentences (``. ! ?`` before a capital or digit, ``。！？``).
* **Answer types.** A question asks for an ``amount``, a ``percent``, a ``count``, a ``year`` or
  ``date``, or a ``name`` (English and Japanese cues); :func:`values_in` finds the values of that
  type a unit prints, verbatim (``$3.6 billion``, ``35%``, ``1,234億円``, ``令和4年度``).
* **Periods.** Years and quarters a question names (``fiscal 2022``, ``FY2022``, ``Q4``,
  ``fourth quarter``, ``2022年度``, ``令和4年``, ``第3四半期``) in a canonical form, so a unit or
  table header that prints the same period another way agrees with it; a document's own
  statement that fiscal 2022 is the "fiscal year ended January 28, 2023" is honoured.

Nothing here computes or rewrites a value: units are verbatim text; a table cell's shown text
puts the row label and column header in front of the verbatim cell.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

from pagesight.ingestion.tables import spread_spanning_labels

AnswerType = Literal["amount", "percent", "count", "year", "date", "name"]
UnitKind = Literal["sentence", "list_item", "table_cell"]

#: A lead is at most this many words; longer units are quoted as a window around their value.
MAX_LEAD_WORDS = 40


@dataclass(frozen=True)
class Unit:
    """One quotable unit of a block's text.

    ``start``/``end`` are its characters in the block's text (for a table cell: the row label's
    start and the value cell's end); ``text`` is what is shown (whitespace collapsed; a cell
    reads "label — header: value"); ``quote_ranges`` are the verbatim pieces to cite (one for a
    sentence or item; the label cell and the value cell for a table cell); ``context`` is text
    that qualifies the unit without being quoted (the column header and table caption).
    """

    kind: UnitKind
    start: int
    end: int
    text: str
    quote_ranges: tuple[tuple[int, int], ...]
    context: str = ""
    header: str = ""
    position: int = 0
    cells: tuple[str, ...] = field(default=())


# -- splitting ---------------------------------------------------------------------------------

_TABLE_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$", re.MULTILINE)
_RULE_ROW = re.compile(r"^[\s|:\-+=]*$")
_BULLET = r"[•●▪■□◦○◆◇►▶➢➤✓✔・\u2023\u2043\u2219]"
_ITEM_START = re.compile(
    rf"(?:^|(?<=\s)){_BULLET}\s*|^\s*(?:[-*–]\s+|\(?\d{{1,2}}[.)]\s+(?=\D)|\(?[a-z][.)]\s+|[①-⑳]\s*)",
    re.MULTILINE,
)
_SENTENCE_END = re.compile(
    r"(?<=[.!?])[\"')\]」』]*\s+(?=[\"'(\[「]?[A-Z0-9\u3040-\u30ff\u3400-\u9fff$€£¥])"
    r"|(?<=[。！？])[」』）)]*"
)
_ABBREVIATION = re.compile(
    r"(?:\b(?:[A-Z]|Mr|Mrs|Ms|Dr|Inc|Corp|Co|Ltd|No|Fig|vs|U\.S|e\.g|i\.e|etc|approx|Jan|Feb|Mar|Apr"
    r"|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.)$"
)


def split_units(text: str) -> list[Unit]:
    """The units of ``text`` in reading order (module doc); empty pieces dropped."""
    units: list[Unit] = []
    cursor = 0
    table: list[tuple[int, int]] = []  # (start, end) of consecutive table-row lines

    def flush_table() -> None:
        if table:
            units.extend(_table_units(text, table))
            table.clear()

    for match in _TABLE_ROW.finditer(text):
        if match.start() > cursor and text[cursor : match.start()].strip():
            flush_table()
            units.extend(_prose_units(text, cursor, match.start()))
        elif match.start() > cursor and "\n\n" in text[cursor : match.start()]:
            flush_table()
        table.append((match.start(), match.end()))
        cursor = match.end()
    flush_table()
    if cursor < len(text):
        units.extend(_prose_units(text, cursor, len(text)))
    return [
        Unit(
            kind=u.kind,
            start=u.start,
            end=u.end,
            text=u.text,
            quote_ranges=u.quote_ranges,
            context=u.context,
            header=u.header,
            position=i,
            cells=u.cells,
        )
        for i, u in enumerate(units)
    ]


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _prose_units(text: str, start: int, end: int) -> list[Unit]:
    """List items and sentences of ``text[start:end]``."""
    out: list[Unit] = []
    marks = [m for m in _ITEM_START.finditer(text, start, end)]
    pieces: list[tuple[int, int, UnitKind]] = []
    if marks:
        if marks[0].start() > start:
            pieces.append((start, marks[0].start(), "sentence"))
        for i, mark in enumerate(marks):
            stop = marks[i + 1].start() if i + 1 < len(marks) else end
            pieces.append((mark.end(), stop, "list_item"))
    else:
        pieces.append((start, end, "sentence"))
    for a, b, kind in pieces:
        # a blank line ends an item or paragraph too
        for para_start, para_end in _paragraphs(text, a, b):
            first_kind = kind
            for s, e in _sentences(text, para_start, para_end):
                piece = _collapse(text[s:e])
                if len(re.sub(r"\W", "", piece)) < 2:
                    continue
                out.append(
                    Unit(kind=first_kind, start=s, end=e, text=piece, quote_ranges=((s, e),))
                )
                if first_kind == "list_item":
                    first_kind = "list_item"
            kind = "sentence"
    return out


#: A line break ends a unit after these (elements are joined by line breaks; a paragraph that
#: continues on the next page is two elements, and its sentence must stay one unit).
_CLOSED_LINE = re.compile(r"[.!?:;。！？」』)]\s*$")


def _paragraphs(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``text[start:end]`` cut at blank lines, and at line breaks after a closed line or a
    heading-like short line (a line break inside a sentence, at a page break, does not cut)."""
    out = []
    cursor = start
    for match in re.finditer(r"\n[ \t]*(?:\n[ \t]*)*", text[start:end]):
        line_end = start + match.start()
        line = text[text.rfind("\n", 0, line_end) + 1 : line_end]
        blank = match.group(0).count("\n") > 1
        heading = len(line.split()) <= 8 and not re.search(r"[,]\s*$", line)
        next_char = text[start + match.end() : start + match.end() + 1]
        if blank or _CLOSED_LINE.search(line) or (heading and not next_char.islower()):
            out.append(_trimmed(text, cursor, line_end))
            cursor = start + match.end()
    out.append(_trimmed(text, cursor, end))
    return [(a, b) for a, b in out if b > a]


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    out = []
    cursor = start
    for match in _SENTENCE_END.finditer(text, start, end):
        cut = match.start()
        if _ABBREVIATION.search(text[max(cursor, cut - 8) : cut]):
            continue
        piece = _trimmed(text, cursor, match.end() if text[cut : match.end()].strip() else cut)
        if piece[1] > piece[0]:
            out.append(piece)
        cursor = match.end()
    last = _trimmed(text, cursor, end)
    if last[1] > last[0]:
        out.append(last)
    return out


def _cells(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The (start, end) of each cell of the markdown row ``text[start:end]``, trimmed."""
    line = text[start:end]
    first = line.index("|")
    last = line.rindex("|")
    cells = []
    base = cursor = start + first + 1
    for match in re.finditer(r"\|", text[base : start + last + 1]):
        cells.append(_trimmed(text, cursor, base + match.start()))
        cursor = base + match.end()
    return cells


def _table_units(text: str, rows: list[tuple[int, int]]) -> list[Unit]:
    """One unit per non-empty value cell of a markdown table: label cell + header + cell.

    The header is the first row; a rule row after it is skipped. A row whose first cell is empty
    carries no label (a units line such as "(in millions)") and is skipped as a header row too.
    """
    grid = [(r, _cells(text, *r)) for r in rows if not _RULE_ROW.match(text[r[0] : r[1]])]
    if len(grid) < 2:
        return []
    # Header rows: the first, and each following row with an empty label cell or no digits
    # (a multi-line header: "Three months ended December 31," over "2022 | 2021"). A head cell
    # spans the empty cells nearest to it, as a table's grid reads it (spread_spanning_labels:
    # "13 Weeks Ended" set over the percent column names its amount column too).
    width = max(len(cells) for _, cells in grid)
    header = [""] * width
    body_from = 0
    while body_from < len(grid) - 1:
        cells = grid[body_from][1]
        texts = [_collapse(text[a:b]) for a, b in cells]
        if body_from > 0 and texts and texts[0] and any(re.search(r"\d", t) for t in texts[1:]):
            break
        padded = texts + [""] * (width - len(texts))
        spread = spread_spanning_labels(padded, 1, join_neighbours=False)
        for i in range(1, width):
            header[i] = " ".join(p for p in (header[i], spread[i]) if p)
        body_from += 1
    units: list[Unit] = []
    for _row, cells in grid[body_from:]:
        if not cells:
            continue
        label_range = cells[0]
        label = _collapse(text[label_range[0] : label_range[1]])
        if not label:
            continue
        values = [(i, c) for i, c in enumerate(cells[1:], start=1) if c[1] > c[0]]
        for column, (a, b) in values:
            value = _collapse(text[a:b])
            if not re.search(r"\w", value):
                continue
            head = header[column] if column < len(header) else ""
            shown = f"{label} — {head}: {value}" if head else f"{label}: {value}"
            units.append(
                Unit(
                    kind="table_cell",
                    start=label_range[0],
                    end=b,
                    text=shown,
                    quote_ranges=((label_range[0], label_range[1]), (a, b)),
                    context=head,
                    header=head,
                    cells=(label, value),
                )
            )
    return units


# -- answer types and values -------------------------------------------------------------------

_I = re.IGNORECASE
_TYPE_CUES: list[tuple[AnswerType, re.Pattern[str]]] = [
    (
        "percent",
        re.compile(
            r"\b(?:percent(?:age)?|per cent|proportion|share of|what share|margin|rate of"
            r"|growth rate)\b|%|割合|率|パーセント|％",
            _I,
        ),
    ),
    (
        "count",
        re.compile(
            r"\bhow many\b|\bnumber of\b|\bcount of\b"
            r"|何人|何件|何社|何か国|何回|いくつ|何個|人数|件数",
            _I,
        ),
    ),
    ("year", re.compile(r"\b(?:what|which|in what)\s+year\b|\bwhen\b|何年|いつ", _I)),
    ("date", re.compile(r"\b(?:what|which)\s+(?:date|day|month)\b|何月|何日", _I)),
    (
        "amount",
        re.compile(
            r"\bhow much\b|\b(?:revenues?|sales|income|earnings|profit|loss|cost|costs|expenses?"
            r"|price|amount|dividends?|capex|capital expenditures?|cash|debt|assets|liabilit\w+"
            r"|equity|ebitda\w*|eps|budget|spending|value|worth|paid|pay)\b"
            r"|\$|€|£|¥|金額|いくら|予算|費用|売上|利益|円",
            _I,
        ),
    ),
    (
        "name",
        re.compile(
            r"^\s*(?:who|whom|whose)\b|\bwhat is the name\b|\bwhich (?:company|companies|country"
            r"|countries|city|person|people|organi[sz]ation|brand|product|firm|state|team|model)\b"
            r"|\bname (?:of|the)\b|誰|どこ|名前|名称",
            _I,
        ),
    ),
]

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_SCALE = r"(?:\s?(?:billion|million|thousand|trillion|bn|mn|m|k|b)\b)?"
_VALUE_PATTERNS: dict[AnswerType, re.Pattern[str]] = {
    "percent": re.compile(
        rf"[-+−]?(?:{_NUM})\s?(?:%|％|percent\b|per cent\b|パーセント|percentage points?\b)", _I
    ),
    "amount": re.compile(
        rf"\(?[-−]?(?:US)?[$€£¥]\s?\(?(?:{_NUM}){_SCALE}\)?"
        rf"|(?<![A-Za-z0-9_.])\(?[-−]?(?:{_NUM})\)?\s?(?:billion|million|thousand|trillion)\b"
        rf"(?:\s(?:dollars|euros|yen|USD|EUR|JPY))?"
        rf"|(?:{_NUM})\s?(?:兆|億|万|千)?円"
        rf"|(?:{_NUM})\s?(?:USD|EUR|JPY|dollars|euros|yen)\b",
        _I,
    ),
    "count": re.compile(
        rf"(?<![A-Za-z0-9_.$€£¥])(?:{_NUM})(?:\s?(?:万|千|億)?(?:人|件|社|か国|カ国|ヶ国|回|個|台|校|名|種類))?"
        r"(?![\d.,]*\s?(?:%|％|percent))"
        r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty"
        r"|hundred)\b",
        _I,
    ),
    "year": re.compile(
        r"(?<!\d)(?:19|20)\d{2}(?!\d)(?:年度?)?|(?:令和|平成|昭和)\s?(?:\d{1,2}|元)\s?年度?", _I
    ),
    "date": re.compile(
        r"\b(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
        r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?\s+\d{1,2}(?:,\s*\d{4})?"
        r"|\b\d{1,2}\s+(?:January|February|March|April|May|June|July|August|September|October"
        r"|November|December)(?:\s+\d{4})?"
        r"|\d{4}[/-]\d{1,2}[/-]\d{1,2}|(?:\d{4}年)?\d{1,2}月\d{1,2}日"
        r"|(?:令和|平成)\s?(?:\d{1,2}|元)\s?年\s?\d{1,2}\s?月(?:\s?\d{1,2}\s?日)?",
        _I,
    ),
    "name": re.compile(
        r"(?:[A-Z][\w&'.-]*(?:\s+(?:of|and|&|de|the|for)\s+|\s+)?){1,5}[A-Z][\w&'.-]*"
        r"|[A-Z][a-z]+(?:\s[A-Z][a-z]+)*"
    ),
}


def answer_type(question: str) -> AnswerType | None:
    """What ``question`` asks for, by its first matching cue (percent before amount: "what
    percentage of revenue"), or None (an open question: any unit may answer)."""
    text = unicodedata.normalize("NFKC", question)
    for kind, cue in _TYPE_CUES:
        if cue.search(text):
            return kind
    return None


@dataclass(frozen=True)
class Value:
    text: str
    start: int  # in the searched string
    end: int


def values_in(text: str, kind: AnswerType, question: str = "") -> list[Value]:
    """The values of type ``kind`` printed in ``text``, verbatim, in order; for counts and
    names, those the question does not itself contain (a question's own "2022" or company name
    is not its answer)."""
    pattern = _VALUE_PATTERNS[kind]
    asked = unicodedata.normalize("NFKC", question).casefold()
    out = []
    for match in pattern.finditer(text):
        value = match.group(0).strip(" ()")
        if not value or not re.search(r"\w", value):
            continue
        if kind in ("count", "name", "year") and value.casefold() in asked:
            continue
        if kind == "name" and value.casefold() in _NAME_STOP:
            continue
        start = match.start() + match.group(0).index(value)
        out.append(Value(text=value, start=start, end=start + len(value)))
    return out


_NAME_STOP_WORDS = (
    "the a an in on at for of and or but this that these those it its as by with from to"
    " is are was were be table figure page source note notes total"
)
_NAME_STOP = frozenset(_NAME_STOP_WORDS.split())


# -- periods -----------------------------------------------------------------------------------

_ERA_BASE = {"令和": 2018, "平成": 1988, "昭和": 1925}
_QUARTER_WORDS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "1st": 1,
    "2nd": 2,
    "3rd": 3,
    "4th": 4,
}
_YEAR = re.compile(r"(?<![\d.,])(?:fy\s?'?|fiscal\s+(?:year\s+)?)?((?:19|20)\d{2})(?!\d|,\d)", _I)
_SHORT_FY = re.compile(r"\bfy\s?'?(\d{2})\b", _I)
_ERA_YEAR = re.compile(r"(令和|平成|昭和)\s?(\d{1,2}|元)\s?年")
_QUARTER = re.compile(
    r"\bq([1-4])\b|\b([1-4])q\b|\b(first|second|third|fourth|1st|2nd|3rd|4th)\s+quarter\b"
    r"|第\s?([1-4１-４一二三四])\s?四半期",
    _I,
)
_FISCAL_EQUIV = re.compile(
    r"fiscal\s+(?:year\s+)?((?:19|20)\d{2})\b[^.;]{0,60}?\bended\s+\w+\s+\d{1,2},\s+((?:19|20)\d{2})"
    r"|fiscal\s+year\s+ended\s+\w+\s+\d{1,2},\s+((?:19|20)\d{2})\s*\(\s*[\"“]?fiscal\s+((?:19|20)\d{2})",
    _I,
)
_KANJI_QUARTER = {"一": 1, "二": 2, "三": 3, "四": 4}


@dataclass(frozen=True)
class Periods:
    years: frozenset[int] = frozenset()
    quarters: frozenset[int] = frozenset()
    #: the years named as fiscal years ("fiscal 2022", "FY2022", "2022年度")
    fiscal: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.years or self.quarters)


def periods_in(text: str) -> Periods:
    """The years and quarters ``text`` names, canonical (``FY2022`` / ``fiscal 2022`` /
    ``2022年度`` -> 2022; ``令和4年`` -> 2022; ``Q4`` / ``fourth quarter`` / ``第4四半期`` -> 4)."""
    text = unicodedata.normalize("NFKC", text)
    years = {int(m.group(1)) for m in _YEAR.finditer(text)}
    fiscal = {int(m.group(1)) for m in _YEAR.finditer(text) if not m.group(0)[0].isdigit()}
    fiscal |= {2000 + int(m.group(1)) for m in _SHORT_FY.finditer(text)}
    fiscal |= {int(y) for y in re.findall(r"((?:19|20)\d{2})\s?年度", text)}
    years |= fiscal
    for era, number in _ERA_YEAR.findall(text):
        years.add(_ERA_BASE[era] + (1 if number == "元" else int(number)))
    quarters = set()
    for m in _QUARTER.finditer(text):
        raw = next(g for g in m.groups() if g)
        quarters.add(_QUARTER_WORDS.get(raw.lower()) or _KANJI_QUARTER.get(raw) or int(raw))
    return Periods(frozenset(years), frozenset(quarters), frozenset(fiscal))


def fiscal_equivalents(text: str) -> dict[int, int]:
    """Fiscal years a document equates with a calendar year-end ("fiscal 2022 ... ended January
    28, 2023" -> {2022: 2023}); both directions are then the same period."""
    out: dict[int, int] = {}
    for m in _FISCAL_EQUIV.finditer(text):
        if m.group(1):
            out[int(m.group(1))] = int(m.group(2))
        else:
            out[int(m.group(4))] = int(m.group(3))
    return out


def period_agreement(asked: Periods, found: Periods, equivalents: dict[int, int]) -> float:
    """How well the periods ``found`` near a unit agree with those ``asked``: 1 all named years
    and quarters present (directly or by the document's fiscal equivalence), 0 none, a share
    otherwise; 1 when the question names no period."""
    wanted = 0
    met = 0
    if asked.years:
        wanted += 1
        met += any(_year_agrees(year, found, equivalents) for year in asked.years)
    if asked.quarters:
        wanted += 1
        met += bool(asked.quarters & found.quarters)
    return met / wanted if wanted else 1.0


def _year_agrees(year: int, found: Periods, equivalents: dict[int, int]) -> bool:
    """Whether ``found`` names ``year``. Where the document equates fiscal ``year`` with a
    later calendar year-end (a retailer's fiscal 2022 ends January 28, 2023), a bare date year
    counts only as that calendar year: "January 29, 2022" is fiscal 2021 there."""
    if year in found.fiscal:
        return True
    calendar = equivalents.get(year)
    if calendar is not None and calendar != year:
        return calendar in found.years
    return year in found.years
