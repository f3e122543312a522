"""The parse stage: one file in, a :class:`ParsedDocument` out.

It decides the route per file (PDF / image / Docling formats) and per page (layout model for
born-digital pages, OCR for image-only ones), renders and stores page images, and assembles the
elements. It never touches an index; :mod:`pagesight.ingestion.isolation` runs it in a child
process.

With a VLM configured (``parse.vlm``), the pages its profile selects are then read by the VLM
(:mod:`pagesight.ingestion.parse.vlm`): its elements replace the OCR elements of an image-only page
and add tables, figures and equations to a page with a text layer. A page the VLM fails on keeps
its text-layer/OCR elements and the document gets a VLM_FAILED warning, never a failure: the
VLM is an improvement on top of a path that works without it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.ids import file_version, make_doc_id
from pagesight.core.settings import Settings
from pagesight.core.types import (
    Document,
    Element,
    OutlineEntry,
    Page,
    ParsedDocument,
    ParseWarning,
    SourceFormat,
)
from pagesight.ingestion.parse.blocks import ElementAssembler, RawBlock
from pagesight.ingestion.sources import check_file, detect_format
from pagesight.ingestion.titles import TITLE_PAGES, choose_title, ocr_lines, text_layer_lines

if TYPE_CHECKING:
    import pymupdf

    from pagesight.ingestion.ocr.base import OcrEngine
    from pagesight.ingestion.parse.vlm import VlmPageEngine
    from pagesight.ingestion.render import (
        BackgroundImageWriter,
        PageImageStore,
        RenderedPage,
        Renderer,
    )

log = logging.getLogger(__name__)

_LAYOUT_BATCH = 16  # pages per layout-model call: bounds memory on 500-page filings

#: Called with (pages done, pages in the file) as parsing advances.
ProgressCallback = Callable[[int, int], None]


@dataclass
class SourceInfo:
    """Who owns a file and where it came from; everything the bytes themselves do not say."""

    tenant: str = "default"
    acl: list[str] = field(default_factory=list)
    source_uri: str | None = None
    doc_id: str | None = None
    password: str | None = None
    title: str | None = None
    valid_until: datetime | None = None


class DocumentParser:
    """Parses one file. Cheap to construct; the OCR engine, layout model and VLM client are
    made on first use."""

    def __init__(
        self,
        settings: Settings,
        image_store: PageImageStore | None = None,
        ocr_engine: OcrEngine | None = None,
        vlm_engine: VlmPageEngine | None = None,
    ) -> None:
        self.settings = settings
        self.image_store = image_store
        self._ocr_engine = ocr_engine
        self._vlm_engine = vlm_engine

    @property
    def ocr_engine(self) -> OcrEngine:
        if self._ocr_engine is None:
            from pagesight.ingestion.ocr.factory import build_ocr_engine

            self._ocr_engine = build_ocr_engine(self.settings.parse.ocr)
        return self._ocr_engine

    @property
    def vlm_engine(self) -> VlmPageEngine | None:
        """The configured VLM engine, or None when ``parse.vlm.base_url`` is unset."""
        if self._vlm_engine is None and self.settings.parse.vlm.active:
            from pagesight.ingestion.parse.vlm import build_vlm_engine

            self._vlm_engine = build_vlm_engine(self.settings.parse.vlm)
        return self._vlm_engine

    def parse(
        self, path: Path, source: SourceInfo | None = None, progress: ProgressCallback | None = None
    ) -> ParsedDocument:
        source = source or SourceInfo()
        size = check_file(path, self.settings.limits.max_file_bytes)
        fmt = detect_format(path)
        uri = source.source_uri or path.resolve().as_uri()
        document = Document(
            doc_id=source.doc_id or make_doc_id(source.tenant, uri),
            version=file_version(path),
            tenant=source.tenant,
            acl=list(source.acl),
            source_uri=uri,
            title=source.title,
            valid_until=source.valid_until,
            source_format=fmt,
            size_bytes=size,
        )
        if fmt in (SourceFormat.DOCX, SourceFormat.HTML, SourceFormat.MARKDOWN):
            from pagesight.ingestion.parse.docling_formats import parse_with_docling

            parsed = parse_with_docling(path, document)
            if progress:
                progress(1, 1)
            return parsed
        from pagesight.ingestion.parse.pdf import open_image_as_pdf, open_pdf

        if fmt == SourceFormat.IMAGE:
            doc = open_image_as_pdf(path)
        else:
            doc = open_pdf(path, source.password, self.settings.limits.max_pages)
        with doc:
            return self._parse_pdf(doc, document, progress)

    def _parse_pdf(
        self, doc: pymupdf.Document, document: Document, progress: ProgressCallback | None
    ) -> ParsedDocument:
        from pagesight.ingestion.parse.pdf import needs_ocr, page_text_stats
        from pagesight.ingestion.render import BackgroundImageWriter, PyMuPdfRenderer

        options = self.settings.parse
        total = doc.page_count
        warnings: list[ParseWarning] = []
        if doc.is_repaired:
            warnings.append(
                ParseWarning(code=ErrorCode.CORRUPT, message="damaged PDF structure was repaired")
            )
        stats = {n: page_text_stats(doc.load_page(n - 1)) for n in range(1, total + 1)}
        ocr_pages = {n for n, s in stats.items() if needs_ocr(s, options)}

        renderer = PyMuPdfRenderer(doc, self.settings.render.max_page_pixels)
        writer = (
            BackgroundImageWriter(self.image_store, _LAYOUT_BATCH) if self.image_store else None
        )
        title_texts: dict[int, dict[str, Any]] = {}
        with writer or contextlib.nullcontext():
            pages, blocks = self._read_pages(
                doc,
                document,
                renderer,
                writer,
                {n: s.chars for n, s in stats.items() if n not in ocr_pages},
                warnings,
                progress,
                title_texts,
            )
            if writer is not None:
                for n, page in pages.items():
                    page.image_ref = writer.result(n)

        if self.vlm_engine is not None:
            self._vlm_pages(doc, renderer, ocr_pages, pages, blocks, warnings)

        toc = doc.get_toc(simple=True)
        assembler = ElementAssembler(outline=[tuple(e[:3]) for e in toc])
        elements = assembler.assemble(
            document.doc_id,
            document.version,
            [(n, blocks.get(n, [])) for n in range(1, total + 1)],
        )
        document.page_count = total
        if not document.title:
            document.title = _document_title(doc, elements, title_texts)
        return ParsedDocument(
            document=document,
            pages=[pages[n] for n in range(1, total + 1)],
            elements=elements,
            warnings=warnings,
            outline=[
                OutlineEntry(level=level, title=" ".join(str(title).split()), page_number=page)
                for level, title, page, *_ in toc
                if str(title).strip()
            ],
        )

    def _read_pages(
        self,
        doc: pymupdf.Document,
        document: Document,
        renderer: Renderer,
        writer: BackgroundImageWriter | None,
        text_pages: dict[int, int],
        warnings: list[ParseWarning],
        progress: ProgressCallback | None,
        title_texts: dict[int, dict[str, Any]],
    ) -> tuple[dict[int, Page], dict[int, list[RawBlock]]]:
        """Page records and raw blocks of every page: text-layer pages (``text_pages``, with
        the characters of their text layer) in batches (plain ones from their fonts, the others
        through the layout model, while their images are encoded in the background), then the
        other pages through OCR. The text layers of the first pages are kept in ``title_texts``
        (the title is chosen from their font sizes)."""
        from pagesight.ingestion.parse.pdf import (
            LayoutPageParser,
            margin_text,
            page_margin_text,
            page_text,
        )
        from pagesight.ingestion.parse.plain import PARSER_NAME as PLAIN_PARSER
        from pagesight.ingestion.parse.plain import plain_blocks, plain_page

        options = self.settings.parse
        total = doc.page_count
        layout_pages = sorted(text_pages)
        ocr_pages = [n for n in range(1, total + 1) if n not in text_pages]
        pages: dict[int, Page] = {}
        blocks: dict[int, list[RawBlock]] = {}
        done = 0

        def advance() -> None:
            nonlocal done
            done += 1
            if progress:
                progress(done, total)

        layout = LayoutPageParser(threads=options.layout_threads)
        for start in range(0, len(layout_pages), _LAYOUT_BATCH):
            batch = layout_pages[start : start + _LAYOUT_BATCH]
            for n in batch:
                pages[n] = self._page(document, renderer, n, True, writer)
            texts = {n: page_text(doc.load_page(n - 1)) for n in batch}
            title_texts.update((n, text) for n, text in texts.items() if n <= TITLE_PAGES)
            plain = {
                n
                for n in batch
                if options.plain_pages and plain_page(doc.load_page(n - 1), texts[n]).plain
            }
            for n in plain:
                blocks[n] = plain_blocks(doc.load_page(n - 1), texts[n])
                pages[n].parser = PLAIN_PARSER
            model_pages = [n for n in batch if n not in plain]
            try:
                if model_pages:
                    blocks.update(layout.parse(doc, model_pages, text_pages))
            except Exception as exc:  # the layout model failing costs these pages' structure
                log.warning("layout model failed on pages %s: %s", model_pages, exc)
                for n in model_pages:
                    warnings.append(
                        ParseWarning(
                            code=ErrorCode.CORRUPT, page_number=n, message=f"layout failed: {exc}"
                        )
                    )
            for n in batch:
                pages[n].margin_text = page_margin_text(doc.load_page(n - 1), texts[n])
                advance()
        for n in ocr_pages:
            page = self._page(document, renderer, n, False, writer)
            page.parser = self.ocr_engine.name
            try:
                page.parser, blocks[n] = self._ocr_page(renderer, n)
                page.margin_text = margin_text(
                    ((b.text, b.bbox) for b in blocks[n] if b.bbox is not None), page.height
                )
            except PageSightError as exc:
                warnings.append(ParseWarning(code=exc.code, page_number=n, message=exc.message))
            pages[n] = page
            advance()
        return pages, blocks

    def _page(
        self,
        document: Document,
        renderer: Renderer,
        n: int,
        has_text_layer: bool,
        writer: BackgroundImageWriter | None,
    ) -> Page:
        """The page record; its image is rendered here and stored by ``writer`` (its
        ``image_ref`` is filled in once the writer is done)."""
        image_size = None
        page_warnings: list[str] = []
        if writer is not None:
            rendered = renderer.render(n, self.settings.render.dpi)
            writer.submit(n, document.tenant, rendered.image)
            image_size = rendered.image.size
            width, height = rendered.width_pt, rendered.height_pt
            if rendered.dpi < self.settings.render.dpi - 1:
                page_warnings.append(f"rendered at {rendered.dpi:.0f} dpi to stay in pixel limit")
        else:
            width, height = renderer.page_size(n)
        return Page(
            doc_id=document.doc_id,
            page_number=n,
            width=width,
            height=height,
            image_size=image_size,
            has_text_layer=has_text_layer,
            label=renderer.label(n),
            warnings=page_warnings,
        )

    def _ocr_page(self, renderer: Renderer, n: int) -> tuple[str, list[RawBlock]]:
        """(engine that read the page, its blocks)."""
        from pagesight.ingestion.parse.pdf import ocr_blocks

        rendered = renderer.render(n, self.settings.parse.ocr_dpi)
        result = self.ocr_engine.recognize(rendered.image)
        return result.engine, ocr_blocks(result, rendered, result.engine)

    def _vlm_pages(
        self,
        doc: pymupdf.Document,
        renderer: Renderer,
        ocr_pages: set[int],
        pages: dict[int, Page],
        blocks: dict[int, list[RawBlock]],
        warnings: list[ParseWarning],
    ) -> None:
        """Let the VLM read the pages its profile selects; see the module docstring for what
        its elements do to a page's blocks, and
        :func:`pagesight.ingestion.parse.vlm.merge_blocks`."""
        from pagesight.ingestion.parse.vlm import (
            VlmFailure,
            figure_coverage,
            merge_blocks,
            parse_pages,
            select_vlm_pages,
        )
        from pagesight.ingestion.render import dpi_within_pixel_limit

        engine = self.vlm_engine
        assert engine is not None
        options = self.settings.parse.vlm
        selected, over_cap = select_vlm_pages(
            options,
            sorted(pages),
            ocr_pages,
            lambda n: figure_coverage(doc.load_page(n - 1)),
        )
        for n in over_cap:
            pages[n].warnings.append(
                f"not read by the VLM: over parse.vlm.max_pages ({options.max_pages})"
            )
        if not selected:
            return

        def render(n: int) -> RenderedPage:
            width, height = renderer.page_size(n)
            dpi = dpi_within_pixel_limit(width, height, options.dpi, options.max_image_pixels)
            return renderer.render(n, dpi)

        outcomes = parse_pages(engine, selected, render, options.concurrency)
        for n in selected:
            outcome = outcomes[n]
            base = blocks.get(n, [])
            if not isinstance(outcome, VlmFailure) and not outcome and base:
                outcome = VlmFailure("the VLM's reply had no usable element (empty or off-page)")
            if isinstance(outcome, VlmFailure):
                kept = "text-layer" if n not in ocr_pages else "OCR"
                log.warning("VLM failed on page %d: %s", n, outcome.message)
                warnings.append(
                    ParseWarning(
                        code=ErrorCode.VLM_FAILED,
                        page_number=n,
                        message=f"page {n} keeps its {kept} elements: {outcome.message}",
                    )
                )
                continue
            replace = n in ocr_pages
            page = pages[n]
            blocks[n] = merge_blocks(
                base, outcome, replace=replace, page_area=page.width * page.height
            )
            if replace:
                page.parser = engine.name


def _document_title(
    doc: pymupdf.Document, elements: list[Element], texts: dict[int, dict[str, Any]]
) -> str | None:
    """The title :func:`pagesight.ingestion.titles.choose_title` picks from the metadata and the
    first pages: their text layer (``texts``) where they have one, else what OCR read on them."""
    pages = [
        text_layer_lines(texts[n], n)
        if n in texts
        else ocr_lines(e for e in elements if e.page_number == n)
        for n in range(1, min(TITLE_PAGES, doc.page_count) + 1)
    ]
    metadata = doc.metadata or {}
    return choose_title(
        metadata.get("title"),
        pages,
        producer_names=[metadata.get(key) for key in ("producer", "creator", "author")],
    )
