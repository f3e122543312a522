"""Pick the OCR engine a configuration names (``parse.ocr.kind``)."""

from __future__ import annotations

from PIL import Image

from pagesight.core.settings import OcrOptions, RapidOcrOptions, TesseractOptions
from pagesight.ingestion.ocr.base import OcrEngine, OcrResult


class FallbackOcrEngine:
    """Reads a page with ``primary``; a page on which it finds no text goes to ``secondary``.

    RapidOCR's detector misses isolated text on otherwise blank pages (a one-word scan at
    300 dpi), which Tesseract reads; an empty page costs one extra pass, other pages nothing.
    """

    def __init__(self, primary: OcrEngine, secondary: OcrEngine) -> None:
        self.primary = primary
        self.secondary = secondary
        self.name = primary.name

    def warm_up(self) -> None:
        self.primary.warm_up()
        self.secondary.warm_up()

    def recognize(self, image: Image.Image) -> OcrResult:
        result = self.primary.recognize(image)
        if result.lines:
            return result
        return self.secondary.recognize(image)


def build_ocr_engine(options: OcrOptions) -> OcrEngine:
    """A cold engine for ``options``; call ``warm_up()`` where start-up cost belongs (a worker)."""
    if isinstance(options, TesseractOptions):
        from pagesight.ingestion.ocr.tesseract import TesseractEngine

        return TesseractEngine(options)
    if isinstance(options, RapidOcrOptions):
        # Imported here so a Tesseract-only deployment never imports onnxruntime.
        from pagesight.ingestion.ocr.rapid import RapidOcrEngine

        engine: OcrEngine = RapidOcrEngine(options)
        if options.fallback is not None:
            engine = FallbackOcrEngine(engine, build_ocr_engine(options.fallback))
        return engine
    raise TypeError(f"no OCR engine for options of type {type(options).__name__}")
