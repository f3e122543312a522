"""The read side of the index service: :class:`QueryService`, and the rules every side shares.

Searches, answers (whole or streamed), traces, document listings and details, structures and
page images: :class:`pagesight.api.protocols.QueryBackend`. None of them changes the index, so a
Query deployment of N replicas can run them (``read_path: query``), each with its own
:class:`QueryService` over the shared PostgreSQL catalog and the index.

Who may see what is decided here once, for reads and writes alike: :func:`access_of` is the
caller's view (the rule retrieval applies inside the index,
:meth:`pagesight.core.types.AccessFilter.admits`), and :class:`Stores` answers a document the
caller may not see exactly as a missing one (``None`` -> 404). :class:`Stores` is what the query
side, the document side (:mod:`pagesight.services.document_service`) and the ingest worker
(:mod:`pagesight.services.ingest_worker`) share: one :class:`LocalStack` and one trace store,
opened by their owner (:meth:`pagesight.services.index_service.IndexService.warm_up`); until
then every call is ``UNAVAILABLE``.

A plain class: no Ray, no HTTP; methods are synchronous and thread-safe.
"""

from __future__ import annotations

import collections
import functools
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator

from pagesight.api.caller import Caller
from pagesight.api.images import PageImage, media_type_of, parse_highlight
from pagesight.api.models import (
    AnswerRequest,
    DocumentDetail,
    SearchHit,
    SearchRequest,
    SearchResponse,
)
from pagesight.api.protocols import QueryBackend
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.links import page_image_url
from pagesight.core.protocols import CatalogRepository, TraceRepository
from pagesight.core.settings import Settings
from pagesight.core.tracing import current_trace_id
from pagesight.core.types import (
    AccessFilter,
    AnswerEvent,
    AnswerResponse,
    Document,
    DocumentStructure,
    JobState,
    RetrievalTrace,
)
from pagesight.ingestion.highlight import render_page_image
from pagesight.query.answer import AnsweredQuery, AnswerPipeline
from pagesight.services.metrics import ServiceMetrics
from pagesight.services.page_images import stored_page
from pagesight.services.stack import LocalStack


class FifoSlots:
    """At most ``n`` holders; waiters are served strictly in arrival order (a slot is handed to
    the oldest waiter, so a newcomer cannot barge past it: that is what keeps p99 near p50
    when a burst of requests queues for the cores)."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._waiters: collections.deque[threading.Event] = collections.deque()
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            turn = threading.Event()
            self._waiters.append(turn)
        turn.wait()

    def __exit__(self, *_exc: object) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().set()  # the slot passes on; _free stays as it is
            else:
                self._free += 1


def access_of(caller: Caller) -> AccessFilter:
    """The caller's view: its tenant and principals, at the current time."""
    return AccessFilter(tenant=caller.tenant, principals=caller.principals)


class Stores:
    """The index (in its :class:`LocalStack`) and the trace store, shared by the query side,
    the document side and the ingest worker; their owner opens and closes them (one copy per
    process: the embedded index has one writer, and two trace stores would split traces)."""

    def __init__(self) -> None:
        self.stack: LocalStack | None = None
        self.traces: TraceRepository | None = None

    def close(self) -> None:
        if self.stack is not None:
            self.stack.close()
            self.stack = None
        if self.traces is not None:
            self.traces.close()
            self.traces = None

    def ready(self) -> LocalStack:
        if self.stack is None:
            raise PageSightError(
                ErrorCode.UNAVAILABLE, Stage.GATEWAY, "the index service is not ready yet"
            )
        return self.stack

    def catalog(self) -> CatalogRepository:
        return self.ready().catalog

    def trace_store(self) -> TraceRepository:
        self.ready()
        assert self.traces is not None
        return self.traces

    def visible_document(self, caller: Caller, doc_id: str) -> Document | None:
        """The catalog's document, if the caller may see it (else as if it did not exist)."""
        doc = self.catalog().document(caller.tenant, doc_id)
        return doc if doc is not None and access_of(caller).admits_document(doc) else None

    def hidden_documents(self, caller: Caller) -> Callable[[str], bool]:
        """``hidden(doc_id)``: the tenant's document exists and the caller may not see it
        (remembered per id, for one listing)."""
        access, catalog = access_of(caller), self.catalog()

        @functools.cache
        def hidden(doc_id: str) -> bool:
            doc = catalog.document(caller.tenant, doc_id)
            return doc is not None and not access.admits_document(doc)

        return hidden


class QueryService:
    """:class:`pagesight.api.protocols.QueryBackend` over shared :class:`Stores`: every call
    needs the key's ``read`` scope and sees only what the caller's :func:`access_of` admits."""

    def __init__(self, settings: Settings, stores: Stores, metrics: ServiceMetrics) -> None:
        self.settings = settings
        self.stores = stores
        self.metrics = metrics
        #: the answer pipeline, built by the owner once the stores are open
        self.answers: AnswerPipeline | None = None
        self._search_slots = FifoSlots(settings.retrieval.parallel_searches or os.cpu_count() or 1)

    # -- search ------------------------------------------------------------------------------

    def search(self, caller: Caller, request: SearchRequest, trace_id: str) -> SearchResponse:
        current_trace_id.set(trace_id)
        caller.require("read")
        stack = self.stores.ready()
        access = access_of(caller).model_copy(update={"doc_ids": request.filters.doc_ids})
        started = time.perf_counter()
        with self._search_slots:
            result = stack.search(request.query, access, request.route, request.top_k, trace_id)
        elapsed = time.perf_counter() - started
        route = result.trace.route.value
        for stage, ms in result.trace.stages_ms.items():
            self.metrics.search_stage.labels(route, stage).observe(ms / 1000)
        self.metrics.search_stage.labels(route, "total").observe(elapsed)
        self.stores.trace_store().put(caller.tenant, result.trace, set(result.trace.doc_ids))
        hits = [
            SearchHit(
                **h.model_dump(exclude={"bboxes"}),
                evidence=h.bboxes,
                page_image_url=page_image_url(h.doc_id, h.page_number, h.bboxes),
            )
            for h in result.hits
        ]
        return SearchResponse(
            trace_id=trace_id,
            route=result.trace.route,
            hits=hits,
            elapsed_ms=round(elapsed * 1000, 2),
        )

    def trace(self, caller: Caller, trace_id: str) -> RetrievalTrace | None:
        """The tenant's trace, when every document it names is visible to the caller (a trace
        carries snippets and ids of what the query saw)."""
        caller.require("read")
        found = self.stores.trace_store().get(caller.tenant, trace_id)
        if found is None:
            return None
        trace, doc_ids = found
        visible = all(
            self.stores.visible_document(caller, doc_id) is not None for doc_id in doc_ids
        )
        return trace if visible else None

    def answer(self, caller: Caller, request: AnswerRequest, trace_id: str) -> AnswerResponse:
        """A grounded answer (extractive without an LLM configured, see pagesight.query.answer)."""
        current_trace_id.set(trace_id)
        caller.require("read")
        self.stores.ready()
        assert self.answers is not None
        with self._search_slots:
            done = self.answers.run(request, access_of(caller), trace_id)
        self.stores.trace_store().put(caller.tenant, done.trace, set(done.trace.doc_ids))
        return done.response

    def answer_stream(
        self, caller: Caller, request: AnswerRequest, trace_id: str
    ) -> Iterator[AnswerEvent]:
        """:meth:`answer`, streamed: :class:`AnswerToken` s as the answer is written, then the
        checked :class:`AnswerResponse` (the authority; see ``AnswerPipeline.stream``).

        A generator: nothing runs before the first ``next()``. The search slot is held up to
        the first event (search, rerank, the LLM's first token), not while tokens flow: a client
        reading slowly must not hold a core's turn. The trace is stored when the answer is
        complete; a stream closed before that (client gone) or failed stores none, as a failed
        :meth:`answer` does. Closing it closes the LLM's stream.
        """
        current_trace_id.set(trace_id)
        caller.require("read")
        self.stores.ready()
        assert self.answers is not None
        events = self.answers.stream(request, access_of(caller), trace_id)
        try:
            with self._search_slots:
                first = next(events)
            for event in itertools.chain([first], events):
                if isinstance(event, AnsweredQuery):
                    trace = event.trace
                    self.stores.trace_store().put(caller.tenant, trace, set(trace.doc_ids))
                    yield event.response
                else:
                    yield event
        finally:
            events.close()

    # -- documents ---------------------------------------------------------------------------

    def documents(self, caller: Caller) -> list[Document]:
        caller.require("read")
        access = access_of(caller)
        return [
            d for d in self.stores.catalog().documents(caller.tenant) if access.admits_document(d)
        ]

    def document(self, caller: Caller, doc_id: str) -> DocumentDetail | None:
        caller.require("read")
        doc = self.stores.visible_document(caller, doc_id)
        if doc is None:
            return None
        catalog = self.stores.catalog()
        ready = [
            j.updated_at
            for j in catalog.jobs(tenant=caller.tenant, states=[JobState.READY], limit=1000)
            if j.doc_id == doc_id
        ]
        return DocumentDetail(
            document=doc,
            pages=len(catalog.pages(caller.tenant, doc_id)),
            ingested_at=max(ready) if ready else None,
        )

    def structure(self, caller: Caller, doc_id: str) -> DocumentStructure | None:
        """Pages (with labels where known), sections, numbered figures and tables of a document
        the caller may see."""
        caller.require("read")
        doc = self.stores.visible_document(caller, doc_id)
        if doc is None:
            return None
        return self.stores.catalog().structure(doc)

    def page_image(
        self,
        caller: Caller,
        doc_id: str,
        page_number: int,
        highlight: str | None = None,
        image_format: str = "png",
    ) -> PageImage | None:
        caller.require("read")
        media_type = media_type_of(image_format)
        boxes = parse_highlight(highlight)
        stack = self.stores.ready()
        if self.stores.visible_document(caller, doc_id) is None:
            return None
        found = stored_page(
            stack.catalog, stack.ingestor.images, caller.tenant, doc_id, page_number
        )
        if found is None:
            return None
        page, path = found
        data = render_page_image(path, (page.width, page.height), boxes, image_format)
        return PageImage(data=data, media_type=media_type)


#: QueryService implements its role of the protocol: the type checker proves it here.
_QUERY_BACKEND: type[QueryBackend] = QueryService
