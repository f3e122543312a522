"""Settings of the query engine (``PAGESIGHT_RETRIEVAL__*``, ``MULTISTEP__*``, ``ANSWER__*``):
candidate retrieval and fusion, multi-step search, answers with corrective retrieval and page
images. Part of :class:`pagesight.core.settings.Settings`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PackMode = Literal["auto", "on", "off"]


class DomainModes(BaseModel):
    """Whether each domain pack acts (``PAGESIGHT_RETRIEVAL__DOMAINS__FINANCE``): ``auto`` on
    the documents its detector marked at ingest, ``on`` on every document, ``off`` never."""

    finance: PackMode = Field(
        default="auto",
        description="the finance pack (route 'statement'): financial statements a query "
        "names or implies, on documents that print primary statements",
    )

    def as_map(self) -> dict[str, str]:
        """Pack name -> mode."""
        return {name: str(mode) for name, mode in self.model_dump().items()}


class RetrievalOptions(BaseModel):
    candidates: int = Field(default=100, ge=1, le=1000, description="per route, before fusion")
    rrf_k: float = Field(default=60.0, gt=0, description="reciprocal rank fusion constant")
    weights: dict[str, float] = Field(
        default_factory=lambda: {
            "dense": 1.0,
            "keyword": 1.0,
            "visual": 0.7,
            "page": 0.5,
            "row": 1.0,
            "reference": 3.0,
            "statement": 3.0,
            "section": 0.0,
            "document": 1.0,
            "count": 3.0,
        },
        description=(
            "weight of each route's ranked list in fusion; visual is below 1 so that a model "
            "that knows nothing costs <= 0.05 page_hit@5 "
            "(tests/unit/query/test_fusion_quality.py); "
            "'page' is the page-aggregated keyword signal (0.5: at 1 it cost page_hit@5 "
            "0.816 -> 0.802 on the full set once the statement route ranked the filings' "
            "statements), 'row' the keyword ranking of table-row units, 'reference' the pages "
            "a query's "
            "'page 17'/'Figure 3'/'Note 7' resolved to (3: a resolved reference in the "
            "leading document outranks a page that keyword, dense and page all rank first), "
            "'statement' the financial statements the query's terms imply "
            "('capex': the cash flow statement; the finance pack, pagesight.query.domains; named "
            "ones go with 'reference'), 'section' the pages of the sections whose titles match "
            "(pagesight.query.structure_search; 0 = off: at 0.5 it cost page_hit@1 0.44 -> 0.38 "
            "on the full set and 0.75 -> 0.48 on the Japanese one); 'document' the pages of "
            "the documents the query names (pagesight.query.document_route; 1: at 1.5 and 3 half a "
            "lost 1 and 3 questions)"
            "; 'count' every page a counting question counts ('how many figures', '表の数'; "
            "pagesight.query.counting; 3, as 'reference': a counted page outranks one that "
            "keyword, dense and page all rank first)"
        ),
    )
    count_pages: int = Field(
        default=100,
        ge=1,
        le=1000,
        description="pages the 'count' route returns at most (every page it counts, up to this)",
    )
    reference_document_decay: float = Field(
        default=0.0,
        ge=0,
        le=4,
        description="a reference that names no document weighs 1 / (1 + i) ** decay in the "
        "document the other routes rank i-th (0 = alike in the leading documents: at 0.5 and "
        "1 the 12 full-set questions naming the structure lost 1 and 2, their document often "
        "not being the first the words find)",
    )
    document_file_names: bool = Field(
        default=True,
        description="route 'document' also recognises a file name or a distinctive word of it "
        "(off where file names are content addresses, or to measure without them)",
    )
    document_matches: int = Field(
        default=3,
        ge=1,
        le=20,
        description="documents a query may name at once (route 'document': two years of one "
        "company); each at least half as certain as the first",
    )
    page_candidates: int = Field(
        default=300,
        ge=1,
        le=2000,
        description="keyword chunks the page route aggregates (the keyword route ranks "
        "the first `candidates` of them)",
    )
    structure_documents: int = Field(
        default=3,
        ge=1,
        le=20,
        description="leading documents in which references and section titles are resolved",
    )
    reference_confirm_documents: int = Field(
        default=20,
        ge=0,
        le=200,
        description="candidate documents in all where a reference's page also counts when "
        "the other routes found that page too (a question that names a page but no document)",
    )
    domains: DomainModes = Field(
        default_factory=lambda: DomainModes(),
        description="the domain packs (pagesight.query.domains), each auto | on | off",
    )
    model_weights: dict[str, float] = Field(
        default_factory=dict,
        description="weight by the model id serving a route; overrides `weights` (tune on eval)",
    )
    snippet_chars: int = Field(default=300, ge=40)
    visual_prefetch: int = Field(
        default=200, ge=1, description="pages kept by the pooled first stage before exact MaxSim"
    )
    visual_coarse: int = Field(
        default=1000,
        ge=1,
        description=(
            "pages kept by stage 0 (the query's centroids against the pooled rows) for the "
            "first stage to rank; at least visual_prefetch is kept"
        ),
    )
    visual_coarse_centroids: int = Field(
        default=3, ge=1, description="k-means centroids of the query rows that stage 0 scores"
    )
    evidence_boxes: int = Field(default=3, ge=1, le=20, description="boxes per visual hit")
    parallel_searches: int | None = Field(
        default=None,
        ge=1,
        description=(
            "searches computed at once by a server; more wait their turn (threads beyond the "
            "cores only thrash: 16 at once on 2 cores gave 27 % less throughput); unset = cores"
        ),
    )


class MultiStepOptions(BaseModel):
    """Route ``agentic`` (``pagesight.query.multistep``): plan, search, read the passages, follow
    one cross-reference hop per step, merge; stop when a step adds no new evidence page, at
    ``max_steps`` or when ``time_budget_ms`` is spent.

    Every step is one ordinary search (route ``step_route``), so the defaults bound the route
    at about ``max_steps`` times a text search plus the page reads a followed reference needs.
    """

    model_config = ConfigDict(extra="forbid")

    max_steps: int = Field(default=3, ge=1, le=10, description="steps at most, the first included")
    time_budget_ms: float = Field(
        default=3000.0,
        gt=0,
        description="no step starts after this much time (planning included); a started one ends",
    )
    sub_query_top_k: int = Field(
        default=5,
        ge=1,
        le=50,
        description="pages of each step's ranking that count as its evidence (and as new)",
    )
    read_pages: int = Field(
        default=3, ge=0, le=20, description="top pages of each search whose passages are read"
    )
    follow_per_step: int = Field(
        default=2, ge=0, le=10, description="references followed per step at most"
    )
    pages_per_reference: int = Field(
        default=1,
        ge=1,
        le=20,
        description="pages of a followed reference's target kept (those sharing most words with "
        "the question): each goes right after the page that named it, ahead of search results",
    )
    max_sub_queries: int = Field(
        default=4, ge=1, le=10, description="parts a plan may split a question into"
    )
    planner: Literal["auto", "rule", "llm"] = Field(
        default="auto",
        description="auto: the LLM when llm.base_url is set (rules if it fails), else the rules",
    )
    auto_route: bool = Field(
        default=True,
        description="route auto may choose agentic for clearly multi-part questions (by rules)",
    )
    step_route: Literal["auto", "text", "keyword", "hybrid"] = Field(
        default="auto",
        description="the route every step searches with; auto: the one route auto picks for "
        "that step's words (keyword for a quoted phrase or a code, as a plain search would)",
    )
    llm_max_tokens: int = Field(default=256, ge=32, description="most tokens of a plan reply")


class CorrectiveOptions(BaseModel):
    """Corrective retrieval (CRAG, ``pagesight.query.corrective``): grade the top candidates, then
    rewrite the query when they are mostly ambiguous, widen the search (or abstain) when they
    are mostly incorrect; at most one corrective round.

    Off by default: it costs one grading call per graded passage (with an LLM) and sometimes a
    second search, and its score bands must sit on a calibrated confidence scale to mean
    anything (``PAGESIGHT_ANSWER__CORRECTIVE__ENABLED=true`` turns it on).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="grade and correct answer candidates")
    grader: Literal["auto", "llm", "score"] = Field(
        default="auto",
        description="auto: the LLM when llm.base_url is set, else score bands on the confidence",
    )
    grade_top_k: int = Field(
        default=5, ge=1, le=50, description="passages graded per round (the best first)"
    )
    correct_at: float = Field(
        default=0.6,
        ge=0.0,
        le=1.0,
        description="score bands: confidence >= this grades CORRECT (calibrate on eval)",
    )
    incorrect_below: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description="score bands: confidence < this grades INCORRECT; between is AMBIGUOUS",
    )
    majority: float = Field(
        default=0.5,
        ge=0.5,
        lt=1.0,
        description=(
            "'mostly' = a grade's share of the graded passages is above this; at least 0.5, "
            "so that at most one grade can hold it"
        ),
    )
    on_incorrect: Literal["widen", "abstain"] = Field(
        default="widen",
        description="mostly incorrect: search wider once (abstain if still so), or abstain now",
    )
    widen_factor: int = Field(
        default=2, ge=1, le=10, description="the widened search asks for this many times more"
    )
    cache_size: int = Field(
        default=4096, ge=0, description="LLM grades kept per (query, chunk, index version); 0 = off"
    )
    grader_concurrency: int = Field(
        default=4, ge=1, le=64, description="grading calls in flight at once per request"
    )

    @model_validator(mode="after")
    def _bands(self) -> CorrectiveOptions:
        if self.incorrect_below > self.correct_at:
            raise ValueError("corrective.incorrect_below must not be above correct_at")
        return self


class ImageContextOptions(BaseModel):
    """Page images in the answer context (``PAGESIGHT_LLM__VISION``): how many, how large, and
    what they may cost.

    Image tokens are counted the way Qwen2-VL-family models spend them: an image is resized to
    whole ``patch_px`` tiles (14-pixel patches merged 2x2 = 28) and costs one token per tile,
    plus its start and end markers. Images are sized here to whole tiles within
    ``max_pixels``, so the server's own resize keeps them as they are (set the server's
    ``max_pixels`` at least as high) and the count is the model's.
    """

    model_config = ConfigDict(extra="forbid")

    max_images: int = Field(default=4, ge=1, le=16, description="page images per request")
    max_pixels: int = Field(
        default=1024 * 28 * 28,
        ge=4 * 28 * 28,
        description="largest image sent (pixels; 1,024 tiles = ~1,024 tokens at patch_px 28)",
    )
    min_pixels: int = Field(
        default=64 * 28 * 28,
        ge=28 * 28,
        description="an image the remaining budget would shrink below this is not sent",
    )
    patch_px: int = Field(
        default=28, ge=1, description="pixels per image token along each side (Qwen2-VL: 28)"
    )
    budget_tokens: int = Field(
        default=4096,
        ge=0,
        description=(
            "most tokens images may take from the context budget, after the reply is reserved; "
            "never more than half of what is left, so the text blocks keep the other half"
        ),
    )
    crop_ratio: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description=(
            "a page larger than max_pixels is cropped to its evidence boxes (padded) when they "
            "cover at most this share of it; otherwise the whole page is sent, scaled down"
        ),
    )
    jpeg_quality: int = Field(default=85, ge=30, le=100)

    @model_validator(mode="after")
    def _pixels(self) -> ImageContextOptions:
        if self.min_pixels > self.max_pixels:
            raise ValueError("min_pixels must not exceed max_pixels")
        return self


class AnswerOptions(BaseModel):
    """Server-side knobs of the answer pipeline."""

    model_config = ConfigDict(extra="forbid")

    # Calibrated by bench/calibrate_abstain.py on the 176 answerable and 35 unanswerable eval
    # questions outside the smoke subset, for the embedded profile's confidence (the dense
    # cosine of the best passage): the highest threshold abstaining on <= 10 % of answerable
    # questions. Its ROC AUC there is 0.53: it stops answers from unrelated passages (an
    # off-topic question), not on-topic questions the documents happen not to answer.
    # Recalibrate when the ranker changes: the scale is the ranker's.
    abstain_threshold: float = Field(
        default=0.378,
        ge=0.0,
        le=1.0,
        description=(
            "abstain without generating when the confidence is below this; 0 = never on score "
            "(bench/calibrate_abstain.py fits it on questions outside the smoke subset)"
        ),
    )
    context_budget_tokens: int = Field(
        default=3000, ge=64, description="prompt + reply tokens the LLM call may use"
    )
    reserve_output_tokens: int = Field(
        default=512, ge=16, description="part of the budget kept for the reply (its max_tokens)"
    )
    max_sentences: int = Field(default=6, ge=1, le=50)
    extractive: Literal["lead", "quotes"] = Field(
        default="lead",
        description=(
            "extractive answers (no LLM): lead = one direct answer unit first, then a few "
            "supporting quotes, abstaining when no unit covers the question; quotes = the "
            "earlier list of best-overlap sentences (kept as the evaluation's baseline)"
        ),
    )
    max_supporting: int = Field(
        default=2, ge=0, le=10, description="supporting quotes after an extractive lead"
    )
    # Fitted on half a of the shared documents (bench/eval_answers.py's trade-off, all 33
    # PDFs, 2026-12-03): the highest threshold on a 0.1 grid abstaining on at most 15 % of
    # half a's answerable questions (0.126 there; 0.2 gives 0.30). Coverage barely separates
    # on-topic unanswerable questions from answerable ones (README, "Extractive answers").
    min_coverage: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description=(
            "extractive lead: the share of the question's content (idf-weighted) its best unit "
            "and that unit's heading context must cover, else an abstention with related "
            "passages (fitted on half a of the shared documents)"
        ),
    )
    policy: Literal["standard", "strict"] = Field(
        default="standard", description="the server's floor (see AnswerRequest)"
    )
    candidate_pool: int = Field(
        default=30, ge=1, description="passages asked of the candidate search, before reranking"
    )
    visual_rerank_weight: float = Field(
        default=0.7,
        ge=0.0,
        description=(
            "weight of the exact-MaxSim page order when fused with the ranker's order (RRF); "
            "used when a page model is configured, 0 = off"
        ),
    )
    visual_rerank_k: float = Field(default=60.0, gt=0, description="RRF constant of that fusion")
    score_scale: Literal["auto", "probability", "logit"] = Field(
        default="auto",
        description=(
            "how ranker scores map to confidence: probability = clamped to [0, 1], logit = "
            "sigmoid; auto = probability for the fused-score pass-through, logit otherwise"
        ),
    )
    corrective: CorrectiveOptions = Field(
        default_factory=CorrectiveOptions, description="corrective retrieval (CRAG); off"
    )
    images: ImageContextOptions = Field(
        default_factory=ImageContextOptions,
        description="page images in the context, when PAGESIGHT_LLM__VISION sends them",
    )

    @model_validator(mode="after")
    def _budget(self) -> AnswerOptions:
        if self.reserve_output_tokens >= self.context_budget_tokens:
            raise ValueError("reserve_output_tokens must be below context_budget_tokens")
        return self
