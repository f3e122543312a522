"""Financial statements a query names ("the cash flow statement") or implies ("capex"), and
the pages they are printed on.

Why: a filing holds dozens of tables with the same line items (the MD&A repeats the income
statement's revenue by segment, the notes repeat the balance sheet's debt by maturity), and
a question about one year's figure is nearly always answered by one of the five primary
statements. Keyword and embedding search rank those pages no higher than the look-alikes, so
on the shared set most missed table questions were statement questions (issue 16). A reader
goes to the statement itself, and so does this route:

- ``statement_references(query)``: the statements the query names ("balance sheet",
  "statement of operations", "P&L", 貸借対照表, 損益計算書, キャッシュ・フロー計算書) and
  the ones its financial terms are computed from (a fixed glossary of standard analysis
  terms: capex and free cash flow come from the cash flow statement, gross margin from the
  income statement, the quick ratio from the balance sheet, return on equity from both).
  Implied statements carry ``inferred=True`` so the trace tells a named statement from a
  guessed one.
- ``statement_pages(kind, structure)``: the primary statement's pages, read off the
  document's section titles ("Consolidated Statements of Cash Flows", "Balance sheet as at
  March 31, 2003", "連結貸借対照表", titles with a company name before them, words split
  by the text layer).
  Discussions of a statement ("Analysis of the Consolidated Statements of Income"),
  supplemental notes, off-balance-sheet arrangements and numbered notes are not the
  statement; the consolidated statement comes before a parent-company or guarantor one.

Only documents whose structure has such a section yield pages, so the glossary costs nothing on
a manual or a paper that says "revenue".
"""

from __future__ import annotations

import functools
import re
from typing import Literal

from pagesight.core.types import DocumentStructure, StructuralReference, StructureSection

StatementKind = Literal["income", "balance", "cash_flows", "equity", "comprehensive"]

STATEMENT_NAMES: dict[StatementKind, str] = {
    "income": "income statement",
    "balance": "balance sheet",
    "cash_flows": "cash flow statement",
    "equity": "statement of equity",
    "comprehensive": "statement of comprehensive income",
}

MAX_STATEMENT_PAGES = 3
"""A primary statement runs one or two pages; a longer section is something else."""

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
    r"|highlights|note\s+\d|notes\s+to|index\s+to|summary)\b",
    re.IGNORECASE,
)
# Japanese statement names (有価証券報告書, 決算短信), read on titles without spaces and in
# queries; in this order, so 損益及び包括利益計算書 is the income statement.
_JA_NAMES: list[tuple[StatementKind, re.Pattern[str]]] = [
    ("cash_flows", re.compile(r"キャッシュ・?フロー計算書")),
    ("balance", re.compile(r"貸借対照表|財政状態計算書")),
    ("equity", re.compile(r"株主資本等変動計算書|持分変動計算書")),
    ("income", re.compile(r"損益計算書|損益及び包括利益計算書")),
    ("comprehensive", re.compile(r"(?<!及び)包括利益計算書")),
]
# '(連結貸借対照表関係)' heads the notes about a statement; 注記 are notes.
_JA_NOT_THE_STATEMENT = re.compile(r"関係|注記|に関する|の概要|分析")
_NOTE_ENUMERATOR = re.compile(r"^\s*(?:[A-Za-z]|\d{1,2})[.)]\s")  # 'O. Cash Equivalents and ...'
_SECONDARY = re.compile(r"\b(?:parent|guarant\w*|unconsolidated)\b", re.IGNORECASE)
_CONSOLIDATED = re.compile(r"consolidated|連結", re.IGNORECASE)
_CONTINUED = re.compile(r"\bcontinued\b|\(cont", re.IGNORECASE)


@functools.lru_cache(maxsize=65_536)
def title_statement(title: str) -> StatementKind | None:
    """Which primary statement a section title is, if any (read once per distinct title: a
    statement reference reads every section title of a filing)."""
    if _NOT_THE_STATEMENT.search(title) or _NOTE_ENUMERATOR.match(title):
        return None
    letters = re.sub(r"[^a-z]", "", title.lower())
    for kind, pattern in _TITLE_PATTERNS:
        if pattern.search(letters):
            return kind
    compact = "".join(title.split())
    if _JA_NOT_THE_STATEMENT.search(compact):
        return None
    for kind, pattern in _JA_NAMES:
        if pattern.search(compact):
            return kind
    return None


def statement_sections(kind: StatementKind, structure: DocumentStructure) -> list[StructureSection]:
    """The sections that print statement ``kind``: the first consolidated one (an MD&A
    subheading 'Balance Sheet:' comes earlier in the document, a parent-company or guarantor
    statement later) and its continuation ('... (continued)' on the next page)."""
    found = [
        (
            bool(_SECONDARY.search(section.title)),
            not _CONSOLIDATED.search(section.title),
            order,
            section,
        )
        for order, section in enumerate(structure.sections)
        if section.page_end - section.page_start < MAX_STATEMENT_PAGES
        and title_statement(section.title) == kind
    ]
    if not found:
        return []
    found.sort(key=lambda item: item[:3])
    primary = found[0][3]
    rest = [item[3] for item in found[1:]]
    out = [primary]
    out.extend(
        s for s in rest if _CONTINUED.search(s.title) and 0 <= s.page_start - primary.page_end <= 1
    )
    return out


def statement_pages(kind: StatementKind, structure: DocumentStructure, limit: int = 4) -> list[int]:
    """The pages of statement ``kind`` (its first page first), at most ``limit``; none when
    the document prints no such statement."""
    pages: list[int] = []
    for section in statement_sections(kind, structure):
        for page in range(section.page_start, section.page_end + 1):
            if page not in pages:
                pages.append(page)
    return pages[:limit]


# --- Queries
_NAMED: list[tuple[StatementKind, re.Pattern[str]]] = [
    (
        "comprehensive",
        re.compile(r"\bstatements?\s+of\s+(?:consolidated\s+)?comprehensive\s+(?:income|loss)\b"),
    ),
    (
        "cash_flows",
        re.compile(r"\bcash[\s-]*flows?\s+statements?\b|\bstatements?\s+of\s+cash[\s-]*flows?\b"),
    ),
    (
        "balance",
        re.compile(
            r"\bbalance[\s-]*sheets?\b|\bstatements?\s+of\s+financial\s+(?:position|condition)\b"
        ),
    ),
    (
        "equity",
        re.compile(
            r"\bstatements?\s+of\s+(?:changes\s+in\s+)?(?:(?:share|stock)holders['’]?\s+)?equity\b"
        ),
    ),
    (
        "income",
        re.compile(
            r"\bincome\s+statements?\b|\bstatements?\s+of\s+(?:income|operations|earnings)\b"
            r"|\bp\s?&\s?l\b|\bprofit\s+(?:and|&)\s+loss\b|\bstatements?\s+of\s+profit\s+or\s+loss\b"
        ),
    ),
]

_NAMED_JA = [*_JA_NAMES, ("balance", re.compile(r"バランスシート"))]

_INCOME: tuple[StatementKind, ...] = ("income",)
_BALANCE: tuple[StatementKind, ...] = ("balance",)
_CASH: tuple[StatementKind, ...] = ("cash_flows",)
_RETURNS: tuple[StatementKind, ...] = ("income", "balance")

#: Standard analysis terms and the statements their figures are printed in.
_GLOSSARY: list[tuple[re.Pattern[str], tuple[StatementKind, ...]]] = [
    (re.compile(p), kinds)
    for p, kinds in [
        (r"\b(?:total\s+|net\s+)?revenues?\b|\bnet\s+sales\b|\bsales\s+growth\b", _INCOME),
        (r"\bgross\s+(?:margin|profit)s?\b", _INCOME),
        (r"\bcost\s+of\s+(?:goods\s+sold|sales|revenues?|products\s+sold)\b|\bcogs\b", _INCOME),
        (r"\boperating\s+(?:income|margin|profit|loss)\b|\bebit\b", _INCOME),
        (r"\bebitda\b", ("income", "cash_flows")),
        (r"\bnet\s+(?:income|earnings|profit|loss)\b|\bprofit\s+margin\b", _INCOME),
        (r"\beps\b|\bearnings\s+per\s+share\b", _INCOME),
        (r"\bsg\s?&\s?a\b|\bselling,?\s+general,?\s+(?:and|&)\s+administrative\b", _INCOME),
        (r"\binterest\s+expense\b|\binterest\s+coverage\b", _INCOME),
        (r"\beffective\s+tax\s+rate\b|\bincome\s+tax\s+(?:expense|provision)\b", _INCOME),
        (r"\btotal\s+(?:assets|liabilities)\b|\bcurrent\s+(?:assets|liabilities)\b", _BALANCE),
        (r"\b(?:share|stock)holders['’]?\s+equity\b|\bbook\s+value\b", _BALANCE),
        (r"\bretained\s+earnings\b|\bgoodwill\b", _BALANCE),
        (r"\bpp\s?&\s?e\b|\bppne\b|\bproperty,?\s+plant,?\s+(?:and|&)\s+equipment\b", _BALANCE),
        (r"\binventor(?:y|ies)\b|\baccounts\s+(?:payable|receivable)\b", _BALANCE),
        (r"\bworking\s+capital\b|\b(?:quick|current|cash)\s+ratio\b", _BALANCE),
        (
            r"\bdebt[\s-]+to[\s-]+(?:equity|capital|assets)\b|\bcapitali[sz]ation\s+ratio\b",
            _BALANCE,
        ),
        (r"\b(?:long[\s-]+term|total)\s+debt\b|\bcash\s+and\s+cash\s+equivalents\b", _BALANCE),
        (
            r"\breturn\s+on\s+(?:average\s+)?(?:total\s+)?(?:assets?|equity|capital|invested)"
            r"|\bro(?:a|e|ce|ic)\b",
            _RETURNS,
        ),
        (
            r"\bdays\s+(?:payables?|sales|inventory|receivables?)\b|\bd[psi]o\b"
            r"|\b(?:asset|inventory|receivables?)\s+turnover\b",
            _RETURNS,
        ),
        (r"\bcapital\s+expenditures?\b|\bcapex\b|\bpurchases?\s+of\s+property\b", _CASH),
        (r"\bfree\s+cash\s+flows?\b|\bfcf\b", _CASH),
        (
            r"\b(?:operating|investing|financing)\s+(?:cash\s+flows?|activities)\b"
            r"|\bcash\s+(?:flows?\s+)?(?:from|provided\s+by|used\s+in)\s+operati",
            _CASH,
        ),
        (r"\bdepreciation(?:\s+and|,|\s*&)\s+amortization\b|\bd\s?&\s?a\b", _CASH),
        (r"\bdividends?\s+paid\b|\b(?:share|stock)\s+(?:repurchases?|buybacks?)\b", _CASH),
    ]
]

_NEEDLES = (
    "statement", "sheet", "p&l", "profit", "revenue", "sales", "margin", "cost", "operat",
    "ebit", "income", "earning", "eps", "sg", "interest", "tax", "assets", "liabilit", "equity",
    "book value", "goodwill", "pp", "property", "inventor", "payable", "receivable", "capital",
    "ratio", "debt", "cash", "return", "ro", "days", "dpo", "dso", "dio", "turnover", "capex",
    "fcf", "depreciation", "d&a", "dividend", "repurchase", "buyback", "計算書", "対照表",
    "バランスシート",
)  # fmt: skip
MAX_QUERY_CHARS = 4000
"""Only the first characters of a query are read: a statement is named early or not at all."""


def statement_references(query: str) -> list[StructuralReference]:
    """The statements ``query`` names, then those its financial terms imply, each once.

    'What is 3M's FY2018 capex, from the cash flow statement?' -> the cash flow statement
    (named); 'What is Amazon's FY2017 return on equity?' -> the income statement and the
    balance sheet (implied, ``inferred=True``). Regular expressions with literal anchors and
    no nested repetition over at most ``MAX_QUERY_CHARS`` characters: linear time.
    """
    text = query[:MAX_QUERY_CHARS].lower()
    if not any(needle in text for needle in _NEEDLES):
        return []
    found: list[StructuralReference] = []
    seen: set[str] = set()
    for kind, pattern in [*_NAMED, *_NAMED_JA]:
        m = pattern.search(text)
        if m and kind not in seen:
            seen.add(kind)
            found.append(
                StructuralReference(kind="statement", text=text[m.start() : m.end()], value=kind)
            )
    for pattern, kinds in _GLOSSARY:
        m = pattern.search(text)
        if m is None:
            continue
        for kind in kinds:
            if kind not in seen:
                seen.add(kind)
                found.append(
                    StructuralReference(
                        kind="statement",
                        text=text[m.start() : m.end()],
                        value=kind,
                        inferred=True,
                    )
                )
    return found
