"""Engine-neutral page blocks and their assembly into typed :class:`Element` objects.

Every page parser (PDF layout model, OCR, VLM later) emits :class:`RawBlock` lists; one
assembler then resolves heading levels across the whole document, builds ``section_path``,
attaches captions to tables and figures, and assigns deterministic ids. Keeping that logic in one
place means OCR pages and born-digital pages get the same structure rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pagesight.core.ids import element_id
from pagesight.core.types import BBox, Element, ElementKind, TextLine
from pagesight.ingestion.parse.text import shift_lines

#: Text that opens a caption: a label, a number, then punctuation ("Figure 3:", "Table 2.",
#: "Exhibit 1 -", "図1"). Running text that merely starts with "Table 3 shows" does not match.
CAPTION_PATTERN = re.compile(
    r"^\s*(?:(?:fig(?:ure)?|table|tab|chart|exhibit|graph|diagram|plate)\.?\s*"
    r"[\dIVX]+[A-Za-z]?(?:\.\d+)*\s*(?:[:.|\-–—]|$)|[図表]\s*[\d０-９]+)",
    re.IGNORECASE,
)
_CAPTION_GAP_PT = 36.0  # a caption box this close to a table/figure belongs to it
_TITLE_GAP_PT = 60.0  # a heading this close above a figure names it (chart titles)
_SECTION_NUMBER = re.compile(r"^\s*(\d{1,2}(?:\.\d{1,2}){0,4})\.?\s+\D")
_MIN_FIGURE_SIDE_PT = 36.0  # smaller wordless pictures are icons, logos, rules


@dataclass
class RawBlock:
    """One region of a page as an engine saw it, before document-level structure."""

    kind: ElementKind
    text: str
    bbox: BBox | None
    parser: str
    confidence: float | None = None
    font_size: float | None = None  # headings: used to rank levels across the document
    heading_level: int | None = None  # headings: set from the outline when it matches
    caption: str | None = None
    consumed: bool = field(default=False, repr=False)  # a caption merged into its owner
    #: character ranges of ``text`` and the box of the line each was printed in (PDF points);
    #: empty when the engine gives no line geometry (tables, figures, VLM elements)
    lines: list[TextLine] = field(default_factory=list, repr=False)
    #: tables: the rows of cell texts the engine found (``Element.cells``; ``text`` is rendered
    #: from them); None when the table came as markdown (a VLM's reply)
    cells: list[list[str]] | None = field(default=None, repr=False)


def _vertical_gap(a: BBox, b: BBox) -> float:
    if a.y1 <= b.y0:
        return b.y0 - a.y1
    if b.y1 <= a.y0:
        return a.y0 - b.y1
    return 0.0


def _overlaps_horizontally(a: BBox, b: BBox) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 0.2 * min(a.width, b.width)


def attach_captions(blocks: list[RawBlock]) -> None:
    """Give each table/figure/equation on a page its caption.

    Preference: a layout CAPTION block next to it (consumed); else a text block next to it that
    reads like a caption ("Figure 3 ..."; consumed); else, for figures, the heading right above
    (chart titles in reports; kept as a heading too, since it also names the section).
    """
    for block in blocks:
        wordless_figure = block.kind == ElementKind.FIGURE and not block.text.strip()
        if wordless_figure and block.bbox:
            # An icon, a logo or a rule: nothing to retrieve it by.
            block.consumed = min(block.bbox.width, block.bbox.height) < _MIN_FIGURE_SIDE_PT
    owners = [
        b
        for b in blocks
        if b.kind in (ElementKind.TABLE, ElementKind.FIGURE) and b.bbox and not b.consumed
    ]
    for owner in owners:
        assert owner.bbox is not None
        candidates: list[tuple[float, RawBlock]] = []
        for other in blocks:
            if other is owner or other.consumed or other.bbox is None:
                continue
            if not _overlaps_horizontally(owner.bbox, other.bbox):
                continue
            gap = _vertical_gap(owner.bbox, other.bbox)
            looks_like_caption = other.kind == ElementKind.CAPTION or (
                other.kind in (ElementKind.TEXT, ElementKind.TITLE)
                and bool(CAPTION_PATTERN.match(other.text))
            )
            if looks_like_caption and gap <= _CAPTION_GAP_PT:
                # A block the layout model called a caption beats text that reads like one.
                rank = 0.0 if other.kind == ElementKind.CAPTION else _CAPTION_GAP_PT
                candidates.append((rank + gap, other))
        if candidates:
            _, best = min(candidates, key=lambda item: item[0])
            owner.caption = best.text
            best.consumed = True
            continue
        if owner.kind == ElementKind.FIGURE:
            above = [
                b
                for b in blocks
                if b.kind == ElementKind.TITLE
                and b.bbox is not None
                and b.bbox.y1 <= owner.bbox.y0 + 2
                and owner.bbox.y0 - b.bbox.y1 <= _TITLE_GAP_PT
                and _overlaps_horizontally(owner.bbox, b.bbox)
            ]
            if above:
                owner.caption = max(above, key=lambda b: b.bbox.y1 if b.bbox else 0).text


def _normalise_heading(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().lower()


class ElementAssembler:
    """Turns per-page raw blocks into ordered, identified elements with section paths.

    Heading levels come from the PDF outline when a heading matches an outline entry, else from
    its section number ("4.1" is level 2), else from its font size ranked across the whole
    document (largest = level 1). Headings the outline does not know sit below its deepest entry.
    """

    def __init__(self, outline: list[tuple[int, str, int]] | None = None) -> None:
        self._outline = {
            (page, _normalise_heading(title)): level
            for level, title, page in (outline or [])
            if title.strip()
        }
        self._outline_depth = max((level for level, _, _ in outline or []), default=0)

    def assemble(
        self, doc_id: str, version: str, pages: list[tuple[int, list[RawBlock]]]
    ) -> list[Element]:
        font_sizes = sorted(
            {
                round(b.font_size)
                for _, blocks in pages
                for b in blocks
                if b.kind == ElementKind.TITLE and b.font_size
            },
            reverse=True,
        )
        stack: list[tuple[int, str]] = []
        elements: list[Element] = []
        for page_number, blocks in pages:
            attach_captions(blocks)
            seq = 0
            for block in blocks:
                if block.consumed or not (block.text.strip() or block.caption):
                    continue
                if block.kind == ElementKind.TITLE:
                    level = self._level(page_number, block, font_sizes)
                    while stack and stack[-1][0] >= level:
                        stack.pop()
                    stack.append((level, " ".join(block.text.split())))
                # A figure's text is what is written in it; one without any is its caption.
                text = block.text.strip() or (block.caption or "").strip()
                lead = len(block.text) - len(block.text.lstrip())
                lines = shift_lines(block.lines, -lead, len(text)) if block.text.strip() else []
                elements.append(
                    Element(
                        element_id=element_id(doc_id, version, page_number, seq),
                        doc_id=doc_id,
                        kind=block.kind,
                        text=text,
                        page_number=page_number,
                        seq=seq,
                        bbox=block.bbox,
                        section_path=[title for _, title in stack],
                        parser=block.parser,
                        confidence=block.confidence,
                        caption=block.caption,
                        lines=lines,
                        cells=block.cells,
                    )
                )
                seq += 1
        return elements

    def _level(self, page_number: int, block: RawBlock, font_sizes: list[int]) -> int:
        if block.heading_level:
            return block.heading_level
        outline_level = self._outline.get((page_number, _normalise_heading(block.text)))
        if outline_level is not None:
            return outline_level
        numbered = _SECTION_NUMBER.match(block.text)
        if numbered:  # "4 Methods" -> 1, "4.1 NCF" -> 2: numbering beats equal font sizes
            return self._outline_depth + min(numbered.group(1).count(".") + 1, 6)
        if block.font_size and round(block.font_size) in font_sizes:
            rank = font_sizes.index(round(block.font_size)) + 1
        else:
            rank = len(font_sizes) + 1
        return self._outline_depth + min(rank, 6)
