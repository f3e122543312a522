"""Element lines: where each character of an element's text is printed, from every parser that
reads lines with boxes (text-layer layout blocks and their fallback, plain pages, OCR)."""

from __future__ import annotations

from types import SimpleNamespace

import pymupdf
import pytest
from PIL import Image

from pagesight.core.types import BBox, Element, ElementKind, TextLine
from pagesight.ingestion.ocr import OcrLine, OcrResult
from pagesight.ingestion.parse.blocks import ElementAssembler, RawBlock
from pagesight.ingestion.parse.pdf import LayoutPageParser, ocr_blocks, page_text
from pagesight.ingestion.parse.plain import plain_blocks
from pagesight.ingestion.parse.text import (
    join_boxed_lines,
    join_lines,
    join_lines_with_ranges,
    line_text,
    shift_lines,
)
from pagesight.ingestion.render import RenderedPage

BODY = (
    "The company designs and sells analog, mixed-signal and digital signal processing circuits "
    "used in industrial, automotive, consumer and communications equipment. Revenue grew in "
    "every region during the year, and the order backlog at year end was the largest reported. "
)


def _assert_lines_valid(text: str, lines: list[TextLine]) -> None:
    """Ranges inside the text, increasing, not overlapping, none empty."""
    previous_end = 0
    for line in lines:
        assert previous_end <= line.start < line.end <= len(text), (line, len(text))
        previous_end = line.end


def test_line_ranges_undo_hyphenation_and_skip_the_joining_spaces() -> None:
    lines = ["The compa-", "ny grew its", "", "Re-", "Ranked list", "-", "and more"]

    text, ranges = join_lines_with_ranges(lines)

    assert text == join_lines(lines) == "The company grew its Re- Ranked list and more"
    assert ranges == [(0, 9), (9, 20), None, (21, 24), (25, 36), (37, 37), (37, 45)]
    assert [text[s:e] for s, e in (r for r in ranges if r)] == [
        "The compa",  # the hyphen is gone from the text and from the line's range
        "ny grew its",
        "Re-",  # before a capital the hyphen stays
        "Ranked list",
        "",  # a line that was nothing but the hyphen: empty
        "and more",
    ]


def test_boxed_lines_keep_a_box_per_non_empty_line() -> None:
    box = BBox.of((0, 0, 10, 10))
    text, lines = join_boxed_lines(
        [("Net sales rose", box), ("", box), ("-", box), ("Sharply", None), ("in Q4", box)]
    )
    assert text == "Net sales rose - Sharply in Q4"
    assert [(text[li.start : li.end]) for li in lines] == ["Net sales rose", "-", "in Q4"]
    _assert_lines_valid(text, lines)


def test_shifted_lines_are_clipped_and_empty_ones_dropped() -> None:
    box = BBox.of((0, 0, 1, 1))
    lines = [TextLine(start=0, end=2, bbox=box), TextLine(start=3, end=9, bbox=box)]
    assert shift_lines(lines, -2, 5) == [TextLine(start=1, end=5, bbox=box)]
    assert shift_lines(lines, 10, 30) == [
        TextLine(start=10, end=12, bbox=box),
        TextLine(start=13, end=19, bbox=box),
    ]


def test_assembler_carries_lines_onto_the_stripped_element_text() -> None:
    box = BBox.of((10, 10, 100, 40))
    raw_text = "  First line second line "
    lines = [
        TextLine(start=2, end=12, bbox=BBox.of((10, 10, 90, 20))),
        TextLine(start=13, end=24, bbox=BBox.of((10, 30, 100, 40))),
    ]
    blocks = [
        RawBlock(ElementKind.TEXT, raw_text, box, "text-layer", lines=lines),
        RawBlock(
            ElementKind.FIGURE,
            "",
            BBox.of((10, 300, 300, 500)),
            "text-layer",
            caption="Figure 1: Sales",
            lines=lines,
        ),
    ]

    text_element, figure = ElementAssembler().assemble("d", "v" * 64, [(1, blocks)])

    assert text_element.text == "First line second line"
    assert [text_element.text[li.start : li.end] for li in text_element.lines] == [
        "First line",
        "second line",
    ]
    assert [li.bbox for li in text_element.lines] == [li.bbox for li in lines]
    # a figure whose text is its caption has no lines of its own
    assert figure.text == "Figure 1: Sales" and figure.lines == []


def test_ocr_lines_become_element_lines_in_points() -> None:
    page = RenderedPage(1, Image.new("RGB", (1224, 1584), "white"), 144.0, 612.0, 792.0)
    result = OcrResult(
        lines=[
            OcrLine("Quarterly results were strong and the out-", (100, 200, 900, 230), 0.9),
            OcrLine("look for the year improved ", (100, 240, 700, 270), 0.8),
            OcrLine("   ", (100, 280, 700, 310), 0.1),
            OcrLine("across all regions.", (100, 280, 600, 310), 0.9),
        ],
        rotation_applied=0,
        image_size=(1224, 1584),
        language="eng",
        engine="tesseract",
    )

    (block,) = ocr_blocks(result, page, "tesseract")

    assert block.text == (
        "Quarterly results were strong and the outlook for the year improved across all regions."
    )
    _assert_lines_valid(block.text, block.lines)
    assert [block.text[li.start : li.end] for li in block.lines] == [
        "Quarterly results were strong and the out",
        "look for the year improved",
        "across all regions.",
    ]
    assert [li.bbox.as_tuple() for li in block.lines] == [
        (50.0, 100.0, 450.0, 115.0),
        (50.0, 120.0, 350.0, 135.0),
        (50.0, 140.0, 300.0, 155.0),
    ]
    assert block.bbox is not None
    assert all(block.bbox.intersection_area(li.bbox) == li.bbox.area for li in block.lines)


def _printed_lines(page: pymupdf.Page) -> dict[tuple[float, ...], str]:
    """The page's text-layer lines: box -> text."""
    return {
        tuple(round(v, 2) for v in line["bbox"]): line_text(line)
        for block in page_text(page)["blocks"]
        if block.get("type") == 0
        for line in block.get("lines", [])
    }


def _assert_blocks_printed(blocks: list[RawBlock], page: pymupdf.Page) -> None:
    printed = _printed_lines(page)
    for block in blocks:
        _assert_lines_valid(block.text, block.lines)
        for line in block.lines:
            text = printed[tuple(round(v, 2) for v in line.bbox.as_tuple())]
            piece = block.text[line.start : line.end]
            # the whole printed line, less a hyphen the join removed
            assert piece in (text, text.removesuffix("-")), (piece, text)


def test_plain_page_blocks_carry_their_printed_lines() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 100), "Certification pursuant to", fontsize=14, fontname="hebo")
    page.insert_text((72, 116), "18 U.S.C. Section 1350", fontsize=14, fontname="hebo")
    page.insert_textbox(pymupdf.Rect(72, 130, 540, 230), BODY * 2, fontsize=10)
    page.insert_text((72, 250), "Revenue grew in every re-", fontsize=10)
    page.insert_text((72, 262), "gion during the year.", fontsize=10)

    blocks = plain_blocks(page, page_text(page))

    heading = blocks[0]
    assert heading.kind == ElementKind.TITLE
    assert heading.text == "Certification pursuant to 18 U.S.C. Section 1350"
    # two text-layer blocks merged into one heading: both lines, the second shifted
    assert [heading.text[li.start : li.end] for li in heading.lines] == [
        "Certification pursuant to",
        "18 U.S.C. Section 1350",
    ]
    assert sum(len(b.lines) for b in blocks) == len(_printed_lines(page))
    assert any("region during" in b.text for b in blocks)
    _assert_blocks_printed(blocks, page)


def test_layout_blocks_and_their_fallback_carry_their_printed_lines() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 130, 540, 230), BODY * 2, fontsize=10)
    textlines = [
        line
        for block in page_text(page)["blocks"]
        if block.get("type") == 0
        for line in block["lines"]
    ]
    parser = LayoutPageParser()

    box = SimpleNamespace(boxclass="text", x0=72, y0=130, x1=540, y1=230, textlines=textlines)
    block = parser._block(box, page)
    assert block is not None and len(block.lines) == len(textlines) > 3
    _assert_blocks_printed([block], page)
    table = SimpleNamespace(
        boxclass="table", x0=72, y0=130, x1=540, y1=230, textlines=textlines,
        table={"extract": [["a", "b"], ["1", "2"]]},
    )  # fmt: skip
    table_block = parser._block(table, page)
    assert table_block is not None and table_block.lines == []

    # the layout model found nothing: the plain text blocks, with their lines
    fallback = parser._with_fallback(page, [])
    assert fallback and sum(len(b.lines) for b in fallback) == len(textlines)
    _assert_blocks_printed(fallback, page)


@pytest.mark.parametrize("bad", [None, (1.0, 2.0), (0.0, float("nan"), 1.0, 1.0)])
def test_a_line_without_a_usable_box_gives_no_line(bad: object) -> None:
    from pagesight.ingestion.parse.text import line_box

    assert line_box({"bbox": bad} if bad is not None else {}) is None
    assert line_box({"bbox": (3, 4, 1, 2)}) == BBox.of((1, 2, 3, 4))


def test_element_lines_survive_serialisation() -> None:
    line = TextLine(start=0, end=4, bbox=BBox.of((1, 2, 3, 4)))
    element = Element(
        element_id="e",
        doc_id="d",
        kind=ElementKind.TEXT,
        text="text",
        page_number=1,
        seq=0,
        lines=[line],
    )
    assert Element.model_validate_json(element.model_dump_json()).lines == [line]
