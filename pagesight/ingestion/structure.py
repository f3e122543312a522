"""A parsed document's own structure: printed page labels, sections, numbered figures and tables.

People name places in a document the way the document prints them: "page 17", "Figure 3",
"Note 7", "Chapter III". None of those is the page index. A 10-K's "page 17" is often its 19th
sheet (cover and contents are unnumbered), a journal article's first page is printed 484, a
report's front matter runs i-xii before page 1. This module captures what resolving such a
reference needs, once at ingest (:func:`build_structure`), so the query side can turn "page 17"
into the right sheet without guessing:

- **Page labels.** The PDF's /PageLabels when it has them (``label_source='pdf'``). Else the
  *folio* printed in the running head or footer (:func:`detect_folios`): a number alone on a
  margin line, or at either end of one ("Page 17", "17 | Annual Report", "- 17 -", "17 of 212",
  "iv", "A-3"). One number in a footer proves nothing (years, amounts, footnote markers and
  chart axes look the same), so a folio is only believed as part of a *run*: consecutive pages
  whose printed number minus page index is one constant offset, read on several pages. Pages
  inside a run whose folio could not be read (a chapter opener, an OCR miss) get the run's
  number when the readings on both sides agree; pages in no supported run get no label, since a
  wrong label sends a reference to the wrong sheet, while a missing one only leaves the page
  index to resolvers.
- **Sections.** The PDF outline (bookmarks) when it has two entries or more, else the heading
  elements; each with the pages it spans and its printed number ("4.2", "III", "Note 7").
- **Items.** Numbered figures, tables and equations from their captions (:func:`caption_number`)
  with their page and box, the first occurrence of each number.
- **Domains.** Which domain packs fit the document, read from its pages' content
  (:mod:`pagesight.ingestion.domains`: the ``finance`` pack when it prints primary financial
  statements), with the pages each recognised.

Everything here is pure and cheap (regular expressions over margin lines and captions: a
500-page document with 2,000 elements in about 50 ms) and never raises on odd input, because a
document whose structure cannot be read is still worth indexing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pagesight.core.numbering import kanji_value_lenient, roman_value, to_roman
from pagesight.core.types import (
    DocumentStructure,
    Element,
    ElementKind,
    OutlineEntry,
    Page,
    ParsedDocument,
    StructureItem,
    StructurePage,
    StructureSection,
)
from pagesight.ingestion.domains import detect_domains, element_page_texts

logger = logging.getLogger(__name__)

#: Bump when the structure or the payload rules change: older documents are re-parsed on
#: re-ingest (``Document.structure_version``).
#: 2: chunk payloads carry ``spans`` (where each piece of the text is printed: page and line
#: boxes, from the parsers' ``Element.lines``), so citations land on the exact page and lines.
STRUCTURE_VERSION = 2

MAX_SECTIONS = 2000
MAX_TITLE_CHARS = 200
MAX_CAPTION_CHARS = 300

ItemKind = Literal["figure", "table", "equation"]

# ---------------------------------------------------------------------------------------------
# Folios: printed page numbers read in the running heads and footers


#: Pages a run may go without a readable folio between two readings that agree.
MAX_FOLIO_GAP = 12
#: Margin lines longer than this are running text (a footnote's first line), not a folio line,
#: unless the folio is the whole line or follows "Page".
_SHORT_LINE = 60
#: A year-like number (1900-2100) is not a folio when it would put the page this far from its
#: index: a running head's "2019" on page 7 is a date, not page 2019.
_YEAR_OFFSET = 1000
_ROMAN_FOLIO_MAX = 100

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
#: Dates and times, removed from a margin line before numbers are read in it.
_DATE = re.compile(
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}(?:,?\s+\d{{2,4}})?\b"
    rf"|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b{_MONTH},?\s+\d{{4}}\b"
    r"|\b\d{1,4}[/.\-]\d{1,2}[/.\-]\d{1,4}\b"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?\s*(?:[ap]\.?m\.?)?"
    r"|\d{4}年\s*\d{1,2}月(?:\s*\d{1,2}日)?",
    re.IGNORECASE,
)
_DECORATION = " \t-–—|•·*_~=‒―"
_PAGE_WORD = r"(?:page|pages|pg\.?|p\.|seite|página|pagina|ページ|頁)"
_PAGE_NUMERAL = (
    r"(?P<arabic>[1-9]\d{0,4})"
    r"|(?P<roman>[ivxlc]{1,8})"
    r"|(?P<prefix>[A-Z]{1,2}\s?[-–.]\s?)(?P<pnum>[1-9]\d{0,2})"
)
_TOTAL = r"(?:\s*(?:of|/|de|von|sur|di)\s*(?P<total>\d{1,5}))?"
#: The whole line is the folio: "17", "- 17 -", "iv", "A-3", "Page 17", "17 of 212", "3ページ".
_WHOLE_LINE = re.compile(
    rf"(?:{_PAGE_WORD}\s*)?(?:{_PAGE_NUMERAL}){_TOTAL}(?:\s*(?:ページ|頁))?", re.IGNORECASE
)
#: "Page 17" anywhere in a line: "Annual Report · Page 17 of 212".
_PAGE_WORD_NUMBER = re.compile(
    rf"\b{_PAGE_WORD}\s*(?:{_PAGE_NUMERAL}){_TOTAL}(?![\w.,])", re.IGNORECASE
)
#: A line that opens with the folio: "17 | Annual Report", "17 PEW RESEARCH CENTER".
_LEADING = re.compile(r"(?P<arabic>[1-9]\d{0,4})(?:\s*[|•·–—]\s*|\s+)(?P<next>\S)")
#: A line that ends with the folio: "Annual Report | 17", "PEW RESEARCH CENTER 17".
_TRAILING = re.compile(r"(?:^|(?<=[\s|•·–—]))(?P<arabic>[1-9]\d{0,4})$")
#: Words after which a number names something else: "Exhibit 4", "Note 7", "Item 9", "$ 17".
# fmt: off
_NOT_FOLIO_BEFORE = frozenset({
    "exhibit", "exhibits", "note", "notes", "item", "items", "table", "tables", "figure", "fig",
    "fig.", "chart", "chapter", "part", "section", "sec.", "schedule", "appendix", "annex",
    "step", "no", "no.", "nos", "number", "#", "rule", "form", "article", "art.", "volume", "vol",
    "vol.", "issue", "version", "v", "v.", "level", "phase", "stage", "tier", "grade", "class",
    "series", "unit", "room", "suite", "floor", "box", "route", "q", "fy", "h", "quarter", "year",
    "years", "week", "day", "days", "plan", "act", "§", "$", "€", "£", "¥", "rs", "rs.", "usd",
    "eur", "inr", "gbp", "jpy", "total",
})
#: Words after which a leading number is an amount or a quantity: "17 million", "3 years".
_NOT_FOLIO_AFTER = frozenset({
    "million", "millions", "billion", "billions", "thousand", "thousands", "percent", "per", "%",
    "x", "years", "months", "weeks", "days", "hours", "minutes", "times",
})
# fmt: on


@dataclass(frozen=True)
class Folio:
    """One number read in a page's margin that might be its folio."""

    style: Literal["arabic", "roman", "prefixed"]
    prefix: str  # "A-" for "A-3"; "upper"/"lower" for roman; "" for arabic
    value: int
    text: str  # as printed, decorations removed: "17", "iv", "A-3"

    def label(self, value: int) -> str:
        """The label this folio's style prints for ``value`` (an interpolated page)."""
        if self.style == "roman":
            numeral = to_roman(value)
            return numeral.upper() if self.prefix == "upper" else numeral
        if self.style == "prefixed":
            return f"{self.prefix}{value}"
        return str(value)


def _token_folio(match: re.Match[str]) -> Folio | None:
    groups = match.groupdict()
    total = groups.get("total")
    if groups.get("arabic"):
        value = int(groups["arabic"])
        if total is not None and int(total) < value:
            return None  # "17 of 12": not a page count
        return Folio("arabic", "", value, str(value))
    if groups.get("roman"):
        text = groups["roman"]
        roman = roman_value(text)
        if roman is None or roman > _ROMAN_FOLIO_MAX or not (text.islower() or text.isupper()):
            return None
        return Folio("roman", "upper" if text.isupper() else "lower", roman, text)
    if groups.get("prefix") and groups.get("pnum"):
        prefix = re.sub(r"\s+", "", groups["prefix"])
        if not prefix[:-1].isupper():
            return None  # "a-3", "p-3": a word fragment, not an appendix page
        value = int(groups["pnum"])
        return Folio("prefixed", prefix, value, f"{prefix}{value}")
    return None


def margin_folios(line: str) -> list[Folio]:
    """The numbers in one margin line that could be its page's folio (most likely first).

    Dates, times, amounts ("1,234", "$17", "12.5%"), list numbers ("15. Power") and numbers that
    name something else ("Exhibit 4", "Note 7", "Item 9") are not read.
    """
    text = " ".join(unicodedata.normalize("NFKC", line).split())
    text = _DATE.sub(" ", text)
    core = " ".join(text.split()).strip(_DECORATION)
    if not core:
        return []
    whole = _WHOLE_LINE.fullmatch(core)
    if whole:
        folio = _token_folio(whole)
        return [folio] if folio else []
    found: list[Folio] = []
    for match in _PAGE_WORD_NUMBER.finditer(core):
        folio = _token_folio(match)
        if folio:
            found.append(folio)
    if len(core) > _SHORT_LINE:
        return found
    leading = _LEADING.match(core)
    if leading:
        rest = core[leading.start("next") :]
        next_word = rest.split()[0].lower() if rest.split() else ""
        next_char = leading.group("next")
        if (
            not (next_char.isdigit() or next_char.islower())
            and next_char not in ".,:;%)/'’"
            and next_word not in _NOT_FOLIO_AFTER
        ):
            found.append(Folio("arabic", "", int(leading.group("arabic")), leading.group("arabic")))
    trailing = _TRAILING.search(core)
    if trailing:
        before = core[: trailing.start()].rstrip(_DECORATION).split()
        previous = before[-1].lower() if before else ""
        if previous not in _NOT_FOLIO_BEFORE and not re.search(r"[\d.,$€£¥]$", previous):
            value = int(trailing.group("arabic"))
            found.append(Folio("arabic", "", value, str(value)))
    return found


_RunKey = tuple[str, str, int]  # (style, prefix, offset = printed value - page index)


@dataclass(frozen=True)
class FolioRun:
    """Consecutive pages printed with one numbering: page ``n`` is printed ``n + offset``."""

    first: int
    last: int
    offset: int
    style: Folio  # the run's first reading: its style, roman case or prefix
    reads: dict[int, str]  # the pages whose folio was read, and as what

    def label(self, page_number: int) -> str:
        return self.reads.get(page_number) or self.style.label(page_number + self.offset)


def _page_candidates(pages: Sequence[Page]) -> dict[int, dict[_RunKey, Folio]]:
    """Per unlabelled page, its folio candidates keyed by (style, prefix, value - page)."""
    candidates: dict[int, dict[_RunKey, Folio]] = {}
    for page in pages:
        if page.label:
            continue
        keyed: dict[_RunKey, Folio] = {}
        for line in page.margin_text:
            for folio in margin_folios(line):
                offset = folio.value - page.page_number
                year_like = folio.style == "arabic" and 1900 <= folio.value <= 2100
                if year_like and offset >= _YEAR_OFFSET:
                    continue  # a year, not page 2019
                keyed.setdefault((folio.style, folio.prefix, offset), folio)
        if keyed:
            candidates[page.page_number] = keyed
    return candidates


def _split(pages: list[int], spans: list[tuple[int, int]]) -> list[list[int]]:
    """``pages`` cut where two readings are too far apart or a claimed span lies between."""
    pieces: list[list[int]] = []
    for p in pages:
        if pieces:
            last = pieces[-1][-1]
            blocked = any(last < start < p or last < end < p for start, end in spans)
            if p - last <= MAX_FOLIO_GAP and not blocked:
                pieces[-1].append(p)
                continue
        pieces.append([p])
    return pieces


def _preference(key: _RunKey, pages: list[int]) -> tuple[int, int, int, int]:
    style_rank = {"arabic": 0, "prefixed": 1, "roman": 2}.get(key[0], 3)
    return (-len(pages), style_rank, abs(key[2]), pages[0])


def folio_runs(pages: Sequence[Page]) -> list[FolioRun]:
    """The supported folio runs of ``pages`` (those without a /PageLabels label), in page order.

    A run is one (style, offset) read on at least ``max(2, min(3, 30% of the pages with any
    candidate))`` pages, no two consecutive readings more than :data:`MAX_FOLIO_GAP` pages apart.
    Runs are claimed best supported first; a weaker run keeps only its readings outside the
    pages already claimed (and not across them), and must still be supported by those.
    """
    candidates = _page_candidates(pages)
    if not candidates:
        return []
    min_support = max(2, min(3, math.ceil(0.3 * len(candidates))))
    support: dict[_RunKey, list[int]] = defaultdict(list)
    for page_number in sorted(candidates):
        for key in candidates[page_number]:
            support[key].append(page_number)
    pending = [
        (key, piece)
        for key, supported in support.items()
        if len(supported) >= min_support
        for piece in _split(supported, [])
        if len(piece) >= min_support
    ]
    claimed: list[tuple[_RunKey, list[int]]] = []
    spans: list[tuple[int, int]] = []
    while pending:
        pending.sort(key=lambda run: _preference(*run))
        key, run_pages = pending.pop(0)
        free = [p for p in run_pages if not any(s <= p <= e for s, e in spans)]
        pieces = _split(free, spans)
        if pieces == [run_pages]:
            claimed.append((key, run_pages))
            spans.append((run_pages[0], run_pages[-1]))
        else:
            pending.extend((key, piece) for piece in pieces if len(piece) >= min_support)
    runs = [
        FolioRun(
            first=run_pages[0],
            last=run_pages[-1],
            offset=key[2],
            style=candidates[run_pages[0]][key],
            reads={p: candidates[p][key].text for p in run_pages},
        )
        for key, run_pages in claimed
    ]
    return sorted(runs, key=lambda run: run.first)


def _looks_like_image_deck(pages: Sequence[Page]) -> bool:
    """Slides saved as images: every page landscape and OCRed. Their folio, if any, is the
    slide number, which is the page index; OCR noise is the only thing left to mislabel."""
    return len(pages) > 1 and all(p.width > p.height and not p.has_text_layer for p in pages)


def detect_folios(pages: list[Page]) -> dict[int, str]:
    """Printed page numbers read in the margins: ``page_number -> label`` for the pages that
    have no /PageLabels label and lie in a supported folio run (see :func:`folio_runs`).

    A page inside a run whose folio was not read gets the run's number, since the readings on
    both sides of it agree; so does one whose only numbers disagree with the run (a footnote
    marker, a chart axis).
    """
    try:
        unique = {p.page_number: p for p in pages}
        ordered = [unique[n] for n in sorted(unique)]
        if _looks_like_image_deck(ordered):
            return {}
        unlabelled = {p.page_number for p in ordered if not p.label}
        labels: dict[int, str] = {}
        for run in folio_runs(ordered):
            for n in range(run.first, run.last + 1):
                if n in unlabelled and n + run.offset >= 1:
                    labels[n] = run.label(n)
        return labels
    except Exception:  # a structure bug must not fail ingestion
        logger.exception("folio detection failed")
        return {}


# ---------------------------------------------------------------------------------------------
# Captions: "Figure 3", "Table 2.1", "図3"


_CAPTION_WORDS: dict[str, ItemKind] = {
    "figure": "figure",
    "fig": "figure",
    "exhibit": "figure",
    "chart": "figure",
    "graph": "figure",
    "diagram": "figure",
    "plate": "figure",
    "table": "table",
    "tab": "table",
    "equation": "equation",
    "eqn": "equation",
    "eq": "equation",
    "図": "figure",
    "图": "figure",
    "グラフ": "figure",
    "表": "table",
    "式": "equation",
    "数式": "equation",
}
_NUM = r"[A-Z]?\d{1,4}(?:\s?[.\-–]\s?\d{1,4})*[a-z]?"
_CAPTION_EN = re.compile(
    r"\s*(?P<word>figure|fig|exhibit|chart|graph|diagram|plate|table|tab|equation|eqn|eq)\.?\s*"
    rf"(?P<num>\(\s*{_NUM}\s*\)|{_NUM}|[IVXLC]{{1,7}}(?![a-z]))(?P<rest>.*)",
    re.IGNORECASE | re.DOTALL,
)
_CAPTION_JA = re.compile(
    r"\s*(?:第\s*(?P<num1>\d{1,4})\s*(?P<word1>図|表)"
    r"|(?P<word>図|图|表|グラフ|数式|式)\s*(?P<num>\(\s*\d{1,4}(?:[.\-]\d{1,4})*\s*\)"
    r"|\d{1,4}(?:[.\-]\d{1,4})*[a-z]?))(?P<rest>.*)",
    re.DOTALL,
)


def _is_hiragana(char: str) -> bool:
    return "\u3040" <= char <= "\u309f"


def caption_number(text: str) -> tuple[ItemKind, str] | None:
    """``(kind, number)`` of a caption: ``"Figure 3: ..."`` -> ``("figure", "3")``,
    ``"Fig. 4b"`` -> ``("figure", "4b")``, ``"TABLE II"`` -> ``("table", "II")``,
    ``"表２"`` -> ``("table", "2")``, ``"Eq. (5)"`` -> ``("equation", "5")``; ``"Exhibit 4"``,
    charts, graphs and diagrams count as figures.

    None for text that only mentions one ("Table 3 shows ...", "表2に示す"): after the number
    a caption has punctuation, its end, or a capitalised title, never a lower-case word.
    """
    if not text:
        return None
    head = unicodedata.normalize("NFKC", text[:200])
    en = _CAPTION_EN.match(head)
    if en:
        return _english_caption(en)
    ja = _CAPTION_JA.match(head)
    if ja:
        return _japanese_caption(ja)
    return None


def _english_caption(en: re.Match[str]) -> tuple[ItemKind, str] | None:
    """:func:`caption_number` of a ``_CAPTION_EN`` match."""
    number = re.sub(r"\s+", "", en.group("num").strip("() \t")).replace("–", "-")
    if re.fullmatch(r"[IVXLCivxlc]+", number) and (
        not number.isupper() or roman_value(number) is None
    ):
        return None  # "Table in", "Figure ii": words, not numerals
    rest = en.group("rest")
    stripped = rest.lstrip()
    if rest and not rest[0].isspace() and (rest[0].isalnum() or rest[0] == "_"):
        return None  # "Table 3rd", "Fig 2x2"
    if stripped and stripped[0].islower():
        return None  # running text: "Table 3 shows"
    return _CAPTION_WORDS[en.group("word").lower()], number


def _japanese_caption(ja: re.Match[str]) -> tuple[ItemKind, str] | None:
    """:func:`caption_number` of a ``_CAPTION_JA`` match."""
    if ja.group("num1"):
        word, number = ja.group("word1"), ja.group("num1")
    else:
        word, number = ja.group("word"), ja.group("num").strip("() ")
    rest = ja.group("rest")
    if rest and _is_hiragana(rest[0]):
        return None  # running text: "表2に示すように"
    if rest and rest[0].isascii() and rest[0].isalnum():
        return None
    return _CAPTION_WORDS[word], number.replace(" ", "")


#: An equation's own number at its end: "E = mc^2 (5)", "\tag{5}".
_EQUATION_TAG = re.compile(
    r"(?:\\tag\{\s*(?P<tag>[\w.\-]{1,8})\s*\}|\s\((?P<num>\d{1,3}(?:\.\d{1,3})?[a-z]?)\))"
    r"\s*\$*\s*$"
)
#: A contents line: "Figure 3: Revenue ........ 12".
_LEADERS = re.compile(r"(?:\.\s?){4,}|…{2,}|\s\.{3,}\s*\d+\s*$")


def _first_line(text: str) -> str:
    return " ".join(text.split())[:MAX_CAPTION_CHARS]


def _item_of(element: Element) -> tuple[ItemKind, str, str | None] | None:
    """``(kind, number, caption)`` of a numbered item ``element`` is or carries, else None."""
    if element.kind in (ElementKind.TABLE, ElementKind.FIGURE, ElementKind.EQUATION):
        first_line = element.text.strip().split("\n", 1)[0] if element.text else None
        for text in (element.caption, first_line):
            found = caption_number(text) if text else None
            if found and text:
                return found[0], found[1], text
        if element.kind == ElementKind.EQUATION and element.text:
            tag = _EQUATION_TAG.search(element.text)
            if tag:
                return "equation", tag.group("tag") or tag.group("num"), element.caption
        return None
    if element.kind in (ElementKind.CAPTION, ElementKind.TEXT, ElementKind.TITLE):
        head = element.text[:MAX_CAPTION_CHARS]
        found = None if _LEADERS.search(head) else caption_number(head)
        if found:
            return found[0], found[1], element.text
    return None


def _items(elements: Iterable[Element]) -> list[StructureItem]:
    """Numbered figures, tables and equations, the first occurrence of each (kind, number).

    A figure/table/equation element's own caption wins over a caption-like text element with the
    same number (a list of figures in the contents, a caption the layout left unattached)."""
    owned: dict[tuple[str, str], tuple[int, int, StructureItem]] = {}
    loose: dict[tuple[str, str], tuple[int, int, StructureItem]] = {}
    for element in sorted(elements, key=lambda e: (e.page_number, e.seq)):
        found = _item_of(element)
        if found is None:
            continue
        kind, number, caption = found
        atomic = element.kind in (ElementKind.TABLE, ElementKind.FIGURE, ElementKind.EQUATION)
        target = owned if atomic else loose
        target.setdefault(
            (kind, number),
            (
                element.page_number,
                element.seq,
                StructureItem(
                    kind=kind,
                    number=number,
                    caption=_first_line(caption) if caption else None,
                    page_number=element.page_number,
                    bbox=element.bbox,
                    element_id=element.element_id,
                ),
            ),
        )
    chosen = {**loose, **owned}
    return [item for _, _, item in sorted(chosen.values(), key=lambda t: (t[0], t[1]))]


# ---------------------------------------------------------------------------------------------
# Sections


#: A heading text on more pages than this is a running head, not a new section each time.
_RUNNING_HEAD_PAGES = 2

_NOTES_CONTEXT = re.compile(
    r"notes?\s+to\s+(?:the\s+)?(?:\w+\s+){0,2}financial\s+statements|財務諸表.{0,4}注記|注記事項",
    re.IGNORECASE,
)
_NOTE = re.compile(r"\s*note\s+(?P<n>\d{1,3}[A-Z]?)\b(?!\.\d)", re.IGNORECASE)
_NOTE_IN_NOTES = re.compile(r"\s*(?P<n>\d{1,3}[A-Z]?)\s*(?:[.:)\-–—]\s*|\s+)(?=[^\W\d_])")
_NAMED = re.compile(
    r"\s*(?P<word>chapter|part|section|appendix|annex|item)\s+"
    r"(?P<n>\d{1,3}(?:\.\d{1,3})*[A-Z]?|[IVXLC]{1,7}|[A-Z])(?![\w])",
    re.IGNORECASE,
)
_JA_CHAPTER = re.compile(r"\s*第\s*(?P<n>[\d〇一二三四五六七八九十百]{1,6})\s*[章節部編条]")
_LEADING_NUMBER = re.compile(r"\s*(?P<n>\d{1,3}(?:\.\d{1,3}){0,5})\.?\s+(?=[^\d\s])")
_LETTER_NUMBER = re.compile(r"\s*(?P<n>[A-Z](?:\.\d{1,3})+)\.?\s+(?=\S)")
_ROMAN_HEADING = re.compile(r"\s*(?P<n>[IVXLC]{1,7})\.\s+(?=\S)")


def section_number(title: str, context: Sequence[str] = ()) -> str | None:
    """The number a heading prints: ``"4.2 Methods"`` -> ``'4.2'``, ``"Chapter 3"`` -> ``'3'``,
    ``"CHAPTER III"`` -> ``'III'``, ``"第3章"`` -> ``'3'``, ``"Note 7 — Income taxes"`` ->
    ``'Note 7'``; ``"7. Income Taxes"`` is ``'Note 7'`` when ``context`` (the titles above it,
    the page's running heads) says it is in the notes to the financial statements."""
    text = unicodedata.normalize("NFKC", title)
    note = _NOTE.match(text)
    if note:
        return f"Note {note.group('n').upper()}"
    if any(_NOTES_CONTEXT.search(c) for c in context) and not _NOTES_CONTEXT.search(text):
        in_notes = _NOTE_IN_NOTES.match(text)
        if in_notes:
            return f"Note {in_notes.group('n').upper()}"
    named = _NAMED.match(text)
    if named:
        number = named.group("n")
        if re.fullmatch(r"[IVXLCivxlc]+", number) and roman_value(number) is None:
            return None
        return number.upper() if named.group("word").lower() == "item" else number
    ja = _JA_CHAPTER.match(text)
    if ja:
        return str(kanji_value_lenient(ja.group("n")))
    for pattern in (_LEADING_NUMBER, _LETTER_NUMBER):
        found = pattern.match(text)
        if found:
            return found.group("n")
    roman = _ROMAN_HEADING.match(text)
    if roman and roman_value(roman.group("n")) is not None:
        return roman.group("n")
    return None


@dataclass
class _Heading:
    title: str
    level: int
    page: int
    continues_page: bool  # content of the previous section precedes it on its page
    context: list[str]


def _normalise_title(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().lower()


def _spans(headings: list[_Heading], last_page: int) -> list[StructureSection]:
    """Each heading's pages: to the page before the next heading of the same or a higher level
    (that page too when the next heading starts below other content on it), else the last."""
    ends = [last_page] * len(headings)
    open_: list[int] = []  # headings whose end is not known yet, levels increasing
    for i, heading in enumerate(headings):
        while open_ and headings[open_[-1]].level >= heading.level:
            ends[open_.pop()] = heading.page if heading.continues_page else heading.page - 1
        open_.append(i)
    return [
        StructureSection(
            title=" ".join(heading.title.split())[:MAX_TITLE_CHARS],
            level=heading.level,
            number=section_number(heading.title, heading.context),
            page_start=heading.page,
            page_end=max(heading.page, min(end, last_page)),
        )
        for heading, end in zip(headings[:MAX_SECTIONS], ends, strict=False)
    ]


def _sections(parsed: ParsedDocument, last_page: int) -> list[StructureSection]:
    margins = {p.page_number: p.margin_text for p in parsed.pages}
    first_on_page: dict[int, int] = {}
    for element in parsed.elements:
        seq = first_on_page.get(element.page_number)
        if seq is None or element.seq < seq:
            first_on_page[element.page_number] = element.seq
    placed, in_outline, depth = _outline_headings(parsed, last_page, margins, first_on_page)
    running = _running_heads(parsed)
    seen_running: set[str] = set()
    # Headings the outline does not list (an outline often holds only the top levels: a
    # filing's "Notes to Financial Statements" but not "Note 7 — Income taxes") sit below
    # its deepest level; without an outline they are the whole tree.
    for element in parsed.elements:
        if element.kind != ElementKind.TITLE or not element.text.strip():
            continue
        if not 1 <= element.page_number <= last_page:
            continue
        normalised = _normalise_title(element.text)
        if (element.page_number, normalised) in in_outline:
            continue
        if normalised in running:
            if normalised in seen_running or any(t == normalised for _, t in in_outline):
                continue
            seen_running.add(normalised)
        heading = _Heading(
            title=element.text,
            level=depth + 1 if depth else max(1, len(element.section_path)),
            page=element.page_number,
            continues_page=element.seq > first_on_page.get(element.page_number, 0),
            context=element.section_path[:-1] + margins.get(element.page_number, []),
        )
        placed.append((element.page_number, element.seq, heading))
    placed.sort(key=lambda item: (item[0], item[1]))
    headings = [heading for _, _, heading in placed]
    return _spans(headings, last_page)


def _outline_headings(
    parsed: ParsedDocument,
    last_page: int,
    margins: dict[int, list[str]],
    first_on_page: dict[int, int],
) -> tuple[list[tuple[int, int, _Heading]], set[tuple[int, str]], int]:
    """The headings of the document's outline (when it has two entries or more), each placed
    as ``(page, seq on the page, heading)`` (seq -1 when no TITLE element matches it); the
    ``(page, normalised title)`` keys they cover; and the outline's depth (0: no outline)."""
    titles = {
        (e.page_number, _normalise_title(e.text)): e.seq
        for e in parsed.elements
        if e.kind == ElementKind.TITLE
    }
    outline = [e for e in parsed.outline if 1 <= e.page_number <= last_page and e.title.strip()]
    placed: list[tuple[int, int, _Heading]] = []
    in_outline: set[tuple[int, str]] = set()
    if len(outline) < 2:
        return placed, in_outline, 0
    stack: list[OutlineEntry] = []
    for entry in outline:
        while stack and stack[-1].level >= entry.level:
            stack.pop()
        key = (entry.page_number, _normalise_title(entry.title))
        in_outline.add(key)
        seq = titles.get(key)
        heading = _Heading(
            title=entry.title,
            level=entry.level,
            page=entry.page_number,
            continues_page=seq is not None and seq > first_on_page.get(entry.page_number, seq),
            context=[s.title for s in stack] + margins.get(entry.page_number, []),
        )
        placed.append((entry.page_number, -1 if seq is None else seq, heading))
        stack.append(entry)
    return placed, in_outline, max(entry.level for entry in outline)


def _running_heads(parsed: ParsedDocument) -> set[str]:
    """Normalised TITLE texts printed on more than a few pages.

    A "heading" printed on many pages is a running head the layout model took for a section
    header ("Notes to Consolidated Financial Statements" atop every page of the notes): only
    its first occurrence opens a section, or it would cut every real one short.
    """
    pages_of_title: dict[str, set[int]] = {}
    for element in parsed.elements:
        if element.kind == ElementKind.TITLE:
            pages_of_title.setdefault(_normalise_title(element.text), set()).add(
                element.page_number
            )
    return {title for title, on in pages_of_title.items() if len(on) > _RUNNING_HEAD_PAGES}


# ---------------------------------------------------------------------------------------------
# Page labels and the whole structure


_HEX_UTF16 = re.compile(r"<FEFF((?:[0-9A-Fa-f]{4})+)>")


def clean_label(label: str | None) -> str | None:
    """A /PageLabels label as printed: whitespace trimmed, a UTF-16 prefix that PyMuPDF returns
    still hex-encoded (``'<FEFF0063>1'``) decoded (``'c1'``); None when empty."""
    if not label:
        return None
    with contextlib.suppress(ValueError):
        label = _HEX_UTF16.sub(lambda m: bytes.fromhex(m.group(1)).decode("utf-16-be"), label)
    return label.strip() or None


def build_structure(parsed: ParsedDocument) -> DocumentStructure:
    """The structure of ``parsed``: a page entry per page (printed label from /PageLabels, else
    a detected folio), the sections of its outline or headings, its numbered items."""
    document = parsed.document
    pages = sorted({p.page_number: p for p in parsed.pages}.values(), key=lambda p: p.page_number)
    last_page = (
        max((p.page_number for p in pages), default=0)
        or document.page_count
        or max((e.page_number for e in parsed.elements), default=1)
    )
    pdf_labels = {p.page_number: clean_label(p.label) for p in pages}
    # A PDF with /PageLabels names its pages itself: folios are read only without them.
    folios = {} if any(pdf_labels.values()) else detect_folios(pages)
    structure_pages = []
    for page in pages:
        pdf_label = pdf_labels.get(page.page_number)
        folio = folios.get(page.page_number)
        structure_pages.append(
            StructurePage(
                page_number=page.page_number,
                label=pdf_label or folio,
                label_source="pdf" if pdf_label else "folio" if folio else None,
                width=page.width,
                height=page.height,
            )
        )
    try:
        sections = _sections(parsed, last_page)
    except Exception:  # a structure bug must not fail ingestion
        logger.exception("sections of %s failed", document.doc_id)
        sections = []
    try:
        items = _items(parsed.elements)
    except Exception:
        logger.exception("items of %s failed", document.doc_id)
        items = []
    # Which domain packs fit the document, read from its pages (pagesight.ingestion.domains).
    domains = detect_domains(element_page_texts(parsed.elements, pages), sections)
    return DocumentStructure(
        doc_id=document.doc_id,
        version=document.version,
        pages=structure_pages,
        sections=sections,
        items=items,
        domains=domains,
    )
