"""pagesight.query.references: structural references read out of a query ('page 17', 'Fig. 4b',
'第2章', 'the second last slide') and resolved against a document's structure, never to a guess."""

from __future__ import annotations

import random
import time

import pytest

from pagesight.core.types import (
    DocumentStructure,
    StructuralReference,
    StructureItem,
    StructurePage,
    StructureSection,
)
from pagesight.query.references import (
    MAX_REFERENCES,
    MAX_SPAN_PAGES,
    Resolution,
    parse_references,
    resolve_reference,
)

Expected = tuple[str, str | None, str | None, int | None]  # kind, value, end, position


def _parsed(query: str) -> list[Expected]:
    return [(r.kind, r.value, r.end, r.position) for r in parse_references(query)]


# ---- parsing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What does the chart on page 17 show?", [("page", "17", None, None)]),
        ("see p. 5", [("page", "5", None, None)]),
        ("Summarise pp. 3-5.", [("page", "3", "5", None)]),
        ("pages 3 to 5", [("page", "3", "5", None)]),
        ("from page 3 to page 5", [("page", "3", "5", None)]),
        ("pp. 123-25", [("page", "123", "125", None)]),
        (
            "pages 3, 5 and 7",
            [("page", "3", None, None), ("page", "5", None, None), ("page", "7", None, None)],
        ),
        ("what is on page iv?", [("page", "iv", None, None)]),
        ("page A-3", [("page", "A-3", None, None)]),
        ("the title of slide 31", [("slide", "31", None, None)]),
        ("slides 2-4", [("slide", "2", "4", None)]),
        ("the first page", [("position", None, None, 1)]),
        ("the last page", [("position", None, None, -1)]),
        ("What is on the second last page?", [("position", None, None, -2)]),
        ("the second-to-last slide", [("position", None, None, -2)]),
        ("the penultimate page", [("position", None, None, -2)]),
        ("the 3rd page", [("position", None, None, 3)]),
        ("the first and last pages", [("position", None, None, 1), ("position", None, None, -1)]),
        ("Who is on the cover?", [("cover", None, None, None)]),
        ("the back cover", [("cover", "back", None, None)]),
        ("the appendix", [("appendix", None, None, None)]),
        ("What is said in Appendix B?", [("appendix", "B", None, None)]),
        ("Appendices A and B", [("appendix", "A", None, None), ("appendix", "B", None, None)]),
        ("In figure 1, which arrows", [("figure", "1", None, None)]),
        ("How many bars are in Fig. 4b?", [("figure", "4b", None, None)]),
        ("Figure 3(a)", [("figure", "3a", None, None)]),
        ("Figure 2-1", [("figure", "2-1", None, None)]),
        (
            "Figures 3-5",
            [("figure", "3", None, None), ("figure", "4", None, None), ("figure", "5", None, None)],
        ),
        ("Which rows of Table 2.1 exceed 10%?", [("table", "2.1", None, None)]),
        (
            "papers listed in Table 1 and Table 2",
            [("table", "1", None, None), ("table", "2", None, None)],
        ),
        ("Tables 1 and 2", [("table", "1", None, None), ("table", "2", None, None)]),
        ("Equation 5", [("equation", "5", None, None)]),
        ("derive Eq. (5)", [("equation", "5", None, None)]),
        (
            "Does Section 3.3 cite more than Section 3.1?",
            [("section", "3.3", None, None), ("section", "3.1", None, None)],
        ),
        ("Section 4.2", [("section", "4.2", None, None)]),
        ("Chapter II", [("chapter", "II", None, None)]),
        ("Chapter 3", [("chapter", "3", None, None)]),
        ("chapter one", [("chapter", "1", None, None)]),
        ("What does Note 7 say about income taxes?", [("note", "7", None, None)]),
        ("the section titled 'Risk Factors'", [("titled", "Risk Factors", None, None)]),
        ("the section titled Risk Factors says what", [("titled", "Risk Factors", None, None)]),
        (
            'In the "Leadership program" section, who leads?',
            [("titled", "Leadership program", None, None)],
        ),
        ("in the 'Leadership program' section", [("titled", "Leadership program", None, None)]),
        ("the section about climate risk in the report", [("titled", "climate risk", None, None)]),
        ("in the Risk Factors section", [("titled", "Risk Factors", None, None)]),
        ("under the heading “Liquidity”", [("titled", "Liquidity", None, None)]),
        (
            "Figure 4b on page 17 in Section 4.2",
            [
                ("figure", "4b", None, None),
                ("page", "17", None, None),
                ("section", "4.2", None, None),
            ],
        ),
        # Japanese
        ("3ページの表の合計は？", [("page", "3", None, None)]),
        ("3頁", [("page", "3", None, None)]),
        ("p.3の図", [("page", "3", None, None)]),
        ("3〜5ページ", [("page", "3", "5", None)]),
        ("第2章の結論は？", [("chapter", "2", None, None)]),
        ("第三章", [("chapter", "3", None, None)]),
        ("第3節", [("section", "3", None, None)]),
        ("図3の凡例は？", [("figure", "3", None, None)]),
        ("図 3", [("figure", "3", None, None)]),
        ("図2-1", [("figure", "2-1", None, None)]),
        ("表2", [("table", "2", None, None)]),
        ("表２の合計", [("table", "2", None, None)]),
        ("第2表", [("table", "2", None, None)]),
        ("式(5)", [("equation", "5", None, None)]),
        ("注記7", [("note", "7", None, None)]),
        ("付録", [("appendix", None, None, None)]),
        ("付録Ｂ", [("appendix", "B", None, None)]),
        ("表紙の写真", [("cover", None, None, None)]),
        ("裏表紙", [("cover", "back", None, None)]),
        ("最後のページ", [("position", None, None, -1)]),
        ("最初のページ", [("position", None, None, 1)]),
        ("最後から2番目のスライド", [("position", None, None, -2)]),
        ("「リスク要因」のセクション", [("titled", "リスク要因", None, None)]),
        (
            "第2章第3節の図2-1",
            [
                ("chapter", "2", None, None),
                ("section", "3", None, None),
                ("figure", "2-1", None, None),
            ],
        ),
    ],
)
def test_parses(query: str, expected: list[Expected]) -> None:
    assert _parsed(query) == expected


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        "the page",
        "How many pages of text are there?",
        "Is table salt iodised?",
        "a figure of speech",
        "note that revenue fell",
        "please note 3 things",
        "which section",
        "The report is 7 pages long.",
        "Does the policy cover flood damage?",
        "the cover letter",
        "How many tables include F1 as a metric?",
        "What figures did revenue reach in 2020?",
        "Do seniors own a tablet computer?",
        "What was revenue in 2019?",
        "page -3",
        "page 123456789012",  # not a page number: a code or a phone number
        "the last two pages",  # a count, not one page
        "the section I mentioned",
        "which page I should read",
        "What page did he sign?",
        "What is the heading of page",
        "令和6年の景気動向は？",
        "全100ページの報告書",
        "代表3社",
    ],
)
def test_running_text_is_not_a_reference(query: str) -> None:
    assert parse_references(query) == []


def test_text_is_the_querys_own_words() -> None:
    query = "表２と Fig. 4b"
    refs = parse_references(query)
    assert [r.text for r in refs] == ["表２", "Fig. 4b"]
    assert all(r.text in query for r in refs)


def test_duplicates_are_dropped_in_query_order() -> None:
    refs = parse_references("Equation 5, then Table 2, then Eq. (5) and table 2 again")
    assert [(r.kind, r.value) for r in refs] == [("equation", "5"), ("table", "2")]


def test_odd_numbers_parse_and_resolve_to_a_reason() -> None:
    structure = _book()
    for query, reason in [
        ("page 0", "no page 0 (212 pages)"),
        ("page 2019", "no page 2019 (212 pages)"),
        ("page 999999999", "no page 999999999 (212 pages)"),
    ]:
        (ref,) = parse_references(query)
        assert resolve_reference(ref, structure) == Resolution([], reason)


def test_a_long_query_is_fast_and_capped() -> None:
    queries = [
        "page " * 2000,
        "x" * 10_000,
        ("Figure 1 and " * 800)[:10_000],
        ("The Risk " * 1200)[:9_990] + " section",
        "'" * 10_000,
        "「" * 10_000,
        "1" * 10_000,
        " ".join(f"page {n}" for n in range(1, 1500))[:10_000],
    ]
    for query in queries:
        started = time.perf_counter()
        refs = parse_references(query)
        assert time.perf_counter() - started < 0.5, query[:40]
        assert len(refs) <= MAX_REFERENCES


def test_random_text_does_not_crash() -> None:
    words = [" page ", " Figure ", " Section ", " the last "]
    alphabet = [*"pagesfiurtblcoxvn.()-'\"「」0123456789 ページ図表第章節付録", *words]
    rng = random.Random(7)  # noqa: S311  # seeded test data, not a secret
    for _ in range(300):
        query = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120)))
        for ref in parse_references(query):
            assert ref.text and ref.text in query
            resolve_reference(ref, _book())


# ---- resolution -----------------------------------------------------------------------------


def _book() -> DocumentStructure:
    """212 pages: roman front matter on pages 1-2, printed '1' on page 3 (label = index - 2)."""
    pages = [StructurePage(page_number=1, label="i"), StructurePage(page_number=2, label="ii")]
    pages += [StructurePage(page_number=n, label=str(n - 2)) for n in range(3, 213)]
    sections = [
        StructureSection(title="Risk Factors", level=1, page_start=10, page_end=14),
        StructureSection(title="Market risk overview", level=2, page_start=15, page_end=15),
        StructureSection(title="Our Leadership Program", level=1, page_start=16, page_end=18),
        StructureSection(
            title="Chapter II Results", level=1, number="II", page_start=30, page_end=60
        ),
        StructureSection(title="4.2 Methods", level=2, page_start=40, page_end=44),
        StructureSection(title="4.2.1 Sampling", level=3, page_start=41, page_end=41),
        StructureSection(title="7 Conclusion", level=1, number="7", page_start=61, page_end=62),
        StructureSection(
            title="Notes to the financial statements", level=1, page_start=80, page_end=120
        ),
        StructureSection(title="1. Accounting policies", level=2, page_start=80, page_end=84),
        StructureSection(title="7. Income taxes", level=2, page_start=95, page_end=97),
        StructureSection(title="Appendix A: Data", level=1, page_start=180, page_end=195),
        StructureSection(title="Appendix B: Proofs", level=1, page_start=196, page_end=212),
        StructureSection(title="リスク要因について", level=1, page_start=170, page_end=171),
    ]
    items = [
        StructureItem(kind="figure", number="3", page_number=12),
        StructureItem(kind="figure", number="4a", page_number=20),
        StructureItem(kind="figure", number="4b", page_number=21),
        StructureItem(kind="figure", number="2.1", page_number=33),
        StructureItem(kind="table", number="2.1", page_number=30),
        StructureItem(kind="table", number="2", page_number=31),
        StructureItem(kind="equation", number="5", page_number=35),
    ]
    return DocumentStructure(
        doc_id="book", version="v1", pages=pages, sections=sections, items=items
    )


def _unlabelled(n: int = 12) -> DocumentStructure:
    pages = [StructurePage(page_number=i) for i in range(1, n + 1)]
    return DocumentStructure(doc_id="deck", version="v1", pages=pages)


def _resolve(query: str, structure: DocumentStructure) -> Resolution:
    refs = parse_references(query)
    assert len(refs) == 1, refs
    return resolve_reference(refs[0], structure)


@pytest.mark.parametrize(
    ("query", "pages"),
    [
        ("page 1", [3]),  # the printed '1' is the third page of the file
        ("page 17", [19]),
        ("page ii", [2]),
        ("page II", [2]),  # labels compare case-insensitively
        ("page 212", [212]),  # no page is printed 212: the 212th page
        ("pages 3-5", [5, 6, 7]),
        ("pages 3 to 5", [5, 6, 7]),
        ("pages 209-215", [211, 212]),  # the part of the range that exists
        ("pages 209-211", [211, 212]),  # printed 211 does not exist: two pages on, at most
        ("the first page", [1]),
        ("the last page", [212]),
        ("the second last page", [211]),
        ("the cover", [1]),
        ("the back cover", [212]),
    ],
)
def test_pages_resolve(query: str, pages: list[int]) -> None:
    assert _resolve(query, _book()) == Resolution(pages)


def test_a_long_range_is_capped() -> None:
    pages = _resolve("pages 1-100", _book()).pages
    assert pages == list(range(3, 3 + MAX_SPAN_PAGES))


def test_without_labels_page_n_is_the_nth_page() -> None:
    assert _resolve("slide 5", _unlabelled()) == Resolution([5])
    assert _resolve("pages 2-4", _unlabelled()) == Resolution([2, 3, 4])
    assert _resolve("the second-to-last slide", _unlabelled()) == Resolution([11])


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("page 300", "no page 300 (212 pages)"),
        ("page xiv", "no page xiv (212 pages)"),  # a roman label nobody prints is not index 14
        ("pages 5-3", "pages 5-3: the range runs backwards"),
        ("pages ii-i", "no page i after page ii"),
        ("the 300th page", "no page at position 300 (212 pages)"),
        ("Figure 9", "no Figure 9 (4 numbered figures)"),
        ("Equation 7", "no Equation 7 (1 numbered equations)"),
        ("Section 9.9", "no Section 9.9"),
        ("Chapter 12", "no Chapter 12"),
        ("Note 30", "no Note 30"),
        ("Appendix C", "no Appendix C"),
        (
            "the section titled 'Executive Compensation'",
            "no section titled 'Executive Compensation'",
        ),
    ],
)
def test_what_does_not_exist_has_a_reason(query: str, reason: str) -> None:
    assert _resolve(query, _book()) == Resolution([], reason)


def test_an_empty_structure_resolves_nothing() -> None:
    empty = DocumentStructure(doc_id="x", version="v1")
    assert _resolve("page 1", empty) == Resolution([], "no page 1 (0 pages)")
    assert _resolve("the cover", empty) == Resolution([], "the document has no pages")
    assert _resolve("the last page", empty).pages == []
    assert _resolve("Table 2", empty) == Resolution([], "no Table 2 (no numbered tables)")


@pytest.mark.parametrize(
    ("query", "pages"),
    [
        ("Figure 3", [12]),
        ("Fig. 4b", [21]),
        ("Figure 4", [20, 21]),  # no Figure 4 itself: its panels 4a and 4b
        ("Figure 2-1", [33]),  # '2-1' is '2.1'
        ("図3の凡例", [12]),
        ("Table 2", [31]),
        ("Table 2.1", [30]),
        ("表2", [31]),
        ("表２", [31]),
        ("Eq. (5)", [35]),
    ],
)
def test_items_resolve(query: str, pages: list[int]) -> None:
    assert _resolve(query, _book()) == Resolution(pages)


@pytest.mark.parametrize(
    ("query", "pages"),
    [
        ("Section 4.2", [40, 41, 42, 43, 44]),  # not 4.2.1 alone
        ("Chapter II", list(range(30, 50))),  # 31 pages, capped at 20
        ("Chapter 2", list(range(30, 50))),  # II == 2
        ("第2章", list(range(30, 50))),
        ("Chapter 7", [61, 62]),
        ("Note 7", [95, 96, 97]),  # under the notes heading, not '7 Conclusion'
        ("Note 1", [80, 81, 82, 83, 84]),
        ("Appendix B", list(range(196, 213))),
        ("付録A", list(range(180, 196))),
        ("the appendix", list(range(180, 200))),  # both appendices, capped
        ("the section titled 'Risk Factors'", [10, 11, 12, 13, 14]),  # not 'Market risk ...'
        ("the section about risk", [10, 11, 12, 13, 14, 15]),  # closest title first
        ("in the 'leadership program' section", [16, 17, 18]),
        ("「リスク要因」のセクション", [170, 171]),
    ],
)
def test_sections_resolve(query: str, pages: list[int]) -> None:
    assert _resolve(query, _book()) == Resolution(pages)


def test_notes_numbered_note_n_match_number_and_title() -> None:
    def statements(section: StructureSection) -> DocumentStructure:
        conclusion = StructureSection(title="7 Outlook", number="7", page_start=2, page_end=2)
        return DocumentStructure(
            doc_id="fs",
            version="v1",
            pages=[StructurePage(page_number=n) for n in range(1, 31)],
            sections=[conclusion, section],
        )

    by_number = StructureSection(title="Income taxes", number="Note 7", page_start=20, page_end=21)
    by_title = StructureSection(title="NOTE 7 — Income taxes", page_start=22, page_end=22)
    assert _resolve("Note 7", statements(by_number)) == Resolution([20, 21])
    assert _resolve("Note 7", statements(by_title)) == Resolution([22])
    assert _resolve("注記7", statements(by_title)) == Resolution([22])


def test_a_section_number_matches_the_number_field_too() -> None:
    structure = DocumentStructure(
        doc_id="paper",
        version="v1",
        pages=[StructurePage(page_number=n) for n in range(1, 11)],
        sections=[
            StructureSection(title="Self-Correction", number="3.4", page_start=4, page_end=5),
            StructureSection(title="Chapter 3: Scope", level=1, page_start=6, page_end=6),
        ],
    )
    assert _resolve("Section 3.4", structure) == Resolution([4, 5])
    assert _resolve("Chapter III", structure) == Resolution([6])
    assert _resolve('the "Self-Correction" section', structure) == Resolution([4, 5])


def test_a_reference_without_a_value_has_a_reason() -> None:
    for kind in ("page", "figure", "section", "chapter", "note"):
        ref = StructuralReference(kind=kind, text=kind)
        resolution = resolve_reference(ref, _book())
        assert resolution.pages == [] and resolution.reason
