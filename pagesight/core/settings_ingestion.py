"""Settings of ingestion (``PAGESIGHT_RENDER__*``, ``PARSE__*``, ``CHUNK__*``, ``LIMITS__*``,
``BULK__*``, ``REINDEX__*``): page images, parsers and OCR engines, chunking, per-file limits,
the bulk and re-index jobs. Part of :class:`pagesight.core.settings.Settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


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
    # Speed choices, measured by bench/bench_ocr.py against RapidOCR's own defaults (736/"min",
    # batch 6, float models on ONNX Runtime, OSD first) in the same run; see
    # pagesight/ingestion/ocr/rapid.py and the README. What pays: 1600/"max" with OSD only for
    # turned pages (s/page p50 0.675x, CER +0.0004 EN / +0.0007 JA), then OpenVINO at bf16 on a
    # CPU with bf16 instructions (all together 0.38x, CER +0.0004 / +0.0009); the full set's 49
    # scan questions keep 45 in the top 5 throughout. 1280/"max" was faster but lost two of them.
    det_limit_side_len: int = Field(
        default=1600, ge=320, le=4000, description="detector input bound, in pixels (see type)"
    )
    det_limit_type: Literal["min", "max"] = Field(
        default="max",
        description="min: shorter side at least det_limit_side_len (RapidOCR's default); max: "
        "longer side at most det_limit_side_len (recognition still reads the full-size crops)",
    )
    rec_batch_size: int = Field(
        default=6, ge=1, le=256, description="text lines per recogniser run"
    )
    int8_detection: bool = Field(
        default=False, description="dynamic-int8 copy of the detector (float model if none)"
    )
    int8_recognition: bool = Field(
        default=False, description="dynamic-int8 copy of the recogniser (float model if none)"
    )
    model_cache_dir: Path | None = Field(
        default=None,
        description="where int8 copies and OpenVINO's compiled models are kept; "
        "~/.cache/pagesight/ocr",
    )
    threads: int = Field(
        default=0, ge=0, le=256, description="inference threads per worker; 0 = one per core"
    )
    runtime: Literal["auto", "openvino", "onnxruntime"] = Field(
        default="auto",
        description=(
            "what runs the detector and recogniser: openvino, onnxruntime, or auto = openvino "
            "when it is installed and no int8 copy is asked for (those are onnxruntime's "
            "quantised operators); a model openvino cannot compile falls back to onnxruntime"
        ),
    )
    openvino_precision: Literal["auto", "f32", "bf16"] = Field(
        default="auto",
        description=(
            "OpenVINO's inference precision: auto = bf16 where the CPU has bf16 instructions "
            "(AVX-512 BF16, AMX), f32 elsewhere; f32 reads exactly what onnxruntime reads"
        ),
    )

    orientation: Literal["when_turned", "always"] = Field(
        default="when_turned",
        description=(
            "when Tesseract OSD decides which way is up: when_turned = only for a page whose "
            "first reading looks turned (low line scores or standing lines), always = before "
            "every page is read (pagesight/ingestion/ocr/rapid.py)"
        ),
    )

    @model_validator(mode="after")
    def _int8_needs_onnxruntime(self) -> RapidOcrOptions:
        if self.runtime == "openvino" and (self.int8_detection or self.int8_recognition):
            raise ValueError(
                "int8_detection/int8_recognition are onnxruntime's dynamic-int8 copies: use "
                "runtime onnxruntime (or auto) with them, or turn them off for openvino"
            )
        return self


OcrOptions = Annotated[TesseractOptions | RapidOcrOptions, Field(discriminator="kind")]


class VlmOptions(BaseModel):
    """A vision-language model that reads page images into elements, behind an OpenAI-compatible
    API (vLLM serving e.g. Qwen2.5-VL); unset ``base_url`` = no VLM (the embedded default).

    ``kind`` picks the engine that talks to it: ``openai`` asks for PageSight's own JSON schema
    (elements with boxes; any instruction-following VLM), ``docling`` runs Docling's VlmPipeline
    against the same API and reads DocTags (for models trained on them, e.g. granite-docling).
    The VLM runs after the text-layer/OCR path, so a page it fails on keeps those elements and
    the job only gets a VLM_FAILED warning (``pagesight.ingestion.parse.vlm``).
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


class LimitsOptions(BaseModel):
    max_file_bytes: int = Field(default=500 * 1024 * 1024, ge=1)
    max_pages: int = Field(default=5000, ge=1)
    parse_timeout_s: float = Field(default=1800.0, gt=0, description="wall clock per file")
    parse_memory_mb: int = Field(default=6144, ge=256, description="address-space cap per file")


class BulkOptions(BaseModel):
    """``pagesight bulk``: the Ray Data pipeline that ingests a folder, a glob or a manifest
    (``pagesight.ingestion.bulk``, wired in ``pagesight.services.bulk_job``). Per-file time and
    memory limits are ``limits``'s, as for ``ingest``."""

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
    model, dims, parser or chunker), verify it, then switch the alias
    (``pagesight.services.reindex_job``). Per-file limits are ``limits``'s and the Ray pipeline's
    sizes ``bulk``'s."""

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
