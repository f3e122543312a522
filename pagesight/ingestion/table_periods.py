"""The period and the unit a table column or caption states.

"Three Months Ended December 31, 2022" is the fourth quarter of 2022, "FY2020" a fiscal year,
"第3四半期" a third quarter; "(in millions)" and "（単位：百万円）" are units. Read from header
labels by :mod:`pagesight.ingestion.tables` (a column's period, a table's unit), kept apart
from the grid building there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Currency signs as printed before an amount (also what a unit line may start with).
CURRENCY = r"(?:US\$|R\$|C\$|A\$|HK\$|\$|€|£|¥|￥|₩|₹)"
YEAR = re.compile(r"(?<![\d,.])((?:19|20)\d{2})(?![\d,])")
FISCAL_SHORT = re.compile(r"\bFY\s*'?(\d{2})(?!\d)", re.IGNORECASE)
QUARTER_YEAR_SHORT = re.compile(r"\b([1-4])Q\s*'?(\d{2})(?!\d)|\bQ([1-4])\s*'(\d{2})(?!\d)", re.I)
_QUARTER = re.compile(
    r"\bQ([1-4])\b|\b([1-4])Q\b|\b(first|second|third|fourth)\s+quarter\b|第\s*([1-4１-４])\s*四半期",
    re.IGNORECASE,
)
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_MONTHS_SPAN = re.compile(r"\b(three|six|nine|twelve|3|6|9|12)[\s-]+months?\b", re.IGNORECASE)
_MONTH_WORDS = {"three": 3, "six": 6, "nine": 9, "twelve": 12}
_FULL_YEAR = re.compile(r"\byears?\s+ended\b|\bfiscal\s+year\b|年度|通期", re.IGNORECASE)
_FISCAL = re.compile(r"\bFY|\bfiscal\b|年度|(?<!四半)期", re.IGNORECASE)

_SCALE = r"(?:millions?|thousands?|billions?|百万|千円|億円|万円|百万円|千ドル|百万ドル)"
# A parenthesised unit: "(in millions)", "(Dollars in millions, except per share amounts)",
# "(Millions)", "(Percent of pre-tax income)", "(百万円)", "（単位：百万円）".
_UNIT_PARENTHESISED = re.compile(
    rf"[(（]\s*([^()（）]*?(?:{_SCALE}|\bpercent\b|単位|%|％)[^()（）]*?)\s*[)）]", re.IGNORECASE
)
_UNIT_BARE = re.compile(
    rf"(?:(?:{CURRENCY}|dollars|amounts|euros?|yen)\s+)?in\s+(?:millions|thousands|billions)"
    r"(?:\s+of\s+[A-Za-z.$]+)?(?:,\s*except\s+[^|()\n]*)?"
    r"|単位\s*[:：]\s*\S+",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Period:
    """The period a column reports, read from its header label."""

    text: str  #: the column label as printed
    year: int | None  #: calendar or fiscal year; None for "Fourth Quarter" alone
    quarter: int | None = None  #: 1-4 for "Q4 2022", "4Q22", "第3四半期"
    months: int | None = None  #: 3/6/9/12 for "Three Months Ended ...", 12 for "Year Ended ..."
    fiscal: bool = False  #: "FY2020", "fiscal 2020", "2022年度", "2022年3月期"


def detect_period(label: str) -> Period | None:
    """The period a column label names, or None (no period, or two years: "2018 vs 2017")."""
    text = label.strip()
    if not text:
        return None
    years = {int(y) for y in YEAR.findall(text)}
    for match in FISCAL_SHORT.finditer(text):
        years.add(2000 + int(match.group(1)))
    quarter: int | None = None
    for match in QUARTER_YEAR_SHORT.finditer(text):
        q, yy = (match.group(1), match.group(2)) if match.group(1) else match.groups()[2:]
        quarter = int(q)
        years.add(2000 + int(yy))
    if len(years) > 1:
        return None
    quarter_match = _QUARTER.search(text)
    if quarter_match and quarter is None:
        number, digit, word, japanese = quarter_match.groups()
        if word:
            quarter = _ORDINALS[word.lower()]
        else:
            quarter = int(
                (number or digit or japanese).translate(str.maketrans("１２３４", "1234"))
            )
    if not years and quarter is None:
        return None
    months: int | None = None
    span = _MONTHS_SPAN.search(text)
    if span:
        word = span.group(1).lower()
        months = _MONTH_WORDS.get(word) or int(word)
    elif _FULL_YEAR.search(text):
        months = 12
    return Period(
        text=text,
        year=next(iter(years)) if years else None,
        quarter=quarter,
        months=months,
        fiscal=bool(_FISCAL.search(text)),
    )


def detect_unit(text: str) -> str | None:
    """The unit a caption or header states, as printed ("Dollars in millions", "百万円")."""
    if not text:
        return None
    match = _UNIT_PARENTHESISED.search(text)
    if match:
        return match.group(1).strip()
    match = _UNIT_BARE.search(text)
    if match:
        return match.group(0).strip().rstrip(",")
    return None
