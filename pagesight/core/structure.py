"""A document's own structure as the catalog keeps it: printed page labels, the outline's sections
and numbered figures, tables and equations (filled by :mod:`pagesight.ingestion.structure`; what
:mod:`pagesight.query.references` resolves "page 17" and "Figure 3" against)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from pagesight.core.document import BBox
from pagesight.core.identity import DocumentIdentity


class StructurePage(BaseModel):
    """A page as the document names it: its 1-based index and, where known, its printed label
    (``"iv"``, ``"17"``, ``"A-3"``) or slide number."""

    page_number: int = Field(ge=1)
    label: str | None = None
    label_source: Literal["pdf", "folio"] | None = Field(
        default=None, description="'pdf': the PDF's /PageLabels; 'folio': read on the page"
    )
    width: float = 0.0
    height: float = 0.0


class StructureSection(BaseModel):
    """A section of the document's outline, with the pages it spans."""

    title: str
    level: int = Field(default=1, ge=1)
    number: str | None = Field(default=None, description="e.g. '2.1', 'Note 7'")
    page_start: int = Field(ge=1)
    page_end: int = Field(ge=1)


class StructureItem(BaseModel):
    """A numbered figure, table or equation: where it is and what its caption says."""

    kind: Literal["figure", "table", "equation"]
    number: str | None = Field(default=None, description="as printed: '3', '2.1', '4b'")
    caption: str | None = None
    page_number: int = Field(ge=1)
    bbox: BBox | None = None
    element_id: str | None = None


class DomainPage(BaseModel):
    """A page a domain pack recognised by its content, e.g. the finance pack's statement pages:
    ``label`` is the pack's own name for what the page is ('cash_flows'), ``confidence`` how
    sure the page's content makes it (0-1)."""

    label: str
    page_number: int = Field(ge=1)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    title: str | None = None


class DomainMark(BaseModel):
    """What a domain pack's detector found in a document at ingest
    (:mod:`pagesight.query.domains`): whether the pack applies to it (``detected``), how sure
    that is, and the pages it recognised. The core names no domain: packs do."""

    name: str
    detected: bool = False
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    content: bool = Field(
        default=True, description="read from the pages' content (False: from titles alone)"
    )
    pages: list[DomainPage] = Field(default_factory=list)


class DocumentStructure(BaseModel):
    """What the catalog knows of a document's structure (``GET /v1/documents/{id}/structure``)."""

    doc_id: str
    version: str
    pages: list[StructurePage] = Field(default_factory=list)
    sections: list[StructureSection] = Field(default_factory=list)
    items: list[StructureItem] = Field(default_factory=list)
    identity: DocumentIdentity | None = Field(
        default=None,
        description="who the document is (issuer, kind, period; pagesight.core.identity); None "
        "for a document stored before identities were kept",
    )
    domains: list[DomainMark] | None = Field(
        default=None,
        description="the domain packs' detections; None: not run (a structure stored before "
        "packs, detected when the query side loads it)",
    )

    def domain(self, name: str) -> DomainMark | None:
        """The mark of pack ``name``, if its detector ran on this document."""
        return next((m for m in self.domains or () if m.name == name), None)
