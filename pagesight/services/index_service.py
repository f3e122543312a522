"""The index service: the one owner of the index, the catalog and the trace store.

It is the composition of the two sides and the worker, over one set of opened stores
(:class:`pagesight.services.query_service.Stores`):

- :class:`pagesight.services.query_service.QueryService`: the reads (searches, answers, traces,
  documents, structures, page images; :class:`pagesight.api.protocols.QueryBackend`);
- :class:`pagesight.services.document_service.DocumentService`: uploads, URIs, deletes, jobs
  and the audit log (:class:`pagesight.api.protocols.DocumentBackend`);
- :class:`pagesight.services.ingest_worker.IngestWorker`: the job queue and its thread.

What is left here is what concerns the whole: opening and closing (:meth:`warm_up`, cheap
``__init__``), readiness and metrics, and the reads a Query replica forwards to the embedded
index's only owner (:meth:`index_schemas`, :meth:`read_index`). Each method of
:class:`pagesight.api.protocols.IndexBackend` is one line handing the call to its side, so
the gateway, the command line and the tests hold one object, whichever side answers.

Every method applies one permission rule, the one retrieval applies inside the index
(:meth:`pagesight.core.types.AccessFilter.admits`: tenant, ACL, validity): a document, page, image,
job or trace the caller may not see answers exactly as a missing one (``None`` -> 404), and
uploads, replacements and deletes need the key's ``write`` scope, everything else ``read``.

It is a plain class: the Ray application wraps it in a deployment (one replica: the embedded
index has a single writer), tests and ``pagesight serve --no-ray`` use it in-process. Methods
are synchronous and thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pagesight.api.caller import Caller
from pagesight.api.images import PageImage
from pagesight.api.models import (
    AnswerRequest,
    DocumentDetail,
    Readiness,
    SearchRequest,
    SearchResponse,
    Submitted,
    UriIngest,
)
from pagesight.api.protocols import IndexBackend
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.protocols import PageEmbedder, TextEmbedder
from pagesight.core.settings import Settings
from pagesight.core.types import (
    AnswerEvent,
    AnswerResponse,
    AuditEntry,
    Document,
    DocumentStructure,
    JobState,
    JobStatus,
    RetrievalTrace,
)
from pagesight.index.base import IndexSchema, VectorStore
from pagesight.index.forwarded import read_primitive
from pagesight.index.vectors import CHUNK_COLLECTION, PAGE_COLLECTION
from pagesight.ingestion.ingest import DocumentParseFn
from pagesight.ingestion.url_sources import SourcePolicy
from pagesight.services.document_service import DocumentService
from pagesight.services.engine import build_answer_pipeline
from pagesight.services.ingest_worker import IngestWorker, upload_root
from pagesight.services.metrics import ServiceMetrics
from pagesight.services.query_service import QueryService, Stores
from pagesight.services.stack import LocalStack, StoreOpener
from pagesight.store.traces import open_traces


class IndexService:
    """Search, ingest jobs, documents, page images and traces over one :class:`LocalStack`."""

    def __init__(
        self,
        settings: Settings,
        *,
        parse: DocumentParseFn | None = None,
        ingest_embedder: TextEmbedder | None = None,
        page_embedder: PageEmbedder | None = None,
        open_store: StoreOpener | None = None,
    ) -> None:
        self.settings = settings
        self._parse = parse
        self._ingest_embedder = ingest_embedder
        self._page_embedder = page_embedder
        self._open_store = open_store
        self.metrics = ServiceMetrics()
        self.sources = SourcePolicy(
            settings.gateway.uri_allowlist,
            allow_private_addresses=settings.gateway.allow_private_addresses,
            max_redirects=settings.gateway.max_redirects,
            max_bytes=settings.gateway.max_upload_bytes,
        )
        self._stores = Stores()
        self.query_service = QueryService(settings, self._stores, self.metrics)
        self.ingest_worker = IngestWorker(settings, self._stores, self.sources, self.metrics)
        self.document_service = DocumentService(
            settings, self._stores, self.ingest_worker, self.sources
        )
        #: whether this process ingests (False: a query replica, or a command that only reads)
        self._ingests = True
        self._warm_error: str | None = None

    # -- life cycle --------------------------------------------------------------------------

    @property
    def upload_dir(self) -> Path:
        return upload_root(self.settings)

    @property
    def worker_id(self) -> str:
        """This process's id in job claims (two workers never run the same job)."""
        return self.ingest_worker.worker_id

    def warm_up(self, worker: bool = True) -> None:
        """Open the index, catalog and trace store, load the query models, start the ingest
        worker and re-queue the jobs a previous process left unfinished (``worker=False``: a
        command line that only reads or deletes leaves the queue alone)."""
        stores = self._stores
        if stores.stack is not None:
            return
        try:
            stores.stack = LocalStack(
                self.settings,
                parse=self._parse,
                ingest_embedder=self._ingest_embedder,
                page_embedder=self._page_embedder,
                open_store=self._open_store,
            )
            stores.stack.embedder.warm_up()
            stores.traces = open_traces(self.settings)
            stores.traces.expire()
            self.query_service.answers = build_answer_pipeline(self.settings, stores.stack)
        except Exception as exc:
            self._warm_error = f"{type(exc).__name__}: {exc}"
            raise
        self._ingests = worker
        if worker:
            self.ingest_worker.start()

    def close(self) -> None:
        self.ingest_worker.stop()
        self._stores.close()

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Block until every queued job has finished (tests, batch scripts)."""
        return self.ingest_worker.wait_idle(timeout_s)

    def readiness(self) -> Readiness:
        stack = self._stores.stack
        checks = {"index_open": stack is not None, "text_model_loaded": stack is not None}
        if self._ingests:
            checks["ingest_worker_alive"] = self.ingest_worker.alive
        if self.settings.visual.active:
            checks["page_model_configured"] = stack is not None and stack.page_embedder is not None
        detail = {"error": self._warm_error} if self._warm_error else {}
        if stack is not None:
            detail["index"] = stack.store.collection
        return Readiness(ready=all(checks.values()), checks=checks, detail=detail)

    def metrics_text(self) -> bytes:
        self.metrics.queue_depth.set(self.ingest_worker.queue_depth())
        return self.metrics.render()

    def index_schemas(self) -> dict[str, tuple[IndexSchema, str]]:
        """Schema and live version of each open index, by name (what a query replica needs to
        open a :class:`pagesight.index.forwarded.ForwardedVectorStore` on this process)."""
        return {name: (s.schema, s.collection) for name, s in self._open_indexes().items()}

    def read_index(self, name: str, primitive: str, args: tuple[Any, ...]) -> Any:
        """One read of a query replica's forwarded store: on the embedded engine this process
        is the only one that may open the index (:mod:`pagesight.index.forwarded`)."""
        store = self._open_indexes().get(name)
        if store is None:
            raise PageSightError(ErrorCode.NOT_FOUND, Stage.QUERY, f"no open index {name!r}")
        return read_primitive(store, primitive, args)

    def _open_indexes(self) -> dict[str, VectorStore]:
        stack = self._ready()
        stores = {CHUNK_COLLECTION: stack.store, PAGE_COLLECTION: stack.page_store}
        return {name: store for name, store in stores.items() if store is not None}

    def _ready(self) -> LocalStack:
        return self._stores.ready()

    # -- the reads: QueryService -------------------------------------------------------------

    def search(self, caller: Caller, request: SearchRequest, trace_id: str) -> SearchResponse:
        return self.query_service.search(caller, request, trace_id)

    def answer(self, caller: Caller, request: AnswerRequest, trace_id: str) -> AnswerResponse:
        return self.query_service.answer(caller, request, trace_id)

    def answer_stream(
        self, caller: Caller, request: AnswerRequest, trace_id: str
    ) -> Iterator[AnswerEvent]:
        # a generator function itself (not one returning a generator): Serve streams only
        # those; closing this one closes the query side's (and the LLM's stream)
        yield from self.query_service.answer_stream(caller, request, trace_id)

    def trace(self, caller: Caller, trace_id: str) -> RetrievalTrace | None:
        return self.query_service.trace(caller, trace_id)

    def documents(self, caller: Caller) -> list[Document]:
        return self.query_service.documents(caller)

    def document(self, caller: Caller, doc_id: str) -> DocumentDetail | None:
        return self.query_service.document(caller, doc_id)

    def structure(self, caller: Caller, doc_id: str) -> DocumentStructure | None:
        return self.query_service.structure(caller, doc_id)

    def page_image(
        self,
        caller: Caller,
        doc_id: str,
        page_number: int,
        highlight: str | None = None,
        image_format: str = "png",
    ) -> PageImage | None:
        return self.query_service.page_image(caller, doc_id, page_number, highlight, image_format)

    # -- the writes and their record: DocumentService ----------------------------------------

    def submit_upload(  # noqa: PLR0913  # the upload's form fields, as the protocol has them
        self,
        caller: Caller,
        filename: str,
        data: bytes,
        *,
        doc_id: str | None = None,
        acl: list[str] | None = None,
        valid_until: datetime | None = None,
        replace: bool = False,
        password: str | None = None,
        trace_id: str = "",
    ) -> Submitted:
        return self.document_service.submit_upload(
            caller,
            filename,
            data,
            doc_id=doc_id,
            acl=acl,
            valid_until=valid_until,
            replace=replace,
            password=password,
            trace_id=trace_id,
        )

    def submit_uri(self, caller: Caller, request: UriIngest, trace_id: str = "") -> Submitted:
        return self.document_service.submit_uri(caller, request, trace_id)

    def job(self, caller: Caller, job_id: str) -> JobStatus | None:
        return self.document_service.job(caller, job_id)

    def jobs(
        self, caller: Caller, limit: int = 100, state: JobState | None = None
    ) -> list[JobStatus]:
        return self.document_service.jobs(caller, limit, state)

    def delete(self, caller: Caller, doc_id: str, trace_id: str = "") -> bool:
        return self.document_service.delete(caller, doc_id, trace_id)

    def audit(
        self, caller: Caller, doc_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        return self.document_service.audit(caller, doc_id, limit)


#: IndexService implements the whole protocol (both roles, readiness and metrics): the type
#: checker proves it here.
_INDEX_BACKEND: type[IndexBackend] = IndexService
