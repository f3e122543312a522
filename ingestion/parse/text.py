"""Text-layer lines as readable strings: spans joined with the spaces producers drop, lines
joined into paragraphs with end-of-line hyphenation undone."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


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


def join_lines(lines: Iterable[str]) -> str:
    """Join text lines into a paragraph, undoing end-of-line hyphenation."""
    out = ""
    for line in lines:
        if not line:
            continue
        if out.endswith("-") and line[:1].islower():
            out = out[:-1] + line
        elif out:
            out = f"{out} {line}"
        else:
            out = line
    return out
