"""The one settings root (pydantic-settings, env prefix ``PAGESIGHT_``).

Nested options use ``__`` in environment variables, e.g. ``PAGESIGHT_RENDER__DPI=200`` or
``PAGESIGHT_PARSE__OCR__KIND=rapidocr``. Engine options are pydantic models selected by their
``kind`` field (the docling pattern), so a config file names an engine and only its own knobs.

The option models live beside the package they configure, re-exported here:
:mod:`pagesight.core.settings_ingestion` (render, parse, OCR, VLM, chunk, limits, bulk, reindex),
:mod:`pagesight.core.settings_models` (embedders, reranker, LLM, BM25),
:mod:`pagesight.core.settings_query` (retrieval, multi-step, answer, corrective, page images),
:mod:`pagesight.core.settings_index`,
:mod:`pagesight.core.settings_serving` (gateway and its API keys, Ray Serve) and
:mod:`pagesight.core.settings_database`. ``tests/unit/project/test_settings_layout.py`` keeps
every name and default as it was (``tests/fixtures/settings.json``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from pagesight.core.settings_database import DatabaseOptions
from pagesight.core.settings_index import IndexOptions
from pagesight.core.settings_ingestion import (
    BulkOptions,
    ChunkOptions,
    LimitsOptions,
    OcrOptions,
    ParseOptions,
    RapidOcrOptions,
    ReindexOptions,
    RenderOptions,
    TesseractOptions,
    VlmOptions,
)
from pagesight.core.settings_models import (
    EmbedderOptions,
    LlmOptions,
    RerankerOptions,
    SparseOptions,
    VisualEmbedderOptions,
)
from pagesight.core.settings_query import (
    AnswerOptions,
    CorrectiveOptions,
    DomainModes,
    ImageContextOptions,
    MultiStepOptions,
    RetrievalOptions,
)
from pagesight.core.settings_serving import (
    ALL_SCOPES,
    ApiKeyRecord,
    GatewayOptions,
    KeyScope,
    ServeOptions,
)

__all__ = [
    "ALL_SCOPES",
    "AnswerOptions",
    "ApiKeyRecord",
    "BulkOptions",
    "ChunkOptions",
    "CorrectiveOptions",
    "DatabaseOptions",
    "DomainModes",
    "EmbedderOptions",
    "GatewayOptions",
    "ImageContextOptions",
    "IndexOptions",
    "KeyScope",
    "LimitsOptions",
    "LlmOptions",
    "MultiStepOptions",
    "OcrOptions",
    "ParseOptions",
    "RapidOcrOptions",
    "ReindexOptions",
    "RenderOptions",
    "RerankerOptions",
    "RetrievalOptions",
    "ServeOptions",
    "Settings",
    "SparseOptions",
    "TesseractOptions",
    "VisualEmbedderOptions",
    "VlmOptions",
]


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
