"""Plain text pages: blocks from the text layer's own fonts, without the layout model.

The layout model costs ~0.3 s a page on a CPU core, and on a page of running text with
nothing drawn on it, it has nothing to find that the text layer does not already say: no
table, figure or equation, and headings that differ from the body by size or weight. Such a
page is recognised by what it lacks (:func:`plain_page`) and read here (:func:`plain_blocks`)
into the same :class:`RawBlock` kinds the model emits: headings, list items, captions and
paragraphs, with running heads and folios left out (they are kept as the page's margin text).

Anything that might hold structure the model would find sends the page to the model: a
picture or scan, a filled shape, more than a few rules, rows of cells side by side, turned
text, or mathematics.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pagesight.core.types import BBox, ElementKind, TextLine
from pagesight.ingestion.parse.blocks import CAPTION_PATTERN, RawBlock
from pagesight.ingestion.parse.text import (
    join_boxed_lines,
    join_lines,
    line_box,
    line_text,
    shift_lines,
)

if TYPE_CHECKING:
    import pymupdf

PARSER_NAME = "text-layer-rules"

#: Thinner than this (points) a drawing is a rule, an underline or a border, not a shape.
_RULE_PT = 3.0
#: More rules than this and they may be a table's grid or a chart's axes.
_MAX_RULES = 6
#: Pictures covering more than this share of the page need the model (figures, scans).
_MAX_IMAGE_SHARE = 0.02
#: A gap between two spans of one line wider than this many ems is a column gap.
_COLUMN_GAP_EM = 2.0
#: Rows of separate cells (one of them narrow) beyond which a page may hold a table.
_MAX_TABULAR_ROWS = 1
#: A cell narrower than this share of the page width; text columns are wider.
_NARROW_CELL = 0.25
#: Lines whose tops are this close (points) sit on one row.
_ROW_TOLERANCE_PT = 2.0
#: Lines not running left to right (vertical Japanese, rotated labels) beyond which the
#: reading order is the model's to find.
_MAX_TURNED_LINES = 2
#: Fonts that set mathematics (TeX's Computer Modern math, STIX/Cambria math, Symbol).
_MATH_FONT = re.compile(r"CMMI|CMSY|CMEX|MSBM|Math|STIX|Symbol|rsfs", re.IGNORECASE)
_MAX_MATH_SHARE = 0.02

#: A heading is at least this much larger than the page's body text.
_HEADING_SIZE_RATIO = 1.15
_HEADING_MAX_CHARS = 160
_HEADING_MAX_LINES = 3
#: A one-line heading without a larger size or weight (capitals, a section number), and a
#: bold or italic lead-in that opens a paragraph, are at most this long.
_RUN_IN_MAX_CHARS = 80
#: A standalone paragraph set wholly bold or italic up to this long is a heading.
_STYLED_HEADING_MAX_CHARS = 320
_NUMBERED_HEADING = re.compile(r"^\s*(?:\d{1,2}(?:\.\d{1,2}){1,3}|[A-Z]\.\d{1,2})\.?\s+[A-Z]")
_BULLET = re.compile(r"^\s*(?:[•◦▪▫●○■□‣⁃∙·\-–—*](?:\s+|$)|\(?[a-zA-Z0-9]{1,3}[.)]\s+)")
#: A running head or folio that the layout model would class page-header/footer.
_FOLIO = re.compile(r"^\s*(?:page\s+)?[\divxlcIVXLC]{1,6}(?:\s*(?:of|/)\s*\d+)?\s*$", re.I)
#: Share of the page height at top and bottom where running heads and folios sit.
_MARGIN_BAND = 0.08


@dataclass(frozen=True)
class PlainCheck:
    """Whether a page can skip the layout model, and the first reason it cannot."""

    plain: bool
    reason: str = ""


def _is_white(color: Any) -> bool:
    return color is not None and all(c >= 0.98 for c in color)


def _visible_size(rect: Any, page_rect: pymupdf.Rect) -> tuple[float, float]:
    """Width and height of the part of ``rect`` on the page; negative when it is off it."""
    x0, y0, x1, y1 = rect
    return (
        min(x1, page_rect.x1) - max(x0, page_rect.x0),
        min(y1, page_rect.y1) - max(y0, page_rect.y0),
    )


def _segments(line: dict[str, Any]) -> list[tuple[float, float, float]]:
    """A line's runs of spans as (x0, x1, font size), split where a column gap separates them."""
    out: list[tuple[float, float, float]] = []
    for span in line.get("spans", []):
        if not span.get("text", "").strip():
            continue
        x0, _, x1, _ = span["bbox"]
        size = float(span.get("size") or 10.0)
        if out and x0 - out[-1][1] <= _COLUMN_GAP_EM * out[-1][2]:
            out[-1] = (out[-1][0], x1, out[-1][2])
        else:
            out.append((x0, x1, size))
    return out


def _tabular_rows(text: dict[str, Any], page_width: float) -> int:
    """Rows of the page set as cells: two or more runs of text side by side with a column gap
    between them, one of them narrow (a figure, a page number in a table of contents). The two
    columns of a paper are both wide and do not count."""
    lines = sorted(
        (line["bbox"][1], segment)
        for block in text.get("blocks", [])
        for line in block.get("lines", [])
        for segment in _segments(line)
    )
    rows: list[list[tuple[float, float, float]]] = []
    row_top = None
    for top, segment in lines:
        if row_top is None or top - row_top > _ROW_TOLERANCE_PT:
            rows.append([])
            row_top = top
        rows[-1].append(segment)
    count = 0
    for row in rows:
        row.sort()
        gapped = any(b[0] - a[1] > _COLUMN_GAP_EM * a[2] for a, b in itertools.pairwise(row))
        narrow = any(x1 - x0 < _NARROW_CELL * page_width for x0, x1, _ in row)
        if len(row) > 1 and gapped and narrow:
            count += 1
    return count


def plain_page(page: pymupdf.Page, text: dict[str, Any]) -> PlainCheck:
    """Whether ``page`` is running text that the layout model has nothing to add to.

    ``text`` is the page's ``get_text("dict")`` (text blocks only), shared with the caller.
    """
    if _image_share(page) > _MAX_IMAGE_SHARE:
        return PlainCheck(False, "picture")
    drawn = _drawings_reason(page)
    if drawn is not None:
        return PlainCheck(False, drawn)
    if _turned_lines(text) > _MAX_TURNED_LINES:
        return PlainCheck(False, "turned text")
    if _tabular_rows(text, page.rect.width) > _MAX_TABULAR_ROWS:
        return PlainCheck(False, "aligned columns")
    if _math_share(text) > _MAX_MATH_SHARE:
        return PlainCheck(False, "mathematics")
    return PlainCheck(True)


def _image_share(page: pymupdf.Page) -> float:
    """The share of the page's area that pictures cover."""
    import pymupdf

    area = abs(page.rect) or 1.0
    covered = pymupdf.Rect()
    for info in page.get_image_info():
        covered |= pymupdf.Rect(info["bbox"]) & page.rect
    return float(abs(covered) / area)


def _drawings_reason(page: pymupdf.Page) -> str | None:
    """Why the drawings make the page more than text: a visible drawing thicker than a rule
    ("shape") or more than a few rules ("rules"); None when neither (drawings off the page and
    white fills are not seen)."""
    rules = 0
    for path in page.get_cdrawings():
        width, height = _visible_size(path["rect"], page.rect)
        if width < 0 or height < 0:
            continue  # off the page
        if path.get("type") == "f" and _is_white(path.get("fill")) and path.get("color") is None:
            continue  # a white fill on a white page: invisible backgrounds
        if min(width, height) > _RULE_PT:
            return "shape"
        rules += 1
        if rules > _MAX_RULES:
            return "rules"
    return None


def _turned_lines(text: dict[str, Any]) -> int:
    """Lines not written left to right along the page."""
    return sum(
        1
        for block in text.get("blocks", [])
        for line in block.get("lines", [])
        if abs(float(line.get("dir", (1.0, 0.0))[0]) - 1.0) > 0.01
    )


def _math_share(text: dict[str, Any]) -> float:
    """The share of the page's characters set in a mathematics font (0 with no characters)."""
    math_chars = 0
    chars = 0
    for block in text.get("blocks", []):
        for line in block.get("lines", []):
            for span in line.get("spans", []):
                n = len(span.get("text", "").strip())
                chars += n
                if _MATH_FONT.search(span.get("font", "")):
                    math_chars += n
    return math_chars / chars if chars else 0.0


_BOLD_FONT = re.compile(r"bold|black|heavy|semibold|demi|medi", re.IGNORECASE)


_SYNTHETIC_BOLD = 8  # FZ_STEXT_BOLD in a span's char_flags: a font drawn heavier


def _is_bold(span: dict[str, Any]) -> bool:
    return (
        bool(int(span.get("flags", 0)) & 16)
        or bool(int(span.get("char_flags", 0)) & _SYNTHETIC_BOLD)
        or bool(_BOLD_FONT.search(span.get("font", "")))
    )


def _is_italic(span: dict[str, Any]) -> bool:
    return bool(int(span.get("flags", 0)) & 2) or "italic" in str(span.get("font", "")).lower()


def _styled(span: dict[str, Any]) -> bool:
    return _is_bold(span) or _is_italic(span)


def body_size(text: dict[str, Any]) -> float:
    """The font size most characters of the page are set in."""
    sizes: Counter[float] = Counter()
    for block in text.get("blocks", []):
        for line in block.get("lines", []):
            for span in line.get("spans", []):
                sizes[round(float(span.get("size") or 0.0) * 2) / 2] += len(span["text"].strip())
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _spans(line: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in line.get("spans", []) if s.get("text", "").strip()]


def _line_of(spans: list[dict[str, Any]]) -> dict[str, Any]:
    boxes = [s["bbox"] for s in spans]
    return {
        "spans": spans,
        "bbox": (
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        ),
    }


def _run_in_split(line: dict[str, Any]) -> list[dict[str, Any]]:
    """A line that opens with a bold or italic lead-in ("Foreign exchange impacts: The ...")
    as two lines, the lead-in first: the layout model reads the lead-in as a heading."""
    spans = _spans(line)
    lead = 0
    while lead < len(spans) and _styled(spans[lead]):
        lead += 1
    if lead == 0 or lead == len(spans):
        return [line]
    head = "".join(s["text"] for s in spans[:lead]).strip()
    if len(head) > _RUN_IN_MAX_CHARS or not head.endswith((":", ".")):
        return [line]
    return [_line_of(spans[:lead]), _line_of(spans[lead:])]


@dataclass
class _Para:
    lines: list[dict[str, Any]]

    @property
    def spans(self) -> list[dict[str, Any]]:
        return [s for line in self.lines for s in _spans(line)]

    @property
    def bbox(self) -> BBox:
        boxes = [line["bbox"] for line in self.lines]
        return BBox.of(
            (
                min(b[0] for b in boxes),
                min(b[1] for b in boxes),
                max(b[2] for b in boxes),
                max(b[3] for b in boxes),
            )
        )

    @property
    def text(self) -> str:
        return join_lines(line_text(line) for line in self.lines)

    @property
    def text_lines(self) -> list[TextLine]:
        """Where each line's characters sit in :attr:`text`, with the line's box."""
        return join_boxed_lines((line_text(line), line_box(line)) for line in self.lines)[1]


def _style(line: dict[str, Any]) -> tuple[float, bool]:
    spans = _spans(line)
    if not spans:
        return (0.0, False)
    return (round(max(float(s.get("size") or 0.0) for s in spans)), all(_styled(s) for s in spans))


def _paragraphs(block: dict[str, Any]) -> list[_Para]:
    """A text block split where a line opens a list item, and where the style changes between
    a heading-like line and the next (one block often holds a heading and its paragraph)."""
    paras: list[_Para] = []
    lines = [part for line in block.get("lines", []) for part in _run_in_split(line)]
    for line in lines:
        if not line_text(line):
            continue
        opens_item = bool(_BULLET.match(line_text(line)))
        if not paras or opens_item or _style(line) != _style(paras[-1].lines[-1]):
            paras.append(_Para([line]))
        else:
            paras[-1].lines.append(line)
    return _merge_style_runs(paras)


def _merge_style_runs(paras: list[_Para]) -> list[_Para]:
    """Lines split only by style go back together unless one side could be a heading: a bold
    word inside a paragraph must not cut it in two."""
    out: list[_Para] = []
    for para in paras:
        prev = out[-1] if out else None
        if (
            prev is not None
            and not _BULLET.match(line_text(para.lines[0]))
            and len(prev.lines) > 1
            and len(para.lines) > 1
        ):
            prev.lines.extend(para.lines)
        else:
            out.append(para)
    return out


def _kind(para: _Para, body: float, has_body: bool) -> ElementKind:
    """Heading, list item, caption or paragraph, by the cues a reader uses: a bullet or item
    number; a caption label; a heading's size, weight, slant, capitals or section number."""
    text = para.text
    if _BULLET.match(line_text(para.lines[0])) and len(text) > 3:
        return ElementKind.LIST
    if CAPTION_PATTERN.match(text):
        return ElementKind.CAPTION
    if not any(ch.isalpha() for ch in text) or text.rstrip().endswith((",", ";")):
        return ElementKind.TEXT
    spans = para.spans
    size = max(float(s.get("size") or 0.0) for s in spans)
    short = len(text) <= _HEADING_MAX_CHARS and len(para.lines) <= _HEADING_MAX_LINES
    if short and body and size >= body * _HEADING_SIZE_RATIO:
        return ElementKind.TITLE
    if has_body and _body_size_heading(para, text, spans):
        return ElementKind.TITLE
    return ElementKind.TEXT


def _body_size_heading(para: _Para, text: str, spans: list[dict[str, Any]]) -> bool:
    """A heading set no larger than the body: by its weight or slant, capitals or number."""
    # Risk-factor headings of filings are whole sentences set bold or italic.
    styled = all(_is_bold(s) for s in spans) or all(_is_italic(s) for s in spans)
    if styled and len(text) <= _STYLED_HEADING_MAX_CHARS and len(para.lines) <= 4:
        return True
    one_line = len(para.lines) == 1 and len(text) <= _RUN_IN_MAX_CHARS
    letters = [ch for ch in text if ch.isalpha()]
    if one_line and len(letters) > 3 and all(ch.isupper() for ch in letters):
        return True  # "ARTICLE VII – PLAN ADMINISTRATION"
    # "7.01 Plan Administrator:"
    return one_line and bool(_NUMBERED_HEADING.match(text)) and not text.rstrip().endswith(".")


def _merge_headings(blocks: list[RawBlock], paras: list[_Para]) -> list[RawBlock]:
    """A heading set over two or three lines that the text layer split into blocks goes back
    together: same size, one line's height apart at most."""
    out: list[RawBlock] = []
    prev_para: _Para | None = None
    for block, para in zip(blocks, paras, strict=True):
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev_para is not None
            and prev.kind == block.kind == ElementKind.TITLE
            and prev.bbox is not None
            and block.bbox is not None
            and _style(prev_para.lines[-1]) == _style(para.lines[0])
            and 0 <= block.bbox.y0 - prev.bbox.y1 <= (block.font_size or 0.0)
        ):
            joined = f"{prev.text} {block.text}"
            prev.lines = prev.lines + shift_lines(block.lines, len(prev.text) + 1, len(joined))
            prev.text = joined
            prev.bbox = BBox.of(
                (
                    min(prev.bbox.x0, block.bbox.x0),
                    prev.bbox.y0,
                    max(prev.bbox.x1, block.bbox.x1),
                    block.bbox.y1,
                )
            )
        else:
            out.append(block)
        prev_para = para
    return out


def plain_blocks(page: pymupdf.Page, text: dict[str, Any]) -> list[RawBlock]:
    """The page's blocks in content order: headings, list items, captions and paragraphs.

    Single lines in the top and bottom bands that are folios ("17", "Page 3 of 9") or set
    smaller than the body are running heads and footers; like the layout model's
    page-header/footer classes they are left out (the page keeps them as margin text).
    """
    body = body_size(text)
    height = page.rect.height
    paras = [p for block in text.get("blocks", []) for p in _paragraphs(block)]
    has_body = any(len(p.text) > _HEADING_MAX_CHARS for p in paras)
    kept: list[_Para] = []
    blocks: list[RawBlock] = []
    for para in paras:
        box = para.bbox
        in_band = box.y1 <= _MARGIN_BAND * height or box.y0 >= (1 - _MARGIN_BAND) * height
        size = max(float(s.get("size") or 0.0) for s in para.spans)
        if in_band and len(para.lines) == 1 and (size < body or _FOLIO.match(para.text)):
            continue
        kind = _kind(para, body, has_body)
        font_size = size if kind == ElementKind.TITLE else None
        blocks.append(
            RawBlock(kind, para.text, box, PARSER_NAME, font_size=font_size, lines=para.text_lines)
        )
        kept.append(para)
    return _merge_headings(blocks, kept)
