"""Plain text pages skip the layout model: which pages qualify, and what is read from them.

Each page is built with PyMuPDF so that it holds exactly one thing that should (or should not)
send it to the layout model.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from pagesight.core.settings import Settings
from pagesight.core.types import ElementKind
from pagesight.ingestion.parse.pdf import page_text
from pagesight.ingestion.parse.plain import PARSER_NAME, plain_blocks, plain_page
from pagesight.ingestion.pipeline import DocumentParser

BODY = (
    "The company designs and sells analog, mixed-signal and digital signal processing circuits "
    "used in industrial, automotive, consumer and communications equipment. Revenue grew in "
    "every region during the year, and the order backlog at year end was the largest reported. "
)


def _text_page(doc: pymupdf.Document) -> pymupdf.Page:
    """A heading, two paragraphs, a two-item list, a caption-like line, a running head and a
    folio: everything a report page of running text has."""
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 40), "Annual Report 2023", fontsize=8)
    page.insert_text((72, 100), "Results of Operations", fontsize=16, fontname="hebo")
    page.insert_textbox(pymupdf.Rect(72, 120, 540, 220), BODY * 2, fontsize=10)
    page.insert_text((72, 250), "Segment Outlook", fontsize=10, fontname="hebo")
    page.insert_textbox(pymupdf.Rect(72, 262, 540, 340), BODY, fontsize=10)
    page.insert_text((72, 360), "• Industrial automation grew 12 percent", fontsize=10)
    page.insert_text((72, 374), "• Automotive grew 9 percent", fontsize=10)
    page.insert_text((72, 400), "Figure 3: Revenue by end market", fontsize=10)
    page.insert_text((300, 770), "17", fontsize=10)
    return page


def _check(page: pymupdf.Page) -> tuple[bool, str]:
    result = plain_page(page, page_text(page))
    return result.plain, result.reason


def test_running_text_is_plain_and_reads_as_the_model_would() -> None:
    doc = pymupdf.open()
    page = _text_page(doc)
    assert _check(page) == (True, "")
    blocks = plain_blocks(page, page_text(page))
    by_kind = {kind: [b.text for b in blocks if b.kind == kind] for kind in ElementKind}
    assert by_kind[ElementKind.TITLE] == ["Results of Operations", "Segment Outlook"]
    # (base-14 Helvetica sets the bullet as a middle dot)
    assert [text[2:] for text in by_kind[ElementKind.LIST]] == [
        "Industrial automation grew 12 percent",
        "Automotive grew 9 percent",
    ]
    assert by_kind[ElementKind.CAPTION] == ["Figure 3: Revenue by end market"]
    assert len(by_kind[ElementKind.TEXT]) == 2
    assert all(b.parser == PARSER_NAME for b in blocks)
    # the running head and the folio are margin text, not content
    assert not any(b.text in ("Annual Report 2023", "17") for b in blocks)
    # the larger heading ranks above the bold body-size one
    sizes = [b.font_size for b in blocks if b.kind == ElementKind.TITLE]
    assert sizes[0] is not None and sizes[1] is not None and sizes[0] > sizes[1]


def test_a_bullet_set_apart_from_its_text_still_opens_a_list_item() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 100, 540, 200), BODY * 2, fontsize=10)
    page.insert_text((72, 240), "·", fontsize=10)
    page.insert_text((84, 240), "Foreign currency impacts decreased pre-tax earnings", fontsize=10)
    blocks = plain_blocks(page, page_text(page))
    assert [b.kind for b in blocks][-1] == ElementKind.LIST


def test_styled_lines_and_sentences_are_headings_but_a_styled_paragraph_is_not() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 100), "Foreign exchange impacts:", fontsize=10, fontname="tiit")
    page.insert_textbox(pymupdf.Rect(72, 110, 540, 200), BODY * 2, fontsize=10, fontname="tiro")
    risk = "Cybersecurity risk: a disruption of our operations could harm our results."
    page.insert_textbox(pymupdf.Rect(72, 220, 540, 250), risk, fontsize=10, fontname="tibo")
    page.insert_text((72, 280), "ARTICLE VII - PLAN ADMINISTRATION", fontsize=10, fontname="tiro")
    page.insert_text((72, 320), "7.01 Plan Administrator:", fontsize=10, fontname="tiro")
    page.insert_textbox(pymupdf.Rect(72, 340, 540, 440), BODY * 2, fontsize=10, fontname="tibo")
    kinds = [(b.kind, b.text[:12]) for b in plain_blocks(page, page_text(page))]
    assert kinds == [
        (ElementKind.TITLE, "Foreign exch"),
        (ElementKind.TEXT, BODY[:12]),
        (ElementKind.TITLE, "Cybersecurit"),
        (ElementKind.TITLE, "ARTICLE VII "),
        (ElementKind.TITLE, "7.01 Plan Ad"),
        (ElementKind.TEXT, BODY[:12]),
    ]


def test_a_bold_lead_in_opening_a_paragraph_is_split_off_as_its_heading() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 100, 540, 200), BODY * 2, fontsize=10, fontname="tiro")
    writer = pymupdf.TextWriter(page.rect)
    writer.append((72, 240), "2017 Debt Activity:", font=pymupdf.Font("tibo"), fontsize=10)
    writer.append(writer.last_point, " Total debt was higher than a year ago.", fontsize=10)
    writer.write_text(page)
    blocks = plain_blocks(page, page_text(page))
    assert [(b.kind, b.text) for b in blocks[-2:]] == [
        (ElementKind.TITLE, "2017 Debt Activity:"),
        (ElementKind.TEXT, "Total debt was higher than a year ago."),
    ]


def test_a_heading_the_text_layer_split_over_two_blocks_is_one_heading() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 100), "Certification pursuant to", fontsize=14, fontname="hebo")
    page.insert_text((72, 116), "18 U.S.C. Section 1350", fontsize=14, fontname="hebo")
    page.insert_textbox(pymupdf.Rect(72, 130, 540, 230), BODY * 2, fontsize=10)
    titles = [b.text for b in plain_blocks(page, page_text(page)) if b.kind == ElementKind.TITLE]
    assert titles == ["Certification pursuant to 18 U.S.C. Section 1350"]


def _png(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


def _draw_shape(page: pymupdf.Page) -> None:
    page.draw_rect(pymupdf.Rect(72, 400, 300, 600), color=(0, 0, 0), fill=(0.9, 0.9, 0.9))


def _draw_picture(page: pymupdf.Page) -> None:
    page.insert_image(pymupdf.Rect(72, 400, 300, 600), stream=_png(60, 60))


def _draw_rules(page: pymupdf.Page) -> None:
    for i in range(8):
        page.draw_line((72, 400 + 12 * i), (540, 400 + 12 * i))


def _draw_cells(page: pymupdf.Page) -> None:
    for i, (label, value) in enumerate([("Industrial", "52%"), ("Consumer", "20%")]):
        page.insert_text((72, 400 + 14 * i), label, fontsize=10)
        page.insert_text((460, 400 + 14 * i), value, fontsize=10)


def _draw_math(page: pymupdf.Page) -> None:
    page.insert_text((72, 400), "a b g d e z h q i k l m n x p r s t", fontname="symb")


def _draw_turned_text(page: pymupdf.Page) -> None:
    for i in range(3):
        page.insert_text((400 + 14 * i, 700), "Revenue by segment", rotate=90, fontsize=10)


def _draw_white_background(page: pymupdf.Page) -> None:
    page.draw_rect(pymupdf.Rect(0, -500, 612, 2000), color=None, fill=(1, 1, 1), overlay=False)


def _draw_two_rules(page: pymupdf.Page) -> None:
    page.draw_line((72, 380), (540, 380))
    page.draw_line((72, 760), (540, 760))


def _draw_two_columns(page: pymupdf.Page) -> None:
    page.insert_textbox(pymupdf.Rect(72, 400, 290, 700), BODY * 3, fontsize=10)
    page.insert_textbox(pymupdf.Rect(320, 400, 540, 700), BODY * 3, fontsize=10)


#: What :func:`_with` draws below the running text, by name.
_DRAWINGS: dict[str, Callable[[pymupdf.Page], None]] = {
    "shape": _draw_shape,
    "picture": _draw_picture,
    "rules": _draw_rules,
    "cells": _draw_cells,
    "math": _draw_math,
    "turned text": _draw_turned_text,
    "white background": _draw_white_background,
    "two rules": _draw_two_rules,
    "two columns": _draw_two_columns,
}


def _with(draw: str) -> pymupdf.Page:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 100, 540, 300), BODY * 3, fontsize=10)
    drawing = _DRAWINGS.get(draw)
    if drawing is not None:
        drawing(page)
    return page


@pytest.mark.parametrize(
    ("draw", "reason"),
    [
        ("shape", "shape"),
        ("picture", "picture"),
        ("rules", "rules"),
        ("cells", "aligned columns"),
        ("math", "mathematics"),
        ("turned text", "turned text"),
    ],
)
def test_anything_the_model_could_find_sends_the_page_to_it(draw: str, reason: str) -> None:
    assert _check(_with(draw)) == (False, reason)


@pytest.mark.parametrize("draw", ["white background", "two rules", "two columns"])
def test_invisible_fills_a_few_rules_and_text_columns_keep_a_page_plain(draw: str) -> None:
    assert _check(_with(draw)) == (True, "")


def _report(path: Path) -> Path:
    """Page 1 running text, page 2 a small ruled table."""
    doc = pymupdf.open()
    _text_page(doc)
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 100), "Revenue by end market", fontsize=14, fontname="hebo")
    for i, (label, value) in enumerate([("Market", "Share"), ("Industrial", "52%"), ("A", "8%")]):
        y = 140 + 20 * i
        page.insert_text((80, y), label, fontsize=10)
        page.insert_text((300, y), value, fontsize=10)
    for i in range(4):
        page.draw_line((72, 126 + 20 * i), (400, 126 + 20 * i))
    for x in (72, 250, 400):
        page.draw_line((x, 126), (x, 186))
    doc.save(path)
    return path


def test_parser_reads_plain_pages_from_their_fonts_and_the_rest_with_the_model(
    tmp_path: Path,
) -> None:
    path = _report(tmp_path / "report.pdf")
    on = Settings()
    on.parse.plain_pages = True
    parsed = DocumentParser(on).parse(path)
    assert [p.parser for p in parsed.pages] == [PARSER_NAME, "text-layer"]
    titles = [e.text for e in parsed.elements if e.kind == ElementKind.TITLE]
    assert titles[:2] == ["Results of Operations", "Segment Outlook"]
    assert parsed.pages[0].margin_text == ["Annual Report 2023", "17"]

    everything = DocumentParser(Settings()).parse(path)  # off by default
    assert [p.parser for p in everything.pages] == ["text-layer", "text-layer"]
    # the text is the same whichever way page 1 was read
    words = {e.page_number: 0 for e in parsed.elements}
    for e in parsed.elements:
        words[e.page_number] += len(e.text.split())
    model_words = sum(len(e.text.split()) for e in everything.elements if e.page_number == 1)
    assert abs(words[1] - model_words) <= 0.05 * model_words
