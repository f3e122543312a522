"""The HTTP API's request and response models (``/v1``), in one module.

The routers, the index service behind them, the CLI and the Python client all speak these
types, so the OpenAPI schema at ``/docs`` is exactly what the client sends and receives. Core
types (:class:`pagesight.core.types.IngestJob`, :class:`pagesight.core.types.RetrievalTrace`, ...)
are reused where the API shows them as they are; API-only shapes live here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from pagesight.core.ids import DOC_ID_PATTERN
from pagesight.core.types import (
    AuditEntry,
    BBox,
    Document,
    JobStatus,
    QueryText,
    Question,
    RetrievalTrace,
    RouteName,
    SearchFilters,
)

API_PREFIX = "/v1"


#: A document id as callers may give it (:data:`pagesight.core.ids.DOC_ID_PATTERN`).
DocId = Annotated[str, Field(pattern=DOC_ID_PATTERN, description="1-128 of A-Z a-z 0-9 . _ : @ -")]
#: What an upload did to the caller's documents.
Outcome = Literal["created", "replaced", "unchanged"]


class ErrorBody(BaseModel):
    """Every non-2xx answer: a stable code, the stage that raised it, a message for humans."""

    code: str = Field(description="e.g. UNAUTHORIZED, NOT_FOUND, TOO_LARGE, INVALID_REQUEST")
    stage: str = Field(description="where it happened: input, auth, limits, query, index, ...")
    message: str
    trace_id: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: QueryText
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
    source_name: str | None = Field(
        default=None, description="the file name: the last component of source_uri"
    )
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


class Submitted(BaseModel):
    """What the service did with an upload or URI: the job, and created/replaced/unchanged."""

    job: JobStatus
    outcome: Outcome


class JobAccepted(BaseModel):
    job_id: str
    doc_id: str
    state: str
    outcome: Outcome = Field(
        description=(
            "created: a new document; replaced: a new version of the document named by doc_id "
            "(or replace=true); unchanged: the same bytes, ACL and validity were already there"
        )
    )
    status_url: str


class JobList(BaseModel):
    jobs: list[JobStatus]


class AuditList(BaseModel):
    entries: list[AuditEntry]


class DocumentList(BaseModel):
    documents: list[Document]


class DocumentDetail(BaseModel):
    document: Document
    pages: int
    ingested_at: datetime | None = None


class UriIngest(BaseModel):
    """Ingest a document from a URI on the gateway's allowlist (never an arbitrary URL)."""

    model_config = ConfigDict(extra="forbid")

    uri: str = Field(min_length=1, max_length=4096)
    doc_id: DocId | None = Field(default=None, description="stable id; default: from the URI")
    acl: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        default_factory=list, max_length=100
    )
    valid_until: datetime | None = None
    password: SecretStr | None = Field(
        default=None,
        max_length=1024,
        description="opens an encrypted PDF; never stored, logged or traced",
    )


class Deleted(BaseModel):
    doc_id: str
    deleted: bool


class TraceResponse(BaseModel):
    trace: RetrievalTrace


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, bool]
    detail: dict[str, str] = Field(default_factory=dict)


class AnswerRequest(Question):
    """``POST /v1/answer``: a :class:`pagesight.core.types.Question`, and how to deliver the
    answer."""

    stream: bool = Field(
        default=False,
        description=(
            "answer as server-sent events: 'token' events as the text is written, then one "
            "'answer' event with the checked answer, the authority (tokens cannot be unsent)"
        ),
    )
