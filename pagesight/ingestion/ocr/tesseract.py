"""Tesseract 5 through pytesseract: orientation and script detection, clean-up, word boxes.

Per page: clean the image (:func:`binarise_for_ocr`), ask Tesseract's OSD model which way is up and
which script the page is in, turn the page upright, read it with ``image_to_data`` (TSV with word
boxes and confidences) using ``jpn`` first when the page is Japanese, group words into lines by
Tesseract's (block, paragraph, line) numbers, and map every box back to the caller's frame.

Tesseract runs as a child process per call (pytesseract), so a crash in it costs one page, not the
worker. ``OMP_THREAD_LIMIT=1`` keeps each call on one core: Tesseract's OpenMP threads only slow it
down when several pages are OCRed in parallel, which is how ingestion runs.
"""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import dataclass
from typing import Any

import pytesseract
from PIL import Image

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import TesseractOptions
from pagesight.ingestion.ocr.base import (
    OcrLine,
    OcrResult,
    OcrWord,
    remove_spaces_between_cjk,
    union_box,
)
from pagesight.ingestion.ocr.preprocess import (
    RIGHT_ANGLES,
    binarise_for_ocr,
    downscale_to_max_side,
    line_to_original_frame,
    rotate_clockwise,
)

logger = logging.getLogger(__name__)

#: OSD script names that mean the page needs the Japanese model.
JAPANESE_SCRIPTS = frozenset({"Japanese", "Han", "Katakana", "Hiragana"})

#: OSD runs on a copy at most this many pixels on its long side (~170 dpi for A4): it needs only
#: glyph shapes, and time grows with pixels (a sparse A4 page: 1.2 s at 300 dpi, 0.45 s at half
#: that; dense pages take 0.6-1 s at 2000 px). Smaller copies give wrong answers (see below).
OSD_MAX_SIDE_PX = 2000

#: Below this OSD orientation confidence a non-zero rotation is ignored: turning an upright page
#: sideways destroys all of its text. Measured on eval pages, upright and turned 90°: at the
#: 2000 px OSD size right answers scored 2.6-14.7 and the one wrong answer 0.25; on copies
#: downscaled to 1000 px wrong answers reached 1.84 (hence also the 2000 px floor above).
MIN_ORIENTATION_CONFIDENCE = 2.0


@dataclass(frozen=True)
class OrientationGuess:
    """Tesseract OSD's answer: turn the image clockwise by ``rotation_cw`` to make it upright."""

    rotation_cw: int
    orientation_confidence: float
    script: str | None
    script_confidence: float


def tesseract_languages(tesseract_cmd: str | None = None) -> frozenset[str]:
    """The language packs the Tesseract binary can load (``tesseract --list-langs``).

    Not ``pytesseract.get_languages``: that caches its first answer for the process, whatever binary
    is configured afterwards.
    """
    cmd = tesseract_cmd or pytesseract.pytesseract.tesseract_cmd
    try:
        completed = subprocess.run(
            [cmd, "--list-langs"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        raise PageSightError(
            ErrorCode.OCR_FAILED,
            Stage.OCR,
            f"the Tesseract binary {cmd!r} cannot be run ({exc.strerror or exc}); "
            "install tesseract-ocr (5.x) or put it on PATH",
        ) from exc
    if completed.returncode != 0:
        raise PageSightError(
            ErrorCode.OCR_FAILED,
            Stage.OCR,
            f"'{cmd} --list-langs' failed with status {completed.returncode}: "
            f"{(completed.stderr or completed.stdout).strip()[:300]}",
        )
    # The first line is 'List of available languages in "<dir>" (N):'.
    listed = completed.stdout.splitlines()[1:]
    return frozenset(line.strip() for line in listed if line.strip())


def detect_orientation(image: Image.Image) -> OrientationGuess | None:
    """Tesseract OSD on a downscaled copy; ``None`` when OSD cannot tell (sparse or blank pages).

    Raises ``PageSightError`` only when Tesseract itself is missing, not when the page is hard.
    """
    small = downscale_to_max_side(image, OSD_MAX_SIDE_PX)
    try:
        osd: dict[str, Any] = pytesseract.image_to_osd(small, output_type=pytesseract.Output.DICT)
    except pytesseract.TesseractNotFoundError as exc:
        raise _binary_missing() from exc
    except pytesseract.TesseractError as exc:
        # "Too few characters. Skipping this page" and friends: treat the page as upright.
        logger.debug("tesseract OSD gave no answer: %s", exc)
        return None
    rotation = int(osd.get("rotate", 0)) % 360
    if rotation not in RIGHT_ANGLES:
        return None
    return OrientationGuess(
        rotation_cw=rotation,
        orientation_confidence=float(osd.get("orientation_conf", 0.0)),
        script=osd.get("script"),
        script_confidence=float(osd.get("script_conf", 0.0)),
    )


def upright_rotation(guess: OrientationGuess | None) -> int:
    """The clockwise rotation to apply, or 0 when OSD's answer is too weak to act on."""
    if guess is None or guess.orientation_confidence < MIN_ORIENTATION_CONFIDENCE:
        return 0
    return guess.rotation_cw


class TesseractEngine:
    """Tesseract behind :class:`~pagesight.ingestion.ocr.base.OcrEngine`."""

    name = "tesseract"

    def __init__(self, options: TesseractOptions | None = None) -> None:
        self.options = options or TesseractOptions()
        self._base_languages = [code for code in self.options.languages.split("+") if code]
        self._japanese_available = False
        self._ready = False

    def warm_up(self) -> None:
        """Check the binary and every language pack this engine will ask for, once."""
        if self._ready:
            return
        # Only child processes read it from here on; an operator's explicit value wins.
        os.environ.setdefault("OMP_THREAD_LIMIT", "1")
        available = tesseract_languages()
        required = [*self._base_languages, "osd"]
        missing = [code for code in required if code not in available]
        if missing:
            raise PageSightError(
                ErrorCode.OCR_FAILED,
                Stage.OCR,
                f"Tesseract language data missing: {', '.join(missing)} "
                f"(installed: {', '.join(sorted(available)) or 'none'}); install the "
                f"tesseract-ocr-<lang> packages or set TESSDATA_PREFIX",
            )
        self._japanese_available = "jpn" in available
        if self.options.detect_script and not self._japanese_available:
            logger.warning(
                "detect_script is on but Tesseract has no 'jpn' data: Japanese pages will be "
                "read with %r only",
                self.options.languages,
            )
        self._ready = True

    def languages_for(self, guess: OrientationGuess | None) -> str:
        """The '+'-joined languages for a page: ``jpn`` first when OSD sees Japanese script."""
        if (
            self.options.detect_script
            and self._japanese_available
            and guess is not None
            and guess.script in JAPANESE_SCRIPTS
        ):
            return "+".join(["jpn", *(code for code in self._base_languages if code != "jpn")])
        return "+".join(self._base_languages)

    def recognize(self, image: Image.Image) -> OcrResult:
        self.warm_up()
        original_size = image.size
        if self.options.preprocess:
            prepared = binarise_for_ocr(image)
        else:
            prepared = image if image.mode in ("L", "RGB") else image.convert("RGB")

        guess = detect_orientation(prepared)
        rotation = upright_rotation(guess)
        upright = rotate_clockwise(prepared, rotation)
        languages = self.languages_for(guess)

        data = self._image_to_data(upright, languages)
        lines = [
            line_to_original_frame(line, rotation, original_size) for line in _lines_from_tsv(data)
        ]
        return OcrResult(
            lines=lines,
            rotation_applied=rotation,
            image_size=original_size,
            language=languages,
            engine=self.name,
        )

    def _image_to_data(self, image: Image.Image, languages: str) -> dict[str, list[Any]]:
        try:
            data: dict[str, list[Any]] = pytesseract.image_to_data(
                image,
                lang=languages,
                config=f"--psm {self.options.psm}",
                output_type=pytesseract.Output.DICT,
            )
        except pytesseract.TesseractNotFoundError as exc:
            raise _binary_missing() from exc
        except pytesseract.TesseractError as exc:
            detail = str(exc.message).strip()[:300]
            if "Failed loading language" in detail or "Error opening data file" in detail:
                message = f"Tesseract language data for {languages!r} missing: {detail}"
            else:
                message = f"Tesseract failed (status {exc.status}): {detail}"
            raise PageSightError(ErrorCode.OCR_FAILED, Stage.OCR, message) from exc
        return data


def _binary_missing() -> PageSightError:
    return PageSightError(
        ErrorCode.OCR_FAILED,
        Stage.OCR,
        f"the Tesseract binary {pytesseract.pytesseract.tesseract_cmd!r} was not found; "
        "install tesseract-ocr (5.x) or put it on PATH",
    )


def _lines_from_tsv(data: dict[str, list[Any]]) -> list[OcrLine]:
    """Group TSV word rows (level 5) into lines by (block, paragraph, line), in Tesseract order."""
    grouped: dict[tuple[int, int, int], list[OcrWord]] = {}
    for i, level in enumerate(data["level"]):
        text = str(data["text"][i]).strip()
        if int(level) != 5 or not text:
            continue
        left, top = int(data["left"][i]), int(data["top"][i])
        box = (left, top, left + int(data["width"][i]), top + int(data["height"][i]))
        confidence = min(max(float(data["conf"][i]) / 100.0, 0.0), 1.0)
        key = (int(data["block_num"][i]), int(data["par_num"][i]), int(data["line_num"][i]))
        grouped.setdefault(key, []).append(OcrWord(text=text, bbox_px=box, confidence=confidence))

    lines = []
    for words in grouped.values():
        lines.append(
            OcrLine(
                text=remove_spaces_between_cjk(" ".join(word.text for word in words)),
                bbox_px=union_box(word.bbox_px for word in words),
                confidence=sum(word.confidence for word in words) / len(words),
                words=words,
            )
        )
    return lines
