"""Text-layer lines as readable strings: spans joined with the spaces producers drop, lines
joined into paragraphs with end-of-line hyphenation undone, and where each line landed in the
joined text (:func:`join_boxed_lines`), so every character knows the line box it is printed in."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from pagesight.core.types import BBox, TextLine


def line_text(line: dict[str, Any]) -> str:
    """Join a line's spans, putting back the spaces the extractor dropped.

    The layout helper drops whitespace-only spans, and some producers place every word as its
    own span; a space goes between two spans when a visible gap (> 0.15 em) separates them.
    """
    out = ""
    prev_x1: float | None = None
    for span in line.get("spans", []):
        text = span.get("text", "")
        if not text.strip():
            continue
        x0 = span.get("bbox", (0.0,))[0]
        gap_needed = 0.15 * float(span.get("size") or 10.0)
        if out and not out.endswith(" ") and prev_x1 is not None and x0 - prev_x1 > gap_needed:
            out += " "
        out += text
        prev_x1 = span.get("bbox", (0.0, 0.0, x0))[2]
    return " ".join(out.split())


def line_box(line: dict[str, Any]) -> BBox | None:
    """A text-layer line's box (``line["bbox"]``, PDF points, top-left origin); ``None`` when
    it has none or it is not finite."""
    try:
        values = [float(v) for v in line["bbox"]]
    except (KeyError, TypeError, ValueError):
        return None
    if len(values) != 4 or not all(math.isfinite(v) for v in values):
        return None
    return BBox.of((values[0], values[1], values[2], values[3]))


def join_lines_with_ranges(lines: Iterable[str]) -> tuple[str, list[tuple[int, int] | None]]:
    """:func:`join_lines`, and for each input line the ``(start, end)`` range of the joined text
    it became (``None`` for an empty line, which joins nothing).

    Lines are joined with one space; a line ending in "-" before a line opening in lower case
    loses the hyphen (its range ends before it) and the next line follows without a space. The
    ranges are increasing and do not overlap; the joining spaces belong to no line. A range may
    be empty (a line that was nothing but the hyphen).
    """
    out = ""
    ranges: list[tuple[int, int] | None] = []
    last: int | None = None  # index in ranges of the line that ends ``out``
    for line in lines:
        if not line:
            ranges.append(None)
            continue
        if out.endswith("-") and line[:1].islower():
            out = out[:-1]
            if last is not None:
                start, end = ranges[last] or (0, 0)
                ranges[last] = (start, min(end, len(out)))
        elif out:
            out += " "
        ranges.append((len(out), len(out) + len(line)))
        out += line
        last = len(ranges) - 1
    return out, ranges


def join_lines(lines: Iterable[str]) -> str:
    """Join text lines into a paragraph, undoing end-of-line hyphenation."""
    return join_lines_with_ranges(lines)[0]


def join_boxed_lines(lines: Iterable[tuple[str, BBox | None]]) -> tuple[str, list[TextLine]]:
    """Join ``(text, box)`` lines as :func:`join_lines` does; each non-empty line with a box
    becomes a :class:`TextLine` over the characters it contributed."""
    pairs = list(lines)
    text, ranges = join_lines_with_ranges(line for line, _ in pairs)
    out = [
        TextLine(start=span[0], end=span[1], bbox=box)
        for (_, box), span in zip(pairs, ranges, strict=True)
        if span is not None and box is not None and span[1] > span[0]
    ]
    return text, out


def shift_lines(lines: Iterable[TextLine], offset: int, length: int) -> list[TextLine]:
    """``lines`` moved by ``offset`` characters and clipped to ``[0, length)``: the ranges of a
    text after a prefix was cut (negative ``offset``) or that was appended after ``offset``
    characters of another; lines left empty are dropped."""
    out = []
    for line in lines:
        start = min(max(line.start + offset, 0), length)
        end = min(max(line.end + offset, 0), length)
        if end > start:
            out.append(TextLine(start=start, end=end, bbox=line.bbox))
    return out
