"""Links that results carry: the public API's page-image URL of a page with boxes drawn.

Search hits and answer citations link to their page image. The URL is built from ids alone, so
the query engine can attach it without knowing anything of the HTTP layer that serves it
(``GET /v1/documents/{doc_id}/pages/{n}/image``, :mod:`pagesight.gateway.app`).
"""

from __future__ import annotations

import math
from urllib.parse import quote

from pagesight.core.types import BBox


def page_image_url(doc_id: str, page_number: int, boxes: list[BBox]) -> str:
    """The relative URL of a page image with ``boxes`` drawn (what a search hit links to)."""
    url = f"/v1/documents/{quote(doc_id, safe='')}/pages/{page_number}/image"
    if boxes:
        url += "?highlight=" + ";".join(
            f"{_down(b.x0):.1f},{_down(b.y0):.1f},{_up(b.x1):.1f},{_up(b.y1):.1f}" for b in boxes
        )
    return url


def _down(value: float) -> float:
    """``value`` rounded down to 0.1 pt (a box's left/top edge: never moved inwards)."""
    return math.floor(round(value * 10, 6)) / 10


def _up(value: float) -> float:
    """``value`` rounded up to 0.1 pt (a box's right/bottom edge)."""
    return math.ceil(round(value * 10, 6)) / 10
