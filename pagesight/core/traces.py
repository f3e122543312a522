"""What a query did, kept per query for debugging and audit (DESIGN.md section 5: a trace per
query): the routes and their candidates, the structural references and where they led,
multi-step search, corrective retrieval and the answer step."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from pagesight.core.document import BBox


class RouteName(StrEnum):
    """Retrieval routes (DESIGN.md section 4)."""

    AUTO = "auto"
    VISUAL = "visual"
    TEXT = "text"
    KEYWORD = "keyword"
    HYBRID = "hybrid"
    AGENTIC = "agentic"


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
    "domain",
]


class StructuralReference(BaseModel):
    """A place in a document that a query names by the document's own structure."""

    kind: ReferenceKind
    text: str = Field(description="the words of the query that name it")
    domain: str | None = Field(
        default=None,
        description="kind 'domain': the domain pack that reads it (pagesight.query.domains, "
        "e.g. 'finance'); its value is the pack's own name for the place ('cash_flows')",
    )
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
    confidence: float | None = Field(
        default=None,
        description="how sure the resolution is (0-1; a domain pack's, e.g. a statement page "
        "read from its content); a low one weighs less in fusion. None: exact look-up",
    )


#: What a multi-step search plan is (``pagesight.query.planner``): one search, or several parts.
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
