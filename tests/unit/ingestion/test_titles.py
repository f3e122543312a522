"""Title choice (pagesight.ingestion.titles): metadata titles that are no titles, the largest text
of the first page, boilerplate that heads a page, SEC covers, printed citations."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight.ingestion.titles import (
    MAX_TITLE_CHARS,
    TitleLine,
    choose_title,
    is_boilerplate,
    metadata_title,
    text_layer_lines,
)


def line(text: str, size: float, y0: float, *, x0: float = 72.0, page: int = 1) -> TitleLine:
    width = 0.5 * size * len(text)
    return TitleLine(text, size, page, x0, y0, x0 + width, y0 + 1.2 * size)


def body(y0: float, words: int = 120, size: float = 10.0) -> list[TitleLine]:
    """Running text: ``words`` words in lines of ten."""
    text = " ".join(["word"] * 10)
    return [line(text, size, y0 + i * 1.3 * size) for i in range(words // 10)]


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "   ",
        "Microsoft Word - report.docx",
        "Microsoft PowerPoint - Q3 results",
        "annual_report_final_v2",
        "Business Plan_Draft_4.30.20",
        "C:\\Users\\me\\Documents\\plan.pdf",
        "/home/me/scans/plan",
        "scan0001.pdf",
        "Quarterly results.pdf",
        "untitled",
        "Untitled-1",
        "Document1",
        "PowerPoint Presentation",
        "Slide 1",
        "12345",
        "0001018724-18-000005",  # an EDGAR accession number
        "report2019v3",
        "ACME Exhibit 99.1 Q4 2022 ER",  # a filing's exhibit label
        "Q1 2023 8-K - Exhibit 99.1",
        "March 9, 2020",
    ],
)
def test_metadata_titles_that_are_no_titles_are_rejected(raw: str | None) -> None:
    assert metadata_title(raw) is None


def test_a_metadata_title_copied_from_the_producer_is_rejected() -> None:
    assert metadata_title("Acme Writer Pro", producer_names=["acme writer pro", None]) is None


@pytest.mark.parametrize(
    ("raw", "title"),
    [
        ("Improving Recommendation Systems", "Improving Recommendation Systems"),
        ("  Annual   Report\n 2023 ", "Annual Report 2023"),
        ("Owner's Manual", "Owner's Manual"),
        ("Exhibit 300: Capital Asset Plan", "Exhibit 300: Capital Asset Plan"),
        ("10-K - 02/07/2019 - 3M Company", "10-K - 02/07/2019 - 3M Company"),
        ("年次報告書", "年次報告書"),
    ],
)
def test_real_metadata_titles_are_kept_cleaned(raw: str, title: str) -> None:
    assert metadata_title(raw) == title


def test_a_long_title_is_cut_at_a_word() -> None:
    title = metadata_title("Findings " * 60)
    assert title is not None and len(title) <= MAX_TITLE_CHARS and title.endswith("Findings…")


@pytest.mark.parametrize(
    "text",
    [
        "Table of Contents",
        "CONTENTS",
        "RECOMMENDED CITATION",
        "Suggested citation: Smith, J. (2020)",
        "FOR IMMEDIATE RELEASE",
        "FOR RELEASE MARCH 9, 2020",
        "FOR MEDIA OR OTHER INQUIRIES:",
        "UNITED STATES SECURITIES AND EXCHANGE COMMISSION",
        "Washington, D.C. 20549",
        "FORM 10-K",
        "Exhibit 99.1",
        "参考資料1",
        "Page 1 of 15",
        "Case 1:18-cv-1 Document 1 Filed 09/13/18 Page 1 of 16",
        "BY Jane Doe and John Roe",
        "Abstract",
        "About the Research Center",
        "www.example.org",
        "https://example.org/report",
        "press@example.org",
        "arXiv:2310.06117v1 [cs.LG] 9 Oct 2023",
        "March 9, 2020",
        "2019",
        "Firsts",  # one word names nothing on its own
        "0000000000",
        "Q3 2015",
    ],
)
def test_boilerplate_lines(text: str) -> None:
    assert is_boilerplate(text)


@pytest.mark.parametrize(
    "text", ["Revenue by Region", "2024 Camry", "Views of Government's Handling of Terrorism"]
)
def test_lines_that_can_be_titles(text: str) -> None:
    assert not is_boilerplate(text)


def test_the_largest_text_wins_when_the_metadata_title_is_no_title() -> None:
    page = [line("Annual Report 2023", 24, 100), *body(200)]
    assert choose_title("Microsoft Word - ar2023.docx", [page]) == "Annual Report 2023"


def test_a_real_metadata_title_comes_first() -> None:
    page = [line("Annual Report 2023", 24, 100), *body(200)]
    assert choose_title("Northwind Annual Report", [page]) == "Northwind Annual Report"


def test_boilerplate_heading_a_page_is_passed_over_for_the_next_largest_line() -> None:
    page = [
        line("Table of Contents", 30, 40),
        line("FOR IMMEDIATE RELEASE", 26, 80),
        line("Northwind Reports Record Quarter", 20, 120),
        *body(200),
    ]
    assert choose_title(None, [page]) == "Northwind Reports Record Quarter"


def test_lines_of_one_size_one_under_the_other_are_one_title() -> None:
    page = [
        line("Views of Government's", 40, 200),
        line("Handling of Terrorism", 40, 246),
        line("Fall to Post-9/11 Low", 40, 292),
        line("Little change in views of the relationship", 16, 350),
        *body(400),
    ]
    title = "Views of Government's Handling of Terrorism Fall to Post-9/11 Low"
    assert choose_title(None, [page]) == title


def test_a_word_hyphenated_across_lines_is_joined() -> None:
    page = [
        line("TAKE A STEP BACK: EVOKING REASONING VIA AB-", 17.4, 82),
        line("STRACTION IN LARGE LANGUAGE MODELS", 17.2, 102),
        *body(200),
    ]
    title = "TAKE A STEP BACK: EVOKING REASONING VIA ABSTRACTION IN LARGE LANGUAGE MODELS"
    assert choose_title(None, [page]) == title


def test_a_line_no_larger_than_the_body_text_is_no_title() -> None:
    page = [line("Quarterly update on operations", 10, 60), *body(100)]
    assert choose_title(None, [page]) is None


def test_on_a_cover_with_hardly_any_text_the_largest_line_is_the_title() -> None:
    cover = [line("VIETNAM MOBILE APPS REPORT", 40, 140), line("Q3 2015", 40, 190)]
    assert choose_title(None, [cover]) == "VIETNAM MOBILE APPS REPORT Q3 2015"


def test_an_unclosed_parenthesis_the_next_smaller_line_closes_is_left_out() -> None:
    page = [line("BUSINESS MANAGEMENT (Articulated course with", 14, 50), *body(120)]
    assert choose_title(None, [page]) == "BUSINESS MANAGEMENT"


def test_an_sec_cover_gives_the_registrant_and_the_form() -> None:
    cover = [
        line("UNITED STATES", 14, 40, x0=250),
        line("SECURITIES AND EXCHANGE COMMISSION", 14, 57, x0=170),
        line("Washington, D.C. 20549", 8, 76, x0=260),
        line("FORM 10-K", 14, 90, x0=270),
        *body(120, words=60, size=8),
        line("NORTHWIND LOGISTICS, INC.", 12, 230, x0=230),
        line("(Exact name of registrant as specified in its charter)", 7, 246, x0=220),
        *body(260, words=200, size=8),
    ]
    assert choose_title("0000012345-23-000006", [cover]) == "NORTHWIND LOGISTICS, INC. — Form 10-K"


def test_a_printed_recommended_citation_names_the_report_when_no_title_is_printed() -> None:
    cover = [
        line("FOR RELEASE MARCH 9, 2020", 8, 206),
        line("BY Jane Doe and John Roe", 11, 420),
        *body(450, words=60, size=8),
        line("RECOMMENDED CITATION", 8, 657),
        line("Research Center, March, 2020, “Neighbours Differ in Their", 8, 669),
        line("Views of Each Other”", 8, 679),
    ]
    assert choose_title(None, [cover]) == "Neighbours Differ in Their Views of Each Other"


def test_the_second_page_counts_only_when_the_first_is_empty() -> None:
    second = [line("Teach your old commute new tricks", 30, 72, page=2), *body(200)]
    assert choose_title(None, [[], second]) == "Teach your old commute new tricks"
    first = [line("Overview of results in the quarter", 10, 60), *body(100)]
    assert choose_title(None, [first, second]) is None


def test_nothing_that_fits_gives_none() -> None:
    assert choose_title("untitled", []) is None
    assert choose_title(None, [[line("Table of Contents", 20, 40)]]) is None


def test_text_layer_lines_keep_horizontal_lines_with_their_font_size(tmp_path: Path) -> None:
    import pymupdf

    from pagesight.ingestion.parse.pdf import page_text

    with pymupdf.open() as doc:
        page = doc.new_page()
        page.insert_text((72, 100), "Northwind Annual Report", fontsize=24)
        page.insert_text((72, 140), "Fleet and parcels in 2024", fontsize=11)
        page.insert_text((30, 700), "arXiv:1234.5678v1 [cs.CL]", fontsize=20, rotate=90)
        lines = text_layer_lines(page_text(page), 1)
    assert [(li.text, round(li.size)) for li in lines] == [
        ("Northwind Annual Report", 24),
        ("Fleet and parcels in 2024", 11),
    ]
