"""Structural references in a query ("page 17", "Figure 4b", "the second last slide", "第2章"),
and where they lead in a document.

Why: a question that names a place in the document ("what does the chart on page 14 show?",
"summarise Note 7", "図3の凡例は？") is about that place, and neither keyword nor embedding
search knows where it is. The printed page number is not in the page's text, and it is
rarely the PDF's page index (front matter, covers); "Table 2" and "Section 4.2" are printed
as captions and headings that search ranks like any other words. Ingestion records the
document's structure (printed page labels, the outline, numbered figures, tables and
equations); this module reads the references out of the query and looks them up there.

Two halves, both pure functions of their arguments:

- ``parse_references(query)``: regular expressions only, no model; it runs before every
  search. Each pattern runs only when the query holds one of its keywords (a substring
  test), so a question that names no structure costs ~30 us, 'What does Figure 4b on page 17
  show in Section 4.2?' ~130 us, '3ページの図2の凡例は？' ~30 us, and 10,000 characters of
  'page page ...' or 'Figure 1 and ...' under 10 ms (``python -m timeit -s "from
  query.references import parse_references" "parse_references('...')"``, 2 shared CPU cores
  under load). Every pattern has a literal anchor (a keyword, a quote, a CJK counter word)
  and bounded repetition, so no input backtracks badly. It leaves running text alone: "the
  page", "pages of text", "table salt", "a figure of speech", "note that", "section" alone,
  "7 pages long", "the policy covers ...", a number alone.
- ``resolve_reference(reference, structure)``: exact look-ups only. A reference that leads
  nowhere (page 300 of 212, a Figure 9 the document does not number) resolves to no pages
  and a reason, never to a nearby guess.

English and Japanese forms; full-width digits and letters ("表２") read as ASCII.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from core.types import DocumentStructure, StructuralReference, StructureSection
from core.types import ReferenceKind as RefKind
from query.statements import STATEMENT_NAMES, statement_pages

MAX_REFERENCES = 50
"""A query naming more places than this is not a question; the rest are dropped."""
MAX_SPAN_PAGES = 20
"""A range or a section resolves to at most this many pages (its first ones)."""
_MAX_EXPAND = 10
"""'Figures 3-7' names each figure; a longer run of numbers keeps only its two ends."""
_TITLE_MATCH = 0.6
"""Share of a title's words (stopwords aside) a section title must contain to match."""

# Full-width ASCII (U+FF01..U+FF5E) and the ideographic space, one character for one, so
# match offsets in the translated query are offsets in the original.
_WIDE = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
_WIDE[0x3000] = 0x20


def _ascii_width(text: str) -> str:
    return text.translate(_WIDE)


# ---------------------------------------------------------------------------------------------
# Numerals


_ROMAN_STRICT = re.compile(
    r"(?=[ivxlcdm])m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})"
)
_ROMAN_DIGITS = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}
_KANJI_DIGITS = {
    "〇": 0, "一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
}  # fmt: skip
_ORDINAL_WORDS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10,
}  # fmt: skip


def _roman_to_int(text: str) -> int | None:
    low = text.lower()
    if not low or not _ROMAN_STRICT.fullmatch(low):
        return None
    total = 0
    for here, after in zip(low, [*low[1:], ""], strict=True):
        value = _ROMAN_DIGITS[here]
        total += -value if after and _ROMAN_DIGITS[after] > value else value
    return total


def _kanji_to_int(text: str) -> int | None:
    if not text or any(ch not in _KANJI_DIGITS and ch not in "十百" for ch in text):
        return None
    if "十" not in text and "百" not in text:
        return int("".join(str(_KANJI_DIGITS[ch]) for ch in text))
    total = digit = 0
    for ch in text:
        if ch == "百":
            total, digit = total + (digit or 1) * 100, 0
        elif ch == "十":
            total, digit = total + (digit or 1) * 10, 0
        else:
            digit = _KANJI_DIGITS[ch]
    return total + digit


def _as_int(text: str) -> int | None:
    """'3', 'III', 'iii', '三', 'three' -> 3; anything else (2.1, 4b, B) -> None."""
    text = _ascii_width(text).strip().lower()
    if text.isdigit():
        return int(text)
    return _NUMBER_WORDS.get(text) or _roman_to_int(text) or _kanji_to_int(text)


def _arabic(text: str) -> str:
    """Kanji and English number words as digits ('三' -> '3'); other forms as printed."""
    if text.lower() in _NUMBER_WORDS or _kanji_to_int(text) is not None:
        return str(_as_int(text))
    return text


def _ordinal(text: str) -> int | None:
    """'first' 1, '3rd' 3, 'last' -1, 'second last' / 'second-to-last' / 'penultimate' -2."""
    low = re.sub(r"[\s-]+", " ", text.lower()).strip()
    if low.startswith("very "):
        low = low[5:]
    if low in ("last", "final"):
        return -1
    if low in ("penultimate", "next to last", "last but one"):
        return -2
    if low == "antepenultimate":
        return -3
    head, _, tail = low.partition(" ")
    digits = re.fullmatch(r"(\d+)(?:st|nd|rd|th)", head)
    n = int(digits.group(1)) if digits else _ORDINAL_WORDS.get(head)
    if n is None:
        return None
    if tail and ("last" in tail or "end" in tail):
        return -n
    return n if n > 0 else None


# ---------------------------------------------------------------------------------------------
# Parsing

_Part = tuple[RefKind, str | None, str | None, int | None]  # kind, value, end, position
_Found = tuple[int, int, list[_Part]]  # start, end (in the query), what it names
_Handler = Callable[[re.Match[str], str], _Found | None]

_I = re.IGNORECASE
# A roman numeral as a whole word, up to 399 (front matter, chapters): 'iv', 'XII'.
_ROMAN = r"(?=[ivxlc])c{0,3}(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})(?!\w)"
# Between a keyword and its number: a space, nothing after an abbreviation's dot ('p.3',
# 'Fig.4'), or nothing before a digit ('page3', 'Eq(5)'); then an optional '#' or 'No.'.
_GAP = r"(?:\s+|(?<=\.)\s*|(?=[\d(]))(?:#\s*|no\.\s*)?"
_RANGE_SEP = r"(?:-|–|—|~|〜|\bto\b|\bthrough\b|\bthru\b)"
_LIST_SEP = r"(?:,|\band\b|\bor\b|&)"
_KANJI_NUM = r"[〇一二三四五六七八九十百]{1,4}"

# Printed page numbers: '17', '2019' (up to 9 digits), 'iv', 'A-3'. Not '3.5' or '1,234'.
_PAGE_NUM = rf"(?:\d{{1,9}}(?!\d|\.\d|,\d{{3}})|{_ROMAN}|(?-i:[A-Z])-\d{{1,4}}(?!\d))"
# Figure / table / equation numbers: '3', '2.1', '4b', 'S1', 'A.1'.
_ITEM_NUM = r"(?:(?-i:[A-Z])\.?)?\d{1,4}(?:\.\d{1,4}){0,3}[a-z]?(?!\w)"
# Section numbers: '4', '4.2.1', 'II', 'B', 'B.2'.
_SECTION_NUM = (
    rf"(?:\d{{1,3}}(?:\.\d{{1,3}}){{0,4}}[a-z]?(?!\w)|{_ROMAN}"
    r"|(?-i:[A-Z])(?:\.\d{1,3}){0,3}(?!\w))"
)
_CHAPTER_NUM = rf"(?:\d{{1,3}}(?!\w)|{_ROMAN}|(?:{'|'.join(_NUMBER_WORDS)})(?!\w))"
_NOTE_NUM = r"\d{1,3}(?:\.\d{1,2})?[a-z]?(?!\w)"
_APPENDIX_NUM = r"(?:(?-i:[IVX]{1,4}|[A-Z](?:\.\d{1,3}){0,3})(?!\w)|\d{1,3}(?!\w))"
# A further number in a list ('pages 3, 5 and 7'): digits only, never a roman 'I'.
_LIST_NUM = r"(?<![\w.])\d{1,4}(?:\.\d{1,4}){0,3}[a-z]?(?!\w)"
_APPENDIX_LIST_NUM = r"(?<![\w.])(?:(?-i:[A-Z])(?!\w)|\d{1,3}(?!\w))"

_ORDINAL = (
    r"(?:(?:\d{1,3}(?:st|nd|rd|th)|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)"
    r"(?:[- ]to[- ]last|[- ]from[- ](?:the[- ])?(?:last|end)|[- ]last)?"
    r"|next[- ]to[- ]last|last[- ]but[- ]one|(?:ante)?penultimate"
    r"|(?:very\s+)?(?:first|last|final))"
)

# Words that, right before 'note N', make 'note' a verb ("please note 3 things").
_NOTE_AS_VERB = re.compile(
    r"\b(?:please|also|i|we|you|they|should|must|can|could|will|would|let's|us)\s+$", _I
)


def _expand(first: str, last: str) -> list[str]:
    a, b = _as_int(first), _as_int(last)
    if (
        a is not None
        and b is not None
        and first.isdigit()
        and last.isdigit()
        and 0 < b - a < _MAX_EXPAND
    ):
        return [str(n) for n in range(a, b + 1)]
    return [first, last]


def _numbered(
    kind: RefKind,
    singular: str,
    plural: str,
    number: str,
    more: str = _LIST_NUM,
    *,
    item: bool = False,
) -> tuple[re.Pattern[str], _Handler]:
    """'<keyword> N', 'N-M' / 'N to M' ranges, 'N, M and K' lists.

    For figures, tables and equations ('item'), 'Figure 2-1' after a singular keyword is one
    number (chapter 2, figure 1) while 'Figures 3-5' is a range; a page range is one
    reference with an ``end``; other ranges and lists give one reference per number.
    """
    keyword = rf"(?:{plural}|{singular})"
    pattern = re.compile(
        rf"\b(?:(?P<pl>{plural})|(?P<kw>{singular})){_GAP}"
        rf"(?P<open>\()?\s*(?P<num>{number})\s*(?(open)\))"
        r"(?P<sub>\s?\(\s*[a-z]\s*\)(?!\w))?"
        rf"(?:\s*(?P<sep>{_RANGE_SEP})\s*(?:{keyword}{_GAP})?(?P<end>{number}))?"
        rf"(?P<rest>(?:\s*{_LIST_SEP}\s*(?:and\s+)?(?:{keyword}{_GAP})?{more}){{0,8}})",
        _I,
    )
    more_re = re.compile(more, _I)

    def handle(m: re.Match[str], s: str) -> _Found | None:
        keyword_text = m.group("pl") or m.group("kw") or ""
        num = _arabic(m.group("num"))
        # 'the section I mentioned', 'which page I ...': a lone 'I' counts after a
        # capitalised keyword only ('Chapter I', 'Section I').
        if num == "I" and not keyword_text[:1].isupper():
            return None
        if kind == "note" and _NOTE_AS_VERB.search(s[max(0, m.start() - 12) : m.start()]):
            return None
        sub = m.group("sub")
        if sub:
            num += sub.strip(" ()").lower()
        end = m.group("end")
        values = [num]
        range_end: str | None = None
        if end:
            end = _arabic(end)
            joined = s[m.end("num") : m.start("end")] == "-"
            if item and m.group("kw") and joined and not sub:
                values = [f"{num}-{end}"]
            elif kind in ("page", "slide"):
                if (
                    end.isdigit()
                    and num.isdigit()
                    and len(end) < len(num)
                    and int(num[: -len(end)] + end) > int(num)
                ):
                    end = num[: -len(end)] + end  # 'pp. 123-25': pages 123 to 125
                range_end = end if end.lower() != num.lower() else None
            else:
                values = _expand(num, end)
        rest = m.group("rest")
        if rest:
            values += [_arabic(x.group(0)) for x in more_re.finditer(rest)]
        parts: list[_Part] = [(kind, values[0], range_end, None)]
        parts += [(kind, v, None, None) for v in values[1:]]
        return m.start(), m.end(), parts

    return pattern, handle


def _simple(
    pattern: str, make: Callable[[re.Match[str]], list[_Part] | None], flags: int = _I
) -> tuple[re.Pattern[str], _Handler]:
    compiled = re.compile(pattern, flags)

    def handle(m: re.Match[str], s: str) -> _Found | None:
        parts = make(m)
        return (m.start(), m.end(), parts) if parts else None

    return compiled, handle


def _position(m: re.Match[str]) -> list[_Part] | None:
    first, second = m.group("o1"), m.group("o2")
    if m.group("plural") and not second:  # 'the first pages of the report': no one page
        return None
    positions = [_ordinal(o) for o in (first, second) if o]
    return [("position", None, None, p) for p in positions if p is not None] or None


def _japanese_position(m: re.Match[str]) -> list[_Part] | None:
    """'最後から2番目' -2; '3枚目' 3."""
    n = _as_int(m.group("n") or m.group("n2") or "")
    if not n:
        return None
    return [("position", None, None, -n if m.group("back") else n)]


# ---- titles -------------------------------------------------------------------------------

_QUOTES = {'"': '"', "“": "”", "'": "'", "‘": "’", "「": "」", "『": "』"}
# Words that start another reference, not a title's next word ('Risk Factors in Table 2').
_PLACE_WORDS = (
    r"(?:pages?|p|pp|slides?|tables?|figures?|figs?|sections?|chapters?|appendix|appendices|"
    r"notes?|equations?|eqs?)\b"
)
_CAPITALISED_TITLE = re.compile(
    r"[A-Z][\w&'’-]*"
    r"(?:\s+(?:(?:of|and|the|for|in|on|to|a|an|&|with|or|vs\.?)\s+){0,2}"
    r"(?!(?i:" + _PLACE_WORDS + r"))[A-Z0-9][\w&'’-]*){0,7}"
)
_LOWER_TITLE = re.compile(r"[^\s,.;:?!()\"“”]+(?:[ \t]+[^\s,.;:?!()\"“”]+){0,5}")
# Where an unquoted, lower-case title stops: the verb or place words of the question.
_TITLE_STOP = re.compile(
    r"\s+(?:say|says|said|mention|mentions|state|states|describe|describes|discuss|discusses|"
    r"show|shows|list|lists|contain|contains|include|includes|is|are|was|were|does|do|did|"
    r"have|has|tell|tells|explain|explains|cover|covers|in\s+the|of\s+the|"
    r"(?:(?:in|on|of|at|from|see)\s+)?" + _PLACE_WORDS + r").*$",
    _I,
)
_NOT_A_TITLE = re.compile(
    r"(?:the\s+)?(?:pages?|slides?|p\.|pp\.|top|bottom|left|right|next|previous|same|this|"
    r"that|it)\b",
    _I,
)
_TITLE_STOPWORDS = frozenset(
    ("a", "an", "the", "of", "and", "or", "in", "on", "for", "to", "with", "about", "at", "by",
     "from", "as", "is", "are", "its", "their", "this", "that")
)  # fmt: skip


_CLOSING_APOSTROPHE = re.compile(r"'(?!\w)")


def _title_after(s: str, at: int) -> tuple[str, int] | None:
    """The title that starts at ``s[at]``: quoted, a run of capitalised words, or a few
    lower-case words up to the question's verb. Returns (title, end offset)."""
    close = _QUOTES.get(s[at : at + 1])
    if close == "'":  # an apostrophe inside ('Management's Discussion') does not close it
        closing = _CLOSING_APOSTROPHE.search(s, at + 1, at + 82)
        stop = closing.start() if closing else -1
        if stop - at - 1 >= 2:
            return s[at + 1 : stop].strip(), stop + 1
        return None
    if close:
        stop = s.find(close, at + 1, at + 82)
        if stop - at - 1 >= 2:
            return s[at + 1 : stop].strip(), stop + 1
        return None
    m = _CAPITALISED_TITLE.match(s, at) if s[at : at + 1].isupper() else None
    if m is None:
        m = _LOWER_TITLE.match(s, at)
        if m is None:
            return None
        title = _TITLE_STOP.sub("", m.group(0))
        end = at + len(title)
    else:
        title, end = m.group(0), m.end()
    words = title.split()
    while words and words[-1].lower() in _TITLE_STOPWORDS:
        words.pop()
    while words and words[0] in ("the", "a", "an"):
        words.pop(0)
    title = " ".join(words)
    if not title or _NOT_A_TITLE.match(title) or not _title_tokens(title):
        return None
    return title, at + s[at:end].rfind(words[-1]) + len(words[-1])


_TITLED_AFTER = re.compile(
    r"\b(?:(?:section|chapter|part|heading)s?\s+(?:titled|entitled|called|named|headed)"
    r"|(?:section|chapter)\s+(?:on|about|regarding|covering|concerning)"
    r"|(?:under\s+)?the\s+heading|section)\s+(?=\S)",
    _I,
)


def _titled_after(m: re.Match[str], s: str) -> _Found | None:
    # bare 'section' and 'the heading' take a quoted title only: "section 'Risk Factors'"
    words = m.group(0).lower().split()
    if (len(words) == 1 or words[-1] == "heading") and s[m.end() : m.end() + 1] not in _QUOTES:
        return None
    got = _title_after(s, m.end())
    if got is None:
        return None
    title, end = got
    return m.start(), end, [("titled", title, None, None)]


_QUOTED_BEFORE = re.compile(
    r"(?:(?<!\w)'(?P<a>(?:[^'\n]|'(?=\w)){2,80})'(?!\w)|\"(?P<b>[^\"\n]{2,80})\"|“(?P<c>[^”\n]{2,80})”"
    r"|‘(?P<d>[^’\n]{2,80})’)\s*(?:section|chapter|part|heading)s?\b",
    _I,
)


def _quoted_before(m: re.Match[str]) -> list[_Part] | None:
    title = next(t for t in m.group("a", "b", "c", "d") if t is not None).strip()
    return [("titled", title, None, None)] if _title_tokens(title) else None


_SECTION_WORD = re.compile(r"\b(?:section|chapter)\b", _I)
_CAPITALISED_BEFORE = re.compile(
    r"\b[Tt]he\s+(?P<title>[A-Z][\w&'’-]*(?:\s+(?:(?:of|and|the|for|in|on|to|&)\s+){0,2}"
    r"[A-Z][\w&'’-]*){0,6})\s+$"
)


def _capitalised_before(m: re.Match[str], s: str) -> _Found | None:
    """'in the Risk Factors section': a capitalised title between 'the' and the keyword."""
    window_start = max(0, m.start() - 120)
    before = _CAPITALISED_BEFORE.search(s[window_start : m.start()])
    if before is None:
        return None
    title = before.group("title")
    if title.split()[0].lower() in ("first", "last", "next", "previous", "same", "following"):
        return None
    return window_start + before.start(), m.end(), [("titled", title, None, None)]


_JA_TITLED = re.compile(
    r"[「『](?P<a>[^「『」』\n]{1,80})[」』]\s*(?:の|という)?\s*(?:セクション|章|節|項目?|部分|欄|見出し)"
    r"|(?:セクション|章|節|見出し)\s*[「『](?P<b>[^」』\n]{1,80})[」』]"
)


def _japanese_titled_found(m: re.Match[str], s: str) -> _Found | None:
    title = (m.group("a") or m.group("b") or "").strip()
    return (m.start(), m.end(), [("titled", title, None, None)]) if _title_tokens(title) else None


# ---- the rules ----------------------------------------------------------------------------


def _value(kind: RefKind, group: str = "num") -> Callable[[re.Match[str]], list[_Part]]:
    return lambda m: [(kind, _arabic(m.group(group)), None, None)]


def _japanese_page(m: re.Match[str]) -> list[_Part]:
    end = m.group("end")
    return [("page", m.group("num"), end if end and end != m.group("num") else None, None)]


def _appendix(m: re.Match[str]) -> list[_Part]:
    value = m.groupdict().get("v")
    return [("appendix", value.strip() if value else None, None, None)]


def _cover(m: re.Match[str]) -> list[_Part]:
    back = m.groupdict().get("back")
    return [("cover", "back" if back else None, None, None)]


_Rule = tuple[tuple[str, ...], re.Pattern[str], _Handler]


def _on(needles: tuple[str, ...], rule: tuple[re.Pattern[str], _Handler]) -> _Rule:
    """A rule runs only on queries that contain one of its needles (lower-cased substring
    tests, C speed): most queries name no structure and skip nearly every pattern."""
    return (needles, *rule)


_SECTION_WORDS = ("section", "chapter", "part", "heading")
_RULES: list[_Rule] = [
    _on(
        ("page", "p.", "pg"), _numbered("page", r"page|p\.|pg\.?", r"pages|pp\.|pgs\.?", _PAGE_NUM)
    ),
    _on(("slide",), _numbered("slide", r"slide", r"slides", _PAGE_NUM)),
    _on(("fig",), _numbered("figure", r"figure|fig\.?", r"figures|figs\.?", _ITEM_NUM, item=True)),
    _on(("table", "tbl"), _numbered("table", r"table|tbl\.?", r"tables", _ITEM_NUM, item=True)),
    _on(
        ("eq",),
        _numbered("equation", r"equation|eqn?\.?", r"equations|eqs\.?", _ITEM_NUM, item=True),
    ),
    _on(
        ("sec", "§"),
        _numbered("section", r"section|sec\.|§", r"sections|secs\.|§§", _SECTION_NUM),
    ),
    _on(("ch",), _numbered("chapter", r"chapter|ch\.|chap\.", r"chapters|chs\.", _CHAPTER_NUM)),
    _on(("note",), _numbered("note", r"note", r"notes", _NOTE_NUM)),
    _on(
        ("appendi", "annex"),
        _numbered(
            "appendix", r"appendix|annex", r"appendices|annexes", _APPENDIX_NUM, _APPENDIX_LIST_NUM
        ),
    ),
    _on(("appendi", "annex"), _simple(r"\b(?:appendix|appendices|annex(?:es)?)\b", _appendix)),
    _on(
        ("page", "slide", "sheet"),
        _simple(
            rf"\b(?:the\s+)?(?P<o1>{_ORDINAL})"
            rf"(?:\s*(?:,|and|or|&)\s*(?:the\s+)?(?P<o2>{_ORDINAL}))?"
            r"\s+(?:page|slide|sheet)(?P<plural>s)?\b",
            _position,
        ),
    ),
    _on(
        ("cover", "title"),
        _simple(
            r"\b(?:the\s+)?(?:(?P<back>back|rear)\s+cover|front\s+cover"
            r"|cover\s+(?:page|slide|sheet)|title\s+(?:page|slide))\b"
            r"|\bthe\s+cover\b(?!\s+(?:letter|story|charge|fee|price|band)s?\b)",
            _cover,
        ),
    ),
    _on(_SECTION_WORDS, (_TITLED_AFTER, _titled_after)),
    _on(_SECTION_WORDS, _simple(_QUOTED_BEFORE.pattern, _quoted_before)),
    _on(("section", "chapter"), (_SECTION_WORD, _capitalised_before)),
    # ---- Japanese
    _on(
        ("ページ", "頁"),
        _simple(
            r"(?<![全計約総\d.])(?P<num>\d{1,5})\s*(?:ページ|頁)目?\s*(?:から|~|〜|-|–)\s*"
            r"(?P<end>\d{1,5})\s*(?:ページ|頁)目?"
            r"|(?<![全計約総\d.])(?P<num2>\d{1,5})\s*(?:~|〜|-|–)\s*(?P<end2>\d{1,5})\s*(?:ページ|頁)",
            lambda m: [
                (
                    "page",
                    m.group("num") or m.group("num2"),
                    m.group("end") or m.group("end2"),
                    None,
                )
            ],
        ),
    ),
    _on(
        ("ページ", "頁"),
        _simple(r"(?<![全計約総\d.])(?P<num>\d{1,5})\s*(?:ページ|頁)目?(?P<end>)", _japanese_page),
    ),
    _on(("スライド",), _simple(r"スライド\s*(?:No\.?\s*)?(?P<num>\d{1,4})", _value("slide"))),
    _on(
        ("番目", "枚目", "ページ目"),
        _simple(
            r"(?:(?P<back>最後|後ろ|末尾)から)\s*(?P<n>\d{1,3}|" + _KANJI_NUM + r")\s*"
            r"(?:番目|枚目|ページ目)(?:の(?:ページ|スライド|頁))?"
            r"|(?P<n2>\d{1,3})\s*(?:枚目|番目の(?:ページ|スライド|頁))",
            _japanese_position,
        ),
    ),
    _on(
        ("最後", "最終"),
        _simple(
            r"(?:最後|最終)の?(?:ページ|頁|スライド)", lambda m: [("position", None, None, -1)]
        ),
    ),
    _on(
        ("最初", "先頭"),
        _simple(r"(?:最初|先頭)の?(?:ページ|頁|スライド)", lambda m: [("position", None, None, 1)]),
    ),
    _on(("表紙",), _simple(r"(?P<back>裏)?表紙", _cover)),
    _on(
        ("章",),
        _simple(
            r"第\s*(?P<num>\d{1,3}|" + _KANJI_NUM + r")\s*章"
            r"|(?<![全計約\d.])(?P<num2>\d{1,3})\s*章",
            lambda m: [("chapter", _arabic(m.group("num") or m.group("num2")), None, None)],
        ),
    ),
    _on(
        ("節",),
        _simple(
            r"第\s*(?P<num>\d{1,3}|" + _KANJI_NUM + r")\s*節"
            r"|(?<![全計約\d.])(?P<num2>\d{1,3}(?:\.\d{1,3}){0,3})\s*節",
            lambda m: [("section", _arabic(m.group("num") or m.group("num2")), None, None)],
        ),
    ),
    _on(
        ("第",),
        _simple(
            r"第\s*(?P<num>\d{1,3}|" + _KANJI_NUM + r")\s*(?P<what>図|表)",
            lambda m: [
                (
                    "figure" if m.group("what") == "図" else "table",
                    _arabic(m.group("num")),
                    None,
                    None,
                )
            ],
        ),
    ),
    _on(
        ("図",),
        _simple(
            r"(?<![地意企合縮系構海])図表?\s*(?P<num>\d{1,4}(?:[.\-]\d{1,4}){0,3}[a-z]?)(?!\d)",
            _value("figure"),
        ),
    ),
    _on(
        ("表",),
        _simple(
            r"(?<![代発公年別時図一辞価])表\s*(?P<num>\d{1,4}(?:[.\-]\d{1,4}){0,3}[a-z]?)(?!\d)",
            _value("table"),
        ),
    ),
    _on(
        ("式",),
        _simple(
            r"(?<![方公様形正株書儀])式\s*[(（]?\s*(?P<num>\d{1,4}(?:\.\d{1,4})?)\s*[)）]?",
            _value("equation"),
        ),
    ),
    _on(("注記",), _simple(r"注記\s*(?P<num>\d{1,3})", _value("note"))),
    _on(
        ("付録", "別添", "別紙"),
        _simple(r"(?:付録|別添|別紙)\s*(?P<v>(?-i:[A-Z])(?![a-z])|\d{1,3})?", _appendix),
    ),
    _on(("「", "『"), (_JA_TITLED, _japanese_titled_found)),
]


def parse_references(query: str) -> list[StructuralReference]:
    """Every structural reference in the query, in query order, de-duplicated.

    Where two patterns claim overlapping words, the one that starts first (then the longer)
    wins: '第3章' is chapter 3 once, 'the back cover' is not also 'the cover'. At most
    ``MAX_REFERENCES``. ``text`` is the query's own words; ``value`` is the number as
    printed, except that kanji and English number words read as digits ('第三章' -> '3',
    'chapter one' -> '1'); a back cover is ``kind='cover', value='back'``.
    """
    if not query or not query.strip():
        return []
    s = _ascii_width(query)
    lower = s.lower()
    found: list[_Found] = []
    for needles, pattern, handle in _RULES:
        if not any(needle in lower for needle in needles):
            continue
        for m in pattern.finditer(s):
            got = handle(m, s)
            if got is not None and got[2]:
                found.append(got)
    found.sort(key=lambda f: (f[0], -f[1]))
    references: list[StructuralReference] = []
    seen: set[tuple[str, str | None, str | None, int | None]] = set()
    taken_until = -1
    for start, end, parts in found:
        if start < taken_until:
            continue
        taken_until = end
        text = query[start:end].strip()
        for kind, value, range_end, position in parts:
            key = (
                kind,
                value.casefold() if value else None,
                range_end.casefold() if range_end else None,
                position,
            )
            if key in seen:
                continue
            seen.add(key)
            references.append(
                StructuralReference(
                    kind=kind, text=text, value=value, end=range_end, position=position
                )
            )
            if len(references) >= MAX_REFERENCES:
                return references
    return references


# ---------------------------------------------------------------------------------------------
# Resolution


@dataclass(frozen=True)
class Resolution:
    pages: list[int]
    """1-based page numbers, best first (a section's span in order, a figure's page)."""
    reason: str | None = None
    """When ``pages`` is empty: why, e.g. 'no page 300 (212 pages)', 'no Figure 9'."""


def _page_count(structure: DocumentStructure) -> int:
    return max((p.page_number for p in structure.pages), default=0)


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


def _labelled(value: str, structure: DocumentStructure) -> list[int]:
    wanted = _ascii_width(value).strip().casefold()
    return [
        p.page_number
        for p in sorted(structure.pages, key=lambda p: p.page_number)
        if p.label is not None and _ascii_width(p.label).strip().casefold() == wanted
    ]


def _find_page(value: str, structure: DocumentStructure, count: int) -> list[int]:
    """Pages that the document prints as ``value``, else page index ``value``.

    The printed label comes first: a reader who says "page 17" read it off the page (or off
    the viewer's page box, which shows the label). When no page is printed so (a document
    without labels, or a number past its printed ones), the page counter is the one
    reading left: index N, if the document has N pages. Both are exact look-ups; a roman
    'iv' that no page is labelled with is not read as index 4.
    """
    hits = _labelled(value, structure)
    if hits:
        return hits
    wanted = _ascii_width(value).strip()
    if wanted.isdigit() and 1 <= int(wanted) <= count:
        return [int(wanted)]
    return []


def _resolve_page(reference: StructuralReference, structure: DocumentStructure) -> Resolution:
    """A single page by ``_find_page``. A range starts there and ends at the first page at or
    after it printed as its end; where none is (a range past the printed numbers, or no
    labels), a numeric range runs as many pages as its numbers say, to the document's end
    at most: 'pages 209-215' of a book printed 1-210 on pages 3-212 is pages 211-212."""
    kind = reference.kind
    count = _page_count(structure)
    value, end = reference.value, reference.end
    if not value:
        return Resolution([], f"no {kind} number")
    start = _find_page(value, structure, count)
    if not start:
        return Resolution([], f"no {kind} {value} ({_pages_word(count, kind)})")
    if not end:
        return Resolution(start)
    first = start[0]
    ends = [p for p in _labelled(end, structure) if p >= first]
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


def _number_key(text: str) -> str:
    """A figure, table or section number as compared: lower case, no spaces or parentheses,
    '-' as '.', no kind word in front ('Figure 3' -> '3', '2-1' -> '2.1', 'A.1' -> 'a1')."""
    key = _ascii_width(text).strip().lower()
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


def _title_number(title: str) -> tuple[str, str] | None:
    """The number a heading opens with, and the word before it: 'Chapter III Results' ->
    ('chapter', 'III'), '4.2 Methods' -> ('', '4.2'), '第3章 結論' -> ('章', '3'),
    'B. Data' -> ('', 'B'). A bare roman numeral or letter counts only before '.', ':' or
    ')' ('A Study of ...' opens with no number)."""
    m = _TITLE_NUMBER.match(_ascii_width(title))
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
    if (num[0] in _KANJI_DIGITS or num[0] in "十百") and word not in ("章", "節"):
        return None
    if not word and not num[0].isdigit() and _roman_to_int(num) is None and len(num) > 1:
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
    x, y = _as_int(a), _as_int(b)
    return x is not None and x == y


def _strip_word(number: str, words: str) -> str:
    return re.sub(rf"^\s*(?:{words})\s*", "", _ascii_width(number), flags=_I)


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


_TOKEN = re.compile(r"[a-z0-9]+|[\u3040-\u30ff\u3400-\u9fff]+")


def _title_tokens(text: str) -> set[str]:
    """Words of a title without stopwords, plural 's' dropped; CJK as character bigrams."""
    words = _TOKEN.findall(_ascii_width(text).lower())
    out: set[str] = set()
    for word in words:
        if word[0] >= "\u3040":  # kana and kanji: character bigrams
            out.update(word[i : i + 2] for i in range(max(1, len(word) - 1)))
        elif word not in _TITLE_STOPWORDS:
            out.add(word[:-1] if len(word) > 3 and word.endswith("s") and word[-2] != "s" else word)
    if not out:
        out = set(words)
    return out


def _resolve_titled(
    reference: StructuralReference, structure: DocumentStructure, count: int
) -> Resolution:
    title = reference.value
    if not title:
        return Resolution([], "no title")
    wanted = _title_tokens(title)
    if not wanted:
        return Resolution([], f"no section titled '{title}'")
    scored = []
    for order, section in enumerate(structure.sections):
        have = _title_tokens(section.title)
        shared = len(wanted & have)
        coverage = shared / len(wanted)
        if coverage >= _TITLE_MATCH:
            jaccard = shared / len(wanted | have)
            scored.append((-coverage, -jaccard, order, section))
    scored.sort(key=lambda c: c[:3])
    pages = _section_pages([c[3] for c in scored], count)
    return Resolution(pages) if pages else Resolution([], f"no section titled '{title}'")


def _resolve_statement(reference: StructuralReference, structure: DocumentStructure) -> Resolution:
    kind = reference.value
    if kind not in STATEMENT_NAMES:
        return Resolution([], f"no statement '{kind}'")
    pages = statement_pages(kind, structure)
    return Resolution(pages) if pages else Resolution([], f"no {STATEMENT_NAMES[kind]}")


def resolve_reference(reference: StructuralReference, structure: DocumentStructure) -> Resolution:
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
    - statement: the primary financial statement's pages (:mod:`query.statements`).

    A section resolves to its span, at most ``MAX_SPAN_PAGES`` pages over all matches.
    """
    count = _page_count(structure)
    kind = reference.kind
    if kind in ("page", "slide"):
        return _resolve_page(reference, structure)
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
    if kind == "statement":
        return _resolve_statement(reference, structure)
    return _resolve_titled(reference, structure, count)
