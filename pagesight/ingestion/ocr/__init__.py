"""OCR for pages without a text layer: word and line boxes in the page image's pixel frame.

Engines (Tesseract, RapidOCR) implement :class:`OcrEngine`; :func:`build_ocr_engine` picks one
from settings. Engine modules are imported on demand, so importing this package stays cheap.
"""

from pagesight.ingestion.ocr.base import OcrEngine, OcrLine, OcrResult, OcrWord, PixelBox
from pagesight.ingestion.ocr.factory import build_ocr_engine

__all__ = ["OcrEngine", "OcrLine", "OcrResult", "OcrWord", "PixelBox", "build_ocr_engine"]
