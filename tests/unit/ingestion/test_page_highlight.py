"""Highlight boxes on page images never hide the text they point at.

A text element's box is tight around its glyphs; the highlight used to paint its outline on the
box itself, covering the lower part of the block's last line. Here a real born-digital page is
parsed by the layout parser, rendered as ingestion stores it, and highlighted as the API does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

from pagesight.api.images import parse_highlight
from pagesight.core.links import page_image_url
from pagesight.core.types import BBox
from pagesight.ingestion import samples
from pagesight.ingestion.highlight import box_pixels, render_page_image
from pagesight.ingestion.parse.blocks import RawBlock
from pagesight.ingestion.parse.pdf import LayoutPageParser
from pagesight.ingestion.render import PyMuPdfRenderer

OUTLINE = (230, 60, 0)
FILL = (255, 200, 0, 60)
#: the stored page image, the PDF, the layout parser's blocks of page 1
ParsedPage = tuple[Path, pymupdf.Document, list[RawBlock]]
DPI = 144


def _glyph_lines(page: pymupdf.Page) -> list[tuple[BBox, str]]:
    """Each text line's box around its glyphs (not the font's line height), and its text."""
    out = []
    for block in page.get_text("dict", flags=pymupdf.TEXT_ACCURATE_BBOXES)["blocks"]:
        for line in block.get("lines", []):
            text = "".join(span["text"] for span in line["spans"]).strip()
            if text:
                out.append((BBox.of(line["bbox"]), text))
    return out


def _contains(outer: BBox, inner: BBox, tol: float = 0.01) -> bool:
    return (
        outer.x0 - tol <= inner.x0
        and outer.y0 - tol <= inner.y0
        and inner.x1 <= outer.x1 + tol
        and inner.y1 <= outer.y1 + tol
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> ParsedPage:
    folder = tmp_path_factory.mktemp("highlight")
    pdf = samples.text_pdf(folder / "text.pdf")
    doc = pymupdf.open(pdf)
    blocks = LayoutPageParser().parse(doc, [1])[1]
    rendered = PyMuPdfRenderer(doc, 40_000_000).render(1, DPI)
    stored = folder / "page.png"
    rendered.image.save(stored)
    return stored, doc, blocks


def _paragraph(blocks: list[RawBlock]) -> RawBlock:
    (block,) = [b for b in blocks if b.text.startswith("Fuel prices")]
    assert block.bbox is not None
    return block


def test_element_box_holds_every_glyph_of_its_lines(page: ParsedPage) -> None:
    _, doc, blocks = page
    block = _paragraph(blocks)
    assert block.bbox is not None
    lines = [(box, text) for box, text in _glyph_lines(doc[0]) if text in block.text]
    assert [text for _, text in lines][-1] == "second risk."
    assert len(lines) == 3
    for box, text in lines:
        assert _contains(block.bbox, box), (text, box, block.bbox)


def test_last_line_is_not_covered_by_the_outline(page: ParsedPage) -> None:
    stored, doc, blocks = page
    block = _paragraph(blocks)
    assert block.bbox is not None
    pdf_page = doc[0]
    size = (pdf_page.rect.width, pdf_page.rect.height)
    original = np.asarray(Image.open(stored).convert("RGB")).astype(int)
    png = stored.with_name("highlighted.png")
    png.write_bytes(render_page_image(stored, size, [block.bbox]))
    drawn = np.asarray(Image.open(png).convert("RGB")).astype(int)
    sx = original.shape[1] / size[0]
    sy = original.shape[0] / size[1]

    last_line, text = [(b, t) for b, t in _glyph_lines(pdf_page) if t in block.text][-1]
    assert text == "second risk."
    left, top, right, bottom = box_pixels(last_line, sx, sy)
    before = original[top : bottom + 1, left : right + 1]
    after = drawn[top : bottom + 1, left : right + 1]
    ink = before.max(axis=2) < 100
    assert ink.sum() > 200, "the last line rendered no ink"
    # lowest ink row: the glyphs reach the line's bottom edge
    assert np.nonzero(ink.any(axis=1))[0].max() >= bottom - top - 2
    # every pixel of the last line is only tinted (the fill over the stored pixel), never
    # painted over by the outline
    alpha = FILL[3] / 255
    tinted = before * (1 - alpha) + np.array(FILL[:3]) * alpha
    assert np.abs(after - tinted).max() <= 2, "the outline covers the last line's glyphs"
    assert after[ink].max() < 140

    # no outline pixel anywhere inside the element's box; the outline runs just outside it
    b_left, b_top, b_right, b_bottom = box_pixels(block.bbox, sx, sy)
    inside = drawn[b_top : b_bottom + 1, b_left : b_right + 1]
    assert not (inside == OUTLINE).all(axis=2).any()
    middle = (b_left + b_right) // 2
    assert tuple(drawn[b_bottom + 1, middle]) == OUTLINE
    assert tuple(drawn[b_top - 1, middle]) == OUTLINE
    assert tuple(drawn[(b_top + b_bottom) // 2, b_left - 1]) == OUTLINE


def test_box_pixels_round_outward() -> None:
    assert box_pixels(BBox(x0=10.0, y0=10.0, x1=20.0, y1=20.0), 1, 1) == (10, 10, 19, 19)
    assert box_pixels(BBox(x0=10.6, y0=10.4, x1=20.4, y1=20.6), 1, 1) == (10, 10, 20, 20)
    # 289.53 pt at 2 px/pt reaches into pixel row 579: the row belongs to the box
    assert box_pixels(BBox(x0=73, y0=251.74, x1=521.33, y1=289.53), 2, 2)[3] == 579
    assert box_pixels(BBox(x0=5, y0=5, x1=5, y1=5), 2, 2) == (10, 10, 10, 10)


def test_highlight_url_rounds_boxes_outward() -> None:
    box = BBox(x0=73.06, y0=251.74, x1=521.33, y1=289.53)
    url = page_image_url("d", 1, [box])
    assert url.endswith("?highlight=73.0,251.7,521.4,289.6")
    (back,) = parse_highlight(url.split("=", 1)[1])
    assert _contains(back, box, tol=0)
    exact = page_image_url("d", 1, [BBox(x0=72, y0=100, x1=300, y1=140)])
    assert exact.endswith("?highlight=72.0,100.0,300.0,140.0")
