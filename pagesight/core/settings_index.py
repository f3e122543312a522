"""Settings of the vector index (``PAGESIGHT_INDEX__*``). Part of
:class:`pagesight.core.settings.Settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


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
    page_layout: Literal["float16", "turbo8", "turbo4"] = Field(
        default="float16",
        description=(
            "how page collections store their vectors: float16 rows (~212 KB a page on disk), "
            "or TurboQuant codes, turbo8 (~112 KB, slower rerank) or turbo4 (~64 KB, lower "
            "recall); a change applies to new versions: run `pagesight reindex` "
            "(pagesight.index.schema.PAGE_LAYOUTS, README 'Compact page layouts')"
        ),
    )
    payload_cache_points: int = Field(
        default=50_000,
        ge=0,
        le=10_000_000,
        description=(
            "embedded index: search candidates' payloads kept in memory per open version "
            "(~1 KB each; dropped on every write; 0 = off). Reading them from the engine was "
            "a fifth of a text search (pagesight.index.payload_cache)"
        ),
    )
    qdrant_timeout_s: int = Field(default=30, ge=1)
    qdrant_prefer_grpc: bool = False
    qdrant_shards: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description=(
            "Qdrant server: shards of each new collection version (server default 1); page "
            "recall follows the pages a shard holds (README 'Sizing a cluster')"
        ),
    )
    qdrant_replicas: int | None = Field(
        default=None,
        ge=1,
        le=16,
        description="Qdrant server: copies of each shard of a new version (server default 1)",
    )
    qdrant_full_rows_on_disk: bool = Field(
        default=True,
        description=(
            "Qdrant server: page collections' full multi-vectors memory-mapped (read for the "
            "rerank's few hundred pages a query), their pooled first stage in RAM"
        ),
    )
    alias_check_s: float = Field(
        default=1.0,
        ge=0,
        description=(
            "a running searcher re-reads the live version's alias at most this often and "
            "switches to a newly promoted (or rolled back) version; 0 = on every call"
        ),
    )
