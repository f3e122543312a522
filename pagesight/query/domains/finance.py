"""The ``finance`` domain pack: financial statements a query names ("the cash flow statement")
or implies ("capex"), and the pages they are printed on (formerly ``query/statements.py``).

Why: a filing holds dozens of tables with the same line items (the MD&A repeats the income
statement's revenue by segment, the notes repeat the balance sheet's debt by maturity), and
a question about one year's figure is nearly always answered by one of the five primary
statements. Keyword and embedding search rank those pages no higher than the look-alikes, so
on the shared set most missed table questions were statement questions (issue 16). A reader
goes to the statement itself, and so does this pack's route (``statement``). It is a pack
(:mod:`pagesight.query.domains`) because that knowledge and its weight of 3 are right for
a filing and wrong for a manual: it acts only on documents detected at ingest as printing
primary statements (:mod:`pagesight.ingestion.finance_statements`), unless settings force it.

- ``statement_references(query)``: the statements the query names ("balance sheet",
  "statement of operations", "P&L", 貸借対照表, 損益計算書, キャッシュ・フロー計算書) and
  the ones its financial terms are computed from (a fixed glossary of standard analysis
  terms: capex and free cash flow come from the cash flow statement, gross margin from the
  income statement, the quick ratio from the balance sheet, return on equity from both).
  Implied statements carry ``inferred=True`` so the trace tells a named statement from a
  guessed one. References are of kind ``domain``, pack ``finance``, value the statement.
- ``resolve_statement(kind, structure)``: the statement's pages, each with a confidence, from
  two sources: the section titles ("Consolidated Statements of Cash Flows", "連結貸借対照表";
  discussions, supplemental notes and numbered notes are not the statement; the consolidated
  statement before a parent-company one) and the pages the ingest detector recognised by
  their content (a capitalised title under a company-name line that the outline lacks,
  period columns, the statement's line items). A titled section whose page the content calls
  something else ("Selected Financial Data", an index to the statements) gets that page's low
  confidence; the more confident source leads, and a low confidence weighs less in fusion.
"""

from __future__ import annotations

import re

from pagesight.core.types import DocumentStructure, StructuralReference, StructureSection
from pagesight.ingestion.finance_statements import (
    CONFIDENT,
    FINANCE,
    JA_NAMES,
    STATEMENT_NAMES,
    StatementKind,
    title_statement,
)
from pagesight.query.domains.base import DomainResolution

__all__ = [
    "FINANCE",
    "STATEMENT_NAMES",
    "STATEMENT_ROUTE",
    "FinancePack",
    "StatementKind",
    "resolve_statement",
    "statement_pages",
    "statement_references",
    "statement_sections",
    "title_statement",
]

#: The pack's route, as traces and ``RetrievalOptions.weights`` spell it.
STATEMENT_ROUTE = "statement"
MAX_STATEMENT_PAGES = 3
"""A primary statement runs one or two pages; a longer section is something else."""
PAGE_LIMIT = 4
"""Pages a statement resolves to, at most."""
MIN_CONFIDENCE = 0.3
"""Below this a page is not offered as the statement at all."""
UNSEEN_TITLE = 0.6
"""A titled section whose first page's content showed no statement title (the outline points
near it; the page may print the title as an image): believed, less."""

_SECONDARY = re.compile(r"\b(?:parent|guarant\w*|unconsolidated)\b", re.IGNORECASE)
_CONSOLIDATED = re.compile(r"consolidated|連結", re.IGNORECASE)
_CONTINUED = re.compile(r"\bcontinued\b|\(cont", re.IGNORECASE)


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


def statement_pages(
    kind: StatementKind, structure: DocumentStructure, limit: int = PAGE_LIMIT
) -> list[int]:
    """The pages of statement ``kind`` by the section titles (its first page first), at most
    ``limit``; none when no section is titled so."""
    pages: list[int] = []
    for section in statement_sections(kind, structure):
        for page in range(section.page_start, section.page_end + 1):
            if page not in pages:
                pages.append(page)
    return pages[:limit]


def _content_pages(kind: str, structure: DocumentStructure) -> dict[int, float] | None:
    """The pages the ingest detector recognised as statement ``kind`` by their content, with
    their confidences; None when the document's mark was not read from its content."""
    mark = structure.domain(FINANCE)
    if mark is None or not mark.content:
        return None
    return {p.page_number: p.confidence for p in mark.pages if p.label == kind}


def _content_statement(found: dict[int, float]) -> list[tuple[int, float]]:
    """The statement's pages by content: the first confident page (the primary statements
    come before a parent-company or guarantor repeat), else the most confident one; and the
    next page when it confidently continues it."""
    confident = sorted(n for n, c in found.items() if c >= CONFIDENT)
    first = confident[0] if confident else max(sorted(found), key=lambda n: found[n], default=0)
    if not first or found[first] < MIN_CONFIDENCE:
        return []
    following = found.get(first + 1, 0.0)
    pages = [(first, found[first])]
    return pages + ([(first + 1, following)] if following >= CONFIDENT else [])


def _leads(group: list[tuple[int, float]]) -> tuple[bool, float]:
    """How a source ranks against the other: a confident one leads a doubtful one; two
    confident ones keep their order (titles first); two doubtful ones, the surer first."""
    confidence = group[0][1]
    return (confidence < CONFIDENT, -confidence if confidence < CONFIDENT else 0.0)


def resolve_statement(kind: str, structure: DocumentStructure) -> DomainResolution:
    """Statement ``kind``'s pages with their confidences (module doc): the titled section's
    (confidence 1 where no content was read, else its first page's content confidence, or
    ``UNSEEN_TITLE``) and the content's; a confident source leads a doubtful one (the titles
    lead when both are), and the other follows only when the leader is not confident."""
    if kind not in STATEMENT_NAMES:
        return DomainResolution([], [], f"no statement '{kind}'")
    titled = statement_pages(kind, structure)
    content = _content_pages(kind, structure)
    groups: list[list[tuple[int, float]]] = []
    if titled:
        believed = 1.0 if content is None else content.get(titled[0], UNSEEN_TITLE)
        groups.append([(n, believed) for n in titled])
    if content:
        groups.append(_content_statement(content))
    groups = [group for group in groups if group]
    groups.sort(key=_leads)  # stable: the titles first on a tie
    chosen: dict[int, float] = {}
    for group in groups:
        if chosen and next(iter(chosen.values())) >= CONFIDENT:
            break
        for number, confidence in group:
            chosen.setdefault(number, confidence)
    kept = [(n, c) for n, c in chosen.items() if c >= MIN_CONFIDENCE][:PAGE_LIMIT]
    if not kept:
        return DomainResolution([], [], f"no {STATEMENT_NAMES[kind]}")
    return DomainResolution([n for n, _ in kept], [c for _, c in kept])


class FinancePack:
    """The ``finance`` pack (:class:`~pagesight.query.domains.DomainPack`)."""

    name = FINANCE
    route = STATEMENT_ROUTE

    def references(self, query: str) -> list[StructuralReference]:
        return statement_references(query)

    def resolve(
        self, reference: StructuralReference, structure: DocumentStructure
    ) -> DomainResolution:
        return resolve_statement(reference.value or "", structure)


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

_NAMED_JA = [*JA_NAMES, ("balance", re.compile(r"バランスシート"))]

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
                StructuralReference(
                    kind="domain", domain=FINANCE, text=text[m.start() : m.end()], value=kind
                )
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
                        kind="domain",
                        domain=FINANCE,
                        text=text[m.start() : m.end()],
                        value=kind,
                        inferred=True,
                    )
                )
    return found
