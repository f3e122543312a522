"""Where a quote is printed: characters of a chunk's text -> pages and boxes.

A chunk may run across a page break, and the answer step sees it once per page (a
:class:`~pagesight.core.types.Passage` per page, all with the whole chunk text). A quote must be
cited on the page its characters are printed on, not the page of the passage it was read from, with
the boxes of exactly those characters. The chunk's ``spans``
(:class:`~pagesight.core.types.TextSpan`: a character range, its page and the box of its printed
line) say that; this module turns a character range of the text into one
:class:`~pagesight.core.types.QuotePart` per page it touches.

A chunk indexed before spans existed has none: its quotes are then placed on the passage's own
page with its element boxes, as before (re-ingesting the document adds the spans).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pagesight.core.types import BBox, QuotePart, TextSpan


def quote_parts(
    text: str,
    ranges: Sequence[tuple[int, int]],
    spans: Sequence[TextSpan],
    fallback_page: int,
    fallback_boxes: Sequence[BBox] = (),
) -> list[QuotePart]:
    """The parts of the quote made of ``text``'s ``ranges`` (one range for a sentence; a table
    cell's label and value), one per page in reading order, each with the verbatim characters
    on that page (pieces joined by " | ") and the boxes of the spans they overlap.

    Without spans (an older index), or where no span covers the range, the whole quote goes on
    ``fallback_page`` with ``fallback_boxes``.
    """
    pieces: dict[int, list[tuple[int, int]]] = {}
    boxes: dict[int, list[BBox]] = {}
    order: list[int] = []
    for start, end in ranges:
        for span in spans:
            a, b = max(start, span.start), min(end, span.end)
            if b <= a or not text[a:b].strip():
                continue
            page = span.page_number
            if page not in pieces:
                pieces[page] = []
                boxes[page] = []
                order.append(page)
            pieces[page].append((a, b))
            if span.bbox not in boxes[page]:
                boxes[page].append(span.bbox)
    if not order:
        whole = " | ".join(_collapse(text[a:b]) for a, b in ranges if text[a:b].strip())
        return [QuotePart(page_number=fallback_page, text=whole, bboxes=list(fallback_boxes))]
    parts = []
    for page in order:
        joined = " | ".join(_collapse(text[a:b]) for a, b in _merged(pieces[page], text, ranges))
        parts.append(QuotePart(page_number=page, text=joined, bboxes=boxes[page]))
    return parts


def _merged(
    pieces: list[tuple[int, int]], text: str, ranges: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Adjacent pieces of one range joined into one (a sentence over three lines is one
    piece of text); pieces of different ranges stay apart."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(pieces):
        joins = out and (
            a < out[-1][1]
            or (_same_range(out[-1][0], a, ranges) and not text[out[-1][1] : a].strip())
        )
        if joins:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _same_range(a: int, b: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(start <= a < end and start <= b < end for start, end in ranges)


def find_quote(text: str, quote: str) -> tuple[int, int] | None:
    """The character range of ``quote`` in ``text``, whitespace-insensitive (quotes are shown
    with whitespace collapsed); None when it is not there verbatim."""
    words = quote.split()
    if not words:
        return None
    pattern = r"\s+".join(re.escape(word) for word in words)
    match = re.search(pattern, text)
    return (match.start(), match.end()) if match else None


def _collapse(text: str) -> str:
    return " ".join(text.split())
