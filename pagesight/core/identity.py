"""Who a document is: its issuer or organisation, its kind of report, its period, its title and
file name, read from its first pages (issue 34).

A question asked of a corpus often names its document instead of its page: "What was
Globex's FY2022 capital expenditure?", "in the 2022 annual report", "J&J's US sales". The
query side (:mod:`pagesight.query.document_route`) resolves such mentions against every
document's :class:`DocumentIdentity`. It is read once, at ingest, from what the cover says
(:func:`identity_of`): the line above a filing's "(Exact name of registrant as specified in its
charter)", a name followed by its exchange ticker ("Globex Holdings, Inc. (NYSE: GBX)"), a
headline that reports or announces results, a cover line that is a company name with its legal
suffix ("ACME WIDGETS COMPANY"); the form ("FORM 10-K"), the period ("For the fiscal year ended
December 31, 2022", "Fourth Quarter and Full Year 2022"). Nothing is keyed on a file name:
the file name is one more, separate, identity field.

Both sides import it from here (ingestion writes it, the query side derives the same identity
from the index's chunks for a document stored before identities were kept), so it lives in
``core`` like :mod:`pagesight.core.numbering`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

#: How many of a document's first pages its identity is read from.
IDENTITY_PAGES = 3
#: Longest name kept (characters): a longer "name" is a sentence.
MAX_NAME_CHARS = 80
#: Legal-form words a name is known without ("Acme Widgets" for "ACME WIDGETS CO., INC.").
LEGAL_SUFFIXES = frozenset(
    {
        "inc", "incorporated", "corp", "corporation", "co", "company", "companies", "ltd",
        "limited", "plc", "llc", "lp", "llp", "sa", "ag", "nv", "se", "spa", "bv", "gmbh",
        "holdings", "holding", "group", "the",
    }
)  # fmt: skip
#: Words too common in names and questions to identify a company on their own ("American" is
#: also an adjective; "General", "National" name dozens of companies).
COMMON_NAME_WORDS = frozenset(
    {
        "american", "america", "national", "general", "united", "international", "global",
        "first", "new", "best", "great", "royal", "standard", "southern", "northern", "western",
        "eastern", "pacific", "atlantic", "central", "federal", "public", "state", "states",
        "world", "bank", "capital", "financial", "energy", "health", "services", "systems",
        "technologies", "technology", "industries", "resources", "products", "brands",
        "resorts", "foods", "research", "center", "report", "annual", "data",
    }
)  # fmt: skip
_LEGAL_FORM = (
    r"(?:Inc\.?|INC\.?|Incorporated|Corporation|CORPORATION|Corp\.?|CORP\.?|Company|COMPANY|"
    r"Co\.|CO\.|plc|PLC|Limited|LIMITED|Ltd\.?|LTD\.?|LLC|L\.P\.|N\.V\.|S\.A\.|AG|SE)"
)
_NAME_WORD = r"(?:[A-Z0-9][\w&'’.\-]*|&|and|of)"
#: A line that is a company's name and legal form, nothing else ("3M COMPANY", "AMCOR PLC").
_NAME_LINE = re.compile(
    rf"^(?:THE |The )?{_NAME_WORD}(?:[ ,]+{_NAME_WORD}){{0,6}},? {_LEGAL_FORM}$"
)
_REGISTRANT = re.compile(r"exact name of (?:the )?registrant", re.IGNORECASE)
_CAPITAL_WORD = r"(?:[A-Z0-9][\w'’.\-]*|&)"
_TICKER = re.compile(
    rf"({_CAPITAL_WORD}(?:[ ,]+{_CAPITAL_WORD}){{0,5}})?\s*\(\s*"
    r"(?:NYSE|NASDAQ|Nasdaq|NYSE American|AMEX|LSE|TSX)\s*:\s*([A-Z][A-Z.]{0,5})\s*\)"
)
_HEADLINE = re.compile(
    r"^(?P<name>[A-Z0-9][\w&'’.,\- ]{1,60}?)\s+(?:Reports|REPORTS|Announces|ANNOUNCES|"
    r"Delivers|DELIVERS|Posts|POSTS)\s+(?P<rest>.*)$"
)
_FORM = re.compile(r"\bFORM\s+(10-K|10-Q|8-K|20-F|40-F|6-K)\b", re.IGNORECASE)
_ENDED = re.compile(
    r"\b(?P<what>fiscal year|year|quarterly period|quarter|period|twelve months|three months)"
    r"\s+ended\s+(?:[A-Z][a-z]+\.?\s+\d{1,2}(?:st|nd|rd|th)?,?|\d{1,2}(?:st|nd|rd|th)?\s+"
    r"[A-Z][a-z]+,?)\s+(?P<year>(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_QUARTER_WORD = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_QUARTER_OF_YEAR = re.compile(
    r"\b(?P<q>first|second|third|fourth)[- ]quarter\b(?:[^.\n]{0,30}?)\b(?P<year>(?:19|20)\d\d)\b"
    r"|\b(?P<year2>(?:19|20)\d\d)\s+(?P<q2>first|second|third|fourth)[- ]quarter\b",
    re.IGNORECASE,
)
_FISCAL_YEAR = re.compile(r"\b(?:fiscal(?: year)?|fy|full[- ]year)\s*'?((?:19|20)\d\d)\b", re.I)
_ANNOUNCED = re.compile(r"\btoday (?:announced|reported) (?:its )?(?:financial )?results\b", re.I)
_ANNUAL_REPORT = re.compile(r"\bannual report\b", re.IGNORECASE)
#: What a filing's cover names besides its issuer: exchanges, filer categories.
_NOT_A_NAME = re.compile(
    r"\b(?:exchange|stock market|reporting company|growth company|filer|registrant|securities)\b",
    re.IGNORECASE,
)
_SPACES = re.compile(r"[\s\u00a0]+")


class DocumentIdentity(BaseModel):
    """What a document is, as a question may name it (module doc)."""

    names: list[str] = Field(
        default_factory=list, description="issuer or organisation names, most certain first"
    )
    aliases: list[str] = Field(
        default_factory=list, description="exchange tickers read next to the name ('ULTA')"
    )
    title: str | None = None
    kind: str | None = Field(
        default=None, description="'10-K', '10-Q', '8-K', 'annual report', 'earnings release'"
    )
    years: list[int] = Field(default_factory=list, description="the periods it reports on")
    quarter: int | None = Field(default=None, ge=1, le=4)
    file_name: str | None = None


def clean_line(line: str) -> str:
    """One line with its whitespace (no-break spaces included) folded and trimmed."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", line)).strip()


def first_pages(texts: Mapping[int, str]) -> list[str]:
    """The texts of pages 1 to :data:`IDENTITY_PAGES` of ``texts`` (page number -> text, as
    :func:`pagesight.ingestion.domains.element_page_texts` and ``chunk_page_texts`` build
    them), '' for a page with none."""
    return [texts.get(n, "") for n in range(1, IDENTITY_PAGES + 1)]


def identity_of(
    page_texts: Sequence[str], title: str | None = None, file_name: str | None = None
) -> DocumentIdentity:
    """The identity of a document whose first pages read ``page_texts`` (in page order)."""
    lines = [clean_line(line) for text in page_texts[:IDENTITY_PAGES] for line in text.splitlines()]
    lines = [line for line in lines if line]
    names, aliases, headline = _names(lines)
    kind = _kind(lines, title)
    if kind is None and (headline or any(_ANNOUNCED.search(line) for line in lines[:80])):
        kind = "earnings release"
    years, quarter = _periods(lines[:150], title)
    return DocumentIdentity(
        names=names[:4],
        aliases=aliases[:4],
        title=title,
        kind=kind,
        years=years,
        quarter=quarter,
        file_name=file_name,
    )


def _names(lines: Sequence[str]) -> tuple[list[str], list[str], bool]:
    """(names, tickers, whether a headline reports results) read on the first pages, the
    most certain first: the registrant's line, a results headline, a name with its ticker,
    a line that is a name with its legal form."""
    names: list[str] = []
    aliases: list[str] = []
    headline = False

    def add(name: str | None) -> None:
        name = clean_name(name or "")
        if name and name.lower() not in (n.lower() for n in names):
            names.append(name)

    for i, line in enumerate(lines):
        if _REGISTRANT.search(line):
            add(_line_before(lines, i))
    for line in lines[:80]:
        match = _HEADLINE.match(line)
        if match and re.search(r"results|quarter|earnings|year", match["rest"], re.I):
            add(match["name"])
            headline = True
    for line in lines[:120]:
        for match in _TICKER.finditer(line):
            add(match.group(1))
            ticker = match.group(2).rstrip(".")
            if ticker not in aliases:
                aliases.append(ticker)
    for line in lines[:60]:
        if len(line) <= MAX_NAME_CHARS and _NAME_LINE.match(line):
            add(line)
    return names, aliases, headline


def clean_name(name: str) -> str:
    """A name as found, trimmed of what surrounds it on the page; '' when it is no name."""
    name = clean_line(name).strip(" ,;:-–—_")
    if not name or len(name) > MAX_NAME_CHARS or not any(c.isalpha() for c in name):
        return ""
    if not name_tokens(name) or _NOT_A_NAME.search(name):
        return ""
    return name


def name_tokens(name: str) -> list[str]:
    """A name's identifying words, lower-cased, without its legal form or a leading "the"
    ("BEST BUY CO., INC." -> ["best", "buy"]; "Amazon.com, Inc." -> ["amazon.com"])."""
    words = [w.strip(".,'’()") for w in re.split(r"[\s,]+", name.lower())]
    words = [w for w in words if w and w not in ("&", "and")]
    while words and words[-1].replace(".", "") in LEGAL_SUFFIXES:
        words.pop()
    if words and words[0] == "the":
        words = words[1:]
    return words


def _line_before(lines: Sequence[str], at: int) -> str | None:
    """The line above a cover's "(Exact name of registrant ...)": the name, skipping rules
    and file numbers; or the text before the parenthesis on the same line."""
    same = lines[at].split("(")[0].strip()
    if same and not _REGISTRANT.search(same):
        return same
    for line in reversed(lines[max(0, at - 4) : at]):
        if re.fullmatch(r"[_\-=\s]*", line) or re.search(r"file n(?:o|umber)", line, re.I):
            continue
        return line
    return None


def _kind(lines: Sequence[str], title: str | None) -> str | None:
    for line in lines[:60]:
        match = _FORM.search(line)
        if match:
            return match.group(1).upper()
    head = " ".join([title or "", *lines[:15]])
    if _ANNUAL_REPORT.search(head):
        return "annual report"
    return None


def _periods(lines: Sequence[str], title: str | None) -> tuple[list[int], int | None]:
    """The years the document reports on (most certain first) and its quarter, if one."""
    text = "\n".join([title or "", *lines])
    years: list[int] = []
    quarter: int | None = None
    for match in _ENDED.finditer(text):
        years.append(int(match["year"]))
        if quarter is None and "quarter" in match["what"].lower():
            quarter = 0  # a quarter, which one unknown
    for match in _QUARTER_OF_YEAR.finditer(text):
        word = (match["q"] or match["q2"]).lower()
        years.append(int(match["year"] or match["year2"]))
        if not quarter:
            quarter = _QUARTER_WORD[word]
    years += [int(m.group(1)) for m in _FISCAL_YEAR.finditer(text)]
    unique: list[int] = []
    for year in years:
        if year not in unique:
            unique.append(year)
    return unique[:4], quarter or None
