"""pagesight.ingestion.structure: printed page labels (folios), sections and numbered items.

The hand-built documents pin each rule; the tests on evaluation PDFs pin what the rules read on
real footers, with labels checked by looking at the pages (skipped without the corpus).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pagesight.core.types import (
    BBox,
    Document,
    Element,
    ElementKind,
    OutlineEntry,
    Page,
    ParsedDocument,
)
from pagesight.ingestion.structure import (
    MAX_SECTIONS,
    STRUCTURE_VERSION,
    build_structure,
    caption_number,
    clean_label,
    detect_folios,
    folio_runs,
    margin_folios,
    section_number,
)


def page(
    n: int,
    *margin: str,
    label: str | None = None,
    width: float = 612.0,
    height: float = 792.0,
    text_layer: bool = True,
) -> Page:
    return Page(
        doc_id="d",
        page_number=n,
        width=width,
        height=height,
        label=label,
        margin_text=list(margin),
        has_text_layer=text_layer,
    )


def element(
    n: int,
    seq: int,
    kind: ElementKind,
    text: str,
    *,
    path: list[str] | None = None,
    caption: str | None = None,
) -> Element:
    return Element(
        element_id=f"e{n}-{seq}",
        doc_id="d",
        kind=kind,
        text=text,
        page_number=n,
        seq=seq,
        bbox=BBox(x0=10, y0=10 + seq, x1=100, y1=50 + seq),
        section_path=path or [],
        caption=caption,
    )


def parsed(
    pages: list[Page],
    elements: list[Element] | None = None,
    outline: list[OutlineEntry] | None = None,
) -> ParsedDocument:
    return ParsedDocument(
        document=Document(doc_id="d", version="v1", source_uri="x.pdf", page_count=len(pages)),
        pages=pages,
        elements=elements or [],
        outline=outline or [],
    )


def test_structure_version_is_a_positive_int() -> None:
    assert isinstance(STRUCTURE_VERSION, int) and STRUCTURE_VERSION >= 1


# -- folios: hand-built margins ------------------------------------------------------------------


def test_constant_offset_after_unnumbered_cover_and_contents() -> None:
    pages = [page(1, "ANNUAL REPORT"), page(2, "Contents")]
    pages += [page(n, "Acme Corp", str(n - 2)) for n in range(3, 21)]
    labels = detect_folios(pages)
    assert labels[3] == "1" and labels[19] == "17" and labels[20] == "18"
    assert 1 not in labels and 2 not in labels
    assert [(r.first, r.last, r.offset) for r in folio_runs(pages)] == [(3, 20, -2)]


def test_roman_front_matter_then_arabic_from_one() -> None:
    numerals = ["i", "ii", "iii", "iv", "v", "vi"]
    pages = [page(1, "A Report")]
    pages += [page(n, numerals[n - 2]) for n in range(2, 8)]  # pages 2-7: i-vi
    pages += [page(n, f"Chapter {n // 10}", str(n - 7)) for n in range(8, 40)]  # 8-39: 1-32
    labels = detect_folios(pages)
    assert labels[2] == "i" and labels[5] == "iv" and labels[7] == "vi"
    assert labels[8] == "1" and labels[24] == "17" and labels[39] == "32"
    assert 1 not in labels


def test_upper_case_roman_and_interpolated_roman_keep_their_case() -> None:
    pages = [page(1, "I"), page(2, "II"), page(3), page(4, "IV"), page(5, "V")]
    assert detect_folios(pages) == {1: "I", 2: "II", 3: "III", 4: "IV", 5: "V"}


def test_pages_without_a_readable_folio_inside_a_run_are_interpolated() -> None:
    # A chapter opener every 5th page prints no folio; the run still covers it.
    pages = [page(n, *([] if n % 5 == 0 else [f"Page {n + 10}"])) for n in range(1, 31)]
    labels = detect_folios(pages)
    assert labels[5] == "15" and labels[10] == "20" and labels[25] == "35"
    # ... but nothing is extrapolated past the last reading.
    assert 30 not in labels and labels[29] == "39"


def test_a_gap_longer_than_the_limit_breaks_the_run() -> None:
    pages = [page(n, str(n + 4)) for n in range(1, 6)]
    pages += [page(n) for n in range(6, 40)]
    pages += [page(n, str(n + 4)) for n in range(40, 45)]
    labels = detect_folios(pages)
    assert labels[5] == "9" and labels[40] == "44"
    assert not any(n in labels for n in range(6, 40))


def test_a_stray_number_on_a_run_page_does_not_break_it() -> None:
    # page 7's footer holds only a footnote marker: both neighbours say page 7 is printed 5.
    pages = [page(n, "Report", str(n - 2)) for n in range(3, 12)]
    pages[4] = page(7, "Report", "3 Source: survey of 2019")
    labels = detect_folios(pages)
    assert labels[7] == "5" and labels[6] == "4" and labels[8] == "6"


def test_years_are_not_folios() -> None:
    running_head = [page(n, "Annual Report 2019", "2019") for n in range(1, 30)]
    assert detect_folios(running_head) == {}
    # A timeline whose pages print consecutive years is consistent, but 2001 is not a page.
    timeline = [page(n, str(2000 + n)) for n in range(1, 15)]
    assert detect_folios(timeline) == {}


def test_dates_amounts_and_list_numbers_are_not_folios() -> None:
    pages = [
        page(n, f"March {n}, 2023", f"$1,{n:03d}", f"{n}.5%", f"{n}. Power supply", "1,234")
        for n in range(1, 20)
    ]
    assert detect_folios(pages) == {}


def test_numbers_that_name_something_else_are_not_folios() -> None:
    pages = [page(n, f"Exhibit {n}", f"Note {n}", f"Item {n}") for n in range(1, 12)]
    assert detect_folios(pages) == {}


def test_no_folios_no_labels() -> None:
    assert detect_folios([page(n, "Acme Corp", "Confidential") for n in range(1, 10)]) == {}
    assert detect_folios([page(n) for n in range(1, 10)]) == {}
    assert detect_folios([]) == {}


def test_an_unsupported_run_is_not_labelled() -> None:
    # Two agreeing pages out of many with numbers: chance, not a folio run.
    pages = [page(n, str((n * 37) % 91 + 1)) for n in range(1, 25)]
    pages[9] = page(10, "50")
    pages[10] = page(11, "51")
    labels = detect_folios(pages)
    assert 10 not in labels and 11 not in labels


def test_two_readings_suffice_in_a_short_document() -> None:
    assert detect_folios([page(1, "Title"), page(2, "- 5 -"), page(3, "- 6 -")]) == {
        2: "5",
        3: "6",
    }


def test_an_extract_with_jumps_gets_one_run_per_stretch() -> None:
    pages = [page(n, str(n + 7)) for n in range(1, 8)]  # printed 8-14
    pages += [page(n, str(n + 12)) for n in range(8, 13)]  # printed 20-24
    pages += [page(n, str(n + 17), str(n + 18)) for n in range(13, 21)]  # 30-37, plus noise
    labels = detect_folios(pages)
    assert labels[1] == "8" and labels[7] == "14"
    assert labels[8] == "20" and labels[12] == "24"
    assert labels[13] == "30" and labels[20] == "37"
    assert [r.offset for r in folio_runs(pages)] == [7, 12, 17]


@pytest.mark.parametrize(
    "footer",
    [
        "{n}",
        "- {n} -",
        "Page {n}",
        "Page {n} of 212",
        "{n} of 212",
        "{n} | Annual Report",
        "Annual Report | {n}",
        "PEW RESEARCH CENTER {n}",
        "p. {n}",
        "{n}ページ",
        "－{n}－",
    ],
)
def test_folio_forms(footer: str) -> None:
    pages = [page(n, "Acme", footer.format(n=n + 3)) for n in range(1, 8)]
    assert detect_folios(pages) == {n: str(n + 3) for n in range(1, 8)}


def test_appendix_style_prefixed_folios() -> None:
    pages = [page(n, str(n)) for n in range(1, 10)]
    pages += [page(n, f"A-{n - 9}") for n in range(10, 14)]
    labels = detect_folios(pages)
    assert labels[5] == "5" and labels[10] == "A-1" and labels[13] == "A-4"


def test_pages_with_a_pdf_label_are_left_alone() -> None:
    pages = [page(n, str(n + 10), label="x" if n == 4 else None) for n in range(1, 8)]
    labels = detect_folios(pages)
    assert 4 not in labels and labels[3] == "13" and labels[5] == "15"


def test_slides_saved_as_images_stay_unlabelled() -> None:
    def deck(text_layer: bool) -> list[Page]:
        return [
            page(n, str(n + 1), width=960, height=540, text_layer=text_layer) for n in range(1, 12)
        ]

    assert detect_folios(deck(text_layer=False)) == {}
    # A born-digital landscape document is read like any other.
    assert detect_folios(deck(text_layer=True))[5] == "6"


def test_margin_folios_reads_the_most_likely_number() -> None:
    assert [f.text for f in margin_folios("9 March 2023 | 4")] == ["4"]
    assert [f.text for f in margin_folios("Tuesday, September 11, 2007 - 12:16 AM")] == []
    assert [f.text for f in margin_folios("5 means the annotator feels")] == []
    assert [f.text for f in margin_folios("17 million")] == []
    assert [f.text for f in margin_folios("１７")] == ["17"]  # full-width digits
    assert [f.text for f in margin_folios("17 of 12")] == []  # not a page count


# -- labels in the whole structure ---------------------------------------------------------------


def test_pdf_page_labels_are_kept_and_folios_not_read() -> None:
    pages = [page(1, "99", label="<FEFF0063>1"), page(2, "100", label="c2")]
    pages += [page(n, str(n + 96), label=str(n - 2)) for n in range(3, 10)]
    structure = build_structure(parsed(pages))
    assert [(p.label, p.label_source) for p in structure.pages[:4]] == [
        ("c1", "pdf"),
        ("c2", "pdf"),
        ("1", "pdf"),
        ("2", "pdf"),
    ]


def test_folio_labels_in_the_structure() -> None:
    pages = [page(1, "Cover", width=500, height=700)]
    pages += [page(n, f"Page {n - 1}") for n in range(2, 8)]
    structure = build_structure(parsed(pages))
    assert structure.doc_id == "d" and structure.version == "v1"
    first, second = structure.pages[0], structure.pages[1]
    assert (first.label, first.label_source, first.width, first.height) == (None, None, 500, 700)
    assert (second.page_number, second.label, second.label_source) == (2, "1", "folio")
    assert len(structure.pages) == 7


def test_clean_label() -> None:
    assert clean_label("<FEFF0063>1") == "c1"
    assert clean_label("  iv ") == "iv"
    assert clean_label("") is None and clean_label("   ") is None and clean_label(None) is None


# -- sections ------------------------------------------------------------------------------------


def test_outline_sections_span_to_the_next_entry_of_the_same_or_higher_level() -> None:
    outline = [
        OutlineEntry(level=1, title="1 Introduction", page_number=1),
        OutlineEntry(level=2, title="1.1 Background", page_number=2),
        OutlineEntry(level=2, title="1.2 Scope", page_number=4),
        OutlineEntry(level=1, title="2 Methods", page_number=6),
        OutlineEntry(level=2, title="2.1 Data", page_number=6),
        OutlineEntry(level=1, title="Nowhere", page_number=0),
        OutlineEntry(level=1, title="Beyond", page_number=99),
        OutlineEntry(level=1, title="3 Results", page_number=9),
    ]
    structure = build_structure(parsed([page(n) for n in range(1, 11)], outline=outline))
    spans = [(s.title, s.level, s.number, s.page_start, s.page_end) for s in structure.sections]
    assert spans == [
        ("1 Introduction", 1, "1", 1, 5),
        ("1.1 Background", 2, "1.1", 2, 3),
        ("1.2 Scope", 2, "1.2", 4, 5),
        ("2 Methods", 1, "2", 6, 8),
        ("2.1 Data", 2, "2.1", 6, 8),
        ("3 Results", 1, "3", 9, 10),
    ]


def test_outline_section_ending_on_the_page_where_the_next_starts_below_content() -> None:
    outline = [
        OutlineEntry(level=1, title="Item 1A. Risk Factors", page_number=2),
        OutlineEntry(level=1, title="Item 1B. Unresolved Staff Comments", page_number=4),
        OutlineEntry(level=1, title="Item 2. Properties", page_number=5),
    ]
    elements = [
        element(4, 0, ElementKind.TEXT, "the last risk factor"),
        element(4, 1, ElementKind.TITLE, "Item 1B. Unresolved Staff Comments"),
        element(5, 0, ElementKind.TITLE, "Item 2. Properties"),
    ]
    structure = build_structure(parsed([page(n) for n in range(1, 7)], elements, outline))
    spans = [(s.number, s.page_start, s.page_end) for s in structure.sections]
    # Item 1A continues onto page 4 (its text precedes Item 1B there); Item 1B ends before
    # page 5, where Item 2 is the first thing on the page.
    assert spans == [("1A", 2, 4), ("1B", 4, 4), ("2", 5, 6)]


def test_a_one_entry_outline_falls_back_to_headings() -> None:
    outline = [OutlineEntry(level=1, title="Whole document", page_number=1)]
    elements = [
        element(1, 0, ElementKind.TITLE, "Chapter 1 Basics", path=["Chapter 1 Basics"]),
        element(1, 1, ElementKind.TEXT, "text", path=["Chapter 1 Basics"]),
        element(3, 0, ElementKind.TITLE, "1.1 Terms", path=["Chapter 1 Basics", "1.1 Terms"]),
        element(3, 1, ElementKind.TEXT, "text", path=["Chapter 1 Basics", "1.1 Terms"]),
        element(5, 0, ElementKind.TEXT, "text", path=["Chapter 1 Basics", "1.1 Terms"]),
        element(5, 1, ElementKind.TITLE, "CHAPTER II Use", path=["CHAPTER II Use"]),
        element(7, 0, ElementKind.TITLE, "第3章 応用", path=["第3章 応用"]),
    ]
    structure = build_structure(parsed([page(n) for n in range(1, 9)], elements, outline))
    spans = [(s.title, s.level, s.number, s.page_start, s.page_end) for s in structure.sections]
    assert spans == [
        ("Chapter 1 Basics", 1, "1", 1, 5),  # Chapter II starts below text on page 5
        ("1.1 Terms", 2, "1.1", 3, 5),
        ("CHAPTER II Use", 1, "II", 5, 6),  # 第3章 is the first thing on page 7
        ("第3章 応用", 1, "3", 7, 8),
    ]


def test_note_numbers_in_financial_statements() -> None:
    notes = "Notes to Consolidated Financial Statements"
    outline = [
        OutlineEntry(level=1, title="Item 8. Financial Statements", page_number=1),
        OutlineEntry(level=2, title=notes, page_number=2),
        OutlineEntry(level=3, title="1. Summary of Significant Accounting Policies", page_number=2),
        OutlineEntry(level=3, title="7. Income Taxes", page_number=4),
        OutlineEntry(level=1, title="Note 9 — Leases", page_number=5),
        OutlineEntry(level=1, title="NOTE 10. DEBT", page_number=6),
        OutlineEntry(level=1, title="11. Segments", page_number=7),
    ]
    structure = build_structure(parsed([page(n) for n in range(1, 9)], outline=outline))
    assert [s.number for s in structure.sections] == [
        "8",
        None,
        "Note 1",
        "Note 7",
        "Note 9",
        "Note 10",
        "11",  # not under the notes: a plain section number
    ]


def test_note_numbers_from_the_running_head() -> None:
    pages = [page(1), page(2, "Notes to Consolidated Financial Statements", "Pfizer Inc.")]
    elements = [
        element(1, 0, ElementKind.TITLE, "3. Results", path=["3. Results"]),
        element(2, 0, ElementKind.TITLE, "3. Acquisitions", path=["3. Acquisitions"]),
    ]
    numbers = [s.number for s in build_structure(parsed(pages, elements)).sections]
    assert numbers == ["3", "Note 3"]


@pytest.mark.parametrize(
    ("title", "number"),
    [
        ("4.2 Methods", "4.2"),
        ("1. Introduction", "1"),
        ("Chapter 3", "3"),
        ("CHAPTER III", "III"),
        ("Chapter 1: Hardware Installation", "1"),
        ("第3章 結論", "3"),
        ("第十二章 展望", "12"),
        ("Note 7 — Income taxes", "Note 7"),
        ("NOTE 7. INCOME TAXES", "Note 7"),
        ("Note 5—LONG-TERM DEBT", "Note 5"),
        ("Item 1A. Risk Factors", "1A"),
        ("PART II", "II"),
        ("Appendix B: Meaning of Symbols", "B"),
        ("A.1 Proofs", "A.1"),
        ("IV. Results", "IV"),
        ("2019 Highlights", None),
        ("Introduction", None),
        ("Notes to Consolidated Financial Statements", None),
    ],
)
def test_section_number(title: str, number: str | None) -> None:
    assert section_number(title) == number


def test_sections_are_capped_and_titles_trimmed() -> None:
    outline = [
        OutlineEntry(level=1, title=f"Section {i} " + "x" * 300, page_number=1 + i % 50)
        for i in range(2500)
    ]
    structure = build_structure(parsed([page(n) for n in range(1, 51)], outline=outline))
    assert len(structure.sections) == MAX_SECTIONS
    assert all(len(s.title) <= 200 for s in structure.sections)
    assert all(s.page_end >= s.page_start for s in structure.sections)


# -- items ---------------------------------------------------------------------------------------


def test_items_from_captions_attached_and_loose() -> None:
    elements = [
        element(1, 0, ElementKind.TEXT, "List of Figures"),
        element(1, 1, ElementKind.TEXT, "Figure 1: Revenue by year ........ 3"),
        element(2, 0, ElementKind.TEXT, "Table 3 shows the revenue by year."),
        element(2, 1, ElementKind.TEXT, "Figure 1: Revenue by year (mentioned early)"),
        element(3, 0, ElementKind.FIGURE, "", caption="Figure 1: Revenue by year"),
        element(3, 1, ElementKind.TABLE, "| a | b |", caption="Table 2.1 Costs"),
        element(4, 0, ElementKind.CAPTION, "Fig. 4b. A chart the layout left alone"),
        element(4, 1, ElementKind.TABLE, "| c |", caption="Table 2.1 (continued)"),
        element(5, 0, ElementKind.EQUATION, "E = mc^2 (5)"),
        element(5, 1, ElementKind.EQUATION, "a + b", caption="Eq. (6)"),
        element(6, 0, ElementKind.FIGURE, "", caption="図３ 売上の推移"),
        element(6, 1, ElementKind.TABLE, "| d |", caption="TABLE II. Results"),
        element(7, 0, ElementKind.FIGURE, "", caption="Figure 9: " + "y" * 400),
        element(7, 1, ElementKind.FIGURE, "", caption="A chart title without a number"),
    ]
    items = build_structure(parsed([page(n) for n in range(1, 8)], elements)).items
    got = [(i.kind, i.number, i.page_number, i.element_id) for i in items]
    assert got == [
        ("figure", "1", 3, "e3-0"),  # the figure's own caption beats text naming it earlier
        ("table", "2.1", 3, "e3-1"),  # "continued" on page 4 is not a second table 2.1
        ("figure", "4b", 4, "e4-0"),
        ("equation", "5", 5, "e5-0"),
        ("equation", "6", 5, "e5-1"),
        ("figure", "3", 6, "e6-0"),
        ("table", "II", 6, "e6-1"),
        ("figure", "9", 7, "e7-0"),
    ]
    assert items[0].caption == "Figure 1: Revenue by year" and items[0].bbox is not None
    assert len(items[-1].caption or "") == 300


def test_an_unattached_caption_counts_on_its_own_page() -> None:
    elements = [element(2, 3, ElementKind.TEXT, "Figure 2: Survey respondents by age")]
    (item,) = build_structure(parsed([page(1), page(2)], elements)).items
    assert (item.kind, item.number, item.page_number, item.element_id) == ("figure", "2", 2, "e2-3")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Figure 3: Revenue", ("figure", "3")),
        ("Fig. 4b", ("figure", "4b")),
        ("Fig.12 Growth", ("figure", "12")),
        ("Figure 3 Distribution of income", ("figure", "3")),
        ("Figure 3-2", ("figure", "3-2")),
        ("Table 2.1", ("table", "2.1")),
        ("TABLE II", ("table", "II")),
        ("TABLE II. RESULTS", ("table", "II")),
        ("Table A1: Robustness", ("table", "A1")),
        ("Table 1 (continued)", ("table", "1")),
        ("Exhibit 4", ("figure", "4")),
        ("Chart 2 — Sales", ("figure", "2")),
        ("Eq. (5)", ("equation", "5")),
        ("Equation 7: the loss", ("equation", "7")),
        ("図3", ("figure", "3")),
        ("図 3：売上高の推移", ("figure", "3")),
        ("表２", ("table", "2")),
        ("表２ 地域別売上", ("table", "2")),
        ("第3図 構成", ("figure", "3")),
        ("式(5)", ("equation", "5")),
        ("Table 3 shows the results", None),
        ("Figure 3 and 4 show", None),
        ("Table IV shows", None),
        ("Figures 3 and 4", None),
        ("Table of Contents", None),
        ("Figure Credits", None),
        ("Table 3rd row", None),
        ("表2に示すように", None),
        ("図3の結果から", None),
        ("The Figure 3 caption", None),
        ("", None),
    ],
)
def test_caption_number(text: str, expected: tuple[str, str] | None) -> None:
    assert caption_number(text) == expected


# -- robustness and speed ------------------------------------------------------------------------


def test_odd_input_does_not_raise() -> None:
    empty = build_structure(parsed([]))
    assert empty.pages == [] and empty.sections == [] and empty.items == []
    pages = [page(1, "", " ", "\x00", "9" * 40, "ⅳ", "🙂 17"), page(1, "dup"), page(3, "x")]
    outline = [
        OutlineEntry(level=1, title="   ", page_number=1),
        OutlineEntry(level=3, title="Deep", page_number=3),
        OutlineEntry(level=1, title="Back", page_number=1),
        OutlineEntry(level=1, title="Far", page_number=10_000),
        OutlineEntry(level=1, title="Negative", page_number=-1),
    ]
    elements = [
        element(7, 0, ElementKind.TITLE, " "),
        element(2, 0, ElementKind.FIGURE, "", caption=""),
        element(2, 1, ElementKind.EQUATION, ""),
    ]
    structure = build_structure(parsed(pages, elements, outline))
    assert [p.page_number for p in structure.pages] == [1, 3]
    # sections follow the pages, whatever order the outline lists them in
    assert [(s.title, s.page_start, s.page_end) for s in structure.sections] == [
        ("Back", 1, 3),
        ("Deep", 3, 3),
    ]


def test_headings_the_outline_omits_join_it_below_its_deepest_level() -> None:
    """A filing's outline lists "Notes to Financial Statements" but not each note: the note
    headings become sections under it, numbered, with their own spans."""
    pages = [page(n) for n in range(1, 7)]
    outline = [
        OutlineEntry(level=1, title="Business", page_number=1),
        OutlineEntry(level=1, title="Notes to Financial Statements", page_number=3),
    ]
    elements = [
        element(3, 0, ElementKind.TITLE, "Notes to Financial Statements"),
        element(4, 0, ElementKind.TITLE, "Note 7 — Income taxes"),
        element(6, 0, ElementKind.TITLE, "Note 8 — Leases"),
    ]
    structure = build_structure(parsed(pages, elements, outline))
    spans = {(s.title, s.level, s.number): (s.page_start, s.page_end) for s in structure.sections}
    assert spans == {
        ("Business", 1, None): (1, 2),
        ("Notes to Financial Statements", 1, None): (3, 6),
        ("Note 7 — Income taxes", 2, "Note 7"): (4, 5),
        ("Note 8 — Leases", 2, "Note 8"): (6, 6),
    }


def test_a_500_page_document_well_under_a_second() -> None:
    pages = [page(1, "Annual Report 2023")]
    pages += [
        page(n, "ACME CORPORATION", "Notes to Consolidated Financial Statements", f"{n - 1}")
        for n in range(2, 501)
    ]
    elements = []
    for n in range(1, 501):
        elements.append(element(n, 0, ElementKind.TITLE, f"{n % 30}. Heading {n}", path=["x"]))
        elements += [element(n, s, ElementKind.TEXT, "Revenue grew 12% in 2023.") for s in (1, 2)]
        elements.append(element(n, 3, ElementKind.TABLE, "| a |", caption=f"Table {n}: Costs"))
    outline = [
        OutlineEntry(level=1 + n % 3, title=f"{n}. Part", page_number=n) for n in range(1, 501)
    ]
    document = parsed(pages, elements, outline)
    start = time.perf_counter()
    structure = build_structure(document)
    elapsed = time.perf_counter() - start
    assert structure.pages[100].label == "100" and len(structure.items) == 500
    assert elapsed < 1.0, f"{elapsed:.2f}s"


# -- folios on evaluation PDFs -------------------------------------------------------------------
#
# Each expected label was checked on the page (its footer or running head, or the rendered image
# for the scanned manual). The EDGAR 10-Ks print their folio right below the text, mid-page, which
# the top/bottom margin bands do not reach: those are pinned as unlabelled until margin_text reads
# them (a test below shows what detect_folios does once it does).

EVAL_PDFS = Path(__file__).resolve().parents[3].parent / "shared" / "eval" / "pdfs"


def _margin_pages(name: str, first: int = 1, last: int | None = None) -> list[Page]:
    if not EVAL_PDFS.is_dir():
        pytest.skip(f"evaluation PDFs not found at {EVAL_PDFS}")
    import pymupdf

    from pagesight.ingestion.parse.pdf import page_margin_text

    with pymupdf.open(EVAL_PDFS / name) as doc:
        stop = min(last or doc.page_count, doc.page_count)
        return [
            Page(
                doc_id=name,
                page_number=n,
                width=doc[n - 1].rect.width,
                height=doc[n - 1].rect.height,
                has_text_layer=True,
                margin_text=page_margin_text(doc[n - 1]),
            )
            for n in range(first, stop + 1)
        ]


@pytest.mark.parametrize(
    ("name", "first", "last", "expected", "unlabelled"),
    [
        # Pew reports: the cover is unnumbered, page 2 is printed 1 (top right).
        ("PG_20.07.30_U.S.-Views-China_final.pdf", 1, None, {2: "1", 12: "11", 22: "21"}, [1]),
        ("12-15-15-ISIS-and-terrorism-release-final.pdf", 1, None, {2: "1", 23: "22"}, [1]),
        ("PIP_Seniors-and-Tech-Use_040314.pdf", 1, None, {2: "1", 27: "26"}, [1]),
        # ... except this one, which counts the cover.
        ("PG_2020.03.09_US-Germany_FINAL.pdf", 1, None, {2: "2", 21: "21"}, [1]),
        # Analog Devices: six glossy pages and the 10-K cover, then PART I on page 8 is 1.
        ("ADI_2009.pdf", 1, None, {8: "1", 50: "43", 103: "96"}, [1, 7, 104, 110]),
        # An annual-report extract whose pages jump: 8-14, 20-24, 30-37.
        (
            "f86d073b0d735ac873a65d906ba82758.pdf",
            1,
            None,
            {1: "8", 8: "20", 13: "30", 20: "37"},
            [],
        ),
        # Seven unnumbered pages, then printed 20-32.
        ("afe620b9beac86c1027b96d31d396407.pdf", 1, None, {8: "20", 20: "32"}, [1, 7]),
        # Scanned manual: the OCR layer misses most folios; page 6's "5" is only on the image.
        ("owners-manual-2170416.pdf", 1, None, {5: "4", 6: "5", 13: "12", 28: "27"}, [1, 2, 32]),
        ("91521110100M_4K_UHD_Display_User_Manual_V1.1.pdf", 1, None, {2: "1", 39: "38"}, [40]),
        # "Page 3 of 15": printed as indexed.
        ("MGMRESORTS_2022Q4_EARNINGS.pdf", 1, None, {1: "1", 15: "15"}, []),
        # Pfizer's Exhibit 21 numbers its own pages from 2; the 10-K's folios are mid-page.
        ("PFIZER_2021_10K.pdf", 100, None, {133: "2", 137: "6"}, [100, 120, 132]),
    ],
)
def test_folios_on_evaluation_pdfs(
    name: str, first: int, last: int | None, expected: dict[int, str], unlabelled: list[int]
) -> None:
    labels = detect_folios(_margin_pages(name, first, last))
    assert {n: labels.get(n) for n in expected} == expected
    assert [n for n in unlabelled if n in labels] == []


@pytest.mark.parametrize(("name", "pages"), [("tacl_a_00660.pdf", 23), ("ABMD_2012.pdf", 12)])
def test_folios_agree_with_the_pdf_page_labels(name: str, pages: int) -> None:
    """Where a PDF has both, the folios read in its margins are its /PageLabels."""
    import pymupdf

    margin_pages = _margin_pages(name, 1, pages)
    labels = detect_folios(margin_pages)
    with pymupdf.open(EVAL_PDFS / name) as doc:
        pdf_labels = {n: doc[n - 1].get_label() for n in labels}
    assert len(labels) >= 10 and labels == pdf_labels


def test_build_structure_keeps_the_pdf_labels_of_an_evaluation_pdf() -> None:
    import pymupdf

    margin_pages = _margin_pages("ABMD_2012.pdf", 1, 14)
    with pymupdf.open(EVAL_PDFS / "ABMD_2012.pdf") as doc:
        for p in margin_pages:
            p.label = doc[p.page_number - 1].get_label() or None
    structure = build_structure(parsed(margin_pages))
    assert [(p.label, p.label_source) for p in structure.pages[:3]] == [
        ("c1", "pdf"),
        ("c2", "pdf"),
        ("1", "pdf"),
    ]


def test_edgar_10k_folios_are_read_from_the_last_line_mid_page() -> None:
    """BOEING's folio is the last line of text, often mid-page (page 21 is printed 19, page
    101 is 97): outside the bottom band, but page_margin_text keeps a page's short first and
    last lines wherever they sit, so the runs are found."""
    found = detect_folios(_margin_pages("BOEING_2022_10K.pdf", 1, 110))
    assert found[3] == "1" and found[21] == "19" and found[101] == "97"
    assert 1 not in found and len(found) >= 100


def test_a_running_head_taken_for_a_heading_opens_one_section_only() -> None:
    """The layout model may read a running head as a section header on every page; only its
    first occurrence opens a section, so the notes under it keep their spans."""
    pages = [page(n) for n in range(1, 6)]
    head = "Notes to Consolidated Financial Statements"
    elements = [
        element(1, 0, ElementKind.TITLE, head),
        element(1, 1, ElementKind.TITLE, "Note 7 — Long-term debt"),
        element(2, 0, ElementKind.TITLE, head),
        element(3, 0, ElementKind.TITLE, head),
        element(4, 0, ElementKind.TITLE, head),
        element(4, 1, ElementKind.TITLE, "Note 8 — Leases"),
    ]
    for e in elements[1:]:
        e.section_path = [head, e.text] if e.text != head else [head]
    structure = build_structure(parsed(pages, elements))
    spans = {s.title: (s.page_start, s.page_end) for s in structure.sections}
    assert [s.title for s in structure.sections].count(head) == 1
    assert spans["Note 7 — Long-term debt"] == (1, 4)
