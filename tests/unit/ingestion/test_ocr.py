"""OCR engines on pages whose text and word positions we know, because we drew them.

Pages are made with PyMuPDF (``insert_text``), rasterised, and read back by both engines; the
words PyMuPDF reports for the page are the ground truth for text and positions. Both engines
must put every box in the frame of the image they were given, including for sideways pages.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pymupdf
import pytest
from PIL import Image, ImageDraw

os.environ.setdefault("OMP_THREAD_LIMIT", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.settings import RapidOcrOptions, TesseractOptions
from pagesight.ingestion.ocr import OcrEngine, OcrLine, OcrResult, OcrWord, build_ocr_engine
from pagesight.ingestion.ocr import rapid as rapid_module
from pagesight.ingestion.ocr.base import (
    PixelBox,
    remove_spaces_between_cjk,
    sort_lines_in_reading_order,
)
from pagesight.ingestion.ocr.preprocess import (
    binarise_for_ocr,
    box_to_original_frame,
    rotate_clockwise,
)
from pagesight.ingestion.ocr.rapid import RapidOcrEngine, _lines_from_output, looks_turned
from pagesight.ingestion.ocr.tesseract import TesseractEngine

EVAL_ROBUST = Path(__file__).resolve().parents[4] / "shared" / "eval" / "robust"
DPI = 200

ENGLISH_LINES = [
    "The quarterly report shows revenue growth",
    "across every region, driven by strong demand",
    "for industrial products and new services.",
    "Operating margin improved to fifteen percent",
    "while the company reduced its total debt.",
]
JAPANESE_LINES = ["東京都の人口は増えています。", "日本語の文書を読み取ります。"]


# --- page fixtures -------------------------------------------------------------------------------


def _render(page: pymupdf.Page, dpi: int = DPI) -> Image.Image:
    pix = page.get_pixmap(dpi=dpi)
    return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)


def _make_page(
    lines: list[str], rotation: int = 0, fontname: str = "helv", fontsize: float = 13
) -> tuple[Image.Image, list[tuple[str, PixelBox]]]:
    """A rasterised page with ``lines`` and the pixel box of every word as PyMuPDF placed it.

    With ``rotation`` the page carries /Rotate, so the image is sideways exactly as a scanned page
    displayed with a rotation would be, and the truth boxes go through PyMuPDF's own rotation
    matrix, not through the code under test.
    """
    doc = pymupdf.open()
    page = doc.new_page(width=400, height=60 + 22 * len(lines))
    for i, text in enumerate(lines):
        page.insert_text((30, 40 + 22 * i), text, fontname=fontname, fontsize=fontsize)
    words = [(w[4], pymupdf.Rect(w[:4])) for w in page.get_text("words")]
    page.set_rotation(rotation)
    scale = DPI / 72
    truth = []
    for text, rect in words:
        shown = rect * page.rotation_matrix
        truth.append(
            (
                text,
                (
                    round(shown.x0 * scale),
                    round(shown.y0 * scale),
                    round(shown.x1 * scale),
                    round(shown.y1 * scale),
                ),
            )
        )
    return _render(page), truth


def _normalise(word: str) -> str:
    return re.sub(r"[^0-9a-z]", "", word.lower())


def _inside(box: PixelBox, size: tuple[int, int]) -> bool:
    x0, y0, x1, y1 = box
    return 0 <= x0 <= x1 <= size[0] and 0 <= y0 <= y1 <= size[1]


def _centre_in(box: PixelBox, target: PixelBox, margin: int) -> bool:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return (
        target[0] - margin <= cx <= target[2] + margin
        and target[1] - margin <= cy <= target[3] + margin
    )


def _located_word_recall(result: OcrResult, truth: list[tuple[str, PixelBox]]) -> float:
    """Share of true words read with the right text whose OCR box sits where the word was drawn."""
    found = 0
    for text, box in truth:
        key = _normalise(text)
        margin = max(6, (box[3] - box[1]) // 2)
        if any(
            _normalise(w.text) == key and _centre_in(w.bbox_px, box, margin) for w in result.words
        ):
            found += 1
    return found / len(truth)


def _cer(predicted: str, expected: str) -> float:
    a, b = re.sub(r"\s+", "", predicted), re.sub(r"\s+", "", expected)
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1] / max(1, len(b))


@pytest.fixture(scope="module")
def tesseract() -> TesseractEngine:
    engine = TesseractEngine(TesseractOptions())
    engine.warm_up()
    return engine


@pytest.fixture(scope="module")
def rapid() -> RapidOcrEngine:
    engine = RapidOcrEngine(RapidOcrOptions())
    engine.warm_up()
    return engine


@pytest.fixture(params=["tesseract", "rapid"])
def engine(request: pytest.FixtureRequest) -> OcrEngine:
    return request.getfixturevalue(request.param)


# --- helpers that need no engine -----------------------------------------------------------------


def test_spaces_between_cjk_characters_are_removed_but_not_next_to_latin() -> None:
    assert remove_spaces_between_cjk("東 京 都 の 人 口") == "東京都の人口"
    assert (
        remove_spaces_between_cjk("売上 は 10 億 円 、 PageSight で")
        == "売上は 10 億円、 PageSight で"
    )
    assert remove_spaces_between_cjk("plain english text") == "plain english text"


@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_box_mapping_undoes_the_rotation_pixel_for_pixel(rotation: int) -> None:
    original = Image.new("L", (120, 80), 255)
    box = (10, 20, 35, 30)
    ImageDraw.Draw(original).rectangle((box[0], box[1], box[2] - 1, box[3] - 1), fill=0)
    rotated = np.asarray(rotate_clockwise(original, rotation))
    ys, xs = np.nonzero(rotated == 0)
    box_in_rotated = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    assert box_to_original_frame(box_in_rotated, rotation, original.size) == box


def test_reading_order_is_rows_top_down_then_left_to_right() -> None:
    def line(text: str, box: PixelBox) -> OcrLine:
        return OcrLine(text=text, bbox_px=box, confidence=1.0, words=[])

    shuffled = [
        line("row2-right", (300, 62, 400, 80)),
        line("row1-right", (300, 8, 400, 30)),  # a few pixels higher than its row neighbour
        line("row2-left", (10, 60, 200, 80)),
        line("row1-left", (10, 10, 200, 30)),
    ]
    ordered = [ln.text for ln in sort_lines_in_reading_order(shuffled)]
    assert ordered == ["row1-left", "row1-right", "row2-left", "row2-right"]


def test_binarisation_removes_table_rules_and_keeps_the_text() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=300, height=120)
    page.draw_rect(pymupdf.Rect(20, 20, 280, 100), color=(0, 0, 0), width=1.5)
    page.draw_line((20, 60), (280, 60), color=(0, 0, 0), width=1.5)
    page.insert_text((30, 48), "Revenue 2023", fontsize=14)
    image = _render(page)
    cleaned = np.asarray(binarise_for_ocr(image))
    scale = DPI / 72
    rule_row = cleaned[round(60 * scale) - 1 : round(60 * scale) + 2, :]
    assert np.count_nonzero(rule_row == 0) < 0.02 * rule_row.size
    text_band = cleaned[
        round(36 * scale) : round(50 * scale), round(30 * scale) : round(120 * scale)
    ]
    assert np.count_nonzero(text_band == 0) > 0.05 * text_band.size


def test_rapid_lines_pair_word_boxes_by_text_and_drop_low_confidence() -> None:
    """RapidOCR omits word groups for some lines; the others must still get their own boxes."""
    output = SimpleNamespace(
        boxes=np.array(
            [
                [[10, 10], [110, 10], [110, 30], [10, 30]],
                [[10, 40], [210, 40], [210, 60], [10, 60]],
                [[10, 70], [110, 70], [110, 90], [10, 90]],
            ],
            dtype=float,
        ),
        txts=("no boxes here", "has word boxes", "blurry"),
        scores=(0.9, 0.95, 0.2),
        word_results=(
            (
                ("has", 0.9, [[10, 40], [40, 40], [40, 60], [10, 60]]),
                ("word", 0.9, [[50, 40], [100, 40], [100, 60], [50, 60]]),
                ("boxes", 0.9, [[110, 40], [200, 40], [200, 60], [110, 60]]),
            ),
        ),
    )
    lines = _lines_from_output(output, (300, 100), min_confidence=0.5)
    assert [ln.text for ln in lines] == ["no boxes here", "has word boxes"]
    assert [w.bbox_px for w in lines[1].words] == [
        (10, 40, 40, 60),
        (50, 40, 100, 60),
        (110, 40, 200, 60),
    ]
    # Proportional split: "no" is the first 2 of 13 characters of a 100 px line.
    assert [w.text for w in lines[0].words] == ["no", "boxes", "here"]
    assert lines[0].words[0].bbox_px == (10, 10, 26, 30)


def test_factory_builds_the_engine_the_options_name() -> None:
    assert isinstance(build_ocr_engine(TesseractOptions()), TesseractEngine)
    rapid_only = build_ocr_engine(RapidOcrOptions(min_confidence=0.7, fallback=None))
    assert isinstance(rapid_only, RapidOcrEngine)
    assert isinstance(build_ocr_engine(TesseractOptions()), OcrEngine)

    from pagesight.ingestion.ocr.factory import FallbackOcrEngine

    chained = build_ocr_engine(RapidOcrOptions())
    assert isinstance(chained, FallbackOcrEngine)
    assert isinstance(chained.primary, RapidOcrEngine)
    assert isinstance(chained.secondary, TesseractEngine)
    assert isinstance(chained, OcrEngine)


# --- engines on drawn pages ----------------------------------------------------------------------


def test_engine_reads_words_where_they_were_drawn(engine: OcrEngine) -> None:
    image, truth = _make_page(ENGLISH_LINES)
    result = engine.recognize(image)

    assert result.engine == engine.name
    assert result.image_size == image.size
    assert result.rotation_applied == 0
    assert len(result.lines) == len(ENGLISH_LINES)
    assert all(_inside(w.bbox_px, image.size) for w in result.words)
    assert all(0.0 <= w.confidence <= 1.0 for w in result.words)
    assert _located_word_recall(result, truth) >= 0.9
    # Reading order: the first and last drawn lines come first and last.
    assert _normalise(result.lines[0].words[0].text) == "the"
    assert "debt" in result.lines[-1].text


@pytest.mark.parametrize(
    "page_rotation",
    [90, pytest.param(180, marks=pytest.mark.slow), pytest.param(270, marks=pytest.mark.slow)],
)
def test_sideways_page_is_read_upright_with_boxes_in_the_given_frame(
    engine: OcrEngine, page_rotation: int
) -> None:
    image, truth = _make_page(ENGLISH_LINES, rotation=page_rotation)
    result = engine.recognize(image)

    # /Rotate turns the page clockwise for display; turning it back takes the complement.
    assert result.rotation_applied == (360 - page_rotation) % 360
    assert result.image_size == image.size
    assert "quarterly report" in result.text
    assert all(_inside(w.bbox_px, image.size) for w in result.words)
    assert _located_word_recall(result, truth) >= 0.9


def test_tesseract_detects_japanese_and_reads_it_without_spaces(tesseract: TesseractEngine) -> None:
    image, _ = _make_page(JAPANESE_LINES * 3, fontname="japan", fontsize=16)
    result = tesseract.recognize(image)

    assert result.language.split("+")[0] == "jpn"
    assert _cer(result.text, "".join(JAPANESE_LINES * 3)) <= 0.1
    assert "東京都" in result.text and "日本語" in result.text
    assert not re.search(r"[\u3040-\u30ff\u4e00-\u9fff] [\u3040-\u30ff\u4e00-\u9fff]", result.text)


def test_rapidocr_reads_japanese(rapid: RapidOcrEngine) -> None:
    image, _ = _make_page(JAPANESE_LINES, fontname="japan", fontsize=16)
    result = rapid.recognize(image)
    assert _cer(result.text, "".join(JAPANESE_LINES)) <= 0.1


def _reading(boxes: list[tuple[int, int, int, int]], scores: list[float]) -> SimpleNamespace:
    quads = [[(x0, y0), (x1, y0), (x1, y1), (x0, y1)] for x0, y0, x1, y1 in boxes]
    return SimpleNamespace(boxes=quads, scores=scores)


def test_a_reading_looks_turned_when_its_lines_stand_or_score_low() -> None:
    wide, tall = (0, 0, 300, 20), (0, 0, 20, 300)
    assert not looks_turned(_reading([wide] * 4, [0.99, 0.98, 0.97, 0.6]))  # upright
    assert looks_turned(_reading([tall, tall, wide], [0.99] * 3))  # on its side, read well
    assert looks_turned(_reading([wide] * 3, [0.6, 0.7, 0.95]))  # upside down: low median
    assert not looks_turned(_reading([], []))  # nothing read: nothing to turn
    assert not looks_turned(SimpleNamespace())  # RapidOCR's empty output


@pytest.fixture(scope="module")
def rapid_osd_first() -> RapidOcrEngine:
    engine = RapidOcrEngine(RapidOcrOptions(orientation="always"))
    engine.warm_up()
    return engine


@pytest.mark.parametrize(
    ("engine_name", "page_rotation", "asked"),
    [("rapid", 0, 0), ("rapid", 180, 1), ("rapid_osd_first", 0, 1), ("rapid_osd_first", 180, 1)],
)
def test_rapidocr_asks_osd_only_when_its_first_reading_looks_turned(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    engine_name: str,
    page_rotation: int,
    asked: int,
) -> None:
    """By default OSD runs only for a page whose first reading looks turned; with
    ``orientation="always"`` before every page, as before issue 36."""
    rapid: RapidOcrEngine = request.getfixturevalue(engine_name)
    calls: list[Image.Image] = []
    osd = rapid_module.detect_orientation

    def counted(image: Image.Image) -> object:
        calls.append(image)
        return osd(image)

    monkeypatch.setattr(rapid_module, "detect_orientation", counted)
    image, truth = _make_page(ENGLISH_LINES, rotation=page_rotation)
    result = rapid.recognize(image)
    assert len(calls) == asked
    assert result.rotation_applied == (360 - page_rotation) % 360
    assert _located_word_recall(result, truth) >= 0.9
    assert (result.stage_seconds["orientation"] > 0) == bool(asked)


def test_blank_page_gives_no_lines_and_no_error(engine: OcrEngine) -> None:
    result = engine.recognize(Image.new("RGB", (800, 600), "white"))
    assert result.lines == []
    assert result.rotation_applied == 0
    assert result.text == ""


# --- failures ------------------------------------------------------------------------------------


def test_missing_tesseract_language_is_ocr_failed() -> None:
    engine = TesseractEngine(TesseractOptions(languages="eng+xyz"))
    with pytest.raises(PageSightError) as caught:
        engine.recognize(Image.new("RGB", (200, 100), "white"))
    assert caught.value.code == ErrorCode.OCR_FAILED
    assert "xyz" in caught.value.message


def test_missing_tesseract_binary_is_ocr_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytesseract

    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/nonexistent/tesseract")
    with pytest.raises(PageSightError) as caught:
        TesseractEngine(TesseractOptions()).warm_up()
    assert caught.value.code == ErrorCode.OCR_FAILED
    assert "/nonexistent/tesseract" in caught.value.message


def test_ocr_result_text_joins_lines() -> None:
    word = OcrWord(text="a", bbox_px=(0, 0, 1, 1), confidence=1.0)
    lines = [OcrLine(text=t, bbox_px=(0, 0, 1, 1), confidence=1.0, words=[word]) for t in "ab"]
    result = OcrResult(
        lines=lines, rotation_applied=0, image_size=(1, 1), language="eng", engine="x"
    )
    assert result.text == "a\nb"
    assert len(result.words) == 2


# --- real scanned pages from the eval set ---------------------------------------------------------

_DOCLING_WORDS = ["docling", "bundles", "pdf", "document", "conversion", "json", "markdown"]


def _eval_page(name: str) -> Image.Image:
    path = EVAL_ROBUST / name
    if not path.exists():
        pytest.skip(f"eval corpus not present: {path}")
    with pymupdf.open(path) as doc:
        page = doc[0]
        assert page.get_text().strip() == ""  # image-only: the text can only come from OCR
        return _render(page)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize(
    ("file_name", "expected_rotation"),
    [("docling__ocr_test.pdf", 0), ("docling__ocr_test_rotated_90.pdf", 90)],
)
def test_eval_scans_are_read(engine: OcrEngine, file_name: str, expected_rotation: int) -> None:
    image = _eval_page(file_name)
    result = engine.recognize(image)

    assert result.rotation_applied == expected_rotation
    tokens = {_normalise(w.text) for w in result.words}
    assert all(word in tokens for word in _DOCLING_WORDS), result.text
    assert "self contained" in result.text.replace("-", " ")
    assert all(_inside(w.bbox_px, image.size) for w in result.words)
    if expected_rotation == 90:
        # Displayed sideways, the text runs bottom to top: every line is taller than wide.
        assert all(
            ln.bbox_px[3] - ln.bbox_px[1] > ln.bbox_px[2] - ln.bbox_px[0]
            for ln in result.lines
            if len(ln.text) > 10
        )


class _ScriptedEngine:
    """A stand-in engine returning fixed lines, to test engine composition alone."""

    def __init__(self, name: str, lines: list[OcrLine]) -> None:
        self.name = name
        self._lines = lines
        self.calls = 0

    def warm_up(self) -> None:
        pass

    def recognize(self, image: Image.Image) -> OcrResult:
        self.calls += 1
        return OcrResult(
            lines=self._lines,
            rotation_applied=0,
            image_size=image.size,
            language="eng",
            engine=self.name,
        )


def test_fallback_engine_reads_only_pages_the_primary_found_empty() -> None:
    from pagesight.ingestion.ocr.factory import FallbackOcrEngine

    line = OcrLine(text="hello", bbox_px=(1, 1, 20, 10), confidence=0.9, words=[])
    image = Image.new("RGB", (40, 20), "white")
    found = FallbackOcrEngine(_ScriptedEngine("a", [line]), _ScriptedEngine("b", [line]))
    assert found.recognize(image).engine == "a"
    assert isinstance(found.secondary, _ScriptedEngine) and found.secondary.calls == 0
    empty = FallbackOcrEngine(_ScriptedEngine("a", []), _ScriptedEngine("b", [line]))
    result = empty.recognize(image)
    assert result.engine == "b" and result.text == "hello"
