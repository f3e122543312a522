"""Numbers as documents and questions print them: roman numerals, kanji numerals, English number
and ordinal words, full-width digits.

One place for what both sides read: ingestion (:mod:`pagesight.ingestion.structure`: folios such as
``'xiv'``, headings such as ``'CHAPTER III'`` or ``'第十二章'``) and the query side
(:mod:`pagesight.query.references`: ``'chapter three'``, ``'第三章'``, ``'the second last page'``).
Pure functions of their arguments, standard library only.

Where the two callers read a form differently, both readings are here under their own names,
so each keeps its behaviour:

- :func:`roman_value` reads canonical numerals only (``'iv'``, never ``'iiii'`` or ``'ic'``);
  the query side caps them at 3999 (``limit=ROMAN_MAX``: ``'mmmm'`` is no number), ingestion
  takes any run of thousands.
- :func:`kanji_value` is strict (kanji numerals only; digits without 十 or 百 read place by
  place, ``'二〇二四'`` -> 2024); :func:`kanji_value_lenient` is what headings after 第 are read
  with (arabic digits as they are, other characters skipped, each digit without 十 or 百
  replacing the one before, ``'二〇'`` -> 0).
"""

from __future__ import annotations

import re

#: The largest classical roman numeral (``'mmmcmxcix'``).
ROMAN_MAX = 3999

_ROMAN_VALUES = (
    (1000, "m"),
    (900, "cm"),
    (500, "d"),
    (400, "cd"),
    (100, "c"),
    (90, "xc"),
    (50, "l"),
    (40, "xl"),
    (10, "x"),
    (9, "ix"),
    (5, "v"),
    (4, "iv"),
    (1, "i"),
)

#: Kanji digits; 十 (ten) and 百 (hundred) multiply the digit before them.
KANJI_DIGITS = {
    "〇": 0, "一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
_KANJI_MULTIPLIERS = {"十": 10, "百": 100}

#: English number words, one to twenty (in this order: patterns are built from the keys).
NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
}  # fmt: skip
#: English ordinal words, first to tenth.
ORDINAL_WORDS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10,
}  # fmt: skip

# Full-width ASCII (U+FF01..U+FF5E) and the ideographic space, one character for one, so
# match offsets in the translated text are offsets in the original.
_WIDE = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
_WIDE[0x3000] = 0x20


def ascii_width(text: str) -> str:
    """Full-width digits, letters and punctuation as ASCII (``'表２'`` -> ``'表2'``), the
    ideographic space as a space; one character for one, so offsets are kept."""
    return text.translate(_WIDE)


# ---------------------------------------------------------------------------------------------
# Roman numerals


def to_roman(value: int) -> str:
    """``4`` -> ``'iv'`` (lower case; ``''`` for values below 1)."""
    out = []
    for amount, numeral in _ROMAN_VALUES:
        while value >= amount:
            out.append(numeral)
            value -= amount
    return "".join(out)


def roman_value(text: str, *, limit: int | None = None) -> int | None:
    """The value of a canonical roman numeral, either case (``'xiv'`` -> 14, ``'MMXXIV'`` ->
    2024); ``None`` for anything else (``'IIII'``, ``'ic'``, ``''``, ``' iv'``) and for values
    above ``limit`` (``None``: no limit, ``'mmmm'`` -> 4000)."""
    lowered = text.lower()
    if not lowered or any(c not in "ivxlcdm" for c in lowered):
        return None
    total, i = 0, 0
    for amount, numeral in _ROMAN_VALUES:
        while lowered.startswith(numeral, i):
            total += amount
            i += len(numeral)
    if i != len(lowered) or to_roman(total) != lowered:
        return None
    if limit is not None and total > limit:
        return None
    return total


# ---------------------------------------------------------------------------------------------
# Kanji numerals


def _kanji_sum(text: str) -> int:
    """Digits times the 十 or 百 after them, summed; a digit not followed by one is added at the
    end, and a digit followed by another digit is replaced by it; other characters are skipped."""
    total = digit = 0
    for char in text:
        if char in KANJI_DIGITS:
            digit = KANJI_DIGITS[char]
        elif char in _KANJI_MULTIPLIERS:
            total, digit = total + (digit or 1) * _KANJI_MULTIPLIERS[char], 0
    return total + digit


def kanji_value(text: str) -> int | None:
    """A kanji numeral: ``'三'`` 3, ``'十二'`` 12, ``'二十一'`` 21, ``'百五'`` 105; digits with
    no 十 or 百 read place by place (``'二〇二四'`` 2024). ``None`` when any character is not a
    kanji numeral (``''``, ``'3'``, ``'三章'``)."""
    if not text or any(ch not in KANJI_DIGITS and ch not in _KANJI_MULTIPLIERS for ch in text):
        return None
    if not any(ch in _KANJI_MULTIPLIERS for ch in text):
        return int("".join(str(KANJI_DIGITS[ch]) for ch in text))
    return _kanji_sum(text)


def kanji_value_lenient(text: str) -> int:
    """A heading's number after 第 as ingestion reads it: arabic digits as they are (``'12'``,
    ``'１２'`` -> 12), else kanji summed (``'十二'`` -> 12, ``'三'`` -> 3) with other characters
    skipped; unlike :func:`kanji_value`, digits with no 十 or 百 between them keep the last one
    (``'二〇'`` -> 0), and ``''`` is 0."""
    if text.isdigit():
        return int(text)
    return _kanji_sum(text)


# ---------------------------------------------------------------------------------------------
# Any of them


def as_int(text: str) -> int | None:
    """``'3'``, ``'３'``, ``'III'``, ``'iii'``, ``'三'``, ``'three'`` -> 3; anything else
    (``'2.1'``, ``'4b'``, ``'B'``) -> ``None``. Roman numerals up to :data:`ROMAN_MAX`."""
    text = ascii_width(text).strip().lower()
    if text.isdigit():
        return int(text)
    return NUMBER_WORDS.get(text) or roman_value(text, limit=ROMAN_MAX) or kanji_value(text)


def spelled_as_digits(text: str) -> str:
    """Kanji numerals and English number words as digits (``'三'`` -> ``'3'``, ``'Three'`` ->
    ``'3'``); every other form as printed (``'III'``, ``'4b'``, ``'17'``)."""
    if text.lower() in NUMBER_WORDS or kanji_value(text) is not None:
        return str(as_int(text))
    return text


def ordinal(text: str) -> int | None:
    """A position: ``'first'`` 1, ``'3rd'`` 3, ``'last'`` -1, ``'second last'`` /
    ``'second-to-last'`` / ``'penultimate'`` -2, ``'antepenultimate'`` -3; ``None`` otherwise."""
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
    n = int(digits.group(1)) if digits else ORDINAL_WORDS.get(head)
    if n is None:
        return None
    if tail and ("last" in tail or "end" in tail):
        return -n
    return n if n > 0 else None
