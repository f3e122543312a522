"""What every OCR engine returns, the protocol engines implement, and text helpers they share.

All boxes are integer pixel boxes ``(x0, y0, x1, y1)`` in the frame of the image the caller passed
to :meth:`OcrEngine.recognize`, top-left origin, even when the engine rotated the page internally
to read it. A caller that rendered a PDF page at ``dpi`` therefore converts to PDF points by one
scale factor (``72 / dpi``) and never has to undo a rotation it did not ask for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Protocol, runtime_checkable

from PIL import Image

#: ``(x0, y0, x1, y1)`` in pixels of the original image, top-left origin, x1 >= x0, y1 >= y0.
PixelBox = tuple[int, int, int, int]


@dataclass(frozen=True)
class OcrWord:
    text: str
    bbox_px: PixelBox
    confidence: float  # 0..1, the engine's own score (not calibrated across engines)


@dataclass(frozen=True)
class OcrLine:
    text: str
    bbox_px: PixelBox
    confidence: float  # 0..1, mean of the line's word confidences
    words: list[OcrWord] = field(default_factory=list)


@dataclass(frozen=True)
class OcrResult:
    """One page image's text, lines in reading order.

    ``rotation_applied`` is the clockwise rotation, in degrees (0, 90, 180 or 270), that the engine
    applied to the original image to make its text upright before reading it. Boxes are already
    mapped back into the original frame; the value is reported so a caller can tell that the page
    is displayed sideways (and, e.g., store an upright page image).
    """

    lines: list[OcrLine]
    rotation_applied: int
    image_size: tuple[int, int]  # (width, height) of the original image
    language: str
    engine: str
    #: Seconds per stage of this page (e.g. ``orientation``, ``detection``, ``recognition``), where
    #: the engine reports them: the profile that decides which stage to make cheaper.
    stage_seconds: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    @property
    def words(self) -> list[OcrWord]:
        return [word for line in self.lines for word in line.words]


@runtime_checkable
class OcrEngine(Protocol):
    """An OCR engine behind one call; construction is cheap, models load in :meth:`warm_up`.

    ``warm_up`` also checks that the engine can run at all (binary, language data, model files) and
    raises ``PageSightError(OCR_FAILED)`` when it cannot, so a worker fails at start-up rather than
    on its first scanned page. ``recognize`` calls it on first use when nobody did.
    """

    name: str

    def warm_up(self) -> None: ...

    def recognize(self, image: Image.Image) -> OcrResult: ...


# --- text helpers --------------------------------------------------------------------------------

# Han (incl. extension A and compatibility ideographs), kana, CJK punctuation, full-width forms.
_CJK_CLASS = (
    r"\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uf900-\ufaff\uff00-\uffef"
)
_SPACE_BETWEEN_CJK = re.compile(rf"(?<=[{_CJK_CLASS}])\s+(?=[{_CJK_CLASS}])")
_CJK_CHAR = re.compile(rf"[{_CJK_CLASS}]")


def remove_spaces_between_cjk(text: str) -> str:
    """Drop the spaces Tesseract's ``jpn`` model puts between CJK characters.

    Japanese has no inter-word spaces; left in, they break substring search, BM25 tokenisation and
    any comparison with a born-digital text layer. Spaces next to Latin text are kept.
    """
    return _SPACE_BETWEEN_CJK.sub("", text)


def contains_cjk(text: str) -> bool:
    return _CJK_CHAR.search(text) is not None


def union_box(boxes: Iterable[PixelBox]) -> PixelBox:
    boxes = list(boxes)
    if not boxes:
        raise ValueError("union of no boxes")
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def clip_box(box: PixelBox, width: int, height: int) -> PixelBox:
    x0, y0, x1, y1 = box
    x0, x1 = sorted((min(max(x0, 0), width), min(max(x1, 0), width)))
    y0, y1 = sorted((min(max(y0, 0), height), min(max(y1, 0), height)))
    return (x0, y0, x1, y1)


def sort_lines_in_reading_order(lines: Sequence[OcrLine]) -> list[OcrLine]:
    """Top-to-bottom rows, left-to-right within a row.

    Detectors emit lines in no useful order, and two boxes of the same visual row rarely share a
    top edge (a '$' cell sits a few pixels above its neighbours), so lines whose vertical centres
    are within half a typical line height of the row's first line are one row. Multi-column
    layouts come out row-interleaved; ordering columns is a layout step, not OCR.
    """
    if len(lines) < 2:
        return list(lines)
    typical_height = median(max(1, line.bbox_px[3] - line.bbox_px[1]) for line in lines)
    tolerance = 0.5 * typical_height

    def centre_y(line: OcrLine) -> float:
        return (line.bbox_px[1] + line.bbox_px[3]) / 2

    rows: list[list[OcrLine]] = []
    for line in sorted(lines, key=lambda ln: (centre_y(ln), ln.bbox_px[0])):
        if rows and abs(centre_y(line) - centre_y(rows[-1][0])) <= tolerance:
            rows[-1].append(line)
        else:
            rows.append([line])
    return [line for row in rows for line in sorted(row, key=lambda ln: ln.bbox_px[0])]
