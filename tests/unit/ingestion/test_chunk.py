"""The structure-aware chunker: sections, atomic elements, merging, splitting, ids."""

from __future__ import annotations

import pytest

from pagesight.core.ids import chunk_id, element_id
from pagesight.core.settings import ChunkOptions
from pagesight.core.types import (
    BBox,
    Chunk,
    Document,
    Element,
    ElementKind,
    Page,
    ParsedDocument,
    TextLine,
)
from pagesight.ingestion.chunk import Chunker, hard_split, sentence_windows, split_sentences

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


def _chunk(
    builder: _Builder, max_chars: int = 400, min_chars: int = 50, *, table_rows: bool = False
) -> list[Chunk]:
    options = ChunkOptions(max_chars=max_chars, min_chars=min_chars, table_rows=table_rows)
    return Chunker(options)(builder.parsed())


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


# --- spans: where each character of a chunk is printed --------------------------------------


def _wrapped(text: str, top: float, width: int = 40) -> list[TextLine]:
    """``text`` as a parser would print it: lines of at most ``width`` characters broken at
    spaces, each with its own box (one 12 pt row each, from ``top`` down)."""
    lines: list[TextLine] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + width)
        if end < len(text):
            cut = text.rfind(" ", start, end + 1)
            end = cut if cut > start else end
        row = top + 12.0 * len(lines)
        box = BBox.of((50.0, row, 50.0 + 5.0 * (end - start), row + 10.0))
        lines.append(TextLine(start=start, end=end, bbox=box))
        start = end
        while start < len(text) and text[start] == " ":
            start += 1
    return lines


def _with_lines(element: Element, top: float, width: int = 40) -> Element:
    """``element`` with wrapped lines (replaces it in the builder's list)."""
    return element.model_copy(update={"lines": _wrapped(element.text, top, width)})


def _assert_spans_valid(chunk: Chunk) -> None:
    """Every span inside the text, in text order, none overlapping, on one of the chunk's pages."""
    previous_end = 0
    for span in chunk.spans:
        assert 0 <= span.start < span.end <= len(chunk.text), span
        assert span.start >= previous_end, chunk.spans
        assert span.page_number in chunk.page_numbers
        previous_end = span.end


def _assert_lines_printed(chunks: list[Chunk], elements: list[Element]) -> None:
    """Each span over a line holds that line's characters (whitespace aside: a hard split may
    drop a space), and together the chunks' spans print every non-space character of every
    line exactly once, in order."""
    for element in elements:
        for line in element.lines:
            pieces = [
                chunk.text[span.start : span.end]
                for chunk in chunks
                if chunk.unit == "chunk"
                for span in chunk.spans
                if span.page_number == element.page_number and span.bbox == line.bbox
            ]
            printed = element.text[line.start : line.end]
            squeezed = "".join(printed.split())
            assert all("".join(piece.split()) in squeezed for piece in pieces), (pieces, printed)
            assert "".join("".join(pieces).split()) == "".join(printed.split())


def _builder_with_lines(elements: list[Element]) -> _Builder:
    b = _Builder()
    b.elements = elements
    return b


def test_spans_of_merged_elements_follow_each_elements_lines() -> None:
    b = _Builder()
    heading = b.add(ElementKind.TITLE, "Revenue", ["Revenue"], bbox=(50, 40, 120, 52))
    body = b.add(
        ElementKind.TEXT,
        "  Revenue rose to 4.2 billion dollars, driven by services and new customers. ",
        ["Revenue"],
    )
    boxless = b.add(ElementKind.TEXT, "A line with no geometry at all.", ["Revenue"], bbox=None)
    plain = b.add(ElementKind.LIST, "- one item without lines", ["Revenue"], page=2)
    body = _with_lines(body, top=100.0, width=30)
    b.elements[1] = body

    (chunk,) = _chunk(b)

    assert chunk.text.split("\n") == [
        "Revenue",
        body.text.strip(),
        boxless.text,
        plain.text,
    ]
    _assert_spans_valid(chunk)
    _assert_lines_printed([chunk], b.elements)
    assert heading.bbox is not None and plain.bbox is not None
    # no lines: one span over the whole part with the element's box; no box: no span
    assert (chunk.spans[0].start, chunk.spans[0].end, chunk.spans[0].bbox) == (
        0,
        7,
        heading.bbox,
    )
    body_spans = [s for s in chunk.spans if s.bbox in {line.bbox for line in body.lines}]
    assert len(body_spans) == len(body.lines) == 3
    assert chunk.text[body_spans[0].start : body_spans[-1].end] == body.text.strip()
    boxless_start = chunk.text.index(boxless.text)
    assert not any(
        boxless_start <= s.start < boxless_start + len(boxless.text) for s in chunk.spans
    )
    last = chunk.spans[-1]
    assert (last.page_number, last.bbox, chunk.text[last.start : last.end]) == (
        2,
        plain.bbox,
        plain.text,
    )


def test_spans_of_a_split_element_keep_each_piece_on_its_lines() -> None:
    b = _Builder()
    b.add(ElementKind.TEXT, "Short lead-in.", ["S"], bbox=(50, 60, 200, 70))
    b.add(ElementKind.TEXT, _sentences(14), ["S"])
    b.elements[1] = _with_lines(b.elements[1], top=100.0, width=45)
    b.add(ElementKind.TEXT, _sentences(3), ["S"], page=2)
    b.elements[2] = _with_lines(b.elements[2], top=50.0, width=45)

    chunks = _chunk(b, max_chars=200, min_chars=20)

    assert len(chunks) > 3
    for chunk in chunks:
        _assert_spans_valid(chunk)
    _assert_lines_printed(chunks, b.elements)
    # a line the sentence split cut in two is cited in both chunks, each with its own part
    boxes = [{s.bbox for s in c.spans} for c in chunks]
    assert any(boxes[i] & boxes[i + 1] for i in range(len(boxes) - 1))
    # the chunk crossing into page 2 is cited on each page with that page's lines
    crossing = [c for c in chunks if c.page_numbers == [1, 2]]
    for chunk in crossing:
        pages = [s.page_number for s in chunk.spans]
        assert pages == sorted(pages) and set(pages) == {1, 2}


def test_spans_of_a_hard_split_sentence_whose_piece_lost_its_space() -> None:
    """A sentence longer than max_chars is hard-split, and its last piece is joined to the next
    sentence without the space between them: the span still finds its characters."""
    text = " ".join(f"w{i}" for i in range(120)) + ". Next one here. And more."
    b = _Builder()
    b.add(ElementKind.TEXT, text, ["S"])
    b.elements[0] = _with_lines(b.elements[0], top=100.0, width=30)

    chunks = _chunk(b, max_chars=200, min_chars=0)

    assert any(c.text not in text for c in chunks)  # "w59.Next": the chunker's own text
    for chunk in chunks:
        _assert_spans_valid(chunk)
        assert chunk.spans and chunk.spans[-1].end == len(chunk.text)
    _assert_lines_printed(chunks, b.elements)


def test_spans_of_an_atomic_table_with_its_caption() -> None:
    b = _Builder()
    caption = b.add(
        ElementKind.CAPTION, "Table 2:  Sales by\nregion", ["S"], bbox=(50, 80, 300, 104)
    )
    b.elements[0] = caption = caption.model_copy(
        update={
            "lines": [
                TextLine(start=0, end=18, bbox=BBox.of((50, 80, 300, 90))),
                TextLine(start=19, end=25, bbox=BBox.of((50, 94, 110, 104))),
            ]
        }
    )
    table = b.add(
        ElementKind.TABLE,
        "| a | b |\n|---|---|\n| 1 | 2 |",
        ["S"],
        caption="Table 2: Sales by region",  # the parser's normalised caption
        bbox=(50, 110, 300, 200),
    )
    merged = b.add(
        ElementKind.TABLE, "| c |\n|---|\n| 3 |", ["T"], caption="Table 3: Costs", bbox=(1, 2, 3, 4)
    )
    figure = b.add(ElementKind.FIGURE, "Figure 4: Growth", ["U"], caption="Figure 4: Growth")

    chunks = _chunk(b, min_chars=0)
    by_element = {c.element_ids[-1]: c for c in chunks if c.unit == "chunk"}

    with_caption = by_element[table.element_id]
    assert with_caption.text == "Table 2: Sales by region\n" + table.text
    _assert_spans_valid(with_caption)
    assert [(s.start, s.end, s.bbox) for s in with_caption.spans] == [
        (0, 17, caption.lines[0].bbox),  # "Table 2: Sales by" (one space less than printed)
        (18, 24, caption.lines[1].bbox),  # "region"
        (25, len(with_caption.text), table.bbox),
    ]
    # a caption the parser merged into its table keeps no box of its own: the table's
    costs = by_element[merged.element_id]
    assert [(s.start, s.end, s.bbox) for s in costs.spans] == [
        (0, 14, merged.bbox),
        (15, len(costs.text), merged.bbox),
    ]
    # a figure whose text is its caption is said once, in the figure's box
    only = by_element[figure.element_id]
    assert [(s.start, s.end, s.bbox) for s in only.spans] == [(0, len(only.text), figure.bbox)]


STATEMENT = (
    "| | 2022 | 2023 |\n|---|---|---|\n| Net sales | 8,630.9 | 10,208.6 |\n"
    "| Cost of sales | 5,262.2 | 6,164.8 |\n| Gross profit | 3,368.7 | 4,043.8 |"
)


def test_table_row_chunks_are_one_span_in_the_tables_box() -> None:
    b = _Builder()
    table = b.add(
        ElementKind.TABLE, STATEMENT, ["S"], caption="Results", page=3, bbox=(40, 50, 500, 300)
    )

    chunks = _chunk(b, table_rows=True)

    rows = [c for c in chunks if c.unit == "table_row"]
    assert len(rows) == 3
    for row in rows:
        assert [(s.start, s.end, s.page_number, s.bbox) for s in row.spans] == [
            (0, len(row.text), 3, table.bbox)
        ]


def _mixed_document() -> _Builder:
    """A section mix that exercises merging, splitting, hard splits, code, CJK, atomic units."""
    b = _Builder()
    b.add(ElementKind.TITLE, "Overview", ["Overview"])
    b.add(ElementKind.TEXT, "  " + _sentences(3) + "  ", ["Overview"])
    b.add(ElementKind.TEXT, _sentences(20, words=11), ["Overview"])
    b.add(ElementKind.LIST, "- a short item", ["Overview"], page=2)
    b.add(
        ElementKind.TEXT,
        " ".join(f"w{i}" for i in range(90)) + ". Then more.",
        ["Overview"],
        page=2,
    )
    b.add(ElementKind.CAPTION, "Table 1: Values", ["Overview"], page=2)
    b.add(
        ElementKind.TABLE,
        STATEMENT,
        ["Overview"],
        page=2,
    )
    b.add(ElementKind.TITLE, "Code", ["Code"], page=3)
    b.add(ElementKind.CODE, "\n".join(f"x = {i}  # step {i}" for i in range(40)), ["Code"], page=3)
    b.add(ElementKind.TEXT, "い" * 420 + "。" + "ろ" * 30 + "。", ["Code"], page=3)
    b.add(ElementKind.FIGURE, "", ["Code"], page=3, caption="Figure 2: Trend")
    for i, element in enumerate(b.elements):
        if element.kind not in (ElementKind.TABLE, ElementKind.FIGURE):
            b.elements[i] = _with_lines(element, top=20.0 * i, width=37)
    return b


def test_spans_leave_chunk_texts_as_they_were() -> None:
    """Spans are bookkeeping only: the chunks of a mixed sample are byte for byte those the
    chunker gave before spans existed (digest taken from that version), and all spans hold."""
    import hashlib

    b = _mixed_document()
    chunks = _chunk(b, max_chars=300, min_chars=40, table_rows=True)
    digest = hashlib.sha256(
        "\x00".join(f"{c.chunk_id}|{c.unit}|{c.element_ids}|{c.text}" for c in chunks).encode()
    ).hexdigest()
    assert digest == MIXED_DIGEST
    for chunk in chunks:
        _assert_spans_valid(chunk)
    _assert_lines_printed(chunks, b.elements)


#: sha256 of the mixed sample's chunks, from the chunker before spans existed (ab5340c).
MIXED_DIGEST = "a3984b37ce5837f6170e6446332be02b69fe626ba917e7177092c55f42209458"


def test_payload_spans_reach_the_passage_on_every_page() -> None:
    from pagesight.ingestion.ingest import chunk_payload
    from pagesight.query.passages import passage_from_payload

    b = _mixed_document()
    parsed = b.parsed()
    parsed.document.source_uri = "file:///data/Annual%20Report%202023.pdf"
    chunks = _chunk(b, max_chars=300, min_chars=40, table_rows=True)
    crossing = next(c for c in chunks if len(c.page_numbers) > 1)
    payload = chunk_payload(crossing, parsed, [])
    assert payload["spans"] and all(len(entry) == 7 for entry in payload["spans"])

    passage = passage_from_payload(payload, crossing.page_numbers[0], 0.5)

    assert passage.source_name == "Annual Report 2023.pdf"
    assert len(passage.spans) == len(crossing.spans)
    assert {s.page_number for s in passage.spans} == set(crossing.page_numbers)
    for got, want in zip(passage.spans, crossing.spans, strict=True):
        assert (got.start, got.end, got.page_number) == (want.start, want.end, want.page_number)
        assert got.bbox.as_tuple() == pytest.approx(want.bbox.as_tuple(), abs=0.01)
    # this page's element boxes only, as before
    assert all(
        box in [bx for p, bx in crossing.bboxes if p == passage.page_number]
        for box in passage.bboxes
    )
    # a payload written before spans existed gives none, and no file name without a source
    old = {k: v for k, v in payload.items() if k not in ("spans", "source_uri")}
    assert passage_from_payload(old, 1, 0.0).spans == []
    assert passage_from_payload(old, 1, 0.0).source_name is None
