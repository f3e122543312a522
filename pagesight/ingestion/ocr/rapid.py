"""RapidOCR 3.x (PP-OCR text detection and recognition on ONNX Runtime).

The wheel ships its models (``rapidocr/models``: PP-OCRv6 small detector and multilingual
recogniser, plus a 0/180 line classifier we do not use). We point RapidOCR at those files
explicitly: left to itself it resolves models by URL and downloads any file whose checksum it does
not find, which must never happen on an offline worker; a missing file is an ``OCR_FAILED`` at
warm-up instead.

Words: RapidOCR's word boxes (``return_word_box``: CTC character positions, a box per Latin word
and per CJK character) are used when they line up with the line's text; otherwise the line is
split on spaces and each word gets the share of the line's width its characters take.

Rotation: when the Tesseract binary is present, its OSD decides which way is up (as in
:mod:`pagesight.ingestion.ocr.tesseract`) and the page is turned upright before detection; without
it the page is read as given. RapidOCR's own per-line 0/180 classifier (the packaged
``ch_ppocr_mobile_v2.0_cls``) is always off: it flips long upright lines by mistake, taking CER on
a 10-K page in 8 pt print from 0.3 % to 9.4 % (2.2 % to 8.9 % on an earnings release) at the same
speed, and on an upside-down page it left four of five lines unflipped (scores under its 0.9
threshold), so it does not even serve as a fallback.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import RapidOcrOptions
from pagesight.ingestion.ocr.base import (
    OcrLine,
    OcrResult,
    OcrWord,
    PixelBox,
    clip_box,
    sort_lines_in_reading_order,
    union_box,
)
from pagesight.ingestion.ocr.preprocess import line_to_original_frame, rotate_clockwise
from pagesight.ingestion.ocr.tesseract import (
    detect_orientation,
    tesseract_languages,
    upright_rotation,
)

logger = logging.getLogger(__name__)

#: PP-OCRv6's recogniser is one multilingual model (Chinese, English, Japanese, Latin scripts).
RAPIDOCR_LANGUAGE = "multi"

_WHITESPACE = re.compile(r"\s+")

# A quadrilateral as RapidOCR returns it: four (x, y) points.
Quad = Sequence[Sequence[float]]


def packaged_model_paths() -> dict[str, Path]:
    """The detection and recognition ONNX files inside the rapidocr wheel."""
    import rapidocr

    models_dir = Path(rapidocr.__file__).resolve().parent / "models"
    paths: dict[str, Path] = {}
    for task in ("det", "rec"):
        found = sorted(models_dir.glob(f"*_{task}_*.onnx"))
        if len(found) != 1:
            raise PageSightError(
                ErrorCode.OCR_FAILED,
                Stage.OCR,
                f"expected one packaged RapidOCR {task} model in {models_dir}, found "
                f"{[p.name for p in found]}; reinstall rapidocr>=3.10 (its wheel ships the models)",
            )
        paths[task] = found[0]
    return paths


class RapidOcrEngine:
    """RapidOCR behind :class:`~pagesight.ingestion.ocr.base.OcrEngine`."""

    name = "rapidocr"

    def __init__(
        self, options: RapidOcrOptions | None = None, *, detect_orientation: bool = True
    ) -> None:
        self.options = options or RapidOcrOptions()
        self._want_orientation = detect_orientation
        self._use_osd = False
        self._engine: Any = None

    def warm_up(self) -> None:
        """Load the detection and recognition models from the wheel; check for Tesseract OSD."""
        if self._engine is not None:
            return
        try:
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise PageSightError(
                ErrorCode.OCR_FAILED, Stage.OCR, f"rapidocr is not installed: {exc}"
            ) from exc
        if self._want_orientation:
            try:
                self._use_osd = "osd" in tesseract_languages()
            except PageSightError as exc:
                logger.info("no Tesseract OSD for RapidOCR page orientation (%s)", exc.message)
        models = packaged_model_paths()
        params = {
            # "warning" would log every page without text ("text detection result is empty").
            "Global.log_level": "error",
            # Our own min_confidence filter runs after word alignment; RapidOCR's own filter
            # drops lines without dropping their word boxes, which shifts the two out of step.
            "Global.text_score": 0.0,
            # The line classifier does more harm than good (module docstring).
            "Global.use_cls": False,
            "Det.model_path": str(models["det"]),
            "Rec.model_path": str(models["rec"]),
        }
        try:
            engine = RapidOCR(params=params)
            # RapidOCR loads each model on first use; loading them here moves the cost (and any
            # failure) to start-up. These loaders are not public API: if a release renames them,
            # the models simply load on the first page.
            for loader in ("_load_det_model", "_load_rec_model"):
                if callable(getattr(engine, loader, None)):
                    getattr(engine, loader)()
        except Exception as exc:
            raise PageSightError(
                ErrorCode.OCR_FAILED, Stage.OCR, f"RapidOCR failed to load its models: {exc}"
            ) from exc
        self._engine = engine

    def recognize(self, image: Image.Image) -> OcrResult:
        self.warm_up()
        original_size = image.size
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        rotation = upright_rotation(detect_orientation(rgb.convert("L"))) if self._use_osd else 0
        upright = rotate_clockwise(rgb, rotation)

        try:
            output = self._engine(upright, return_word_box=True)
        except Exception as first_exc:
            # RapidOCR 3.10 drops lines without word boxes from its word list and then indexes
            # that list by line number, which can fail; the lines themselves are fine, so read
            # the page again without word boxes (words then get proportional boxes).
            logger.debug("RapidOCR with word boxes failed (%s); retrying without", first_exc)
            try:
                output = self._engine(upright, return_word_box=False)
            except Exception as exc:
                raise PageSightError(
                    ErrorCode.OCR_FAILED, Stage.OCR, f"RapidOCR failed on the page: {exc}"
                ) from exc

        lines = _lines_from_output(output, upright.size, self.options.min_confidence)
        lines = sort_lines_in_reading_order(lines)
        return OcrResult(
            lines=[line_to_original_frame(line, rotation, original_size) for line in lines],
            rotation_applied=rotation,
            image_size=original_size,
            language=RAPIDOCR_LANGUAGE,
            engine=self.name,
        )


def _lines_from_output(output: Any, size: tuple[int, int], min_confidence: float) -> list[OcrLine]:
    boxes = getattr(output, "boxes", None)
    texts = getattr(output, "txts", None)
    scores = getattr(output, "scores", None)
    if boxes is None or texts is None or scores is None:
        return []  # nothing detected (RapidOCR returns an empty output object)
    width, height = size
    word_groups = _align_word_groups(texts, getattr(output, "word_results", ()) or ())

    lines: list[OcrLine] = []
    for quad, text, score, group in zip(boxes, texts, scores, word_groups, strict=True):
        text = str(text).strip()
        if not text or float(score) < min_confidence:
            continue
        line_box = clip_box(_quad_to_box(quad), width, height)
        if group is not None:
            words = [
                OcrWord(
                    text=str(word_text),
                    bbox_px=clip_box(_quad_to_box(word_quad), width, height),
                    confidence=_unit(word_score),
                )
                for word_text, word_score, word_quad in group
                if str(word_text).strip()
            ]
        else:
            words = _split_line_into_words(text, line_box, _unit(score))
        lines.append(
            OcrLine(
                text=text,
                bbox_px=union_box([line_box, *(w.bbox_px for w in words)]) if words else line_box,
                confidence=_unit(score),
                words=words,
            )
        )
    return lines


def _align_word_groups(
    texts: Sequence[str], word_results: Sequence[Any]
) -> list[list[tuple[str, float, Quad]] | None]:
    """Pair each line with its word boxes, or ``None`` where RapidOCR gave none for it.

    RapidOCR omits lines without word boxes from ``word_results`` (and returns raw decoder output
    when any line lacks them), so the two sequences are matched by text, not index: a group
    belongs to a line when its words, concatenated, spell the line without spaces.
    """
    groups = [list(group) for group in word_results if _is_word_group(group)]
    aligned: list[list[tuple[str, float, Quad]] | None] = []
    next_group = 0
    for text in texts:
        squashed = _WHITESPACE.sub("", str(text))
        if next_group < len(groups):
            candidate = groups[next_group]
            if _WHITESPACE.sub("", "".join(str(w[0]) for w in candidate)) == squashed:
                aligned.append(candidate)
                next_group += 1
                continue
        aligned.append(None)
    return aligned


def _is_word_group(group: Any) -> bool:
    if not isinstance(group, (tuple, list)) or not group:
        return False
    for item in group:
        if not (isinstance(item, (tuple, list)) and len(item) == 3 and isinstance(item[0], str)):
            return False
        quad = item[2]
        if quad is None or len(quad) != 4:
            return False
    return True


def _split_line_into_words(text: str, line_box: PixelBox, confidence: float) -> list[OcrWord]:
    """Words of a line without word boxes: split on spaces, widths proportional to characters."""
    x0, y0, x1, y1 = line_box
    per_char = (x1 - x0) / max(1, len(text))
    return [
        OcrWord(
            text=match.group(),
            bbox_px=(
                x0 + math.floor(match.start() * per_char),
                y0,
                x0 + math.ceil(match.end() * per_char),
                y1,
            ),
            confidence=confidence,
        )
        for match in re.finditer(r"\S+", text)
    ]


def _quad_to_box(quad: Quad) -> PixelBox:
    xs = [float(point[0]) for point in quad]
    ys = [float(point[1]) for point in quad]
    return (math.floor(min(xs)), math.floor(min(ys)), math.ceil(max(xs)), math.ceil(max(ys)))


def _unit(score: Any) -> float:
    return min(max(float(score), 0.0), 1.0)
