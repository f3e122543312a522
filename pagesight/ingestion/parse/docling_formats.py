"""DOCX, HTML and Markdown through Docling, and (optionally) PDF through Docling's layout models.

The three text formats go through Docling's model-free ``SimplePipeline``: a declarative backend
reads the file's own structure (headings, lists, tables) into a ``DoclingDocument``, which is
then mapped onto PageSight elements. No model weights are involved, so this runs in the
embedded profile.

We drive ``SimplePipeline`` and the backends ourselves instead of going through
``docling.document_converter.DocumentConverter``: in docling-slim 2.143 importing that module
imports the ASR pipeline, which imports torch at module level, so it fails on the torch-free
install this project uses. The pieces we pick are exactly the defaults ``DocumentConverter``
picks for these formats (``WordFormatOption``, ``HTMLFormatOption``, ``MarkdownFormatOption``),
with every enrichment model (picture classification/description, chart extraction) switched off
and remote and local resource fetching off: an uploaded HTML or Markdown file must not make
the parser fetch URLs or read other local files.

Docling is imported inside functions: it takes about two seconds and most ingests are PDFs.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.ids import element_id
from pagesight.core.settings import ParseOptions
from pagesight.core.types import (
    BBox,
    Document,
    Element,
    ElementKind,
    Page,
    ParsedDocument,
    ParseWarning,
    SourceFormat,
)
from pagesight.ingestion.tables import table_cells

if TYPE_CHECKING:
    from docling.datamodel.document import ConversionResult, InputDocument
    from docling.pipeline.simple_pipeline import SimplePipeline
    from docling.pipeline.standard_pdf_pipeline import StandardPdfPipeline
    from docling_core.transforms.serializer.markdown import MarkdownDocSerializer
    from docling_core.types.doc import DoclingDocument, NodeItem, TableItem, TextItem

#: ``Element.parser`` / ``Page.parser`` for everything this module produces.
DOCLING_PARSER = "docling"

#: File suffixes this module can parse without any model, and the format each one means.
SUFFIX_FORMATS: dict[str, SourceFormat] = {
    ".docx": SourceFormat.DOCX,
    ".html": SourceFormat.HTML,
    ".htm": SourceFormat.HTML,
    ".xhtml": SourceFormat.HTML,
    ".md": SourceFormat.MARKDOWN,
    ".markdown": SourceFormat.MARKDOWN,
}

DOCLING_TEXT_FORMATS = frozenset({SourceFormat.DOCX, SourceFormat.HTML, SourceFormat.MARKDOWN})

_PDF_SETUP_HINT = (
    "Docling's PDF pipeline is optional: install docling-slim[format-pdf,models-local] and set "
    "PAGESIGHT_PARSE__DOCLING_ARTIFACTS_PATH to a directory holding its layout and table "
    "weights (e.g. from `docling-tools models download`)"
)


def docling_source_format(path: Path, document: Document | None = None) -> SourceFormat:
    """The format to parse ``path`` as: the document's own format if it is one of ours, else
    the file suffix's (the caller may have sniffed the bytes; a suffix is only a hint)."""
    if document is not None and document.source_format in DOCLING_TEXT_FORMATS:
        return document.source_format
    source_format = SUFFIX_FORMATS.get(path.suffix.lower())
    if source_format is None:
        raise PageSightError(
            ErrorCode.UNSUPPORTED_FORMAT,
            Stage.PARSE,
            f"{path.name}: Docling parses {', '.join(sorted(SUFFIX_FORMATS))} files here, "
            f"not {path.suffix or 'files without a suffix'}",
        )
    return source_format


def parse_with_docling(path: Path, document: Document) -> ParsedDocument:
    """Parse a DOCX, HTML or Markdown file with Docling's model-free pipeline.

    ``document`` comes from the caller (doc_id, version and tenant are decided before parsing);
    the returned copy has ``source_format``, ``page_count`` and, when the caller had none, the
    ``title`` the file declares.
    """
    source_format = docling_source_format(path, document)
    if not path.is_file():
        raise PageSightError(ErrorCode.NOT_FOUND, Stage.PARSE, f"{path} does not exist")
    input_document = _input_document(path, source_format)
    result = _execute(_simple_pipeline(), input_document, path)
    return docling_to_parsed(
        result.document,
        document.model_copy(update={"source_format": source_format}),
        warnings=_partial_success_warnings(result),
    )


def docling_to_parsed(
    docling_document: DoclingDocument,
    document: Document,
    warnings: list[ParseWarning] | None = None,
) -> ParsedDocument:
    """Map a ``DoclingDocument`` onto PageSight elements, in Docling's reading order.

    Headings (title, section headers) become TITLE elements and define ``section_path``: a
    title is depth 0 and a section header its level (1, 2, ...), and a heading's own
    ``section_path`` ends with the heading itself, so the chunker keeps it with its body.
    Captions referenced by a table or picture travel as that element's ``caption`` and are not
    repeated as CAPTION elements. Page furniture (headers, footers) and structured items that
    carry no text of their own (key-value and form regions) are left out. Items without
    provenance (DOCX, HTML, Markdown have no pages) are on page 1 with no bbox; items with
    provenance get their page and a top-left-origin bbox in points.
    """
    from docling_core.types.doc import PictureItem, SectionHeaderItem, TableItem, TitleItem

    doc_id, version = document.doc_id, document.version
    table_serializer = _table_serializer(docling_document)
    items = [item for item, _depth in docling_document.iterate_items()]
    attached_captions = {
        ref.cref
        for item in items
        if isinstance(item, TableItem | PictureItem)
        for ref in item.captions
    }
    headings: list[tuple[int, str]] = []
    elements: list[Element] = []
    next_seq: dict[int, int] = {}
    declared_title: str | None = None

    for item in items:
        if _inside_table(item, docling_document):
            continue  # rich table cells: their text is already in the table's markdown
        mapped: _Mapped | None
        if isinstance(item, TitleItem | SectionHeaderItem):
            text = item.text.strip()
            if not text:
                continue
            depth = 0 if isinstance(item, TitleItem) else max(item.level, 1)
            while headings and headings[-1][0] >= depth:
                headings.pop()
            headings.append((depth, text))
            if isinstance(item, TitleItem) and declared_title is None:
                declared_title = text
            mapped = (ElementKind.TITLE, text, None, None)
        else:
            mapped = _body_item(item, docling_document, table_serializer, attached_captions)
        if mapped is None:
            continue
        kind, text, caption, cells = mapped
        if not text.strip() and kind != ElementKind.FIGURE:
            continue  # an uncaptioned figure stays: it is content, just not text
        page_number, bbox = _provenance(item, docling_document)
        seq = next_seq.get(page_number, 0)
        next_seq[page_number] = seq + 1
        elements.append(
            Element(
                element_id=element_id(doc_id, version, page_number, seq),
                doc_id=doc_id,
                kind=kind,
                text=text.strip(),
                page_number=page_number,
                seq=seq,
                bbox=bbox,
                section_path=[heading for _depth, heading in headings],
                parser=DOCLING_PARSER,
                caption=caption,
                cells=cells,
            )
        )

    pages = _pages(docling_document, document.doc_id, {e.page_number for e in elements})
    update: dict[str, Any] = {"page_count": len(pages)}
    if document.title is None and declared_title is not None:
        update["title"] = declared_title
    return ParsedDocument(
        document=document.model_copy(update=update),
        pages=pages,
        elements=elements,
        warnings=warnings or [],
    )


#: An item as an element: its kind, text, caption and (tables) cells.
_Mapped = tuple[ElementKind, str, str | None, list[list[str]] | None]


def _body_item(
    item: NodeItem,
    docling_document: DoclingDocument,
    table_serializer: MarkdownDocSerializer,
    attached_captions: set[str],
) -> _Mapped | None:
    """The kind, text, caption and cells of an item that is not a heading; None for one left
    out (page furniture, a caption that travels with its table or picture, an item with no
    text of its own)."""
    from docling_core.types.doc import CodeItem, ListItem, PictureItem, TableItem, TextItem

    if isinstance(item, TableItem):
        caption = _caption(item, docling_document)
        text = table_serializer.serialize(item=item).text
        cells = _table_cells(item, docling_document, table_serializer) if text.strip() else None
        return ElementKind.TABLE, text, caption, cells
    if isinstance(item, PictureItem):
        caption = _caption(item, docling_document)
        return ElementKind.FIGURE, caption or "", caption, None
    if isinstance(item, CodeItem):
        return ElementKind.CODE, item.text, None, None
    if isinstance(item, ListItem):
        return ElementKind.LIST, item.text, None, None
    if isinstance(item, TextItem):
        kind = _text_kind(item, attached_captions)
        return None if kind is None else (kind, item.text or item.orig, None, None)
    return None


def _table_cells(
    item: TableItem, docling_document: DoclingDocument, table_serializer: MarkdownDocSerializer
) -> list[list[str]]:
    """The table's rows as its markdown (Docling's serializer) shows them, for
    ``Element.cells``: Docling's grid, a rich cell (a list, a paragraph in a cell) as the
    serializer writes it, stacked column-header rows joined into the one header row GitHub
    markdown has, by docling_core's own rule, so that the cells and the markdown agree. A ``|``
    in a cell stays a ``|`` (the markdown says ``&#124;``)."""
    from docling_core.transforms.serializer.markdown import (
        _count_header_rows,
        _flatten_header_rows,
    )
    from docling_core.types.doc import RichTableCell

    visited = {item.self_ref}
    rich_texts: dict[tuple[int, int], str] = {}
    rows: list[list[str]] = []
    for grid_row in item.data.grid:
        row: list[str] = []
        for cell in grid_row:
            if isinstance(cell, RichTableCell):
                key = (cell.start_row_offset_idx, cell.start_col_offset_idx)
                if key not in rich_texts:
                    rich_texts[key] = table_serializer.serialize(
                        item=cell.ref.resolve(doc=docling_document),
                        visited=visited,
                        _nested_in_table=True,
                        in_table_cell=True,
                    ).text
                text = rich_texts[key]
            else:
                text = cell.text or ""
            row.append(text.replace("\n", " "))
        rows.append(row)
    if not rows:
        return []
    header_rows = _count_header_rows(item)
    header = _flatten_header_rows(rows[:header_rows], len(rows[0]))
    return table_cells([header, *rows[header_rows:]])


def _text_kind(item: TextItem, attached_captions: set[str]) -> ElementKind | None:
    """A plain text item's kind by its label; None for page headers and footers and for a
    caption that an attached table or picture already carries."""
    from docling_core.types.doc import DocItemLabel

    if item.label in (DocItemLabel.PAGE_HEADER, DocItemLabel.PAGE_FOOTER):
        return None
    if item.label == DocItemLabel.CAPTION:
        return None if item.self_ref in attached_captions else ElementKind.CAPTION
    if item.label == DocItemLabel.FORMULA:
        return ElementKind.EQUATION
    return ElementKind.TEXT


class DoclingPdfParser:
    """Docling's standard PDF pipeline (layout and table-structure models). Never the default.

    It needs what the embedded install leaves out: docling-slim's ``format-pdf`` and
    ``models-local`` extras (docling-parse, docling-ibm-models, torch) and the model weights on
    local disk at ``ParseOptions.docling_artifacts_path``; PageSight never downloads weights
    while ingesting. A missing path fails here, at construction; missing packages or weights
    fail in :meth:`warm_up`, both as UNSUPPORTED_FORMAT with what to install and set. Docling's
    own OCR is off: scanned pages go through PageSight's OCR stage.
    """

    def __init__(self, options: ParseOptions) -> None:
        artifacts_path = options.docling_artifacts_path
        if artifacts_path is None:
            raise PageSightError(ErrorCode.UNSUPPORTED_FORMAT, Stage.PARSE, _PDF_SETUP_HINT)
        if not artifacts_path.is_dir():
            raise PageSightError(
                ErrorCode.UNSUPPORTED_FORMAT,
                Stage.PARSE,
                f"docling_artifacts_path {artifacts_path} is not a directory. {_PDF_SETUP_HINT}",
            )
        self.artifacts_path = artifacts_path
        self._pipeline: StandardPdfPipeline | None = None

    def warm_up(self) -> None:
        """Import Docling's PDF stack and load the layout and table weights (once)."""
        if self._pipeline is not None:
            return
        try:
            if importlib.util.find_spec("docling_parse") is None:
                raise ModuleNotFoundError("No module named 'docling_parse'", name="docling_parse")
            from docling.datamodel.pipeline_options import ThreadedPdfPipelineOptions
            from docling.pipeline.standard_pdf_pipeline import StandardPdfPipeline

            pipeline_options = ThreadedPdfPipelineOptions(
                artifacts_path=self.artifacts_path,
                do_ocr=False,
                enable_remote_services=False,
            )
            self._pipeline = StandardPdfPipeline(pipeline_options)
        except ImportError as exc:
            raise PageSightError(
                ErrorCode.UNSUPPORTED_FORMAT,
                Stage.PARSE,
                f"Docling's PDF pipeline is not installed ({exc}). {_PDF_SETUP_HINT}",
            ) from exc
        except (OSError, RuntimeError, ValueError) as exc:
            raise PageSightError(
                ErrorCode.UNSUPPORTED_FORMAT,
                Stage.PARSE,
                f"Docling's PDF models could not be loaded from {self.artifacts_path} ({exc}). "
                f"{_PDF_SETUP_HINT}",
            ) from exc

    def __call__(self, path: Path, document: Document) -> ParsedDocument:
        self.warm_up()
        assert self._pipeline is not None  # warm_up either set it or raised
        from docling.backend.docling_parse_backend import ThreadedDoclingParseDocumentBackend
        from docling.datamodel.base_models import InputFormat
        from docling.datamodel.document import InputDocument

        if not path.is_file():
            raise PageSightError(ErrorCode.NOT_FOUND, Stage.PARSE, f"{path} does not exist")
        input_document = InputDocument(
            path_or_stream=path,
            format=InputFormat.PDF,
            backend=ThreadedDoclingParseDocumentBackend,
        )
        if not input_document.valid:
            raise PageSightError(
                ErrorCode.CORRUPT, Stage.PARSE, f"{path.name}: Docling cannot open this PDF"
            )
        result = _execute(self._pipeline, input_document, path)
        return docling_to_parsed(
            result.document,
            document.model_copy(update={"source_format": SourceFormat.PDF}),
            warnings=_partial_success_warnings(result),
        )


@functools.cache
def _simple_pipeline() -> SimplePipeline:
    """One model-free pipeline per process; it holds no per-document state."""
    from docling.datamodel.pipeline_options import ConvertPipelineOptions
    from docling.pipeline.simple_pipeline import SimplePipeline

    return SimplePipeline(
        ConvertPipelineOptions(
            do_picture_classification=False,
            do_picture_description=False,
            do_chart_extraction=False,
            enable_remote_services=False,
        )
    )


def _input_document(path: Path, source_format: SourceFormat) -> InputDocument:
    from docling.backend.abstract_backend import AbstractDocumentBackend
    from docling.backend.html_backend import HTMLDocumentBackend
    from docling.backend.md_backend import MarkdownDocumentBackend
    from docling.backend.msword_backend import MsWordDocumentBackend
    from docling.datamodel.backend_options import (
        BackendOptions,
        HTMLBackendOptions,
        MarkdownBackendOptions,
        MsWordBackendOptions,
    )
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.document import InputDocument

    # model_validate: Docling declares these defaults as Field(default, ...), which mypy
    # without the pydantic plugin reads as required arguments.
    no_fetching = {"enable_remote_fetch": False, "enable_local_fetch": False}
    backend: type[AbstractDocumentBackend]
    backend_options: BackendOptions
    if source_format == SourceFormat.DOCX:
        input_format, backend = InputFormat.DOCX, MsWordDocumentBackend
        backend_options = MsWordBackendOptions.model_validate(no_fetching)
    elif source_format == SourceFormat.HTML:
        input_format, backend = InputFormat.HTML, HTMLDocumentBackend
        backend_options = HTMLBackendOptions.model_validate(
            {**no_fetching, "fetch_images": False, "render_page": False}
        )
    else:
        input_format, backend = InputFormat.MD, MarkdownDocumentBackend
        backend_options = MarkdownBackendOptions.model_validate(
            {**no_fetching, "fetch_images": False}
        )
    input_document = InputDocument(
        path_or_stream=path, format=input_format, backend=backend, backend_options=backend_options
    )
    if not input_document.valid:
        raise PageSightError(
            ErrorCode.CORRUPT,
            Stage.PARSE,
            f"{path.name}: Docling cannot open this file as {source_format.value}",
        )
    return input_document


def _execute(
    pipeline: SimplePipeline | StandardPdfPipeline, input_document: InputDocument, path: Path
) -> ConversionResult:
    from docling.datamodel.base_models import ConversionStatus

    try:
        result = pipeline.execute(input_document, raises_on_error=True)
    except Exception as exc:  # a backend failing on malformed input raises anything
        cause = exc.__cause__ or exc
        raise PageSightError(
            ErrorCode.CORRUPT,
            Stage.PARSE,
            f"{path.name}: Docling could not convert it ({type(cause).__name__}: {cause})",
        ) from exc
    if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        details = "; ".join(error.error_message for error in result.errors) or "no details"
        raise PageSightError(
            ErrorCode.CORRUPT,
            Stage.PARSE,
            f"{path.name}: Docling conversion ended {result.status.value} ({details})",
        )
    return result


def _partial_success_warnings(result: ConversionResult) -> list[ParseWarning]:
    return [
        ParseWarning(code=ErrorCode.CORRUPT, message=f"docling: {error.error_message}")
        for error in result.errors
    ]


def _table_serializer(docling_document: DoclingDocument) -> MarkdownDocSerializer:
    """Markdown for tables, as ``TableItem.export_to_markdown(doc)`` makes it, but without the
    caption (it travels in ``Element.caption``; the chunker puts it first), without column
    padding (it only costs characters of the chunk budget) and without escaping ``_`` or HTML
    (chunk text is matched by BM25 and read by models, not rendered)."""
    from docling_core.transforms.serializer.markdown import MarkdownDocSerializer, MarkdownParams
    from docling_core.types.doc import DocItemLabel

    params = MarkdownParams.model_validate(
        {
            "labels": set(DocItemLabel) - {DocItemLabel.CAPTION},
            "compact_tables": True,
            "escape_underscores": False,
            "escape_html": False,
        }
    )
    return MarkdownDocSerializer(doc=docling_document, params=params)


def _caption(item: Any, docling_document: DoclingDocument) -> str | None:
    texts = [ref.resolve(docling_document).text.strip() for ref in item.captions]
    caption = " ".join(text for text in texts if text)
    return caption or None


def _inside_table(item: NodeItem, docling_document: DoclingDocument) -> bool:
    from docling_core.types.doc import TableItem

    parent_ref = item.parent
    while parent_ref is not None:
        parent = parent_ref.resolve(docling_document)
        if isinstance(parent, TableItem):
            return True
        parent_ref = parent.parent
    return False


def _provenance(item: Any, docling_document: DoclingDocument) -> tuple[int, BBox | None]:
    provenance = getattr(item, "prov", None)
    if not provenance:
        return 1, None
    first = provenance[0]
    page = docling_document.pages.get(first.page_no)
    if page is None:
        return first.page_no, None
    top_left = first.bbox.to_top_left_origin(page_height=page.size.height)
    return first.page_no, BBox.of((top_left.l, top_left.t, top_left.r, top_left.b))


def _pages(docling_document: DoclingDocument, doc_id: str, element_pages: set[int]) -> list[Page]:
    """Docling's pages when it has any (PDF); else the single page a DOCX/HTML/Markdown file is.

    Those formats have no page geometry, so the one page is 0 x 0 points and counts as having a
    text layer. A PDF page has one when Docling (whose OCR is off here) found elements on it.
    """
    sizes = {
        number: (page.size.width, page.size.height)
        for number, page in docling_document.pages.items()
    }
    numbers = sorted(set(sizes) | element_pages) or [1]
    return [
        Page(
            doc_id=doc_id,
            page_number=number,
            width=sizes.get(number, (0.0, 0.0))[0],
            height=sizes.get(number, (0.0, 0.0))[1],
            has_text_layer=not sizes or number in element_pages,
            parser=DOCLING_PARSER,
        )
        for number in numbers
    ]
