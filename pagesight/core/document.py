"""The typed document model shared by every layer (DESIGN.md section 2).

Coordinates are PDF points (1/72 inch) with the origin at the top-left of the page as displayed
(after /Rotate is applied), which is PyMuPDF's convention and the one page images use. Ids are
strings produced by :mod:`pagesight.core.ids` so that re-parsing the same bytes gives the same ids.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from pagesight.core.errors import ErrorCode


class ElementKind(StrEnum):
    TEXT = "text"
    TITLE = "title"
    TABLE = "table"
    FIGURE = "figure"
    EQUATION = "equation"
    CAPTION = "caption"
    LIST = "list"
    CODE = "code"


#: Kinds that are never split and always travel with their caption.
ATOMIC_KINDS = frozenset({ElementKind.TABLE, ElementKind.FIGURE, ElementKind.EQUATION})


class SourceFormat(StrEnum):
    PDF = "pdf"
    IMAGE = "image"
    DOCX = "docx"
    HTML = "html"
    MARKDOWN = "markdown"


class BBox(BaseModel):
    """An axis-aligned box in PDF points, top-left origin."""

    model_config = ConfigDict(frozen=True)

    x0: float
    y0: float
    x1: float
    y1: float

    @model_validator(mode="after")
    def _ordered(self) -> BBox:
        if self.x1 < self.x0 or self.y1 < self.y0:
            raise ValueError(f"bbox corners out of order: {self}")
        return self

    @classmethod
    def of(cls, rect: tuple[float, float, float, float] | list[float]) -> BBox:
        x0, y0, x1, y1 = (float(v) for v in rect)
        return cls(x0=min(x0, x1), y0=min(y0, y1), x1=max(x0, x1), y1=max(y0, y1))

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    @property
    def area(self) -> float:
        return self.width * self.height

    def union(self, other: BBox) -> BBox:
        return BBox(
            x0=min(self.x0, other.x0),
            y0=min(self.y0, other.y0),
            x1=max(self.x1, other.x1),
            y1=max(self.y1, other.y1),
        )

    def intersection_area(self, other: BBox) -> float:
        w = min(self.x1, other.x1) - max(self.x0, other.x0)
        h = min(self.y1, other.y1) - max(self.y0, other.y0)
        return w * h if w > 0 and h > 0 else 0.0

    def clip(self, width: float, height: float) -> BBox:
        return BBox(
            x0=min(max(self.x0, 0.0), width),
            y0=min(max(self.y0, 0.0), height),
            x1=min(max(self.x1, 0.0), width),
            y1=min(max(self.y1, 0.0), height),
        )

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.x0, self.y0, self.x1, self.y1)


class DocumentState(StrEnum):
    """What a catalogued document is to search (README, "Zero-downtime re-index").

    READY: the live index version holds its points. MISSING: ``pagesight reindex
    --allow-missing`` left it out of the version it promoted (its source file was gone or had
    changed), so nothing of it is searchable, yet it stays listed, so that the operator sees
    what was lost instead of a document that silently vanished. Re-ingesting its file makes it
    READY again, so does a rollback to a version that held it; deleting it removes it."""

    READY = "READY"
    MISSING = "MISSING"


def source_name(source_uri: object) -> str | None:
    """The file name in a document's source URI: the last component of its path, URL-decoded
    (``file:///data/Annual%20Report.pdf`` -> ``Annual Report.pdf``; an upload's
    ``upload:q3.pdf`` -> ``q3.pdf``); ``None`` when there is none. What is shown next to a
    document's title (never a storage path, never a bare id)."""
    if not isinstance(source_uri, str) or not source_uri.strip():
        return None
    if source_uri.startswith("upload:"):
        path = source_uri.removeprefix("upload:")
    elif "://" in source_uri:
        parts = urlsplit(source_uri)
        path = unquote(parts.path) if parts.path.strip("/") else parts.netloc
    else:
        path = source_uri
    name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].strip()
    return name or None


class Document(BaseModel):
    """One ingested file. ``doc_id`` is stable across edits; ``version`` changes with the bytes."""

    doc_id: str
    version: str = Field(description="sha256 of the file's bytes")
    tenant: str = "default"
    acl: list[str] = Field(default_factory=list, description="principals allowed to read it")
    source_uri: str
    title: str | None = None
    valid_until: datetime | None = None
    page_count: int = 0
    source_format: SourceFormat = SourceFormat.PDF
    size_bytes: int = 0
    structure_version: int = Field(
        default=0,
        description="the structure and payload rules it was indexed with "
        "(pagesight.ingestion.structure.STRUCTURE_VERSION); re-ingesting re-parses an older one",
    )
    chunk_count: int | None = Field(
        default=None,
        description="chunks this version wrote to the text index (none for a file recorded "
        "before the count was kept); 0 is a file with no text, which re-ingesting skips too",
    )
    state: DocumentState = Field(
        default=DocumentState.READY,
        description="READY: searchable in the live index version; MISSING: a re-index left it "
        "out (its source file was gone or changed): listed, never searched, until its file is "
        "ingested again, a rollback restores the version that held it, or it is deleted",
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="the file name: the last component of source_uri, shown next to the title"
    )
    @property
    def source_name(self) -> str | None:
        return source_name(self.source_uri)


class Page(BaseModel):
    doc_id: str
    page_number: int = Field(ge=1, description="1-based")
    width: float = Field(description="points, as displayed")
    height: float = Field(description="points, as displayed")
    image_ref: str | None = Field(default=None, description="content address of the rendered image")
    image_size: tuple[int, int] | None = Field(default=None, description="pixels (w, h)")
    has_text_layer: bool = False
    parser: str = Field(default="text-layer", description="what produced this page's elements")
    label: str | None = Field(
        default=None,
        description="printed page label: the PDF's /PageLabels, else the folio read in a "
        "header or footer (e.g. 'iv', '17')",
    )
    margin_text: list[str] = Field(
        default_factory=list,
        description="short lines in the top and bottom margins (running heads, folios): what "
        "folio detection reads; not indexed",
    )
    warnings: list[str] = Field(default_factory=list)


class TextLine(BaseModel):
    """Where a piece of an element's text is printed: characters ``start:end`` of
    ``Element.text`` sit in ``bbox`` (one printed line, or an OCR line)."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    bbox: BBox


class TextSpan(BaseModel):
    """Where a piece of a chunk's text is printed: characters ``start:end`` of ``Chunk.text``
    sit on ``page_number`` inside ``bbox``. A quote is cited on the pages and boxes of the
    spans its characters overlap, so a chunk that runs across a page break is cited per page."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    page_number: int = Field(ge=1)
    bbox: BBox


class Element(BaseModel):
    """One unit of page content, in reading order (``seq``) within its page."""

    element_id: str
    doc_id: str
    kind: ElementKind
    text: str = Field(
        description="markdown for tables, LaTeX for equations, the caption for figures"
    )
    page_number: int = Field(ge=1)
    seq: int = Field(ge=0, description="reading order within the page")
    bbox: BBox | None = None
    section_path: list[str] = Field(default_factory=list)
    parser: str = "text-layer"
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    caption: str | None = Field(default=None, description="tables/figures/equations: their caption")
    lines: list[TextLine] = Field(
        default_factory=list,
        description="character ranges of ``text`` and the line box each is printed in, in "
        "order; empty when the parser knows no finer geometry than ``bbox``",
    )
    cells: list[list[str]] | None = Field(
        default=None,
        description="tables: the rows of cell texts the parser found, first row the header "
        "row, each row as wide as the widest. The grid is the source: a parser that has one "
        "renders ``text`` from it, and whoever needs rows and columns reads them here instead "
        "of parsing the markdown back. None for other kinds, for a table that arrived as "
        "markdown (a VLM's reply) and for elements stored before cells were kept",
    )


class Chunk(BaseModel):
    """The unit of text retrieval: one or more consecutive elements of one section."""

    chunk_id: str
    doc_id: str
    seq: int = Field(ge=0)
    element_ids: list[str]
    page_numbers: list[int]
    section_path: list[str] = Field(default_factory=list)
    kinds: list[ElementKind]
    text: str
    bboxes: list[tuple[int, BBox]] = Field(
        default_factory=list, description="(page_number, bbox) of each element that has one"
    )
    spans: list[TextSpan] = Field(
        default_factory=list,
        description="where the characters of ``text`` are printed: (start, end, page, box), in "
        "text order; pieces the parser gave no box are absent",
    )
    unit: Literal["chunk", "table_row"] = Field(
        default="chunk",
        description="'table_row': one row of a statement table with its headers, indexed "
        "besides the whole table so a single line item can be found",
    )


class ParseWarning(BaseModel):
    """A problem that cost part of a document but not all of it (e.g. one page failed OCR)."""

    code: ErrorCode
    page_number: int | None = None
    message: str


class OutlineEntry(BaseModel):
    """One entry of the PDF's own outline (bookmarks)."""

    level: int = Field(ge=1)
    title: str
    page_number: int = Field(description="1-based; <= 0 when the entry points nowhere")


class ParsedDocument(BaseModel):
    """What the parse stage hands to chunking and indexing."""

    document: Document
    pages: list[Page]
    elements: list[Element]
    warnings: list[ParseWarning] = Field(default_factory=list)
    outline: list[OutlineEntry] = Field(default_factory=list)

    def elements_on(self, page_number: int) -> list[Element]:
        return [e for e in self.elements if e.page_number == page_number]
