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

- ``parse_references(query)`` (here): regular expressions only, no model; it runs before every
  search. Each pattern runs only when the query holds one of its keywords (a substring
  test), so a question that names no structure costs ~30 us, 'What does Figure 4b on page 17
  show in Section 4.2?' ~130 us, '3ページの図2の凡例は？' ~30 us, and 10,000 characters of
  'page page ...' or 'Figure 1 and ...' under 10 ms (``python -m timeit -s "from
  pagesight.query.references import parse_references" "parse_references('...')"``, 2 shared CPU
  cores under load). Every pattern has a literal anchor (a keyword, a quote, a CJK counter word)
  and bounded repetition, so no input backtracks badly. It leaves running text alone: "the
  page", "pages of text", "table salt", "a figure of speech", "note that", "section" alone,
  "7 pages long", "the policy covers ...", a number alone.
- ``resolve_reference(reference, structure)`` (:mod:`pagesight.query.reference_resolution`,
re-exported
  here): exact look-ups only. A reference that leads nowhere (page 300 of 212, a Figure 9 the
  document does not number) resolves to no pages and a reason, never to a nearby guess.

English and Japanese forms; full-width digits and letters ("表２") read as ASCII; numerals are
read by :mod:`pagesight.core.numbering`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pagesight.core.numbering import (
    NUMBER_WORDS,
    as_int,
    ascii_width,
    ordinal,
    spelled_as_digits,
)
from pagesight.core.types import ReferenceKind as RefKind
from pagesight.core.types import StructuralReference
from pagesight.query.reference_resolution import (
    MAX_SPAN_PAGES,
    TITLE_STOPWORDS,
    Resolution,
    resolve_reference,
    title_tokens,
)

__all__ = [
    "MAX_REFERENCES",
    "MAX_SPAN_PAGES",
    "Resolution",
    "parse_references",
    "resolve_reference",
]

MAX_REFERENCES = 50
"""A query naming more places than this is not a question; the rest are dropped."""
_MAX_EXPAND = 10
"""'Figures 3-7' names each figure; a longer run of numbers keeps only its two ends."""


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
_CHAPTER_NUM = rf"(?:\d{{1,3}}(?!\w)|{_ROMAN}|(?:{'|'.join(NUMBER_WORDS)})(?!\w))"
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
    a, b = as_int(first), as_int(last)
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
        num = spelled_as_digits(m.group("num"))
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
            end = spelled_as_digits(end)
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
            values += [spelled_as_digits(x.group(0)) for x in more_re.finditer(rest)]
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
    positions = [ordinal(o) for o in (first, second) if o]
    return [("position", None, None, p) for p in positions if p is not None] or None


def _japanese_position(m: re.Match[str]) -> list[_Part] | None:
    """'最後から2番目' -2; '3枚目' 3."""
    n = as_int(m.group("n") or m.group("n2") or "")
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
    while words and words[-1].lower() in TITLE_STOPWORDS:
        words.pop()
    while words and words[0] in ("the", "a", "an"):
        words.pop(0)
    title = " ".join(words)
    if not title or _NOT_A_TITLE.match(title) or not title_tokens(title):
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
    return [("titled", title, None, None)] if title_tokens(title) else None


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
    return (m.start(), m.end(), [("titled", title, None, None)]) if title_tokens(title) else None


# ---- the rules ----------------------------------------------------------------------------


def _value(kind: RefKind, group: str = "num") -> Callable[[re.Match[str]], list[_Part]]:
    return lambda m: [(kind, spelled_as_digits(m.group(group)), None, None)]


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
            lambda m: [
                ("chapter", spelled_as_digits(m.group("num") or m.group("num2")), None, None)
            ],
        ),
    ),
    _on(
        ("節",),
        _simple(
            r"第\s*(?P<num>\d{1,3}|" + _KANJI_NUM + r")\s*節"
            r"|(?<![全計約\d.])(?P<num2>\d{1,3}(?:\.\d{1,3}){0,3})\s*節",
            lambda m: [
                ("section", spelled_as_digits(m.group("num") or m.group("num2")), None, None)
            ],
        ),
    ),
    _on(
        ("第",),
        _simple(
            r"第\s*(?P<num>\d{1,3}|" + _KANJI_NUM + r")\s*(?P<what>図|表)",
            lambda m: [
                (
                    "figure" if m.group("what") == "図" else "table",
                    spelled_as_digits(m.group("num")),
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
    s = ascii_width(query)
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
