"""The embedded, single-process wiring of PageSight: one index, one catalog, the text models.

The CLI, the demo and the evaluation harness all build this; the Ray Serve application (later)
wires the same plain classes across deployments instead.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from core.ids import make_doc_id
from core.settings import Settings
from core.types import AccessFilter, RouteName, SearchResult
from gateway.retrieval import TextRetriever
from index.base import IndexSchema, VectorStore
from ingestion.catalog import Catalog
from ingestion.ingest import DENSE_VECTOR, SPARSE_VECTOR, Ingestor, IngestRequest
from models.sparse import Bm25Encoder
from models.text_embedder import SentenceTransformerEmbedder

CHUNK_COLLECTION = "chunks"


def chunk_schema(embedder: SentenceTransformerEmbedder, sparse: Bm25Encoder) -> IndexSchema:
    """What the chunk collection is built with; opening it with anything else is an error."""
    return IndexSchema.for_text(
        dense_name=DENSE_VECTOR,
        dense_dim=embedder.dim,
        dense_model=embedder.model_id,
        sparse_name=SPARSE_VECTOR,
        sparse_model=sparse.model_id,
    )


class LocalStack:
    """Opens the index and catalog under ``settings.data_dir``; close it (or use ``with``)."""

    def __init__(self, settings: Settings) -> None:
        from index.factory import open_store

        self.settings = settings
        self.embedder = SentenceTransformerEmbedder(settings.embedder)
        self.sparse = Bm25Encoder(settings.sparse)
        self.store: VectorStore = open_store(
            settings, CHUNK_COLLECTION, chunk_schema(self.embedder, self.sparse)
        )
        self.catalog = Catalog(settings.data_dir / "catalog.sqlite3")
        self.ingestor = Ingestor(settings, self.store, self.catalog, self.embedder, self.sparse)
        self.retriever = TextRetriever(self.store, self.embedder, self.sparse, settings.retrieval)

    def request(
        self,
        path: Path,
        tenant: str = "default",
        acl: list[str] | None = None,
        password: str | None = None,
    ) -> IngestRequest:
        return IngestRequest(path=path, tenant=tenant, acl=list(acl or []), password=password)

    @staticmethod
    def doc_id_for(tenant: str, path: Path) -> str:
        return make_doc_id(tenant, path.resolve().as_uri())

    def search(
        self, query: str, access: AccessFilter, route: RouteName = RouteName.AUTO, top_k: int = 10
    ) -> SearchResult:
        return self.retriever.search(query, access, route, top_k)

    def close(self) -> None:
        self.store.close()
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
