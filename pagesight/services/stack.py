"""The embedded, single-process wiring of PageSight: one index, one catalog, the text models.

The CLI, the demo and the evaluation harness all build this; the Ray Serve application (later)
wires the same plain classes across deployments instead.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from pagesight.core.ids import make_doc_id
from pagesight.core.protocols import CatalogRepository, PageEmbedder, TextEmbedder
from pagesight.core.settings import Settings
from pagesight.core.types import AccessFilter, RouteName, SearchResult
from pagesight.index.base import IndexSchema, VectorStore
from pagesight.index.vectors import (
    CHUNK_COLLECTION,
    DENSE_VECTOR,
    PAGE_COLLECTION,
    PAGE_VECTOR,
    SPARSE_VECTOR,
)
from pagesight.ingestion.ingest import (
    FIRST_STAGE_POOLING,
    DocumentParseFn,
    Ingestor,
    IngestRequest,
)
from pagesight.ingestion.isolation import parse_isolated
from pagesight.models.llm import OpenAiChatClient
from pagesight.models.sparse import Bm25Encoder
from pagesight.models.text_embedder import SentenceTransformerEmbedder
from pagesight.query.multistep import MultiStepSearch
from pagesight.query.planner import build_planner
from pagesight.query.retrieval import Retriever
from pagesight.query.structure_cache import CachedStructures
from pagesight.store.catalog import open_catalog

if TYPE_CHECKING:
    from pagesight.models.colqwen import ColQwen2Embedder

#: opens the live store of one index (name, the schema this process needs); the default is
#: :func:`pagesight.index.live.open_live_store` on this process's settings
StoreOpener = Callable[[str, IndexSchema], VectorStore]


def chunk_schema(embedder: SentenceTransformerEmbedder, sparse: Bm25Encoder) -> IndexSchema:
    """What the chunk collection is built with; opening it with anything else is an error."""
    return IndexSchema.for_text(
        dense_name=DENSE_VECTOR,
        dense_dim=embedder.dim,
        dense_model=embedder.model_id,
        sparse_name=SPARSE_VECTOR,
        sparse_model=sparse.model_id,
    )


def cli_actor() -> str:
    """Who acts when the command line writes to the local index (for the audit log)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (containers)
        user = str(os.getuid())
    return f"cli:{user}"


class LocalStack:
    """Opens the index and catalog under ``settings.data_dir``; close it (or use ``with``).

    Engines may be injected: the Ray application passes adapters that call its parser, text
    and page embedder deployments, so only the index work runs here. ``embedder`` (queries)
    always runs in-process: embedding one query locally is cheaper than a hop to a replica.
    ``open_store`` replaces how the indexes are opened: a query replica on the embedded engine
    reads through the process that owns it (:mod:`pagesight.index.forwarded`).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        parse: DocumentParseFn | None = None,
        ingest_embedder: TextEmbedder | None = None,
        page_embedder: PageEmbedder | None = None,
        open_store: StoreOpener | None = None,
    ) -> None:
        from pagesight.index.live import open_live_store

        def open_live(name: str, schema: IndexSchema) -> VectorStore:
            return open_live_store(settings, name, schema)

        open_store = open_store or open_live
        self.settings = settings
        self.embedder = SentenceTransformerEmbedder(settings.embedder)
        self.sparse = Bm25Encoder(settings.sparse)
        # Live stores follow the alias: a re-index or rollback promoted meanwhile is switched
        # to without a restart (pagesight.index.live).
        self.store: VectorStore = open_store(
            CHUNK_COLLECTION, chunk_schema(self.embedder, self.sparse)
        )
        if ingest_embedder is not None and ingest_embedder.model_id != self.embedder.model_id:
            raise ValueError(
                f"the ingest embedder serves {ingest_embedder.model_id!r} but queries use "
                f"{self.embedder.model_id!r}: both must be the same model"
            )
        self.page_embedder: PageEmbedder | None = page_embedder
        #: the page embedder this stack built (and so closes); one passed in is the caller's
        self._own_page_embedder: ColQwen2Embedder | None = None
        self.page_store: VectorStore | None = None
        if settings.visual.active:
            if self.page_embedder is None:
                from pagesight.models.colqwen import ColQwen2Embedder

                self.page_embedder = self._own_page_embedder = ColQwen2Embedder(settings.visual)
            self.page_store = open_store(
                PAGE_COLLECTION,
                IndexSchema.for_pages(
                    name=PAGE_VECTOR,
                    dim=self.page_embedder.dim,
                    model_id=self.page_embedder.model_id,
                    pooling=FIRST_STAGE_POOLING,
                ),
            )
        self.catalog: CatalogRepository = open_catalog(settings)
        self.ingestor = Ingestor(
            settings,
            self.store,
            self.catalog,
            ingest_embedder or self.embedder,
            self.sparse,
            page_store=self.page_store,
            page_embedder=self.page_embedder,
            parse=parse or parse_isolated,
        )
        #: what searches read of the documents' structure, held per index version: refreshed
        #: when the index's version moves, when this stack writes to it, and otherwise at most
        #: every alias_check_s (pagesight.query.structure_cache)
        self.structures = CachedStructures(
            self.catalog, self.store, check_s=settings.index.alias_check_s
        )
        self.retriever = Retriever(
            self.store,
            self.embedder,
            self.sparse,
            settings.retrieval,
            page_store=self.page_store,
            page_embedder=self.page_embedder,
            structures=self.structures,
        )
        #: the chat model route ``agentic`` plans with (None: the rules plan)
        self.planner_llm: OpenAiChatClient | None = None
        if settings.llm.base_url and settings.multistep.planner != "rule":
            self.planner_llm = OpenAiChatClient(settings.llm)
        #: every search goes through it: route ``agentic`` (and ``auto`` for clearly
        #: multi-part questions) runs the multi-step loop, the rest the retriever
        self.multistep = MultiStepSearch(
            self.retriever,
            build_planner(settings.multistep, self.planner_llm),
            settings.multistep,
        )

    def request(
        self,
        path: Path,
        tenant: str = "default",
        acl: list[str] | None = None,
        password: str | None = None,
    ) -> IngestRequest:
        return IngestRequest(
            path=path, tenant=tenant, acl=list(acl or []), password=password, actor=cli_actor()
        )

    @staticmethod
    def doc_id_for(tenant: str, path: Path) -> str:
        return make_doc_id(tenant, path.resolve().as_uri())

    def search(
        self,
        query: str,
        access: AccessFilter,
        route: RouteName = RouteName.AUTO,
        top_k: int = 10,
        trace_id: str | None = None,
    ) -> SearchResult:
        return self.multistep.search(query, access, route, top_k, trace_id)

    def close(self) -> None:
        if self.planner_llm is not None:
            self.planner_llm.close()
        if self._own_page_embedder is not None:
            self._own_page_embedder.close()  # its page-preparing threads
        self.store.close()
        if self.page_store is not None:
            self.page_store.close()
        self.catalog.close()

    def __enter__(self) -> LocalStack:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
