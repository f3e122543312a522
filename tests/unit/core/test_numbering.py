"""pagesight.core.numbering: the one reader of roman and kanji numerals, number and ordinal words
and full-width digits, for ingestion (pagesight.ingestion.structure) and the query side
(pagesight.query.references)."""

from __future__ import annotations

import pytest

from pagesight.core.numbering import (
    NUMBER_WORDS,
    ORDINAL_WORDS,
    ROMAN_MAX,
    as_int,
    ascii_width,
    kanji_value,
    kanji_value_lenient,
    ordinal,
    roman_value,
    spelled_as_digits,
    to_roman,
)
from pagesight.ingestion.structure import section_number
from pagesight.query.references import parse_references

# ---- roman numerals ---------------------------------------------------------------------------


def test_roman_round_trip_from_i_to_mmxxiv_in_either_case() -> None:
    for value in range(1, 2025):
        numeral = to_roman(value)
        assert roman_value(numeral) == value
        assert roman_value(numeral.upper()) == value
        assert roman_value(numeral, limit=ROMAN_MAX) == value
    assert to_roman(2024) == "mmxxiv"
    assert to_roman(0) == to_roman(-3) == ""


ROMANS = [
    ("i", 1), ("iv", 4), ("IX", 9), ("xiv", 14), ("XL", 40), ("xcix", 99), ("cd", 400),
    ("MCMXCIX", 1999), ("mmxxiv", 2024), ("Xiv", 14), ("mmmcmxcix", 3999),
]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), ROMANS)
def test_roman_values(text: str, value: int) -> None:
    assert roman_value(text) == value


@pytest.mark.parametrize(
    "text", ["", " ", "iiii", "ic", "vx", "iiv", "xxxx", "vv", "dd", "lc", "iv ", " iv", "4", "ivb"]
)
def test_only_canonical_roman_numerals_have_a_value(text: str) -> None:
    assert roman_value(text) is None
    assert roman_value(text, limit=ROMAN_MAX) is None


def test_thousands_beyond_the_classical_range_only_without_a_limit() -> None:
    # ingestion (folios, headings) takes any run of thousands; the query side stops at 3999
    assert roman_value("mmmm") == 4000
    assert roman_value("MMMMMI") == 5001
    assert roman_value("mmmm", limit=ROMAN_MAX) is None
    assert as_int("mmmm") is None
    assert as_int("mmmcmxcix") == 3999


# ---- kanji numerals ---------------------------------------------------------------------------


KANJI = [
    ("〇", 0), ("一", 1), ("三", 3), ("九", 9), ("十", 10), ("十二", 12), ("二十", 20),
    ("二十一", 21), ("九十九", 99), ("百", 100), ("百五", 105), ("三百二十一", 321),
    ("二〇二四", 2024), ("一二", 12),
]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), KANJI)
def test_kanji_values(text: str, value: int) -> None:
    assert kanji_value(text) == value


@pytest.mark.parametrize("text", ["", "3", "三章", "第三", "1十", "三 "])
def test_strict_kanji_reads_kanji_numerals_only(text: str) -> None:
    assert kanji_value(text) is None


KANJI_LENIENT = [
    ("三", 3), ("十二", 12), ("二十一", 21), ("百五", 105), ("12", 12), ("１２", 12),
    # where the lenient reading (ingestion's headings) differs from the strict one
    ("二〇", 0), ("一二", 2), ("1十", 10), ("", 0),
]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), KANJI_LENIENT)
def test_lenient_kanji_as_ingestion_reads_a_heading(text: str, value: int) -> None:
    assert kanji_value_lenient(text) == value


def test_chapter_in_kanji_on_both_sides() -> None:
    assert section_number("第三章 結論") == "3"
    assert section_number("第二十一章") == "21"
    assert section_number("第１２章") == "12"
    assert [(r.kind, r.value) for r in parse_references("第三章の要点は？")] == [("chapter", "3")]
    assert [(r.kind, r.value) for r in parse_references("第二十一章")] == [("chapter", "21")]


# ---- words, ordinals, any form ------------------------------------------------------------


def test_number_and_ordinal_words() -> None:
    assert NUMBER_WORDS["one"] == 1 and NUMBER_WORDS["twenty"] == 20 and len(NUMBER_WORDS) == 20
    assert list(NUMBER_WORDS)[:3] == ["one", "two", "three"]  # the chapter pattern's order
    assert ORDINAL_WORDS["first"] == 1 and ORDINAL_WORDS["tenth"] == 10 and len(ORDINAL_WORDS) == 10
    assert [(r.kind, r.value) for r in parse_references("chapter three")] == [("chapter", "3")]


ORDINALS = [
    ("first", 1), ("Second", 2), ("3rd", 3), ("22nd", 22), ("tenth", 10), ("last", -1),
    ("final", -1), ("very last", -1), ("very first", 1), ("second last", -2),
    ("second-to-last", -2), ("Second  To  Last", -2), ("penultimate", -2), ("next to last", -2),
    ("last but one", -2), ("antepenultimate", -3), ("third from the end", -3),
    ("eleventh", None), ("0th", None), ("page", None), ("", None),
]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), ORDINALS)
def test_ordinals(text: str, value: int | None) -> None:
    assert ordinal(text) == value


ANY_FORM = [
    ("3", 3), ("３", 3), ("１７", 17), (" 17 ", 17), ("III", 3), ("iii", 3), ("三", 3),
    ("three", 3), ("Three", 3), ("ＩＶ", 4), ("二十一", 21), ("0", 0),
    ("2.1", None), ("4b", None), ("B", None), ("", None), ("twenty-one", None),
]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), ANY_FORM)
def test_as_int_reads_every_form(text: str, value: int | None) -> None:
    assert as_int(text) == value


SPELLED = [
    ("三", "3"), ("二十一", "21"), ("three", "3"), ("Twelve", "12"),
    ("III", "III"), ("iv", "iv"), ("4b", "4b"), ("17", "17"), ("２", "２"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "printed"), SPELLED)
def test_spelled_numbers_as_digits_other_forms_as_printed(text: str, printed: str) -> None:
    assert spelled_as_digits(text) == printed


def test_full_width_digits_and_letters_read_as_ascii_one_for_one() -> None:
    assert ascii_width("表２") == "表2"
    assert ascii_width("ｐａｇｅ　１７！") == "page 17!"
    text = "第１２章　Ａ－３"
    assert len(ascii_width(text)) == len(text)
    assert [(r.kind, r.value) for r in parse_references("表２の合計")] == [("table", "2")]
    assert [(r.kind, r.value) for r in parse_references("ｐａｇｅ １７")] == [("page", "17")]
