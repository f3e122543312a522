"""The HTTP API's request and response models (``/v1``), in one module.

Routers, the serving backend and the Python client all speak these types, so the OpenAPI
schema at ``/docs`` is exactly what the client sends and receives. Core types
(:class:`core.types.IngestJob`, :class:`core.types.RetrievalTrace`, ...) are reused where the
API shows them as they are; API-only shapes live here.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from core.types import BBox, Document, IngestJob, RetrievalTrace, RouteName

API_PREFIX = "/v1"


class ErrorBody(BaseModel):
    """Every non-2xx answer: a stable code, the stage that raised it, a message for humans."""

    code: str = Field(description="e.g. UNAUTHORIZED, NOT_FOUND, TOO_LARGE, INVALID_REQUEST")
    stage: str = Field(description="where it happened: input, auth, limits, query, index, ...")
    message: str
    trace_id: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


class SearchFilters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    doc_ids: list[str] | None = Field(
        default=None, description="only these documents (of the caller's tenant)"
    )


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)
    route: RouteName = RouteName.AUTO
    top_k: int = Field(default=10, ge=1)
    filters: SearchFilters = Field(default_factory=SearchFilters)


class SearchHit(BaseModel):
    """One page: where it is, why it was found, and what to show."""

    doc_id: str
    page_number: int
    rank: int
    score: float = Field(description="fused score")
    route_scores: dict[str, float] = Field(
        default_factory=dict, description="raw score of the page's best candidate per route"
    )
    snippet: str = ""
    title: str | None = None
    source_uri: str | None = None
    kinds: list[str] = Field(default_factory=list)
    chunk_ids: list[str] = Field(default_factory=list)
    element_ids: list[str] = Field(default_factory=list)
    evidence: list[BBox] = Field(
        default_factory=list, description="boxes on the page (PDF points) that matched"
    )
    page_image_url: str = Field(description="relative URL of the page image, with highlights")


class SearchResponse(BaseModel):
    trace_id: str
    route: RouteName = Field(description="the route that ran (auto resolves to one)")
    hits: list[SearchHit]
    elapsed_ms: float


class JobAccepted(BaseModel):
    job_id: str
    doc_id: str
    state: str
    status_url: str


class JobList(BaseModel):
    jobs: list[IngestJob]


class DocumentList(BaseModel):
    documents: list[Document]


class DocumentDetail(BaseModel):
    document: Document
    pages: int
    ingested_at: datetime | None = None


class UriIngest(BaseModel):
    """Ingest a document from a URI on the gateway's allowlist (never an arbitrary URL)."""

    model_config = ConfigDict(extra="forbid")

    uri: str = Field(min_length=1)
    doc_id: str | None = Field(default=None, description="stable id; default: from the URI")
    acl: list[str] = Field(default_factory=list)
    valid_until: datetime | None = None


class Deleted(BaseModel):
    doc_id: str
    deleted: bool


class TraceResponse(BaseModel):
    trace: RetrievalTrace


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, bool]
    detail: dict[str, str] = Field(default_factory=dict)
