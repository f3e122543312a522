"""Evidence boxes drawn on a stored page image (what ``GET .../pages/{n}/image?highlight=``
returns), re-encoded as PNG or JPEG.

Boxes arrive in PDF points (the unit of every bbox PageSight returns) and are scaled to the
stored image's pixels by the page's size in points (:mod:`pagesight.ingestion.render` wrote the
image).

A text element's box is tight around its glyphs (the layout parser's box is the union of the
glyphs' own boxes), so a highlight must never cover any pixel inside it: the box is widened to
whole pixels (never narrowed), tinted, and outlined *outside* that area. (An outline drawn on
the box itself, as Pillow's ``width`` does, paints over the outermost stroke-width of ink: the
lower half of a block's last line, the top of its first.) URLs round boxes outward too.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from PIL import Image, ImageDraw

from pagesight.core.types import BBox

#: The encodings on offer (the API's formats: :data:`pagesight.api.images.MEDIA_TYPES`).
IMAGE_FORMATS = ("png", "jpeg")


def render_page_image(
    path: Path,
    page_size_pt: tuple[float, float],
    boxes: list[BBox],
    image_format: str = "png",
) -> bytes:
    """The stored page image re-encoded, with ``boxes`` lightly filled and outlined around.

    Every pixel the box touches is only tinted; the outline lies outside them (so a box that
    touches the image's edge has no outline on that side). ``image_format`` is one of
    :data:`IMAGE_FORMATS` (callers have checked the request's: anything else is a ValueError).
    """
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image format must be one of {IMAGE_FORMATS}, not {image_format!r}")
    with Image.open(path) as stored:
        image = stored.convert("RGB")
    if boxes:
        width_pt, height_pt = page_size_pt
        sx, sy = image.width / max(width_pt, 1e-6), image.height / max(height_pt, 1e-6)
        overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
        draw = ImageDraw.Draw(overlay)
        stroke = max(2, round(min(image.size) / 300))
        for box in boxes:
            left, top, right, bottom = box_pixels(box, sx, sy)
            draw.rectangle((left, top, right, bottom), fill=(255, 200, 0, 60))
            draw.rectangle(
                (left - stroke, top - stroke, right + stroke, bottom + stroke),
                outline=(230, 60, 0, 255),
                width=stroke,
            )
        image = Image.alpha_composite(image.convert("RGBA"), overlay).convert("RGB")
    out = io.BytesIO()
    if image_format == "jpeg":
        image.save(out, format="JPEG", quality=85)
    else:
        image.save(out, format="PNG", optimize=False)
    return out.getvalue()


def box_pixels(box: BBox, sx: float, sy: float) -> tuple[int, int, int, int]:
    """The inclusive pixel rectangle (left, top, right, bottom) covering ``box`` scaled by
    (``sx``, ``sy``): every pixel the box touches, even partly (edges round outward; a box
    without area still covers one pixel row or column)."""
    eps = 1e-6  # a scaled edge that is a whole number up to float noise stays on it
    left = math.floor(box.x0 * sx + eps)
    top = math.floor(box.y0 * sy + eps)
    right = max(left, math.ceil(box.x1 * sx - eps) - 1)
    bottom = max(top, math.ceil(box.y1 * sy - eps) - 1)
    return left, top, right, bottom
