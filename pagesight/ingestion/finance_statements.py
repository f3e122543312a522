"""Primary financial statements read off a document's pages: the ingest half of the ``finance``
domain pack (:mod:`pagesight.query.domains.finance` is the query half).

Why at ingest, and by content: the finance pack's glossary ("capex" means the cash flow
statement) and its weight of 3 in fusion are right for a filing and wrong for a manual or a
survey that says "revenue" (issue 34). Whether a document carries primary statements is read
once, from what its pages print, never from its file name:

- **A statement page** (:func:`statement_page`) has a statement title line near its top
  ("CONSOLIDATED STATEMENTS OF OPERATIONS", often under a company-name line and absent from the
  outline; "連結貸借対照表"), period columns (two or more years, or "Three Months Ended",
  "Fiscal Years Ended", "As of"), and that statement's own line items ("Net cash provided by
  operating activities", "Total current assets"). Its confidence grows with each of those.
- **Never a statement page**: "Selected Financial Data" (a five-year summary of the same line
  items), an index to the financial statements (every statement title on one page, page
  numbers beside them), a discussion or a note about a statement; such a page with a
  statement title is kept with a low confidence, so that a section title pointing at it (an
  outline entry "Consolidated Statements of Operations Data") weighs less.
- **The document** (:func:`detect_finance`) carries primary statements when at least two
  different statements have a confident page, or one statement has two sure ones (an
  earnings release's quarter and full-year statements of earnings): one stray title does not
  switch the pack on.

Pure functions over text (a page's lines), cheap (regular expressions over at most
``MAX_PAGE_CHARS`` characters per page), never raising on odd input.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Literal

from pagesight.core.structure import DomainMark, DomainPage, StructureSection

#: The pack's name, as structures, settings and traces spell it.
FINANCE = "finance"

StatementKind = Literal["income", "balance", "cash_flows", "equity", "comprehensive"]

STATEMENT_NAMES: dict[StatementKind, str] = {
    "income": "income statement",
    "balance": "balance sheet",
    "cash_flows": "cash flow statement",
    "equity": "statement of equity",
    "comprehensive": "statement of comprehensive income",
}

#: Characters of a page read (a statement page is a table of a few thousand characters).
MAX_PAGE_CHARS = 20_000
#: Lines from the top of a page where a statement's title may stand (exhibit number, company
#: name, title, "(In millions, except per share data)", "(Unaudited)").
TITLE_LINES = 8
#: A title line is short; a longer line is running text that mentions a statement.
MAX_TITLE_LINE = 120
#: Confidence of a page at or above which it counts towards detecting the document.
CONFIDENT = 0.7
#: Different statements with a confident page that make a document carry primary statements.
MIN_STATEMENTS = 2
#: A page this sure of itself; two of one statement also make the document carry statements.
SURE = 0.9

# --- Titles, matched on the title's letters only (a text layer splits 'Incom e', 'Shee t'), in
# this order: 'Statements of Comprehensive Income' is not the income statement.
_TITLE_PATTERNS: list[tuple[StatementKind, re.Pattern[str]]] = [
    ("comprehensive", re.compile(r"statements?of(?:consolidated)?comprehensive(?:income|loss)")),
    ("cash_flows", re.compile(r"statements?of(?:consolidated)?cashflows?|cashflowstatements?")),
    (
        "balance",
        re.compile(
            r"balancesheets?|statements?of(?:consolidated)?financial(?:position|condition)"
            r"|statements?ofcondition"
        ),
    ),
    (
        "equity",
        re.compile(
            r"statements?of(?:changesin)?(?:consolidated)?(?:shareholders|stockholders|shareowners)?"
            r"(?:equity|deficit)"
        ),
    ),
    (
        "income",
        re.compile(
            r"statements?of(?:consolidated)?(?:income|operations|earnings)(?!tax)"
            r"|incomestatements?|profitandloss|profitorloss"
        ),
    ),
]
# A section about a statement, not the statement: 'Off-Balance Sheet Arrangements',
# 'Supplemental Cash Flow Statement Information', 'Analysis of the Consolidated Statements of
# Income', 'NOTE 6. Supplemental Income Statement Information', 'Selected ... Information'.
_NOT_THE_STATEMENT = re.compile(
    r"\b(?:off[\s-]*balance|supplement(?:al|ary)|analysis|discussion|selected|information"
    r"|highlights|note\s+\d|notes\s+to|index\s+to|summary)\b|\bdata\s*:?\s*$",
    re.IGNORECASE,
)
# Japanese statement names (有価証券報告書, 決算短信), read on titles without spaces; in this
# order, so 損益及び包括利益計算書 is the income statement.
JA_NAMES: list[tuple[StatementKind, re.Pattern[str]]] = [
    ("cash_flows", re.compile(r"キャッシュ・?フロー計算書")),
    ("balance", re.compile(r"貸借対照表|財政状態計算書")),
    ("equity", re.compile(r"株主資本等変動計算書|持分変動計算書")),
    ("income", re.compile(r"損益計算書|損益及び包括利益計算書")),
    ("comprehensive", re.compile(r"(?<!及び)包括利益計算書")),
]
# '(連結貸借対照表関係)' heads the notes about a statement; 注記 are notes.
_JA_NOT_THE_STATEMENT = re.compile(r"関係|注記|に関する|の概要|分析")
_NOTE_ENUMERATOR = re.compile(r"^\s*(?:[A-Za-z]|\d{1,2})[.)]\s")  # 'O. Cash Equivalents and ...'


@functools.lru_cache(maxsize=65_536)
def title_statement(title: str) -> StatementKind | None:
    """Which primary statement a title (a section's, or a line's) is, if any (read once per
    distinct title: a statement reference reads every section title of a filing)."""
    if _NOT_THE_STATEMENT.search(title) or _NOTE_ENUMERATOR.match(title):
        return None
    letters = re.sub(r"[^a-z]", "", title.lower())
    for kind, pattern in _TITLE_PATTERNS:
        if pattern.search(letters):
            return kind
    compact = "".join(title.split())
    if _JA_NOT_THE_STATEMENT.search(compact):
        return None
    for kind, pattern in JA_NAMES:
        if pattern.search(compact):
            return kind
    return None


# --- Page content
_YEAR = re.compile(r"(?<![\d,.$])(?:19[5-9]\d|20[0-4]\d)(?![\d,%])")
_PERIOD = re.compile(
    r"\b(?:(?:three|six|nine|twelve|\d{1,2})\s+(?:months|weeks)\s+ended"
    r"|(?:fiscal\s+)?years?\s+ended|as\s+of|as\s+at|quarter\s+ended|period\s+ended)\b"
    r"|(?:当|前)(?:連結)?(?:会計|事業)年度|第\d+期",
    re.IGNORECASE,
)
#: Each statement's own line items; a page must show several of one statement's.
_LINE_ITEMS: dict[StatementKind, re.Pattern[str]] = {
    "income": re.compile(
        r"\b(?:net\s+(?:sales|revenues?|income|earnings|loss)|total\s+(?:net\s+)?revenues?"
        r"|cost\s+of\s+(?:sales|revenues?|goods\s+sold|products)|gross\s+(?:profit|margin)"
        r"|operating\s+(?:income|expenses|profit|loss)|income\s+before\s+income\s+taxes"
        r"|(?:provision|benefit)\s+for\s+income\s+taxes|income\s+tax\s+expense"
        r"|earnings\s+per\s+(?:common\s+)?share|per\s+share|diluted|basic"
        r"|selling,?\s+general|interest\s+expense|weighted[\s-]+average)"
        r"|売上高|売上原価|営業利益|経常利益|当期純利益|税引前",
        re.IGNORECASE,
    ),
    "balance": re.compile(
        r"\b(?:total\s+(?:current\s+)?assets|total\s+(?:current\s+)?liabilities"
        r"|current\s+(?:assets|liabilities)|cash\s+and\s+cash\s+equivalents|inventor(?:y|ies)"
        r"|(?:accounts|trade)\s+(?:receivable|payable)|receivables|retained\s+earnings"
        r"|additional\s+paid[\s-]+in\s+capital|goodwill|property(?:,\s+plant)?\s+and\s+equipment"
        r"|total\s+(?:share|stock)holders['’]?\s+equity|total\s+equity|long[\s-]+term\s+debt"
        r"|accrued\s+(?:liabilities|expenses))"
        r"|資産合計|負債合計|純資産合計|流動資産|流動負債|固定資産|利益剰余金",
        re.IGNORECASE,
    ),
    "cash_flows": re.compile(
        r"\b(?:operating\s+activities|investing\s+activities|financing\s+activities"
        r"|depreciation|net\s+cash\s+(?:provided|used|from)|capital\s+expenditures"
        r"|(?:purchases?|additions?)\s+(?:of|to)\s+property|cash\s+(?:and\s+cash\s+equivalents\s+)?"
        r"at\s+(?:beginning|end)|beginning\s+of\s+(?:the\s+)?(?:year|period)"
        r"|end\s+of\s+(?:the\s+)?(?:year|period)|stock[\s-]+based\s+compensation"
        r"|dividends\s+paid|repayments?\s+of)"
        r"|営業活動|投資活動|財務活動|減価償却費|期末残高",
        re.IGNORECASE,
    ),
    "equity": re.compile(
        r"\b(?:balances?,?\s+(?:at|as\s+of)|common\s+stock|additional\s+paid[\s-]+in"
        r"|retained\s+earnings|accumulated\s+other\s+comprehensive|treasury\s+stock"
        r"|dividends|repurchases?\s+of|stock[\s-]+based\s+compensation|net\s+(?:income|earnings))"
        r"|資本金|資本剰余金|利益剰余金|自己株式|当期変動額|剰余金の配当",
        re.IGNORECASE,
    ),
    "comprehensive": re.compile(
        r"\b(?:other\s+comprehensive\s+(?:income|loss)|comprehensive\s+(?:income|loss)"
        r"|foreign\s+currency\s+translation|unrealized|net\s+(?:income|earnings)"
        r"|reclassification|cash\s+flow\s+hedges|pension|net\s+of\s+tax)"
        r"|その他の包括利益|包括利益|為替換算調整勘定",
        re.IGNORECASE,
    ),
}
#: Pages that print statement titles and line items but are no statement.
_NEVER = re.compile(
    r"\bselected\s+(?:consolidated\s+)?financial\s+(?:data|information)"
    r"|\bindex\s+to\s+(?:the\s+)?(?:consolidated\s+)?financial\s+statements"
    r"|\bmanagement['’]?s\s+discussion\s+and\s+analysis",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])\(?\$?\s?\d{1,3}(?:,\d{3})+(?:\.\d+)?\)?|(?<![\w.])\d+\.\d+(?!\w)")
_CONTINUED = re.compile(r"\bcontinued\b|\(cont", re.IGNORECASE)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text[:MAX_PAGE_CHARS].splitlines() if line.strip()]


#: Every statement title holds one of these (spaces removed: a text layer splits 'Shee t').
_TITLE_NEEDLES = ("statement", "sheet", "profit", "計算書", "対照表")


def _may_title(line: str) -> bool:
    compact = line.lower().replace(" ", "")
    return any(needle in compact for needle in _TITLE_NEEDLES)


def _title_line(lines: Sequence[str]) -> tuple[StatementKind, str] | None:
    """The first statement title among the page's top lines (a markdown table's first row or
    a heading's ``#`` are read as plain text)."""
    for line in lines[:TITLE_LINES]:
        plain = line.strip("#|* \t")
        if len(plain) > MAX_TITLE_LINE or not _may_title(plain):
            continue
        kind = title_statement(plain)
        if kind is not None:
            return kind, plain
    return None


def statement_page(text: str, page_number: int = 1) -> DomainPage | None:
    """What a page says of itself as a primary statement: the statement (``label``) its top
    lines title it as, with a confidence (title 0.3; period columns +0.2; that statement's
    line items, three or more distinct, +0.3; figures +0.1; 'Consolidated' +0.1); a page
    titled so that is 'Selected Financial Data', an index to the statements or an MD&A page
    gets 0.1 whatever it prints. None: no statement title near the top."""
    lines = _lines(text)
    found = _title_line(lines)
    if found is None:
        return None
    kind, title = found
    body = "\n".join(lines)
    if _NEVER.search("\n".join(lines[:TITLE_LINES])):
        return DomainPage(label=kind, page_number=page_number, confidence=0.1, title=title)
    if len({k for k, _ in filter(None, (_title_line([line]) for line in lines))}) >= 3:
        return DomainPage(
            label=kind, page_number=page_number, confidence=0.1, title=title
        )  # an index
    confidence = 0.3
    if len(set(_YEAR.findall(body))) >= 2 or _PERIOD.search(body):
        confidence += 0.2
    items = {m.group(0).lower() for m in _LINE_ITEMS[kind].finditer(body)}
    if len(items) >= 3:
        confidence += 0.3
    if len(_NUMBER.findall(body)) >= 6:
        confidence += 0.1
    if re.search(r"consolidated|連結", title, re.IGNORECASE) or _CONTINUED.search(title):
        confidence += 0.1
    return DomainPage(
        label=kind, page_number=page_number, confidence=round(min(confidence, 1.0), 2), title=title
    )


def detect_finance(
    page_texts: Mapping[int, str], sections: Sequence[StructureSection] = ()
) -> DomainMark:
    """Whether a document carries primary financial statements (module doc), and every page
    that titles itself as one with its confidence. ``page_texts``: page number -> the page's
    text, lines in reading order (elements at ingest, stored chunks for an index built before
    detection). Without any page text (a structure alone), the section titles decide, and the
    mark says so (``content=False``)."""
    pages: list[DomainPage] = []
    for number in sorted(page_texts):
        found = statement_page(page_texts[number], number)
        if found is not None:
            pages.append(found)
    if page_texts:
        kinds = {p.label for p in pages if p.confidence >= CONFIDENT}
        sure = [p.label for p in pages if p.confidence >= SURE]
        # two statements, or one printed twice in full (a release's quarter and full year)
        detected = len(kinds) >= MIN_STATEMENTS or any(sure.count(k) >= 2 for k in set(sure))
        return DomainMark(
            name=FINANCE,
            detected=detected,
            confidence=round(min(1.0, len(kinds) / 3), 2),
            content=True,
            pages=pages,
        )
    titled = {
        kind
        for s in sections
        if s.page_end - s.page_start < 3 and (kind := title_statement(s.title)) is not None
    }
    return DomainMark(
        name=FINANCE,
        detected=len(titled) >= MIN_STATEMENTS,
        confidence=round(min(1.0, len(titled) / 3) * 0.5, 2),
        content=False,
        pages=[],
    )
