"""The typed document model shared by every layer (DESIGN.md section 2).

Coordinates are PDF points (1/72 inch) with the origin at the top-left of the page as displayed
(after /Rotate is applied), which is PyMuPDF's convention and the one page images use. Ids are
strings produced by :mod:`core.ids` so that re-parsing the same bytes gives the same ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, computed_field, model_validator

from core.errors import ErrorCode


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
        "(ingestion.structure.STRUCTURE_VERSION); re-ingesting re-parses an older one",
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


class SparseVector(BaseModel):
    """A sparse vector as (index, value) pairs; indices are unique and need not be sorted."""

    indices: list[int] = Field(default_factory=list)
    values: list[float] = Field(default_factory=list)

    @model_validator(mode="after")
    def _aligned(self) -> SparseVector:
        if len(self.indices) != len(self.values):
            raise ValueError("sparse vector indices and values differ in length")
        return self


#: The ACL principal that lets every principal of the tenant read a document.
EVERYONE = "*"


class AccessFilter(BaseModel):
    """Who is asking: applied inside every candidate query, never after retrieval.

    A point is visible when its ``tenant`` matches, its ``acl`` shares a principal with
    ``principals`` (or contains :data:`EVERYONE`), and its ``valid_until`` is unset or not
    before ``now``. ``principals=None`` skips the ACL check (tenant administrators, batch jobs),
    never the tenant check.
    """

    tenant: str
    principals: list[str] | None = None
    now: datetime | None = None
    doc_ids: list[str] | None = None

    def admits(self, tenant: str, acl: list[str], valid_until: datetime | None) -> bool:
        """The same rule for a record read outside the index (a catalog document, a job, an
        audit entry) as the index applies to points: tenant, ACL (an empty ``acl`` is
        :data:`EVERYONE`, as ingestion writes it), validity at ``now``."""
        if tenant != self.tenant:
            return False
        if self.principals is not None:
            allowed = set(acl) or {EVERYONE}
            if EVERYONE not in allowed and not allowed.intersection(self.principals):
                return False
        if valid_until is not None:
            now = self.now or datetime.now(valid_until.tzinfo)
            if valid_until.timestamp() < now.timestamp():
                return False
        return True

    def admits_document(self, document: Document) -> bool:
        return self.admits(document.tenant, document.acl, document.valid_until)


class JobState(StrEnum):
    """Ingest job states (DESIGN.md section 2); READY and FAILED are terminal."""

    PENDING = "PENDING"
    RENDERING = "RENDERING"
    PARSING = "PARSING"
    EMBEDDING = "EMBEDDING"
    INDEXING = "INDEXING"
    READY = "READY"
    FAILED = "FAILED"

    @property
    def terminal(self) -> bool:
        return self in (JobState.READY, JobState.FAILED)


class JobStatus(BaseModel):
    """An ingest job as callers see it: its state, never where the service keeps the file."""

    job_id: str
    tenant: str
    source_uri: str
    doc_id: str
    version: str | None = None
    acl: list[str] = Field(default_factory=list)
    valid_until: datetime | None = None
    state: JobState = JobState.PENDING
    error_code: ErrorCode | None = None
    error_stage: str | None = None
    error_message: str | None = None
    warnings: list[str] = Field(default_factory=list)
    pages: int = 0
    chunks: int = 0
    unchanged: bool = False
    attempts: int = 0
    created_at: datetime
    updated_at: datetime


class IngestJob(JobStatus):
    """One file's trip through ingestion, persisted so a killed batch can resume."""

    path: str = Field(description="where the service reads the file (internal)")
    submitted_by: str | None = Field(default=None, description="key id or CLI user")

    def status(self) -> JobStatus:
        """What the API shows of this job."""
        return JobStatus.model_validate(self.model_dump(include=set(JobStatus.model_fields)))


class AuditEntry(BaseModel):
    """One delete or replacement of a document: who (key id), what, when."""

    seq: int = 0
    at: datetime
    tenant: str
    actor: str = Field(description="API key id, or cli:<user> for the command line")
    action: Literal["delete", "replace"]
    doc_id: str
    version: str | None = Field(default=None, description="the version removed or replaced")
    new_version: str | None = None
    source_uri: str | None = None
    acl: list[str] = Field(default_factory=list, description="the document's ACL at the time")
    via: str = Field(default="", description="api, cli, sync")


class RouteName(StrEnum):
    """Retrieval routes (DESIGN.md section 4)."""

    AUTO = "auto"
    VISUAL = "visual"
    TEXT = "text"
    KEYWORD = "keyword"
    HYBRID = "hybrid"
    AGENTIC = "agentic"


class PageHit(BaseModel):
    """One page in a ranked result: the unit users see and evaluation scores."""

    doc_id: str
    page_number: int
    page_label: str | None = Field(
        default=None, description="the page's printed label ('17', 'iv'), where known"
    )
    rank: int = Field(ge=1)
    score: float = Field(description="fused score of the page's best candidate")
    route_scores: dict[str, float] = Field(
        default_factory=dict, description="raw score of the best candidate per route"
    )
    chunk_ids: list[str] = Field(default_factory=list)
    element_ids: list[str] = Field(default_factory=list)
    kinds: list[str] = Field(default_factory=list)
    snippet: str = ""
    title: str | None = None
    source_uri: str | None = None
    bboxes: list[BBox] = Field(default_factory=list, description="evidence boxes on this page")

    @computed_field(  # type: ignore[prop-decorator]
        description="the file name: the last component of source_uri, shown next to the title"
    )
    @property
    def source_name(self) -> str | None:
        return source_name(self.source_uri)


class RouteTrace(BaseModel):
    route: str
    weight: float
    candidates: list[tuple[str, float]] = Field(
        default_factory=list, description="(candidate id, raw score), best first"
    )
    skipped: str | None = Field(default=None, description="why the route did not run")


class Grade(StrEnum):
    """How well one retrieved passage serves the question (corrective retrieval, CRAG)."""

    CORRECT = "correct"  # states (part of) the answer
    AMBIGUOUS = "ambiguous"  # on topic, but does not clearly state the answer
    INCORRECT = "incorrect"  # unrelated: it cannot help answer


class GradeRecord(BaseModel):
    """One passage's grade in one round of corrective retrieval."""

    round: int = Field(ge=0, description="0 = the first retrieval, 1 = the corrective round")
    chunk_id: str
    doc_id: str
    page_number: int
    grade: Grade
    source: Literal["llm", "score"] = Field(description="an LLM's verdict, or a score band")
    reason: str | None = Field(
        default=None, description="the score and band, or why grading failed"
    )
    cached: bool = Field(default=False, description="reused, not graded again")


class CorrectiveTrace(BaseModel):
    """What corrective retrieval did: every grade, the decision, the rewrite or widening, and
    which candidates the answer step got, so the outcome can be replayed by hand."""

    query: str = Field(default="", description="the question every passage is graded against")
    grader: str = Field(description="'llm:<model>' or 'score-bands[lo, hi)'")
    grade_top_k: int = Field(description="passages graded per round, at most")
    grades: list[GradeRecord] = Field(default_factory=list)
    decision: Grade | None = Field(default=None, description="over the first round's grades")
    action: Literal["pass", "rewrite", "widen", "abstain"] = "pass"
    corrected_decision: Grade | None = Field(
        default=None, description="over the corrective round's grades; None without one"
    )
    used: Literal["original", "corrected", "none"] = Field(
        default="original", description="whose candidates went on to the answer step"
    )
    rounds: int = Field(default=0, ge=0, le=1, description="corrective rounds run (at most 1)")
    rewritten_query: str | None = None
    rewrite_source: Literal["llm", "keywords"] | None = None
    widened_route: RouteName | None = None
    widened_top_k: int | None = None
    dropped: list[str] = Field(
        default_factory=list, description="chunk ids graded incorrect and taken out"
    )
    abstained: bool = False
    reason: str | None = Field(default=None, description="why it abstained")
    cache_hits: int = 0
    cache_misses: int = 0
    llm_calls: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    steps: list[str] = Field(default_factory=list, description="every decision, in words")
    stages_ms: dict[str, float] = Field(default_factory=dict, description="grade, rewrite, ...")


class ImageContextRef(BaseModel):
    """A page image that was part of an answer's context: where it came from and what it cost.

    Traces keep this, never the image or its data URL (a trace is stored and shown to
    administrators; the image is already stored once, and is read again through the page-image
    route, which checks access).
    """

    n: int = Field(ge=1, description="its number among the context blocks")
    doc_id: str
    page_number: int
    box: BBox | None = Field(
        default=None, description="the crop, PDF points; None = the whole page"
    )
    width: int = Field(description="pixels sent")
    height: int = Field(description="pixels sent")
    tokens: int = Field(description="what the image costs the model, estimated")


class VisionTrace(BaseModel):
    """Whether an answer request carried page images, and why (``PAGESIGHT_LLM__VISION``)."""

    setting: Literal["off", "auto", "always"]
    sent: bool = Field(description="images were in the request that produced the answer")
    reason: str = Field(description="why images were or were not sent")
    images: list[ImageContextRef] = Field(default_factory=list)
    fallback: str | None = Field(
        default=None,
        description="why the answer was asked again with text alone (the VLM failed on images)",
    )


class AnswerTrace(BaseModel):
    """What the answer step did after retrieval: the audit half of an answered query's trace.

    It records enough to replay the decision by hand: which passages the ranker put first and
    with what scores, which of them became numbered context, what the LLM was asked and
    answered (token counts, every attempt's problem), and what the caller got.
    """

    mode: Literal["llm", "extractive"]
    ranker: str = Field(description="model_id of the scorer that reranked the candidates")
    visual_ranker: str | None = Field(
        default=None, description="model_id of the page model whose MaxSim order was fused in"
    )
    candidates: int = Field(default=0, description="passages the candidate search returned")
    reranked: list[tuple[str, float | None]] = Field(
        default_factory=list,
        description="(chunk id, score) in rerank order, kept passages only; None = not scored",
    )
    context: list[str] = Field(
        default_factory=list, description="chunk id of each numbered context block, 1 first"
    )
    context_tokens: int = Field(default=0, description="estimated tokens of the context blocks")
    prompt_tokens: int | None = Field(default=None, description="as the LLM server counted them")
    completion_tokens: int | None = None
    attempts: list[str] = Field(
        default_factory=list,
        description="each LLM attempt's outcome: 'ok' or the problem that made it retry",
    )
    sufficient: list[int] | None = Field(
        default=None,
        description="context blocks the model judged to contain the answer by themselves "
        "(structured LLM replies; unknown numbers dropped); None = not judged",
    )
    confidence: float = 0.0
    abstained: bool = False
    reason: str | None = None
    answer: str = ""
    cited: list[str] = Field(default_factory=list, description="chunk ids the answer cites")
    stages_ms: dict[str, float] = Field(default_factory=dict, description="rerank, generate, ...")
    corrective: CorrectiveTrace | None = Field(
        default=None, description="set when corrective retrieval graded the candidates"
    )
    vision: VisionTrace | None = Field(
        default=None, description="page images in the context; None = no LLM, or vision off"
    )
    answer_type: str | None = Field(
        default=None,
        description="extractive: what the question asks for (amount, percent, count, year, "
        "date, name) or None",
    )
    coverage: float | None = Field(
        default=None,
        description="extractive: the share of the question's content the best unit covers "
        "(abstains below answer.min_coverage); None when not judged",
    )


#: What a structural reference names (``StructuralReference.kind``).
ReferenceKind = Literal[
    "page",
    "slide",
    "position",
    "figure",
    "table",
    "equation",
    "section",
    "chapter",
    "note",
    "appendix",
    "cover",
    "titled",
    "statement",
]


class StructuralReference(BaseModel):
    """A place in a document that a query names by the document's own structure."""

    kind: ReferenceKind
    text: str = Field(description="the words of the query that name it")
    value: str | None = Field(
        default=None, description="as printed: '17', 'iv', '2.1', '4b', 'B'; a title for 'titled'"
    )
    end: str | None = Field(default=None, description="last page of a range ('pages 3-5')")
    position: int | None = Field(
        default=None, description="'position': 1 first, 2 second, -1 last, -2 second last"
    )
    inferred: bool = Field(
        default=False,
        description="implied by the query's terms ('capex' -> the cash flow statement), not named",
    )


class ResolvedReference(BaseModel):
    """Where a reference led, for the trace: pages per document, or why nowhere."""

    reference: StructuralReference
    pages: list[tuple[str, int]] = Field(
        default_factory=list, description="(doc_id, page number) it resolved to"
    )
    unresolved: str | None = Field(
        default=None, description="why it led nowhere, e.g. 'no page 300: 212 pages'"
    )


#: What a multi-step search plan is (``query.planner``): one search, or several parts.
PlanKind = Literal["single", "comparison", "conjunction", "list", "aggregate"]
#: Why a multi-step search stopped.
StopReason = Literal["plan_done", "no_new_evidence", "max_steps", "time_budget"]


class FollowedReference(BaseModel):
    """A reference read in a retrieved passage ("see Note 7", "continued on page 12") and
    what multi-step search did with it: followed to its pages, or why not."""

    reference: StructuralReference
    found_on: tuple[str, int] = Field(description="(doc_id, page number) of the passage")
    chunk_id: str | None = None
    cue: str | None = Field(
        default=None, description="the pointing words next to it ('see', '参照'); None = bare"
    )
    pages: list[tuple[str, int]] = Field(
        default_factory=list, description="(doc_id, page number) it resolved to"
    )
    followed: bool = False
    skipped: str | None = Field(
        default=None,
        description="why it was not followed: unresolved, its own page, already found, limit",
    )


class SearchStep(BaseModel):
    """One step of a multi-step search: a (sub-)query searched, or the references of pages
    reached by the previous step followed one more hop."""

    step: int = Field(ge=1)
    action: Literal["search", "follow"]
    sub_query: str | None = Field(default=None, description="what was searched ('search')")
    scope: Literal["all", "lead_document"] = Field(
        default="all", description="lead_document: searched only in the leading document"
    )
    pages: list[tuple[str, int]] = Field(
        default_factory=list, description="the step's own pages, best first (what it counts)"
    )
    new_pages: list[tuple[str, int]] = Field(
        default_factory=list, description="pages no earlier step had, followed ones included"
    )
    references: list[FollowedReference] = Field(
        default_factory=list, description="references read in the step's passages"
    )
    elapsed_ms: float = 0.0


class MultiStepTrace(BaseModel):
    """What route ``agentic`` did: the plan, every step, and why it stopped."""

    planner: str = Field(description="'rule' or 'llm:<model>'")
    plan_kind: PlanKind
    sub_queries: list[str] = Field(default_factory=list, description="as planned")
    plan_note: str | None = Field(
        default=None, description="e.g. why the LLM planner fell back to the rules"
    )
    plan_ms: float = 0.0
    steps: list[SearchStep] = Field(default_factory=list)
    stop_reason: StopReason
    max_steps: int
    time_budget_ms: float


class RetrievalTrace(BaseModel):
    """What a query did, for debugging and audit (DESIGN.md section 5: a trace per query)."""

    trace_id: str
    query: str
    requested_route: RouteName
    route: RouteName
    routes: list[RouteTrace] = Field(default_factory=list)
    fused: list[tuple[str, float]] = Field(default_factory=list)
    index_version: str | None = None
    elapsed_ms: float = 0.0
    stages_ms: dict[str, float] = Field(
        default_factory=dict, description="time per stage: keyword, dense, visual, fuse, ..."
    )
    doc_ids: list[str] = Field(
        default_factory=list,
        description="every document a candidate came from (deleting one purges the trace)",
    )
    references: list[ResolvedReference] = Field(
        default_factory=list,
        description="structural references the query named and where they resolved",
    )
    answer: AnswerTrace | None = Field(
        default=None, description="set when the query was a /v1/answer request"
    )
    multistep: MultiStepTrace | None = Field(
        default=None, description="route agentic: its plan, steps and stop reason"
    )


class SearchResult(BaseModel):
    hits: list[PageHit]
    trace: RetrievalTrace


# -- questions and answers ---------------------------------------------------------------------


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must contain a non-whitespace character")
    return text


def _valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("must be valid Unicode text (no lone surrogate escapes)") from exc
    return text


#: Text a request hands on (to the index, or back in a response): valid Unicode, else 422. JSON
#: may escape a lone surrogate (``"\\ud800"``), which no UTF-8 text holds; an unconstrained
#: ``str`` lets it through to fail deeper (the index's filter, serialising the response).
UnicodeText = Annotated[str, AfterValidator(_valid_unicode)]
#: A question or search: at least one non-whitespace character (a blank query matches nothing
#: a person meant, so it is refused rather than answered with arbitrary pages).
QueryText = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]
#: strict: uncited sentences are dropped and weak evidence abstains.
Policy = Literal["standard", "strict"]
#: A page: (doc_id, page_number).
PageKey = tuple[str, int]
#: A page and its visual score (None: not scored).
PageScore = tuple[PageKey, float | None]


class SearchFilters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    doc_ids: list[UnicodeText] | None = Field(
        default=None, max_length=1000, description="only these documents (of the caller's tenant)"
    )


class Question(BaseModel):
    """A question to answer from the caller's documents (the HTTP request adds ``stream``)."""

    model_config = ConfigDict(extra="forbid")

    query: QueryText
    route: RouteName = RouteName.AUTO
    top_k_context: int = Field(
        default=8, ge=1, le=50, description="passages kept after reranking, before the budget"
    )
    policy: Policy = Field(
        default="standard",
        description=(
            "strict: uncited sentences are dropped and weak evidence abstains; the stricter of "
            "this and the server's policy applies"
        ),
    )
    filters: SearchFilters = Field(default_factory=SearchFilters)


class AnswerSentence(BaseModel):
    text: str
    citations: list[int] = Field(
        default_factory=list, description="numbers n of the citations supporting this sentence"
    )


class QuotePart(BaseModel):
    """The part of a quote printed on one page, with the boxes of exactly those characters."""

    page_number: int = Field(ge=1)
    text: str = Field(description="the quote's characters on this page, verbatim")
    bboxes: list[BBox] = Field(default_factory=list, description="PDF points, on this page")


class Citation(BaseModel):
    """One quote an answer cites: the page its characters are printed on, and what it says.

    ``page_number`` and ``bboxes`` are those of the quote's first part; a quote that runs across
    a page break has one entry per page in ``parts``."""

    n: int = Field(ge=1, description="the number sentences cite it by")
    doc_id: str
    page_number: int
    chunk_id: str = Field(description="the cited chunk; for a page image, the image block's id")
    kind: Literal["text", "image"] = Field(
        default="text", description="image: the model was shown the page (or a crop) itself"
    )
    element_ids: list[str] = Field(default_factory=list)
    bboxes: list[BBox] = Field(
        default_factory=list,
        description="boxes on this page, PDF points; for an image block, its crop (none = page)",
    )
    page_image_url: str = Field(description="relative URL of the page image, boxes highlighted")
    quote: str = Field(
        description="text of the block that supports the citing sentences; empty for an image"
    )
    parts: list[QuotePart] = Field(
        default_factory=list,
        description="the quote per page it is printed on, in reading order (two across a page "
        "break); empty for an image block",
    )
    title: str | None = Field(default=None, description="the cited document's title")
    source_name: str | None = Field(
        default=None, description="the cited document's file name (shown next to the title)"
    )


AnswerUnitKind = Literal["sentence", "list_item", "table_cell"]


class AnswerUnit(BaseModel):
    """One answer unit of an extractive answer: a sentence, a list item, or a table cell given
    with its row label and column header ("Net revenues — Q4 2022: $3.6 billion")."""

    text: str = Field(description="what is shown: the quoted sentence or item, or the cell")
    kind: AnswerUnitKind = "sentence"
    value: str | None = Field(
        default=None,
        description="the one value the unit quotes for the question (an amount, percent, "
        "count, date or name), verbatim; None when the question asks for none or it holds none",
    )
    citations: list[int] = Field(default_factory=list, description="numbers n of its citations")


class WithheldSentence(BaseModel):
    """A sentence of a streamed answer that was sent as tokens, then failed the citation check.

    Only streams have these: a complete answer is checked before anything is shown, so its
    unsupported sentences are never sent at all.
    """

    index: int = Field(ge=0, description="position among the streamed text's sentences, 0 first")
    text: str = Field(description="the sentence, citation markers removed")
    citations: list[int] = Field(default_factory=list, description="the numbers it cited")
    reason: str


class AnswerResponse(BaseModel):
    answer: str
    abstained: bool
    reason: str | None = Field(
        default=None,
        description="why it abstained, or what was withheld or fell back; None when clean",
    )
    sentences: list[AnswerSentence] = Field(default_factory=list)
    lead: AnswerUnit | None = Field(
        default=None,
        description="the direct answer, first: one unit (extractive) or the first sentence "
        "(LLM); None when abstained",
    )
    supporting: list[AnswerUnit] = Field(
        default_factory=list, description="extractive: shorter quotes that back the lead"
    )
    related: list[Citation] = Field(
        default_factory=list,
        description="with an abstention: the nearest passages, somewhere to look",
    )
    citations: list[Citation] = Field(default_factory=list)
    confidence: float = Field(ge=0.0, le=1.0, description="best evidence score on [0, 1]")
    mode: Literal["llm", "extractive"]
    trace_id: str
    withheld: list[WithheldSentence] = Field(
        default_factory=list,
        description=(
            "streamed answers only: sentences already sent as tokens that the citation check "
            "withheld; they are not in answer, so render answer, not the tokens"
        ),
    )


class AnswerToken(BaseModel):
    """A piece of a streamed answer's text as it is written (SSE ``event: token``); citation
    markers ``[n]`` included, unchecked until the final :class:`AnswerResponse`."""

    text: str


#: What a streamed answer yields: tokens, then exactly one checked :class:`AnswerResponse`.
AnswerEvent = AnswerToken | AnswerResponse


@dataclass(frozen=True)
class Passage:
    """A retrieved chunk on one page: what the candidate search hands the answer pipeline.

    ``bboxes`` are the chunk's boxes on ``page_number`` only (a chunk spanning pages is one
    passage per page); ``score`` is the candidate search's score, which the fused-score
    pass-through ranker reports as the confidence (so it should be calibrated to ``[0, 1]``).
    """

    chunk_id: str
    doc_id: str
    page_number: int
    text: str
    score: float = 0.0
    element_ids: list[str] = field(default_factory=list)
    bboxes: list[BBox] = field(default_factory=list)
    section_path: list[str] = field(default_factory=list)
    title: str | None = None
    #: where each piece of ``text`` is printed, on every page of the chunk (``TextSpan``)
    spans: list[TextSpan] = field(default_factory=list)
    #: the document's file name
    source_name: str | None = None


@dataclass
class Candidates:
    """What the candidate search found: passages best first, and the search's own trace."""

    passages: list[Passage]
    trace: RetrievalTrace | None = None


# -- chat models (the LLM role, core.protocols.ChatModel) ---------------------------------------


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of the conversation.

    ``content`` is text, or a list of OpenAI content parts (``{"type": "text", ...}``,
    ``{"type": "image_url", ...}``) for a vision model that should see page images.
    """

    role: Literal["system", "user", "assistant"]
    content: str | list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A completed reply.

    ``parsed`` is the decoded JSON when a ``json_schema`` was given (else None). Token counts are
    None when the server did not report usage. ``attempts`` counts the requests made, retries
    included, for metrics and tests.
    """

    text: str
    parsed: Any
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    model: str
    attempts: int = 1


# -- document structure (filled by structure-aware ingestion; empty lists until then) ------------


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


class DocumentStructure(BaseModel):
    """What the catalog knows of a document's structure (``GET /v1/documents/{id}/structure``)."""

    doc_id: str
    version: str
    pages: list[StructurePage] = Field(default_factory=list)
    sections: list[StructureSection] = Field(default_factory=list)
    items: list[StructureItem] = Field(default_factory=list)
