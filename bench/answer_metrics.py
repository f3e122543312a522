"""What ``bench/eval_answers.py`` measures of an extractive answer's lead and its quotes (issue 31,
"Measure it"): pure functions over plain values and :class:`~pagesight.core.types.AnswerResponse`
objects, no index and no model, so each rule is unit-tested on hand-made inputs.

- **The lead** (:func:`lead_of`): ``response.lead`` with the pages of its citations' parts. In
  the baseline (``answer.extractive = "quotes"``) a response may have no ``lead``: its lead is
  then today's first quote, ``response.sentences[0]`` with its first citation, and its value the
  one :func:`bench.answer_scoring.extract_value` takes out of that sentence for the question's
  format. An abstention has no lead.
- **Printable** (:func:`find_printed`): whether a gold value is printed on a page as a whole
  token with its unit or sign. Both sides are NFKC-normalised (full-width digits and ``％``),
  whitespace collapsed, line breaks read as spaces. A gold that is a number (``"35%"``,
  ``"$3.6 billion"``, ``"-3.65%"``, ``"1,234億円"``, ``"3600"``) must be printed as a number that:

  - is a whole token: no letter, digit or decimal point glued to it (``Q4``, ``FY2022``,
    ``240V`` and the ``07`` of ``2009-07`` are not tokens);
  - carries the gold's unit: ``%`` (or ``percent``) for a percentage, the same currency sign
    (``$``, ``€``, ``£``, ``¥``) and the same Japanese counter (``円``, ``人``, ``件``, ...);
    a unit the gold lacks may be printed ("45" is found as "45%", "0.052" as "5.2%");
  - carries its sign: a negative gold needs a minus or accounting parentheses (``(3.65)%``); a
    positive gold is not matched by a minus;
  - has the same value: thousands separators are ignored (gold 3600 matches "3,600"); without a
    scale word on either side the values must be equal; when one side only has one
    (``million``, ``billion``, ``mn``, ``bn``, ``$3.6B``, ``万``, ``億``, ``兆``) the document's
    own scale is allowed: the values may differ by a power of 1,000 or 10,000 ("$3.6 billion"
    is found as "$3,600" in a table in millions, "$ 17966 million" as "$17,966"); with scales
    on both sides, or a Japanese counter (``3万人`` is 30000人, never 3人), they must be equal
    once scaled;
  - is never a bare integer under 10: such a gold (``"3"``) is not printable.

  Any other gold is a string, found case-folded as a whole token (no ASCII letter or digit
  glued to either end); ``Yes`` / ``No`` never count (not a value printed anywhere).
- **Exact citations** (:func:`quote_on_page`): a quote occurs on a page when each of its pieces
  occurs in the page's text, case-folded, whitespace ignored (collapsed and also removed, since
  the text layer breaks lines inside CJK sentences where a quote has none; a hyphen at a line
  break may be dropped, as the parser joins such words), or reads as the page's printed lines
  in a row (the end of a line, whole lines, the start of a line: the text layer interleaves
  the lines of side-by-side table cells and chart labels). Pieces: a table-cell quote's
  ``" | "``-separated cells (markdown row pipes too), and the sentences a citation joins with
  ``" … "``; an empty quote (an image block) is not a quote.
- **Words** (:func:`count_words`): whitespace-separated words with a letter or digit (not a
  table's ``|`` or a bullet), a run of CJK characters counting as ``len / 2`` words (about two
  characters a word in Japanese).
- **Trade-off** (:func:`tradeoff`): the abstention rates if ``answer.min_coverage`` were each
  threshold, from each row's coverage (an abstention for another reason stays one).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.answer_scoring import NOT_ANSWERABLE, extract_value, score_value

# -- words -------------------------------------------------------------------------------------

_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+")


def count_words(text: str) -> float:
    """Words of ``text``: whitespace-separated tokens with a letter or digit (a table's ``|``,
    a bullet or a dash is none), each run of CJK characters counting as half its length (a CJK
    run glued to Latin text is counted apart from it)."""
    cjk = 0.0
    for run in _CJK_RUN.findall(text):
        cjk += len(run) / 2
    rest = _CJK_RUN.sub(" ", text)
    return cjk + sum(1 for token in rest.split() if re.search(r"\w", token))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by linear interpolation between order statistics (the
    median for 0.5); ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    value = ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    return round(value, 2)


# -- printable: is the gold value printed on the page? -----------------------------------------

_MINUS = "-−–"
_CURRENCY = "$€£¥₹"
_SCALE_WORDS = {
    "thousand": 1e3,
    "million": 1e6,
    "mn": 1e6,
    "mln": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "bln": 1e9,
    "trillion": 1e12,
}
#: Single-letter scales, only after a currency sign ("$3.6B", "$2,018M").
_SCALE_LETTERS = {"k": 1e3, "m": 1e6, "b": 1e9}
_CJK_SCALES = {"千": 1e3, "万": 1e4, "百万": 1e6, "千万": 1e7, "億": 1e8, "兆": 1e12}
_CJK_UNITS = (
    "円", "ドル", "人", "名", "件", "社", "台", "戸", "回", "倍", "歳", "か所", "箇所", "ヵ所",
    "カ所", "か国", "カ国", "トン", "世帯", "時間", "日", "か月", "ヶ月", "カ月", "年",
)  # fmt: skip

_NUMBER_BODY = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
_NUMBER_TOKEN = re.compile(
    r"(?P<open>\(\s?)?"
    rf"(?:(?P<minus>[{_MINUS}])\s?)?(?:(?P<currency>[{re.escape(_CURRENCY)}])\s?)?"
    rf"(?P<minus2>[{_MINUS}])?"
    rf"(?P<number>{_NUMBER_BODY})"
    r"(?P<close1>\s?\))?"
    r"(?:\s?(?P<percent>%|percent\b|per\s?cent\b))?"
    r"(?P<close2>\s?\))?"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|mn|mln|bn|bln)\b"
    r"|(?P<letter>[kmb])\b)?"
    r"(?:\s?(?P<cjk_scale>百万|千万|千|万|億|兆))?"
    rf"(?:\s?(?P<cjk_unit>{'|'.join(sorted(map(re.escape, _CJK_UNITS), key=len, reverse=True))}))?",
    re.IGNORECASE,
)
#: Before a whole token: not a letter, a digit, a decimal point, nor "digit-" / "digit:" etc.
_GLUED_BEFORE = re.compile(r"(?:[A-Za-z0-9_.]|\d[-/:])$")
#: After a whole token: not a letter or digit, nor one after "-", "/", ":" or "." ("10-K",
#: "100-240V", "2009-07", "1.5.2"), nor a digit after a comma.
_GLUED_AFTER = re.compile(r"^(?:[A-Za-z0-9_]|[-/:.][A-Za-z0-9]|,\d)")
_YES_NO = frozenset(("yes", "no", "true", "false"))


@dataclass(frozen=True)
class Amount:
    """A number as printed: its value (separators removed, unscaled), sign, unit and scale."""

    value: float
    negative: bool
    parenthesised: bool
    currency: str | None
    percent: bool
    scale: float  # 1.0 when no scale word
    unit: str | None  # a Japanese counter (円, 人, ...)
    integer: bool  # written without a decimal point


def normalise_text(text: str) -> str:
    """NFKC (full-width digits and ``％``), whitespace collapsed; case kept."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def _amount(match: re.Match[str]) -> Amount:
    number = match.group("number")
    scale = 1.0
    if match.group("scale"):
        scale = _SCALE_WORDS[match.group("scale").casefold()]
    elif match.group("letter"):
        scale = _SCALE_LETTERS[match.group("letter").casefold()]
    if match.group("cjk_scale"):
        scale *= _CJK_SCALES[match.group("cjk_scale")]
    opened = bool(match.group("open"))
    closed = bool(match.group("close1") or match.group("close2"))
    return Amount(
        value=float(number.replace(",", "")),
        negative=bool(match.group("minus") or match.group("minus2")),
        parenthesised=opened and closed,
        currency=match.group("currency"),
        percent=bool(match.group("percent")),
        scale=scale,
        unit=match.group("cjk_unit"),
        integer="." not in number,
    )


def parse_amount(gold: str) -> Amount | None:
    """``gold`` as an :class:`Amount` when the whole of it is one number with its sign, unit
    and scale (``"$3.6 billion"``, ``"-3.65%"``, ``"1,234億円"``); else ``None``."""
    text = normalise_text(gold).strip("\"'“”‘’ ").rstrip(".")
    if text.startswith("+"):
        text = text[1:]
    match = _NUMBER_TOKEN.fullmatch(text)
    if match is None or (match.group("letter") and not match.group("currency")):
        return None
    return _amount(match)


def too_plain(amount: Amount) -> bool:
    """A bare integer under 10 (no unit, sign, currency or scale): printed on every page."""
    return (
        amount.integer
        and abs(amount.value) < 10
        and not (amount.percent or amount.currency or amount.unit or amount.negative)
        and amount.scale == 1.0
    )


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def _same_scaled(gold: Amount, printed: Amount) -> bool:
    """Equal values; with a scale word on one side only, equal up to a power of 1,000 or
    10,000 (the document's own scale: a table "in millions"). With a scale on both sides, or a
    Japanese counter (億円 is a unit of its own), the scaled values must be equal."""
    if gold.scale == 1.0 and printed.scale == 1.0:
        return _same(gold.value, printed.value)
    a, b = gold.value * gold.scale, printed.value * printed.scale
    if a == 0 or b == 0 or gold.unit or (gold.scale != 1.0 and printed.scale != 1.0):
        return _same(a, b)
    for base in (1e3, 1e4):
        for k in range(-4, 5):
            if _same(a, b * base**k):
                return True
    return False


def amount_matches(gold: Amount, printed: Amount) -> bool:
    """Whether ``printed`` is the gold value with its unit and sign (see the module doc)."""
    if too_plain(gold):
        return False
    if gold.currency and printed.currency != gold.currency:
        return False
    if gold.unit and printed.unit != gold.unit:
        return False
    if gold.negative:
        if not (printed.negative or printed.parenthesised):
            return False
    elif printed.negative:
        return False
    if gold.percent:
        return printed.percent and _same_scaled(gold, printed)
    if printed.percent and not gold.currency and gold.scale == 1.0:
        # a plain gold printed as a percentage: the same number, or the fraction * 100
        return _same(gold.value, printed.value) or _same(gold.value * 100, printed.value)
    return _same_scaled(gold, printed)


@dataclass(frozen=True)
class Printed:
    """Where a gold value was found: the page and the printed line(s) around it."""

    page: int
    line: str


class _PageLines:
    """A page's text as lines (NFKC, whitespace collapsed) and as one string of them joined by
    spaces, with each line's offset there, so a match that crosses a line break is found."""

    def __init__(self, text: str) -> None:
        self.lines = [line for line in (normalise_text(raw) for raw in text.splitlines()) if line]
        self.starts: list[int] = []
        offset = 0
        for line in self.lines:
            self.starts.append(offset)
            offset += len(line) + 1
        self.joined = " ".join(self.lines)

    def lines_at(self, start: int, end: int) -> str:
        picked = [
            line
            for line, first in zip(self.lines, self.starts, strict=True)
            if first < end and first + len(line) > start
        ]
        return " / ".join(picked)


def _whole(text: str, start: int, end: int) -> bool:
    """No letter, digit or decimal point glued to ``text[start:end]``; before a currency sign
    or an opening bracket only a digit or a point counts ("US$3.6" is a token)."""
    before = text[max(0, start - 2) : start]
    if text[start : start + 1] in f"({_CURRENCY}":
        glued = bool(re.search(r"[0-9.]$", before))
    else:
        glued = bool(_GLUED_BEFORE.search(before))
    return not glued and not _GLUED_AFTER.match(text[end : end + 2])


def printed_amount(gold: Amount, page: _PageLines) -> tuple[int, int] | None:
    """The first place ``page`` prints ``gold`` (character offsets in ``page.joined``)."""
    for match in _NUMBER_TOKEN.finditer(page.joined):
        start, end = match.span()
        # a number glued to the end of a word ("Q4", "FY2022") is no token; a bracket or sign
        # before it is part of the match
        if not _whole(page.joined, start, end):
            continue
        if match.group("letter") and not match.group("currency"):
            # "5m" of a length is no amount; read it without the letter
            end = match.start("letter")
            if _GLUED_AFTER.match(page.joined[end : end + 2]):
                continue
            retry = _NUMBER_TOKEN.fullmatch(page.joined[start:end].rstrip())
            if retry is None:
                continue
            match = retry
        if amount_matches(gold, _amount(match)):
            return start, end
    return None


def _string_key(text: str) -> str:
    return normalise_text(text).casefold()


def printed_string(gold: str, page: _PageLines) -> tuple[int, int] | None:
    """The first whole-token occurrence of the string ``gold`` (case-folded) in ``page``;
    between CJK characters a line break (a space here) may fall anywhere."""
    needle = _string_key(gold).strip("\"'“”‘’ ").rstrip(".").strip()
    if len(needle) < 2 or needle in _YES_NO:
        return None
    haystack = page.joined.casefold()
    if _CJK_RUN.search(needle):
        body = r"\s?".join(re.escape(char) for char in needle.replace(" ", ""))
    else:
        body = r"\s".join(re.escape(word) for word in needle.split())
    for match in re.finditer(r"(?<![A-Za-z0-9_])" + body, haystack):
        start, end = match.span()
        if not re.match(r"[A-Za-z0-9_]", haystack[end : end + 1]):
            return start, end
    return None


def find_printed(gold: str, pages: Mapping[int, str]) -> Printed | None:
    """The first evidence page (in ``pages``' order) that prints ``gold`` as a whole token with
    its unit or sign, and the line where it is; ``None`` when none does (module doc)."""
    amount = parse_amount(gold)
    if amount is not None and too_plain(amount):
        return None
    for number, text in pages.items():
        page = _PageLines(text)
        found = printed_amount(amount, page) if amount is not None else printed_string(gold, page)
        if found is not None:
            return Printed(page=number, line=page.lines_at(*found))
    return None


# -- exact citations ---------------------------------------------------------------------------

_ELISION = re.compile(r"\s+…\s+|\s*\.\.\.\s+")
_CELL = re.compile(r"\s\|\s")


def quote_pieces(quote: str) -> list[str]:
    """The pieces of a quote that must each be printed on its page: the sentences it joins with
    " … ", and the cells of a table row (" | "-separated; a markdown row's outer pipes go)."""
    out: list[str] = []
    for sentence in _ELISION.split(quote):
        text = " ".join(sentence.split())
        if text.startswith("|"):
            text = text[1:]
        if text.endswith("|"):
            text = text[:-1]
        for cell in _CELL.split(f" {text} "):
            cell = cell.strip()
            if cell and not re.fullmatch(r"[\s|:\-+=]*", cell):
                out.append(cell)
    return out


_LINE_END_HYPHEN = re.compile(r"(?<=\w)-[ \t]*\n\s*(?=\w)")


def _squeeze(text: str) -> str:
    return "".join(text.casefold().split())


def _made_of_lines(piece: str, lines: Sequence[str]) -> bool:
    """Whether ``piece`` (squeezed) reads as consecutive printed lines: the end of one line,
    then whole lines, then the start of one (each squeezed). The text layer interleaves the
    lines of side-by-side cells and chart labels, so a cell printed on three lines of its own
    column is no substring of the page's text, yet every line of it is printed there."""
    if not piece:
        return False
    todo = [
        cut for cut in range(1, len(piece) + 1) if any(line.endswith(piece[:cut]) for line in lines)
    ]
    seen = set(todo)
    while todo:
        position = todo.pop()
        rest = piece[position:]
        if not rest or any(line.startswith(rest) for line in lines):
            return True
        for line in lines:
            if rest.startswith(line) and position + len(line) not in seen:
                seen.add(position + len(line))
                todo.append(position + len(line))
    return False


class PageText:
    """A page's text as the exactness check reads it (built once per page)."""

    def __init__(self, text: str) -> None:
        self.collapsed = " ".join(text.casefold().split())
        self.squeezed = _squeeze(text)
        #: a word hyphenated at a line break, read joined ("lower-\nmargin" as "lowermargin")
        self.dehyphenated = _squeeze(_LINE_END_HYPHEN.sub("", text))
        self.lines = sorted({line for line in map(_squeeze, text.splitlines()) if line})

    def has(self, piece: str) -> bool:
        squeezed = _squeeze(piece)
        return (
            " ".join(piece.casefold().split()) in self.collapsed
            or squeezed in self.squeezed
            or squeezed in self.dehyphenated
            or _made_of_lines(squeezed, self.lines)
        )


def quote_on_page(quote: str, page_text: str | PageText) -> bool:
    """Whether every piece of ``quote`` is printed on the page of ``page_text``: as a
    substring of its text (case-folded, whitespace ignored), or line by line (the end of a
    line, whole lines, the start of a line: a multi-line cell, a chart's labels). An empty
    quote is never on a page (callers skip image citations)."""
    pieces = quote_pieces(quote)
    if not pieces:
        return False
    page = page_text if isinstance(page_text, PageText) else PageText(page_text)
    return all(page.has(piece) for piece in pieces)


@dataclass(frozen=True)
class Quote:
    """One quoted span a response shows: the document and page it cites, and its text."""

    doc_id: str
    page: int
    text: str
    n: int
    related: bool


def quotes_of(response: Any) -> list[Quote]:
    """Every text quote of ``response`` (an :class:`~pagesight.core.types.AnswerResponse`): each
    part of each citation, in ``citations`` and in ``related``; a citation without parts counts as
    one quote on its ``page_number``. Image citations and empty quotes are left out."""
    out: list[Quote] = []
    for related, citations in ((False, response.citations), (True, response.related)):
        for citation in citations:
            if getattr(citation, "kind", "text") == "image":
                continue
            parts = list(getattr(citation, "parts", []) or [])
            if parts:
                for part in parts:
                    if part.text.strip():
                        out.append(
                            Quote(citation.doc_id, part.page_number, part.text, citation.n, related)
                        )
            elif citation.quote.strip():
                out.append(
                    Quote(
                        citation.doc_id, citation.page_number, citation.quote, citation.n, related
                    )
                )
    return out


# -- the lead ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lead:
    """What the answer leads with: the unit's text, kind and value, and the (doc id, page) of
    every part of every citation it carries."""

    text: str
    kind: str
    value: str | None
    pages: tuple[tuple[str, int], ...]
    from_sentence: bool  # the baseline's stand-in: today's first quote


def _cited_pages(response: Any, numbers: Iterable[int]) -> tuple[tuple[str, int], ...]:
    by_n = {citation.n: citation for citation in response.citations}
    pages: list[tuple[str, int]] = []
    for n in numbers:
        citation = by_n.get(n)
        if citation is None:
            continue
        parts = list(getattr(citation, "parts", []) or [])
        for page in [part.page_number for part in parts] or [citation.page_number]:
            if (citation.doc_id, page) not in pages:
                pages.append((citation.doc_id, page))
    return tuple(pages)


def lead_of(response: Any, answer_format: str, baseline: bool) -> Lead | None:
    """The lead of ``response``: its ``lead`` unit; in the baseline (``baseline``: the quotes
    mode) without one, the first sentence with its first citation, its value extracted by
    :func:`~bench.answer_scoring.extract_value` for ``answer_format``. ``None`` when it
    abstained or leads with nothing."""
    if response.abstained:
        return None
    lead = response.lead
    if lead is not None:
        return Lead(
            text=lead.text,
            kind=lead.kind,
            value=lead.value,
            pages=_cited_pages(response, lead.citations),
            from_sentence=False,
        )
    if not baseline or not response.sentences:
        return None
    first = response.sentences[0]
    value = extract_value(first.text, answer_format)
    return Lead(
        text=first.text,
        kind="sentence",
        value=None if isinstance(value, list) or value == NOT_ANSWERABLE else value,
        pages=_cited_pages(response, first.citations[:1]),
        from_sentence=True,
    )


def lead_value_score(gold: str, answer_format: str, lead: Lead | None) -> float:
    """The lead's value scored as :func:`~bench.answer_scoring.score_value` scores; no lead or
    no value scores 0 (never "any number in the unit"). The value is quoted verbatim, so for
    Int and Float its number is read the way the scorer reads an answer ("$3.6 billion" is 3.6,
    "29 percent" is 29: :func:`~bench.answer_scoring.extract_value`)."""
    if lead is None or lead.value is None or not lead.value.strip():
        return 0.0
    value: str | None = lead.value
    if answer_format in ("Int", "Float"):
        extracted = extract_value(lead.value, answer_format)
        value = extracted if isinstance(extracted, str) else None
    return 0.0 if value is None else score_value(gold, value, answer_format)


# -- page text of the OCR layer ----------------------------------------------------------------


def _span_fields(span: Any) -> tuple[int, int, int] | None:
    if isinstance(span, Mapping):
        try:
            return int(span["start"]), int(span["end"]), int(span["page_number"])
        except (KeyError, TypeError, ValueError):
            return None
    if isinstance(span, list | tuple) and len(span) >= 3:
        try:
            return int(span[0]), int(span[1]), int(span[2])
        except (TypeError, ValueError):
            return None
    return None


def index_page_texts(payloads: Iterable[Mapping[str, Any]]) -> dict[int, str]:
    """Each page's text as the index holds it, from one document's chunk payloads (in chunk
    order): a chunk's characters on each page by its ``spans`` when the payload carries them,
    else the whole chunk text for each page it covers (a chunk across a page break then counts
    on both). ``table_row`` units are left out: their text repeats headers next to each row,
    which is not printed that way."""
    texts: dict[int, list[str]] = {}
    ordered = sorted(payloads, key=lambda p: int(p.get("seq", 0)))
    for payload in ordered:
        if payload.get("unit", "chunk") != "chunk":
            continue
        text = str(payload.get("text", ""))
        spans = [s for s in (_span_fields(x) for x in payload.get("spans") or []) if s]
        if spans:
            for start, end, page in spans:
                texts.setdefault(page, []).append(text[start:end])
            continue
        for page in payload.get("page_numbers", []):
            texts.setdefault(int(page), []).append(text)
    return {page: "\n".join(parts) for page, parts in texts.items()}


# -- the trade-off curve -----------------------------------------------------------------------

THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(11))


def tradeoff(
    rows: Sequence[Mapping[str, Any]],
    min_coverage: float,
    thresholds: Sequence[float] = THRESHOLDS,
) -> list[dict[str, Any]]:
    """The abstention rates on unanswerable and on answerable questions if
    ``answer.min_coverage`` were each of ``thresholds``.

    Each row needs ``answerable``, ``abstained`` and ``coverage`` (``None``: not judged). A row
    abstained for coverage (judged below ``min_coverage``, the run's setting) answers at a
    threshold at or below its coverage; any other abstention stays; an answered row with a
    coverage abstains at a threshold above it."""
    out = []
    for threshold in thresholds:
        rates: dict[str, Any] = {"min_coverage": threshold}
        for key, answerable in (("unanswerable", False), ("answerable", True)):
            group = [r for r in rows if bool(r["answerable"]) is answerable]
            abstained = []
            for row in group:
                coverage = row.get("coverage")
                for_coverage = coverage is not None and coverage < min_coverage
                other = bool(row["abstained"]) and not for_coverage
                abstained.append(other or (coverage is not None and coverage < threshold))
            rates[f"abstain_rate_{key}"] = (
                round(sum(abstained) / len(abstained), 4) if abstained else None
            )
        out.append(rates)
    return out
