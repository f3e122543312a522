"""The structure-aware chunker: sections, atomic elements, merging, splitting, ids."""

from __future__ import annotations

import pytest

from core.ids import chunk_id, element_id
from core.settings import ChunkOptions
from core.types import BBox, Chunk, Document, Element, ElementKind, Page, ParsedDocument
from ingestion.chunk import Chunker, hard_split, sentence_windows, split_sentences

DOC_ID = "doc-1"
VERSION = "ab" * 32


class _Builder:
    """Builds elements in reading order with the ids a parser would give them."""

    def __init__(self) -> None:
        self.elements: list[Element] = []
        self._seq_by_page: dict[int, int] = {}

    def add(
        self,
        kind: ElementKind,
        text: str,
        path: list[str],
        *,
        page: int = 1,
        caption: str | None = None,
        bbox: tuple[float, float, float, float] | None = (10.0, 10.0, 100.0, 20.0),
    ) -> Element:
        seq = self._seq_by_page.get(page, 0)
        self._seq_by_page[page] = seq + 1
        element = Element(
            element_id=element_id(DOC_ID, VERSION, page, seq),
            doc_id=DOC_ID,
            kind=kind,
            text=text,
            page_number=page,
            seq=seq,
            bbox=BBox.of(bbox) if bbox else None,
            section_path=path,
            caption=caption,
        )
        self.elements.append(element)
        return element

    def parsed(self) -> ParsedDocument:
        pages = sorted({e.page_number for e in self.elements}) or [1]
        return ParsedDocument(
            document=Document(doc_id=DOC_ID, version=VERSION, source_uri="file:///r.pdf"),
            pages=[Page(doc_id=DOC_ID, page_number=p, width=612.0, height=792.0) for p in pages],
            elements=list(self.elements),
        )


def _chunk(builder: _Builder, max_chars: int = 400, min_chars: int = 50) -> list[Chunk]:
    return Chunker(ChunkOptions(max_chars=max_chars, min_chars=min_chars))(builder.parsed())


def _sentences(count: int, words: int = 8) -> str:
    return " ".join(
        f"Sentence {i} " + " ".join(f"word{j}" for j in range(words)) + "." for i in range(count)
    )


def _paths_of(chunk: Chunk, builder: _Builder) -> set[tuple[str, ...]]:
    by_id = {e.element_id: e for e in builder.elements}
    return {tuple(by_id[i].section_path) for i in chunk.element_ids}


# --- sections -----------------------------------------------------------------------------


def test_heading_starts_a_section_and_opens_its_first_chunk() -> None:
    b = _Builder()
    b.add(ElementKind.TITLE, "Annual report", ["Annual report"])
    b.add(ElementKind.TEXT, "A short introduction.", ["Annual report"])
    revenue = b.add(ElementKind.TITLE, "Revenue", ["Annual report", "Revenue"])
    body = b.add(ElementKind.TEXT, "Revenue grew 12% to 3.5 bn.", ["Annual report", "Revenue"])
    b.add(ElementKind.TITLE, "Costs", ["Annual report", "Costs"])
    b.add(ElementKind.TEXT, "Costs fell.", ["Annual report", "Costs"])

    chunks = _chunk(b, min_chars=0)

    assert [c.text for c in chunks] == [
        "Annual report\nA short introduction.",
        "Revenue\nRevenue grew 12% to 3.5 bn.",
        "Costs\nCosts fell.",
    ]
    assert chunks[1].element_ids == [revenue.element_id, body.element_id]
    assert chunks[1].section_path == ["Annual report", "Revenue"]
    assert chunks[1].kinds == [ElementKind.TITLE, ElementKind.TEXT]


def test_no_chunk_mixes_section_paths_even_when_small() -> None:
    b = _Builder()
    for section in ("A", "B", "C"):
        b.add(ElementKind.TITLE, section, [section])
        b.add(ElementKind.TEXT, f"tiny {section}", [section])
    b.add(ElementKind.TEXT, "tail without heading", ["C", "D"])

    chunks = _chunk(b, min_chars=200)  # every chunk is "small"; merging must stop at sections

    assert len(chunks) == 4
    for chunk in chunks:
        assert _paths_of(chunk, b) == {tuple(chunk.section_path)}


def test_a_heading_does_not_join_the_previous_chunk_of_the_same_path() -> None:
    b = _Builder()
    b.add(ElementKind.TEXT, "before", ["S"])
    b.add(ElementKind.TITLE, "S again", ["S"])
    b.add(ElementKind.TEXT, "after", ["S"])

    chunks = _chunk(b, min_chars=200)

    assert [c.text for c in chunks] == ["before", "S again\nafter"]


def test_heading_broken_over_two_title_elements_stays_one_heading() -> None:
    b = _Builder()
    b.add(ElementKind.TITLE, "Chapter 3", ["Chapter 3 Revenue"])
    b.add(ElementKind.TITLE, "Revenue", ["Chapter 3 Revenue"])
    b.add(ElementKind.TEXT, "Body.", ["Chapter 3 Revenue"])

    assert [c.text for c in _chunk(b)] == ["Chapter 3\nRevenue\nBody."]


# --- atomic elements ----------------------------------------------------------------------


def test_table_is_atomic_carries_its_caption_and_is_never_split() -> None:
    b = _Builder()
    b.add(ElementKind.TEXT, "Intro paragraph.", ["S"])
    rows = "\n".join(f"| row {i} | {i * 10} |" for i in range(60))
    markdown = "| name | value |\n|---|---|\n" + rows
    table = b.add(ElementKind.TABLE, markdown, ["S"], caption="Table 1: Values")
    b.add(ElementKind.TEXT, "Outro paragraph.", ["S"])

    chunks = _chunk(b, max_chars=200, min_chars=0)

    assert len(markdown) > 200
    assert [c.kinds for c in chunks] == [
        [ElementKind.TEXT],
        [ElementKind.TABLE],
        [ElementKind.TEXT],
    ]
    assert chunks[1].element_ids == [table.element_id]
    assert chunks[1].text == "Table 1: Values\n" + markdown


def test_separate_caption_elements_join_their_table_and_figure() -> None:
    b = _Builder()
    table_caption = b.add(ElementKind.CAPTION, "Table 2: Sales by region", ["S"])
    table = b.add(ElementKind.TABLE, "| a | b |\n|---|---|\n| 1 | 2 |", ["S"])
    figure = b.add(ElementKind.FIGURE, "", ["S"])
    figure_caption = b.add(ElementKind.CAPTION, "Figure 3: Growth", ["S"])
    equation = b.add(ElementKind.EQUATION, "E = mc^2", ["S"], caption="(1)")

    chunks = _chunk(b, min_chars=0)

    assert [c.element_ids for c in chunks] == [
        [table_caption.element_id, table.element_id],
        [figure.element_id, figure_caption.element_id],
        [equation.element_id],
    ]
    assert chunks[0].text == "Table 2: Sales by region\n| a | b |\n|---|---|\n| 1 | 2 |"
    assert chunks[0].kinds == [ElementKind.CAPTION, ElementKind.TABLE]
    assert chunks[1].text == "Figure 3: Growth"
    assert chunks[2].text == "(1)\nE = mc^2"


def test_figure_whose_text_is_its_caption_does_not_repeat_it() -> None:
    b = _Builder()
    b.add(ElementKind.FIGURE, "Figure 1: Map", ["S"], caption="Figure 1: Map")
    b.add(ElementKind.CAPTION, "Figure 1: Map", ["S"])  # the parser left a copy behind

    chunks = _chunk(b)

    assert len(chunks) == 1
    assert chunks[0].text == "Figure 1: Map"
    assert len(chunks[0].element_ids) == 2


def test_caption_naming_another_kind_is_not_claimed() -> None:
    b = _Builder()
    b.add(ElementKind.TABLE, "| a |\n|---|\n| 1 |", ["S"])
    b.add(ElementKind.CAPTION, "Figure 4: Unrelated", ["S"])

    chunks = _chunk(b, min_chars=0)

    assert [c.kinds for c in chunks] == [[ElementKind.TABLE], [ElementKind.CAPTION]]
    assert chunks[0].text == "| a |\n|---|\n| 1 |"


def test_figure_without_any_text_gives_no_chunk() -> None:
    b = _Builder()
    b.add(ElementKind.FIGURE, "", ["S"])
    b.add(ElementKind.TEXT, "Only text.", ["S"])

    assert [c.text for c in _chunk(b)] == ["Only text."]


def test_small_text_does_not_merge_into_an_atomic_chunk() -> None:
    b = _Builder()
    b.add(ElementKind.TITLE, "Results", ["Results"])
    b.add(ElementKind.TABLE, "| a |\n|---|\n| 1 |", ["Results"])

    chunks = _chunk(b, min_chars=100)

    assert [c.kinds for c in chunks] == [[ElementKind.TITLE], [ElementKind.TABLE]]


# --- merging ------------------------------------------------------------------------------


def test_consecutive_text_list_code_caption_merge_up_to_max_chars() -> None:
    b = _Builder()
    kinds = [ElementKind.TEXT, ElementKind.LIST, ElementKind.CODE, ElementKind.CAPTION]
    for i in range(12):
        b.add(kinds[i % 4], f"element {i} " + "x" * 60, ["S"])

    chunks = _chunk(b, max_chars=300, min_chars=0)

    assert len(chunks) == 3  # four 71-char elements + separators fit 300, five do not
    assert all(len(c.text) <= 300 for c in chunks)
    assert chunks[0].kinds == kinds
    assert [eid for c in chunks for eid in c.element_ids] == [e.element_id for e in b.elements]


def test_small_chunk_takes_its_next_neighbour_even_past_max_chars() -> None:
    b = _Builder()
    b.add(ElementKind.TITLE, "Revenue", ["Revenue"])
    paragraph = "y" * 395
    b.add(ElementKind.TEXT, paragraph, ["Revenue"])

    chunks = _chunk(b, max_chars=400, min_chars=50)

    assert [c.text for c in chunks] == ["Revenue\n" + paragraph]


def test_small_chunk_without_a_next_neighbour_joins_its_previous_one() -> None:
    b = _Builder()
    b.add(ElementKind.TEXT, "a" * 300, ["S"])
    b.add(ElementKind.TEXT, "b" * 150, ["S"])  # misses the first chunk (300 + 1 + 150 > 400)
    b.add(ElementKind.TABLE, "| t |\n|---|", ["S"])  # and cannot merge into the table

    chunks = _chunk(b, max_chars=400, min_chars=200)

    assert [c.text for c in chunks] == ["a" * 300 + "\n" + "b" * 150, "| t |\n|---|"]


def test_small_chunk_stays_alone_when_merging_would_pass_max_plus_min() -> None:
    b = _Builder()
    b.add(ElementKind.TITLE, "Head", ["S"])
    b.add(ElementKind.TEXT, "a" * 400, ["S"])  # the small heading takes it: 405 chars
    b.add(ElementKind.TEXT, "b" * 45, ["S"])  # small, but 405 + 1 + 45 > 400 + 50

    chunks = _chunk(b, max_chars=400, min_chars=50)

    assert [c.text for c in chunks] == ["Head\n" + "a" * 400, "b" * 45]

    b2 = _Builder()
    b2.add(ElementKind.TEXT, "a" * 390, ["S"])
    b2.add(ElementKind.TEXT, "b" * 40, ["S"])

    chunks2 = _chunk(b2, max_chars=400, min_chars=50)

    assert [c.text for c in chunks2] == ["a" * 390 + "\n" + "b" * 40]


def test_small_chunk_is_filled_from_a_long_neighbour() -> None:
    sentence = "Sentence " + "w" * 180 + "."  # 190 chars
    b = _Builder()
    b.add(ElementKind.TITLE, "Revenue", ["Revenue"])
    b.add(ElementKind.TEXT, " ".join(["Short one.", sentence, sentence]), ["Revenue"])
    b.add(ElementKind.TITLE, "Costs", ["Costs"])
    b.add(ElementKind.TEXT, " ".join([sentence, sentence]), ["Costs"])  # 1st misses the room

    chunks = _chunk(b, max_chars=200, min_chars=50)

    assert [c.text for c in chunks] == [
        # "Short one." fills the room; still under min_chars, so the next window joins too
        "Revenue\nShort one.\n" + sentence,
        sentence,
        "Costs\n" + sentence,  # the first sentence misses the room: the window joins whole
        sentence,
    ]


def test_short_remainder_of_a_split_paragraph_joins_the_window_before_it() -> None:
    sentence = "Sentence " + "w" * 180 + "."  # 190 chars
    paragraph = " ".join([sentence, sentence, "Short tail."])
    b = _Builder()
    b.add(ElementKind.TEXT, paragraph, ["S"])

    chunks = _chunk(b, max_chars=200, min_chars=50)

    assert [c.text for c in chunks] == [sentence, sentence + "\n" + "Short tail."]


# --- splitting ----------------------------------------------------------------------------


def test_long_english_paragraph_splits_at_sentence_ends() -> None:
    b = _Builder()
    paragraph = _sentences(40)
    element = b.add(ElementKind.TEXT, paragraph, ["S"])

    chunks = _chunk(b, max_chars=300, min_chars=0)

    assert len(chunks) > 1
    for chunk in chunks:
        assert len(chunk.text) <= 300
        assert chunk.text.endswith(".")
        assert chunk.text.startswith("Sentence ")
        assert chunk.element_ids == [element.element_id]
    assert " ".join(c.text for c in chunks) == paragraph


def test_japanese_paragraph_of_3000_chars_splits_at_full_stops() -> None:
    sentences = [
        f"第{i}四半期の売上高は前年同期比で増加し、主力製品の出荷が好調に推移した。"
        for i in range(80)
    ]
    paragraph = "".join(sentences)[:3000]
    paragraph = paragraph[: paragraph.rindex("。") + 1]
    assert len(paragraph) > 2900
    b = _Builder()
    element = b.add(ElementKind.TEXT, paragraph, ["業績"])

    chunks = _chunk(b, max_chars=1200, min_chars=200)

    assert len(chunks) == 3
    for chunk in chunks:
        assert len(chunk.text) <= 1200
        assert chunk.text.endswith("。")
        assert chunk.text.startswith("第")
        assert chunk.element_ids == [element.element_id]
        assert chunk.section_path == ["業績"]
    assert "".join(c.text for c in chunks) == paragraph


def test_sentence_boundaries() -> None:
    assert split_sentences("Growth was 3.5 percent. Next one.") == [
        "Growth was 3.5 percent. ",
        "Next one.",
    ]
    assert split_sentences("Use a tool, e.g. x or y. Then stop.") == [
        "Use a tool, e.g. x or y. ",
        "Then stop.",
    ]
    assert split_sentences("See Fig. 3 for details! Really? Yes.") == [
        "See Fig. 3 for details! ",
        "Really? ",
        "Yes.",
    ]
    assert split_sentences("売上は増加。利益も増加！本当？はい．終わり") == [
        "売上は増加。",
        "利益も増加！",
        "本当？",
        "はい．",
        "終わり",
    ]
    assert split_sentences("「引用です。」次の文。") == ["「引用です。」", "次の文。"]
    assert split_sentences("first paragraph\n\nsecond paragraph") == [
        "first paragraph\n\n",
        "second paragraph",
    ]


def test_sentence_longer_than_max_chars_is_hard_split() -> None:
    words = " ".join(f"word{i}" for i in range(100))
    assert all(len(piece) <= 50 for piece in hard_split(words, 50))
    assert " ".join(hard_split(words, 50)) == words

    cjk = "あ" * 250
    assert hard_split(cjk, 100) == ["あ" * 100, "あ" * 100, "あ" * 50]

    b = _Builder()
    b.add(ElementKind.TEXT, "い" * 500 + "。", ["S"])
    chunks = _chunk(b, max_chars=200, min_chars=0)
    assert [len(c.text) for c in chunks] == [200, 200, 101]


def test_sentence_windows_fill_an_open_chunk_first() -> None:
    head, windows = sentence_windows("One two. Three four. Five six.", 200, first_budget=10)
    assert head == "One two."
    assert windows == ["Three four. Five six."]

    head, windows = sentence_windows("A long first sentence. Short.", 200, first_budget=5)
    assert head == ""
    assert windows == ["A long first sentence. Short."]


def test_code_splits_at_line_ends() -> None:
    code = "\n".join(f"print('line {i:03d} of the program')" for i in range(30))
    b = _Builder()
    b.add(ElementKind.CODE, code, ["S"])

    chunks = _chunk(b, max_chars=200, min_chars=0)

    assert len(chunks) > 1
    for chunk in chunks:
        assert len(chunk.text) <= 200
        assert all(
            line.startswith("print(") and line.endswith(")") for line in chunk.text.split("\n")
        )
    assert "\n".join(c.text for c in chunks) == code


# --- pages, bboxes, ids ---------------------------------------------------------------------


def test_chunk_spans_pages_and_lists_every_bbox() -> None:
    b = _Builder()
    first = b.add(ElementKind.TEXT, "The paragraph ends on this page and", ["S"], page=1)
    second = b.add(
        ElementKind.TEXT, "continues on the next one.", ["S"], page=2, bbox=(20, 30, 200, 40)
    )
    b.add(ElementKind.TEXT, "no box", ["S"], page=2, bbox=None)

    chunks = _chunk(b)

    assert len(chunks) == 1
    assert chunks[0].page_numbers == [1, 2]
    assert chunks[0].bboxes == [(1, first.bbox), (2, second.bbox)]


def test_ids_are_positional_and_output_is_deterministic() -> None:
    b = _Builder()
    b.add(ElementKind.TITLE, "Intro", ["Intro"])
    b.add(ElementKind.TEXT, _sentences(30), ["Intro"])
    b.add(ElementKind.TABLE, "| a |\n|---|\n| 1 |", ["Intro"], caption="Table 1")
    b.add(ElementKind.TITLE, "売上", ["売上"])
    b.add(ElementKind.TEXT, "売上は増加した。" * 60, ["売上"])

    first = _chunk(b, max_chars=300, min_chars=100)
    second = Chunker(ChunkOptions(max_chars=300, min_chars=100))(b.parsed())

    assert [c.model_dump() for c in first] == [c.model_dump() for c in second]
    assert [c.seq for c in first] == list(range(len(first)))
    assert [c.chunk_id for c in first] == [chunk_id(DOC_ID, VERSION, i) for i in range(len(first))]
    assert len({c.chunk_id for c in first}) == len(first)


def test_elements_out_of_order_are_chunked_in_reading_order() -> None:
    b = _Builder()
    b.add(ElementKind.TEXT, "first", ["S"], page=1)
    b.add(ElementKind.TEXT, "second", ["S"], page=2)
    parsed = b.parsed()
    parsed.elements.reverse()

    chunks = Chunker(ChunkOptions(max_chars=300, min_chars=0))(parsed)

    assert [c.text for c in chunks] == ["first\nsecond"]


def test_kinds_are_distinct_in_order() -> None:
    b = _Builder()
    b.add(ElementKind.TEXT, "a", ["S"])
    b.add(ElementKind.LIST, "b", ["S"])
    b.add(ElementKind.TEXT, "c", ["S"])
    b.add(ElementKind.CODE, "d", ["S"])

    assert _chunk(b)[0].kinds == [ElementKind.TEXT, ElementKind.LIST, ElementKind.CODE]


def test_empty_document_gives_no_chunks() -> None:
    assert _chunk(_Builder()) == []


def test_min_chars_above_max_chars_is_rejected() -> None:
    with pytest.raises(ValueError, match="min_chars"):
        Chunker(ChunkOptions(max_chars=200, min_chars=500))
