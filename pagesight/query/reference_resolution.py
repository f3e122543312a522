"""Where a structural reference leads in a document: ``resolve_reference(reference,
structure)``, the second half of :mod:`pagesight.query.references` (which reads the references out
of a query, and re-exports this module's names).

Exact look-ups only: a reference that leads nowhere (page 300 of 212, a Figure 9 the document
does not number) resolves to no pages and a reason, never to a nearby guess. Pure functions of
their arguments; full-width digits and letters read as ASCII, numerals by
:mod:`pagesight.core.numbering`.

Cheap on a query path (issue 33): what a resolution reads of a heading, a number or a title
(``_title_number``, ``_number_key``, ``title_tokens``, ...) is computed once per distinct
string and kept (bounded caches of pure functions); what it reads of a whole document (its page
count, its printed labels) once per :class:`PreparedStructure`, which
:class:`pagesight.query.structure_cache.StructureView` keeps per document version.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pagesight.core.numbering import KANJI_DIGITS, ROMAN_MAX, as_int, ascii_width, roman_value
from pagesight.core.types import DocumentStructure, StructuralReference, StructureSection
from pagesight.query import domains

MAX_SPAN_PAGES = 20
"""A range or a section resolves to at most this many pages (its first ones)."""
_TITLE_MATCH = 0.6
"""Share of a title's words (stopwords aside) a section title must contain to match."""
_I = re.IGNORECASE


@dataclass(frozen=True)
class Resolution:
    pages: list[int]
    """1-based page numbers, best first (a section's span in order, a figure's page)."""
    reason: str | None = None
    """When ``pages`` is empty: why, e.g. 'no page 300 (212 pages)', 'no Figure 9'."""
    confidences: tuple[float, ...] | None = None
    """A domain pack's confidence in each page (None: an exact look-up, fully believed)."""


def _page_count(structure: DocumentStructure) -> int:
    return max((p.page_number for p in structure.pages), default=0)


@functools.lru_cache(maxsize=65_536)
def _label_key(label: str) -> str:
    """A printed page label (or a page reference's value) as labels are compared."""
    return ascii_width(label).strip().casefold()


class PreparedStructure:
    """A document's structure with what every resolution reads of the whole document computed
    once: its page count and its pages by printed label. :func:`resolve_reference` prepares a
    plain structure on each call; keep one per document version to resolve many references
    (:class:`pagesight.query.structure_cache.StructureView`)."""

    __slots__ = ("_labels", "count", "structure")

    def __init__(self, structure: DocumentStructure) -> None:
        self.structure = structure
        self.count = _page_count(structure)
        self._labels: dict[str, list[int]] | None = None

    def labelled(self, value: str) -> list[int]:
        """The pages printed ``value`` (compared as :func:`_label_key` reads both), in page
        order."""
        if self._labels is None:
            labels: dict[str, list[int]] = {}
            for page in sorted(self.structure.pages, key=lambda p: p.page_number):
                if page.label is not None:
                    labels.setdefault(_label_key(page.label), []).append(page.page_number)
            self._labels = labels
        return list(self._labels.get(_label_key(value), ()))


def _pages_word(n: int, kind: str = "page") -> str:
    return f"{n} {kind}" + ("" if n == 1 else "s")


def _capped(pages: Iterable[int]) -> list[int]:
    out: list[int] = []
    for page in pages:
        if page not in out:
            out.append(page)
            if len(out) >= MAX_SPAN_PAGES:
                break
    return out


def _find_page(value: str, prepared: PreparedStructure, count: int) -> list[int]:
    """Pages that the document prints as ``value``, else page index ``value``.

    The printed label comes first: a reader who says "page 17" read it off the page (or off
    the viewer's page box, which shows the label). When no page is printed so (a document
    without labels, or a number past its printed ones), the page counter is the one
    reading left: index N, if the document has N pages. Both are exact look-ups; a roman
    'iv' that no page is labelled with is not read as index 4.
    """
    hits = prepared.labelled(value)
    if hits:
        return hits
    wanted = ascii_width(value).strip()
    if wanted.isdigit() and 1 <= int(wanted) <= count:
        return [int(wanted)]
    return []


def _resolve_page(reference: StructuralReference, prepared: PreparedStructure) -> Resolution:
    """A single page by ``_find_page``. A range starts there and ends at the first page at or
    after it printed as its end; where none is (a range past the printed numbers, or no
    labels), a numeric range runs as many pages as its numbers say, to the document's end
    at most: 'pages 209-215' of a book printed 1-210 on pages 3-212 is pages 211-212."""
    kind = reference.kind
    count = prepared.count
    value, end = reference.value, reference.end
    if not value:
        return Resolution([], f"no {kind} number")
    start = _find_page(value, prepared, count)
    if not start:
        return Resolution([], f"no {kind} {value} ({_pages_word(count, kind)})")
    if not end:
        return Resolution(start)
    first = start[0]
    ends = [p for p in prepared.labelled(end) if p >= first]
    if ends:
        last = ends[0]
    elif value.isdigit() and end.isdigit():
        if int(end) < int(value):
            return Resolution([], f"{kind}s {value}-{end}: the range runs backwards")
        last = min(count, first + int(end) - int(value))
    else:
        return Resolution([], f"no {kind} {end} after {kind} {value}")
    return Resolution(_capped(range(first, last + 1)))


def _resolve_position(reference: StructuralReference, count: int) -> Resolution:
    position = reference.position
    if not position:
        return Resolution([], "no position")
    page = position if position > 0 else count + 1 + position
    if 1 <= page <= count:
        return Resolution([page])
    return Resolution([], f"no page at position {position} ({_pages_word(count)})")


_KIND_WORD = re.compile(
    r"^(?:figure|fig\.?|table|tbl\.?|equation|eqn?\.?|section|sec\.|§|図表?|表|式)"
)


@functools.lru_cache(maxsize=65_536)
def _number_key(text: str) -> str:
    """A figure, table or section number as compared: lower case, no spaces or parentheses,
    '-' as '.', no kind word in front ('Figure 3' -> '3', '2-1' -> '2.1', 'A.1' -> 'a1')."""
    key = ascii_width(text).strip().lower()
    key = _KIND_WORD.sub("", key)
    key = re.sub(r"[\s()]", "", key).replace("-", ".").replace("–", ".").rstrip(".")
    return re.sub(r"^([a-z])\.(?=\d)", r"\1", key)


_ITEM_NAMES = {"figure": "Figure", "table": "Table", "equation": "Equation"}


def _resolve_item(reference: StructuralReference, structure: DocumentStructure) -> Resolution:
    name = _ITEM_NAMES[reference.kind]
    value = reference.value
    if not value:
        return Resolution([], f"no {name.lower()} number")
    wanted = _number_key(value)
    items = [i for i in structure.items if i.kind == reference.kind and i.number]
    exact = [i.page_number for i in items if _number_key(i.number or "") == wanted]
    # 'Figure 4' also finds the panels '4a', '4b', after any figure numbered exactly 4.
    panels = [
        i.page_number
        for i in items
        if (key := _number_key(i.number or "")).startswith(wanted)
        and key[len(wanted) :].isalpha()
        and wanted[-1:].isdigit()
    ]
    pages = _capped([*exact, *panels])
    if pages:
        return Resolution(pages)
    numbered = len(items)
    what = f"{numbered} numbered {name.lower()}s" if numbered else f"no numbered {name.lower()}s"
    return Resolution([], f"no {name} {value} ({what})")


# ---- sections -------------------------------------------------------------------------------

_TITLE_NUMBER = re.compile(
    r"\s*(?:(?P<kw>(?:chapter|section|part|note|appendix|annex)(?![a-z])|ch\.|sec\.|§|注記|付録)"
    r"\s*|(?P<dai>第)\s*)?"
    r"(?P<num>\d{1,3}(?:\.\d{1,3}){0,4}[a-z]?|[ivxlcdm]{1,7}|[a-z]|[〇一二三四五六七八九十百]{1,4})"
    r"(?P<tail>\s*[章節]|[.:)](?!\d)|(?=\s|$|[—–]))",
    _I,
)


@functools.lru_cache(maxsize=65_536)
def _title_number(title: str) -> tuple[str, str] | None:
    """The number a heading opens with, and the word before it: 'Chapter III Results' ->
    ('chapter', 'III'), '4.2 Methods' -> ('', '4.2'), '第3章 結論' -> ('章', '3'),
    'B. Data' -> ('', 'B'). A bare roman numeral or letter counts only before '.', ':' or
    ')' ('A Study of ...' opens with no number)."""
    m = _TITLE_NUMBER.match(ascii_width(title))
    if m is None:
        return None
    word = (m.group("kw") or "").lower()
    num, tail = m.group("num"), m.group("tail").strip()
    if tail in ("章", "節"):
        word = tail
    elif m.group("dai"):
        return None
    if not word and not num[0].isdigit() and tail not in (".", ":", ")"):
        return None
    if (num[0] in KANJI_DIGITS or num[0] in "十百") and word not in ("章", "節"):
        return None
    if (
        not word
        and not num[0].isdigit()
        and roman_value(num, limit=ROMAN_MAX) is None
        and len(num) > 1
    ):
        return None
    return word, num


def _span(section: StructureSection, count: int) -> range:
    start = max(1, section.page_start)
    end = max(start, section.page_end)
    if count:
        start, end = min(start, count), min(end, count)
    return range(start, end + 1)


def _section_pages(sections: Iterable[StructureSection], count: int) -> list[int]:
    return _capped(page for section in sections for page in _span(section, count))


def _same_numeral(a: str, b: str) -> bool:
    """'II' == '2' == 'ii' == '二'; text otherwise."""
    if _number_key(a) == _number_key(b):
        return True
    x, y = as_int(a), as_int(b)
    return x is not None and x == y


@functools.lru_cache(maxsize=65_536)
def _strip_word(number: str, words: str) -> str:
    return re.sub(rf"^\s*(?:{words})\s*", "", ascii_width(number), flags=_I)


def _ranked(candidates: list[tuple[int, int, int, StructureSection]]) -> list[StructureSection]:
    """(tier, level, order, section) -> the sections of the best tier only, outer levels
    first, then in document order: a weaker reading ('7 Conclusion' for 'Note 7') counts only
    where no stronger one ('7. Income taxes' under the notes heading) exists."""
    if not candidates:
        return []
    best = min(c[0] for c in candidates)
    return [c[3] for c in sorted(candidates, key=lambda c: c[:3]) if c[0] == best]


def _resolve_section(
    reference: StructuralReference, structure: DocumentStructure, count: int
) -> Resolution:
    value = reference.value
    if not value:
        return Resolution([], "no section number")
    wanted = _number_key(value)
    candidates = []
    for order, section in enumerate(structure.sections):
        number = section.number and _number_key(_strip_word(section.number, r"section|sec\.|§"))
        opened = _title_number(section.title)
        by_title = (
            opened is not None
            and opened[0] in ("", "section", "sec.", "§", "節")
            and _number_key(opened[1]) == wanted
        )
        if number == wanted or by_title:
            candidates.append((0, section.level, order, section))
    pages = _section_pages(_ranked(candidates), count)
    return Resolution(pages) if pages else Resolution([], f"no Section {value}")


def _resolve_chapter(
    reference: StructuralReference, structure: DocumentStructure, count: int
) -> Resolution:
    value = reference.value
    if not value:
        return Resolution([], "no chapter number")
    candidates = []
    for order, section in enumerate(structure.sections):
        opened = _title_number(section.title)
        number = section.number and _strip_word(section.number, r"chapter|ch\.|第")
        if opened and opened[0] in ("chapter", "ch.", "章") and _same_numeral(opened[1], value):
            candidates.append((0, section.level, order, section))
        elif (number and _same_numeral(number, value)) or (
            opened and opened[0] == "" and _same_numeral(opened[1], value)
        ):
            candidates.append((1, section.level, order, section))
    if candidates and min(c[0] for c in candidates) == 1:
        # a section numbered N is a chapter only at the outermost level that has one
        top = min(c[1] for c in candidates)
        candidates = [c for c in candidates if c[1] == top]
    pages = _section_pages(_ranked(candidates), count)
    return Resolution(pages) if pages else Resolution([], f"no Chapter {value}")


_NOTES_HEADING = re.compile(r"^\s*(?:notes\b(?!\s*\d)|.*\bnotes\s+to\b|注記)", _I)
_APPENDIX_HEADING = re.compile(r"^\s*(?:appendix|appendices|annex(?:es)?|付録)(?![a-z])", _I)


def _inside(
    sections: Sequence[StructureSection], heading: re.Pattern[str]
) -> list[tuple[int, StructureSection]]:
    """Sections under a heading that ``heading`` matches ('Notes to the financial
    statements', 'Appendices'): deeper levels after it, and same-level numbered ones (flat
    outlines), up to the next unnumbered heading at its level or above."""
    inside: list[tuple[int, StructureSection]] = []
    area_level: int | None = None
    for order, section in enumerate(sections):
        if area_level is not None:
            numbered = section.number is not None or _title_number(section.title) is not None
            if section.level > area_level or (section.level == area_level and numbered):
                inside.append((order, section))
                continue
            area_level = None
        if heading.match(section.title):
            area_level = section.level
    return inside


def _main_number(value: str) -> str | None:
    """'7b' -> '7', '2.3' -> '2'; None when the value is already a whole number."""
    m = re.match(r"\d+", value)
    return m.group(0) if m and m.group(0) != value else None


def _resolve_note(
    reference: StructuralReference, structure: DocumentStructure, count: int
) -> Resolution:
    value = reference.value
    if not value:
        return Resolution([], "no note number")
    sections = structure.sections
    in_notes = {order for order, _ in _inside(sections, _NOTES_HEADING)}

    def tiers(wanted: str, base: int) -> list[tuple[int, int, int, StructureSection]]:
        key = _number_key(wanted)
        found = []
        for order, section in enumerate(sections):
            number = section.number and _number_key(section.number)
            noted = number and re.fullmatch(r"(?:note|注記)\s*(.+)", number)
            opened = _title_number(section.title)
            if (noted and noted.group(1) == key) or (
                opened and opened[0] in ("note", "注記") and _number_key(opened[1]) == key
            ):
                found.append((base, section.level, order, section))
            elif order in in_notes and (
                number == key or (opened and opened[0] == "" and _number_key(opened[1]) == key)
            ):
                found.append((base + 1, section.level, order, section))
            elif number == key:
                found.append((base + 2, section.level, order, section))
        return found

    candidates = tiers(value, 0)
    main = _main_number(value)
    if not candidates and main:  # 'Note 7b' in an outline that stops at Note 7
        candidates = tiers(main, 3)
    pages = _section_pages(_ranked(candidates), count)
    return Resolution(pages) if pages else Resolution([], f"no Note {value}")


def _resolve_appendix(
    reference: StructuralReference, structure: DocumentStructure, count: int
) -> Resolution:
    value = reference.value
    sections = structure.sections
    if not value:
        headed = [s for s in sections if _APPENDIX_HEADING.match(s.title)]
        pages = _section_pages(headed, count)
        return Resolution(pages) if pages else Resolution([], "no appendix")
    key = _number_key(value)
    in_appendix = {order for order, _ in _inside(sections, _APPENDIX_HEADING)}
    candidates = []
    for order, section in enumerate(sections):
        opened = _title_number(section.title)
        number = section.number and _number_key(_strip_word(section.number, r"appendix|annex"))
        if opened and opened[0] in ("appendix", "annex", "付録") and _number_key(opened[1]) == key:
            candidates.append((0, section.level, order, section))
        elif order in in_appendix and (
            number == key or (opened and opened[0] == "" and _number_key(opened[1]) == key)
        ):
            candidates.append((1, section.level, order, section))
        elif number == key and not key.isdigit():  # 'B Proofs' numbered B after the chapters
            candidates.append((2, section.level, order, section))
    pages = _section_pages(_ranked(candidates), count)
    return Resolution(pages) if pages else Resolution([], f"no Appendix {value}")


#: Words a title is matched without (an unquoted title in a query does not end on one either).
TITLE_STOPWORDS = frozenset(
    ("a", "an", "the", "of", "and", "or", "in", "on", "for", "to", "with", "about", "at", "by",
     "from", "as", "is", "are", "its", "their", "this", "that")
)  # fmt: skip

_TOKEN = re.compile(r"[a-z0-9]+|[\u3040-\u30ff\u3400-\u9fff]+")


@functools.lru_cache(maxsize=65_536)
def title_tokens(text: str) -> frozenset[str]:
    """Words of a title without stopwords, plural 's' dropped; CJK as character bigrams
    (computed once per distinct text: section titles are read by every titled reference)."""
    words = _TOKEN.findall(ascii_width(text).lower())
    out: set[str] = set()
    for word in words:
        if word[0] >= "\u3040":  # kana and kanji: character bigrams
            out.update(word[i : i + 2] for i in range(max(1, len(word) - 1)))
        elif word not in TITLE_STOPWORDS:
            out.add(word[:-1] if len(word) > 3 and word.endswith("s") and word[-2] != "s" else word)
    if not out:
        out = set(words)
    return frozenset(out)


def _resolve_titled(
    reference: StructuralReference, structure: DocumentStructure, count: int
) -> Resolution:
    title = reference.value
    if not title:
        return Resolution([], "no title")
    wanted = title_tokens(title)
    if not wanted:
        return Resolution([], f"no section titled '{title}'")
    scored = []
    for order, section in enumerate(structure.sections):
        have = title_tokens(section.title)
        shared = len(wanted & have)
        coverage = shared / len(wanted)
        if coverage >= _TITLE_MATCH:
            jaccard = shared / len(wanted | have)
            scored.append((-coverage, -jaccard, order, section))
    scored.sort(key=lambda c: c[:3])
    pages = _section_pages([c[3] for c in scored], count)
    return Resolution(pages) if pages else Resolution([], f"no section titled '{title}'")


def _resolve_domain(reference: StructuralReference, structure: DocumentStructure) -> Resolution:
    found = domains.resolve(reference, structure)
    return Resolution(found.pages, found.reason, tuple(found.confidences) or None)


def resolve_reference(  # noqa: PLR0911  # one return per kind of reference
    reference: StructuralReference, structure: DocumentStructure | PreparedStructure
) -> Resolution:
    """The pages of ``structure`` that ``reference`` names, best first, or why none.

    - page / slide N: the page printed N (label, case-insensitive, roman as text), else page
      index N when the document has that many pages (see ``_find_page``); a range gives
      every page from its first to its last, at most ``MAX_SPAN_PAGES``.
    - position: 1 first, 2 second, -1 last, -2 second last; the cover is page 1, the back
      cover the last page.
    - figure / table / equation N: the pages of the items numbered N ('2-1' == '2.1'); for a
      plain number, then those of its lettered panels ('4' -> '4a', '4b').
    - section N: sections numbered N or whose heading opens with N ('4.2 Methods').
    - chapter N: headings 'Chapter N' / '第N章' first, then sections numbered N at the
      outermost level; roman, arabic and kanji numerals are the same number.
    - note N: 'Note N' (number or heading), then N under a 'Notes to ...' heading, then any
      section numbered N.
    - appendix [X]: headings 'Appendix X', then X under an 'Appendices' heading, then a
      section lettered X; without X every 'Appendix ...' heading.
    - titled: sections whose title holds at least 60% of the title's words, best first.
    - domain: what a domain pack resolves it to, each page with a confidence
      (:mod:`pagesight.query.domains`: the finance pack's statements).

    A section resolves to its span, at most ``MAX_SPAN_PAGES`` pages over all matches.

    ``structure`` may be a :class:`PreparedStructure` (what a cache keeps per document
    version); the result is the same.
    """
    prepared = (
        structure if isinstance(structure, PreparedStructure) else PreparedStructure(structure)
    )
    structure = prepared.structure
    count = prepared.count
    kind = reference.kind
    if kind in ("page", "slide"):
        return _resolve_page(reference, prepared)
    if kind == "position":
        return _resolve_position(reference, count)
    if kind == "cover":
        if not count:
            return Resolution([], "the document has no pages")
        return Resolution([count] if reference.value == "back" else [1])
    if kind in _ITEM_NAMES:
        return _resolve_item(reference, structure)
    if kind == "section":
        return _resolve_section(reference, structure, count)
    if kind == "chapter":
        return _resolve_chapter(reference, structure, count)
    if kind == "note":
        return _resolve_note(reference, structure, count)
    if kind == "appendix":
        return _resolve_appendix(reference, structure, count)
    if kind == "domain":
        return _resolve_domain(reference, structure)
    return _resolve_titled(reference, structure, count)
