"""PDF opening and the two page parsers: layout model (born-digital) and OCR (image-only).

Born-digital pages go through PyMuPDF's layout model (ONNX, shipped in the pymupdf-layout wheel,
via pymupdf4llm), which classifies regions as title / section-header / text / list-item /
table / picture / caption / formula / footnote and orders them for reading. Tables come out as
cell grids that we write as markdown; text inside pictures (chart labels, values) is kept with
the figure, since it is what questions about charts ask for.

Pages without a usable text layer are rendered and OCRed; OCR lines are grouped into paragraphs
and headings by geometry.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import statistics
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import ParseOptions
from pagesight.core.types import BBox, ElementKind
from pagesight.ingestion.parse.blocks import RawBlock
from pagesight.ingestion.parse.table_words import fill_grid
from pagesight.ingestion.parse.text import join_boxed_lines, line_box, line_text
from pagesight.ingestion.tables import table_cells, table_to_markdown

if TYPE_CHECKING:
    import pymupdf

    from pagesight.ingestion.ocr.base import OcrLine, OcrResult
    from pagesight.ingestion.render import RenderedPage

log = logging.getLogger(__name__)

_LAYOUT_KINDS: dict[str, ElementKind | None] = {
    "title": ElementKind.TITLE,
    "section-header": ElementKind.TITLE,
    "text": ElementKind.TEXT,
    "footnote": ElementKind.TEXT,
    "list-item": ElementKind.LIST,
    "caption": ElementKind.CAPTION,
    "formula": ElementKind.EQUATION,
    "picture": ElementKind.FIGURE,
    "table": ElementKind.TABLE,
    "code": ElementKind.CODE,
    # Running headers and footers repeat on every page and only add noise to retrieval.
    "page-header": None,
    "page-footer": None,
}


def open_pdf(source: Path | bytes, password: str | None, max_pages: int) -> pymupdf.Document:
    """Open, authenticate and sanity-check a PDF; every failure carries a stage error code.

    MuPDF repairs broken xref tables on open; a file it cannot make sense of is CORRUPT.
    Authentication happens before anything else is read, because MuPDF caches a page count of
    zero for an encrypted file that is queried before the password is given.
    """
    import pymupdf

    try:
        if isinstance(source, bytes):
            doc = pymupdf.open(stream=source, filetype="pdf")
        else:
            doc = pymupdf.open(source, filetype="pdf")
    except (pymupdf.FileDataError, RuntimeError, ValueError) as exc:
        raise PageSightError(ErrorCode.CORRUPT, Stage.RENDER, f"cannot open PDF: {exc}") from exc
    if doc.needs_pass:
        if not password:
            doc.close()
            raise PageSightError(
                ErrorCode.ENCRYPTED, Stage.RENDER, "the PDF is encrypted and no password was given"
            )
        if not doc.authenticate(password):
            doc.close()
            raise PageSightError(
                ErrorCode.ENCRYPTED, Stage.RENDER, "the password given does not open this PDF"
            )
    if doc.page_count == 0:
        doc = _rebuild(doc)
    if doc.page_count > max_pages:
        count = doc.page_count
        doc.close()
        raise PageSightError(
            ErrorCode.TOO_LARGE, Stage.RENDER, f"{count} pages, over the limit of {max_pages}"
        )
    return doc


def _rebuild(doc: pymupdf.Document) -> pymupdf.Document:
    """Second repair attempt: rewrite the objects MuPDF could read into a fresh file."""
    import pymupdf

    try:
        data = doc.tobytes(garbage=3, encryption=pymupdf.mupdf.PDF_ENCRYPT_NONE)
        rebuilt = pymupdf.open(stream=data, filetype="pdf")
    except (RuntimeError, ValueError) as exc:
        raise PageSightError(
            ErrorCode.CORRUPT, Stage.RENDER, f"no readable pages and repair failed: {exc}"
        ) from exc
    finally:
        doc.close()
    if rebuilt.page_count == 0:
        raise PageSightError(ErrorCode.CORRUPT, Stage.RENDER, "the PDF has no readable pages")
    return rebuilt


def open_image_as_pdf(path: Path) -> pymupdf.Document:
    """PNG/JPEG/TIFF (multi-page TIFF too) become image-only PDF pages, then take the OCR path."""
    import pymupdf

    try:
        with pymupdf.open(path) as img:
            data = img.convert_to_pdf()
        return pymupdf.open(stream=data, filetype="pdf")
    except (pymupdf.FileDataError, RuntimeError, ValueError) as exc:
        raise PageSightError(ErrorCode.CORRUPT, Stage.RENDER, f"cannot read image: {exc}") from exc


@dataclass(frozen=True)
class PageTextStats:
    chars: int
    image_coverage: float
    has_graphics: bool


def text_layer_chars(page: pymupdf.Page) -> int:
    """Characters of the page's text layer, whitespace left out."""
    return len("".join(page.get_text("text").split()))


def page_text_stats(page: pymupdf.Page) -> PageTextStats:
    import pymupdf

    chars = text_layer_chars(page)
    area = abs(page.rect) or 1.0
    covered = pymupdf.Rect()
    rects = [pymupdf.Rect(info["bbox"]) & page.rect for info in page.get_image_info()]
    for rect in rects:
        covered |= rect
    coverage = min(1.0, abs(covered) / area) if rects else 0.0
    has_graphics = bool(rects) or bool(page.get_drawings())
    return PageTextStats(chars, coverage, has_graphics)


def needs_ocr(stats: PageTextStats, options: ParseOptions) -> bool:
    """Image-only page test (STACK-FACTS): almost no text layer, and images that cover it.

    A page with almost no text but vector drawings is OCRed too: slide decks often outline
    their text as paths, which no text layer reveals.
    """
    if stats.chars >= options.image_only_max_chars:
        return False
    return stats.image_coverage >= options.image_only_min_coverage or stats.has_graphics


#: Share of the page height at the top and at the bottom where running heads and folios sit.
MARGIN_BAND = 0.1
_MARGIN_LINE_CHARS = 100
_MARGIN_LINES_PER_BAND = 4
#: The page's first and last lines are kept too when this short, wherever they sit: filings
#: converted from HTML print the folio as the last line, often halfway down a short page.
_EDGE_LINE_CHARS = 40


def margin_text(lines: Iterable[tuple[str, BBox]], height: float) -> list[str]:
    """The short lines wholly inside the top and bottom bands of a page, nearest the edge
    first within each band (top band, then bottom band), plus the page's first and last
    lines when short: running heads, footers and printed page numbers (folios).

    The layout model drops page headers and footers as noise for retrieval, but they are
    what tells "page 17" from the 19th sheet of the file.
    """
    top: list[tuple[float, str]] = []
    bottom: list[tuple[float, str]] = []
    first: tuple[float, str] | None = None
    last: tuple[float, str] | None = None
    for text, box in lines:
        text = " ".join(text.split())
        if not text or len(text) > _MARGIN_LINE_CHARS:
            continue
        if box.y1 <= MARGIN_BAND * height:
            top.append((box.y0, text))
        elif box.y0 >= (1 - MARGIN_BAND) * height:
            bottom.append((-box.y1, text))
        if first is None or box.y0 < first[0]:
            first = (box.y0, text)
        if last is None or -box.y1 < last[0]:
            last = (-box.y1, text)
    top.sort()
    bottom.sort()
    top = top[:_MARGIN_LINES_PER_BAND]
    bottom = bottom[:_MARGIN_LINES_PER_BAND]
    if first is not None and first not in top and len(first[1]) <= _EDGE_LINE_CHARS:
        top.append(first)
    if last is not None and last not in bottom and len(last[1]) <= _EDGE_LINE_CHARS:
        bottom.append(last)
    return [text for _, text in top + bottom]


def page_text(page: pymupdf.Page) -> dict[str, Any]:
    """The page's text layer as ``get_text("dict")``, text only (extracting image data too
    costs seconds on a scanned page); read once per page and shared by the steps below."""
    import pymupdf

    # Read the way the layout path (pymupdf4llm) reads: ligatures expanded ("ﬁ" is "fi"),
    # ActualText ignored, clipped to the page, styles collected (synthetic bold is in each
    # span's char_flags); no image data.
    flags = (
        pymupdf.TEXT_MEDIABOX_CLIP
        | pymupdf.TEXT_CID_FOR_UNKNOWN_UNICODE
        | pymupdf.TEXT_IGNORE_ACTUALTEXT
        | pymupdf.TEXT_COLLECT_STYLES
    )
    text: dict[str, Any] = page.get_text("dict", flags=flags)
    return text


def page_margin_text(page: pymupdf.Page, text: dict[str, Any] | None = None) -> list[str]:
    """:func:`margin_text` of a born-digital page's text layer (``text``: its
    :func:`page_text`, read here when not given)."""
    lines = (
        (line_text(line), BBox.of(line["bbox"]))
        for block in (text or page_text(page))["blocks"]
        if block.get("type") == 0
        for line in block.get("lines", [])
    )
    return margin_text(lines, page.rect.height)


# --------------------------------------------------------------------------------------------
# Born-digital pages: the layout model.


def _max_font_size(textlines: list[dict[str, Any]]) -> float | None:
    sizes = [span.get("size", 0.0) for line in textlines for span in line.get("spans", [])]
    return max(sizes) if sizes else None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """pymupdf4llm prints progress and notes to stdout; the CLI owns stdout (``--json``)."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


class LayoutPageParser:
    """Born-digital pages through PyMuPDF's layout model (pymupdf4llm ``parse_document``)."""

    name = "text-layer"

    def __init__(self, threads: int = 0) -> None:
        self.threads = threads

    def parse(
        self,
        doc: pymupdf.Document,
        page_numbers: list[int],
        page_chars: Mapping[int, int] | None = None,
    ) -> dict[int, list[RawBlock]]:
        """Blocks per 1-based page number, in reading order.

        Callers pass pages in modest batches: the model keeps every page's text dict of a call
        in memory until it returns. ``page_chars``: each page's :class:`PageTextStats` ``chars``
        where the caller has them (read again here otherwise: a MuPDF text page, ~6 ms).
        """
        from pymupdf4llm.helpers import document_layout

        from pagesight.ingestion.parse.layout_model import use_layout_model

        use_layout_model(self.threads)
        with _quiet():
            parsed = document_layout.parse_document(
                doc,
                pages=[n - 1 for n in page_numbers],
                use_ocr=document_layout.OCRMode.NEVER,
                force_text=True,
            )
        out: dict[int, list[RawBlock]] = {}
        for page_layout in parsed.pages:
            page = doc.load_page(page_layout.page_number - 1)
            blocks = [b for box in page_layout.boxes if (b := self._block(box, page)) is not None]
            chars = (page_chars or {}).get(page_layout.page_number)
            out[page_layout.page_number] = self._with_fallback(page, blocks, chars)
        return out

    def _with_fallback(
        self, page: pymupdf.Page, blocks: list[RawBlock], page_chars: int | None = None
    ) -> list[RawBlock]:
        """Use the plain text blocks when the layout model missed most of the text layer.

        The model skips text on tiny or unusual pages (a 200x50 pt label, a one-line page);
        losing text silently is worse than losing structure.
        """
        if page_chars is None:
            page_chars = text_layer_chars(page)
        found = sum(len("".join(b.text.split())) for b in blocks)
        if page_chars == 0 or found >= 0.5 * page_chars:
            return blocks
        plain = []
        for raw in page.get_text("dict")["blocks"]:
            if raw.get("type") != 0:
                continue
            text, lines = join_boxed_lines(
                (line_text(line), line_box(line)) for line in raw.get("lines", [])
            )
            if text:
                plain.append(
                    RawBlock(ElementKind.TEXT, text, BBox.of(raw["bbox"]), self.name, lines=lines)
                )
        return plain

    def _block(self, box: Any, page: pymupdf.Page) -> RawBlock | None:
        kind = _LAYOUT_KINDS.get(box.boxclass, ElementKind.TEXT)
        if kind is None:
            return None
        bbox = BBox.of((box.x0, box.y0, box.x1, box.y1))
        if kind == ElementKind.TABLE:
            table = box.table or {}
            # The grid the table model found is the element's cells, filled with whole words
            # (its own text is clipped at the cell edges: table_words); the text is rendered
            # from it.
            extract = table.get("extract") or []
            grid = table.get("cells") or []
            words = (
                page.get_text("words", clip=table.get("bbox") or bbox.as_tuple()) if grid else []
            )
            cells = table_cells(fill_grid(grid, words, extract) or extract)
            if not cells:
                return None
            return RawBlock(kind, table_to_markdown(cells), bbox, self.name, cells=cells)
        textlines = box.textlines or []
        text, lines = join_boxed_lines((line_text(line), line_box(line)) for line in textlines)
        font_size = _max_font_size(textlines) if kind == ElementKind.TITLE else None
        return RawBlock(kind, text, bbox, self.name, font_size=font_size, lines=lines)


# --------------------------------------------------------------------------------------------
# Image-only pages: OCR lines grouped into paragraphs.

_SENTENCE_END = re.compile(r"[.!?。！？:]$")


def ocr_blocks(result: OcrResult, page: RenderedPage, parser: str) -> list[RawBlock]:
    """Group OCR lines into paragraph and heading blocks, in PDF points.

    Lines join a paragraph while the vertical gap stays under ~0.9 line heights and they
    overlap horizontally. A short line clearly taller than the page's median is a heading.
    """
    lines = [line for line in result.lines if line.text.strip()]
    if not lines:
        return []
    heights = [line.bbox_px[3] - line.bbox_px[1] for line in lines]
    median_h = statistics.median(heights) or 1.0
    groups: list[list[OcrLine]] = []
    for line in lines:
        if groups:
            prev = groups[-1][-1]
            gap = line.bbox_px[1] - prev.bbox_px[3]
            overlap = min(line.bbox_px[2], prev.bbox_px[2]) - max(line.bbox_px[0], prev.bbox_px[0])
            same_size = _is_heading(prev, median_h) == _is_heading(line, median_h)
            if -0.5 * median_h <= gap <= 0.9 * median_h and overlap > 0 and same_size:
                groups[-1].append(line)
                continue
        groups.append([line])
    blocks: list[RawBlock] = []
    for group in groups:
        x0 = min(li.bbox_px[0] for li in group)
        y0 = min(li.bbox_px[1] for li in group)
        x1 = max(li.bbox_px[2] for li in group)
        y1 = max(li.bbox_px[3] for li in group)
        bbox = _points((x0, y0, x1, y1), page)
        text, text_lines = join_boxed_lines(
            (li.text.strip(), _points(li.bbox_px, page)) for li in group
        )
        confidence = statistics.fmean(li.confidence for li in group)
        heading = (
            len(group) <= 2 and _is_heading(group[0], median_h) and not _SENTENCE_END.search(text)
        )
        kind = ElementKind.TITLE if heading else ElementKind.TEXT
        font_size = (y1 - y0) / len(group) / page.scale if heading else None
        blocks.append(
            RawBlock(
                kind,
                text,
                bbox,
                parser,
                confidence=confidence,
                font_size=font_size,
                lines=text_lines,
            )
        )
    return blocks


def _points(box_px: tuple[float, float, float, float], page: RenderedPage) -> BBox:
    """A pixel box of the rendered ``page`` in PDF points, clipped to the page."""
    x0, y0, x1, y1 = box_px
    return BBox.of((x0 / page.scale, y0 / page.scale, x1 / page.scale, y1 / page.scale)).clip(
        page.width_pt, page.height_pt
    )


def _is_heading(line: OcrLine, median_h: float) -> bool:
    return (line.bbox_px[3] - line.bbox_px[1]) >= 1.4 * median_h and len(line.text) <= 120
