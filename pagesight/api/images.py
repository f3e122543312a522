"""Page images as the API gives them: the encoded bytes and their media type, the formats on
offer, and the ``highlight`` parameter (evidence boxes in PDF points).

Boxes arrive in PDF points (the unit of every bbox PageSight returns), so a client can pass a
search hit's ``evidence`` straight back as ``highlight=x0,y0,x1,y1;...``. The drawing itself is
:func:`pagesight.ingestion.highlight.render_page_image`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.types import BBox

MAX_HIGHLIGHTS = 50
#: Largest highlight coordinate, in points (PDF pages are at most 14,400 points on a side).
MAX_COORDINATE = 20_000.0
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg"}


@dataclass(frozen=True)
class PageImage:
    """Encoded image bytes and their media type, as the API returns them."""

    data: bytes
    media_type: str


def parse_highlight(value: str | None) -> list[BBox]:
    """``"x0,y0,x1,y1;x0,y0,x1,y1"`` -> boxes; anything malformed is INVALID_REQUEST."""
    if not value:
        return []
    boxes: list[BBox] = []
    for part in value.split(";"):
        if not part.strip():
            continue
        try:
            numbers = [float(v) for v in part.split(",")]
            if len(numbers) != 4:
                raise ValueError("four numbers per box")
            if not all(math.isfinite(n) and abs(n) <= MAX_COORDINATE for n in numbers):
                # a box far off the page would cost seconds of drawing per request
                raise ValueError(f"coordinates must be finite, within ±{MAX_COORDINATE:g} points")
            boxes.append(BBox.of(numbers))
        except ValueError as exc:
            raise PageSightError(
                ErrorCode.INVALID_REQUEST,
                Stage.GATEWAY,
                f"highlight must be 'x0,y0,x1,y1' boxes in PDF points joined by ';' ({exc})",
            ) from exc
    if len(boxes) > MAX_HIGHLIGHTS:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST, Stage.GATEWAY, f"at most {MAX_HIGHLIGHTS} highlight boxes"
        )
    return boxes


def media_type_of(image_format: str) -> str:
    """The media type of ``image_format``; an unknown format is INVALID_REQUEST."""
    if image_format not in MEDIA_TYPES:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.GATEWAY,
            f"format must be one of {sorted(MEDIA_TYPES)}",
        )
    return MEDIA_TYPES[image_format]
