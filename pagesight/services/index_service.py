"""The index service: the one owner of the index, the catalog and the trace store.

Everything the gateway does to data goes through here: searches (with the caller's tenant and
principals inside every index query), document uploads (written to disk, queued as a job and
ingested by a background worker, never on the request path), job and document listings,
deletes (points, page images, uploads, jobs and the traces that name the document), page images
with highlights, traces and the audit log.

Every method applies one permission rule, the one retrieval applies inside the index
(:meth:`pagesight.core.types.AccessFilter.admits`: tenant, ACL, validity): a document, page, image,
job or trace the caller may not see answers exactly as a missing one (``None`` -> 404), and
uploads, replacements and deletes need the key's ``write`` scope, everything else ``read``.

It is a plain class: the Ray application wraps it in a deployment (one replica: the embedded
index has a single writer), tests and ``pagesight serve --no-ray`` use it in-process. Methods
are synchronous and thread-safe; :meth:`warm_up` opens everything (cheap ``__init__``).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import itertools
import logging
import os
import queue
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pagesight.api.caller import Caller
from pagesight.api.images import PageImage, media_type_of, parse_highlight
from pagesight.api.models import (
    AnswerRequest,
    DocumentDetail,
    Outcome,
    Readiness,
    SearchHit,
    SearchRequest,
    SearchResponse,
    Submitted,
    UriIngest,
)
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.ids import check_doc_id, make_doc_id
from pagesight.core.links import page_image_url
from pagesight.core.protocols import CatalogRepository, PageEmbedder, TextEmbedder, TraceRepository
from pagesight.core.settings import Settings
from pagesight.core.tracing import current_trace_id
from pagesight.core.types import (
    AccessFilter,
    AnswerEvent,
    AnswerResponse,
    AuditEntry,
    Document,
    DocumentStructure,
    IngestJob,
    JobState,
    JobStatus,
    RetrievalTrace,
)
from pagesight.index.base import IndexSchema, VectorStore
from pagesight.index.forwarded import read_primitive
from pagesight.index.vectors import CHUNK_COLLECTION, PAGE_COLLECTION
from pagesight.ingestion.claims import claimed_job, new_worker_id, release_dead_local_claims
from pagesight.ingestion.highlight import render_page_image
from pagesight.ingestion.ingest import DocumentParseFn, IngestRequest, is_current
from pagesight.ingestion.url_sources import SourcePolicy
from pagesight.query.answer import AnsweredQuery, AnswerPipeline
from pagesight.services.engine import build_answer_pipeline
from pagesight.services.metrics import ServiceMetrics
from pagesight.services.page_images import stored_page
from pagesight.services.stack import LocalStack, StoreOpener
from pagesight.store.traces import open_traces

log = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_STOP = "__stop__"


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


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:24]


def _access(caller: Caller) -> AccessFilter:
    """The caller's view: its tenant and principals, at the current time."""
    return AccessFilter(tenant=caller.tenant, principals=caller.principals)


def _sees_job(caller: Caller, job: IngestJob, hidden: Callable[[str], bool]) -> bool:
    """A job is the submitting key's, and visible by its ACL like the document it makes; not
    once that document reads as missing to the caller (a later version's ACL, or expired):
    a job of it would show a document that every other route denies."""
    if job.tenant != caller.tenant:
        return False
    if job.submitted_by == caller.key_id:
        return True
    return _access(caller).admits(job.tenant, job.acl, job.valid_until) and not hidden(job.doc_id)


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
        self._stack: LocalStack | None = None
        self._traces: TraceRepository | None = None
        self._queue: queue.Queue[str] = queue.Queue()
        self._search_slots = FifoSlots(settings.retrieval.parallel_searches or os.cpu_count() or 1)
        self._worker: threading.Thread | None = None
        #: whether this process ingests (False: a query replica, or a command that only reads)
        self._ingests = True
        #: this process's id in job claims (two workers never run the same job)
        self.worker_id = new_worker_id()
        self._warm_error: str | None = None
        self._answers: AnswerPipeline | None = None
        #: passwords of queued jobs, in memory only until the worker takes them
        self._passwords: dict[str, str] = {}

    # -- life cycle --------------------------------------------------------------------------

    @property
    def upload_dir(self) -> Path:
        return self.settings.data_dir / "uploads"

    def warm_up(self, worker: bool = True) -> None:
        """Open the index, catalog and trace store, load the query models, start the ingest
        worker and re-queue the jobs a previous process left unfinished (``worker=False``: a
        command line that only reads or deletes leaves the queue alone)."""
        if self._stack is not None:
            return
        try:
            self._stack = LocalStack(
                self.settings,
                parse=self._parse,
                ingest_embedder=self._ingest_embedder,
                page_embedder=self._page_embedder,
                open_store=self._open_store,
            )
            self._stack.embedder.warm_up()
            self._traces = open_traces(self.settings)
            self._traces.expire()
            self._answers = build_answer_pipeline(self.settings, self._stack)
        except Exception as exc:
            self._warm_error = f"{type(exc).__name__}: {exc}"
            raise
        self._ingests = worker
        if not worker:
            return
        release_dead_local_claims(self._stack.catalog, self.worker_id)
        for job in self._stack.catalog.unfinished_jobs():
            self._enqueue(job.job_id)
        self._worker = threading.Thread(target=self._work, name="ingest-worker", daemon=True)
        self._worker.start()

    def close(self) -> None:
        if self._worker is not None:
            self._queue.put(_STOP)
            self._worker.join(timeout=60)
            self._worker = None
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        if self._traces is not None:
            self._traces.close()
            self._traces = None

    def readiness(self) -> Readiness:
        checks = {
            "index_open": self._stack is not None,
            "text_model_loaded": self._stack is not None,
        }
        if self._ingests:
            checks["ingest_worker_alive"] = self._worker is not None and self._worker.is_alive()
        if self.settings.visual.active:
            checks["page_model_configured"] = (
                self._stack is not None and self._stack.page_embedder is not None
            )
        detail = {"error": self._warm_error} if self._warm_error else {}
        if self._stack is not None:
            detail["index"] = self._stack.store.collection
        return Readiness(ready=all(checks.values()), checks=checks, detail=detail)

    def metrics_text(self) -> bytes:
        self.metrics.queue_depth.set(self._queue.qsize())
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

    # -- search ------------------------------------------------------------------------------

    def search(self, caller: Caller, request: SearchRequest, trace_id: str) -> SearchResponse:
        current_trace_id.set(trace_id)
        caller.require("read")
        stack = self._ready()
        access = _access(caller).model_copy(update={"doc_ids": request.filters.doc_ids})
        started = time.perf_counter()
        with self._search_slots:
            result = stack.search(request.query, access, request.route, request.top_k, trace_id)
        elapsed = time.perf_counter() - started
        route = result.trace.route.value
        for stage, ms in result.trace.stages_ms.items():
            self.metrics.search_stage.labels(route, stage).observe(ms / 1000)
        self.metrics.search_stage.labels(route, "total").observe(elapsed)
        self._trace_store().put(caller.tenant, result.trace, set(result.trace.doc_ids))
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
        found = self._trace_store().get(caller.tenant, trace_id)
        if found is None:
            return None
        trace, doc_ids = found
        visible = all(self._visible_document(caller, doc_id) is not None for doc_id in doc_ids)
        return trace if visible else None

    def answer(self, caller: Caller, request: AnswerRequest, trace_id: str) -> AnswerResponse:
        """A grounded answer (extractive without an LLM configured, see pagesight.query.answer)."""
        current_trace_id.set(trace_id)
        caller.require("read")
        self._ready()
        assert self._answers is not None
        with self._search_slots:
            done = self._answers.run(request, _access(caller), trace_id)
        self._trace_store().put(caller.tenant, done.trace, set(done.trace.doc_ids))
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
        self._ready()
        assert self._answers is not None
        events = self._answers.stream(request, _access(caller), trace_id)
        try:
            with self._search_slots:
                first = next(events)
            for event in itertools.chain([first], events):
                if isinstance(event, AnsweredQuery):
                    trace = event.trace
                    self._trace_store().put(caller.tenant, trace, set(trace.doc_ids))
                    yield event.response
                else:
                    yield event
        finally:
            events.close()

    # -- ingestion ---------------------------------------------------------------------------

    def submit_upload(
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
        """Write the uploaded bytes under the data directory and queue their ingestion.

        Which document the bytes become (DESIGN.md section 2): with ``doc_id``, that document
        (created, or replaced when it exists); with ``replace``, the caller's one document of
        the same file name; otherwise the document of this file name *and* these bytes —
        the same upload again is ``unchanged``, different bytes under the same name are a new
        document. ``password`` opens an encrypted PDF; it is handed to the worker in memory,
        never stored, logged or traced.
        """
        current_trace_id.set(trace_id or None)
        caller.require("write")
        limit = self.settings.gateway.max_upload_bytes
        if len(data) > limit:
            raise PageSightError(
                ErrorCode.TOO_LARGE, Stage.INPUT, f"upload is larger than {limit} bytes"
            )
        if not data:
            raise PageSightError(ErrorCode.CORRUPT, Stage.INPUT, "the uploaded file is empty")
        name = _SAFE_NAME.sub("_", Path(filename or "upload").name).strip("._") or "upload"
        source_uri = f"upload:{name}"
        digest = hashlib.sha256(data).hexdigest()
        acl = list(acl or [])
        if doc_id is not None:
            target, existing = check_doc_id(doc_id), self._claim(caller, doc_id)
        elif replace:
            target, existing = self._named_upload(caller, source_uri, digest)
        else:
            target = make_doc_id(caller.tenant, f"{source_uri}\x00{digest}")
            existing = self._catalog().document(caller.tenant, target)
            if existing is not None and not _access(caller).admits_document(existing):
                # the same name and bytes under an ACL this key cannot see: a copy of its own
                target, existing = str(uuid.uuid4()), None
        outcome: Outcome = "created" if existing is None else "replaced"
        if existing is not None and is_current(existing, digest, acl, valid_until):
            outcome = "unchanged"
        request = IngestRequest(
            path=Path(),
            tenant=caller.tenant,
            acl=acl,
            doc_id=target,
            source_uri=source_uri,
            valid_until=valid_until,
            actor=caller.key_id,
        )
        if outcome == "unchanged":
            job = self._ready().ingestor.unchanged(request, digest)
            return Submitted(job=job.status(), outcome=outcome)
        # one file per upload: two queued uploads of the same bytes must not share (and delete)
        # one stored copy
        stored = f"{digest[:32]}-{uuid.uuid4().hex[:12]}{Path(name).suffix.lower()}"
        path = self._upload_dir(caller.tenant, target) / stored
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        request.path = path
        return Submitted(job=self._queue_job(request, password), outcome=outcome)

    def submit_uri(self, caller: Caller, request: UriIngest, trace_id: str = "") -> Submitted:
        """Check the URI against the allowlist now; fetch it in the worker. A URI is a real
        location: the same URI again replaces its document (or leaves it unchanged)."""
        current_trace_id.set(trace_id or None)
        caller.require("write")
        uri = self.sources.check(request.uri)
        doc_id = check_doc_id(request.doc_id) if request.doc_id else make_doc_id(caller.tenant, uri)
        existing = self._claim(caller, doc_id)
        suffix = Path(urlsplit(uri).path).suffix.lower()[:10]
        path = self._upload_dir(caller.tenant, doc_id) / f"fetched-{_digest(uri)}{suffix}"
        job = self._queue_job(
            IngestRequest(
                path=path,
                tenant=caller.tenant,
                acl=list(request.acl),
                doc_id=doc_id,
                source_uri=uri,
                valid_until=request.valid_until,
                actor=caller.key_id,
            ),
            request.password.get_secret_value() if request.password else None,
        )
        return Submitted(job=job, outcome="created" if existing is None else "replaced")

    def job(self, caller: Caller, job_id: str) -> JobStatus | None:
        caller.require("read")
        job = self._catalog().job(job_id)
        if job is None or not _sees_job(caller, job, self._hidden_documents(caller)):
            return None
        return job.status()

    def jobs(
        self, caller: Caller, limit: int = 100, state: JobState | None = None
    ) -> list[JobStatus]:
        """The newest ``limit`` jobs the caller may see (of ``state`` only, when given)."""
        caller.require("read")
        catalog, offset, page = self._catalog(), 0, max(limit, 200)
        found: list[JobStatus] = []
        states = [state] if state is not None else None
        hidden = self._hidden_documents(caller)
        while len(found) < limit:
            batch = catalog.jobs(tenant=caller.tenant, states=states, limit=page, offset=offset)
            found += [j.status() for j in batch if _sees_job(caller, j, hidden)]
            if len(batch) < page:
                break
            offset += page
        return found[:limit]

    # -- documents ---------------------------------------------------------------------------

    def documents(self, caller: Caller) -> list[Document]:
        caller.require("read")
        access = _access(caller)
        return [d for d in self._catalog().documents(caller.tenant) if access.admits_document(d)]

    def document(self, caller: Caller, doc_id: str) -> DocumentDetail | None:
        caller.require("read")
        doc = self._visible_document(caller, doc_id)
        if doc is None:
            return None
        catalog = self._catalog()
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
        doc = self._visible_document(caller, doc_id)
        if doc is None:
            return None
        return self._catalog().structure(doc)

    def delete(self, caller: Caller, doc_id: str, trace_id: str = "") -> bool:
        """Gone everywhere: points, catalog rows, page images, uploads, jobs, traces; the audit
        log records who deleted it. A document the caller cannot see is not found."""
        current_trace_id.set(trace_id or None)
        caller.require("write")
        stack = self._ready()
        if self._visible_document(caller, doc_id) is None:
            return False
        found = stack.ingestor.delete(caller.tenant, doc_id, actor=caller.key_id, via="api")
        purged = self._trace_store().purge_document(caller.tenant, doc_id)
        jobs = stack.catalog.delete_jobs(caller.tenant, doc_id)
        shutil.rmtree(self._upload_dir(caller.tenant, doc_id), ignore_errors=True)
        log.info(
            "deleted document", extra={"doc_id": doc_id, "traces_purged": purged, "jobs": jobs}
        )
        return found

    def audit(
        self, caller: Caller, doc_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        """The tenant's deletes and replacements, newest first: those of documents whose ACL
        (at the time) admits the caller, except a document that still exists and now reads as
        missing to it (a later ACL, or expired)."""
        caller.require("read")
        access, catalog, page = _access(caller), self._catalog(), max(limit, 200)
        hidden = self._hidden_documents(caller)
        found: list[AuditEntry] = []
        before: int | None = None
        while len(found) < limit:
            batch = catalog.audit_entries(caller.tenant, doc_id, limit=page, before=before)
            found += [
                e for e in batch if access.admits(e.tenant, e.acl, None) and not hidden(e.doc_id)
            ]
            if len(batch) < page:
                break
            before = batch[-1].seq
        return found[:limit]

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
        stack = self._ready()
        if self._visible_document(caller, doc_id) is None:
            return None
        found = stored_page(
            stack.catalog, stack.ingestor.images, caller.tenant, doc_id, page_number
        )
        if found is None:
            return None
        page, path = found
        data = render_page_image(path, (page.width, page.height), boxes, image_format)
        return PageImage(data=data, media_type=media_type)

    # -- the worker --------------------------------------------------------------------------

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Block until every queued job has finished (tests, batch scripts)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.05)
        return False

    def _queue_job(self, request: IngestRequest, password: str | None) -> JobStatus:
        job = self._ready().ingestor.queue(request)
        if password:
            self._passwords[job.job_id] = password
        self._enqueue(job.job_id)
        log.info("queued ingest job", extra={"job_id": job.job_id, "doc_id": job.doc_id})
        return job.status()

    def _enqueue(self, job_id: str) -> None:
        self._queue.put(job_id)
        self.metrics.queue_depth.set(self._queue.qsize())

    def _work(self) -> None:
        """Run queued jobs; on a shared database, also poll for jobs other replicas queued
        (or a dead worker left), every ``database.job_poll_s``."""
        poll_s = self.settings.database.job_poll_s if self.settings.database_url else None
        while True:
            try:
                job_id: str | None = self._queue.get(timeout=poll_s)
            except queue.Empty:
                job_id = None
            try:
                if job_id == _STOP:
                    return
                while self._run_job(job_id) and job_id is None:
                    pass  # polled one: poll again right away, the queue may be long
            except Exception:  # the worker must outlive any one job
                log.exception("ingest worker failed on job %s", job_id)
            finally:
                if job_id is not None:
                    self._queue.task_done()
                self.metrics.queue_depth.set(self._queue.qsize())

    def _run_job(self, job_id: str | None) -> bool:
        """Claim ``job_id`` (None: the oldest claimable job) and run it; False when there was
        nothing to claim (finished, or another worker holds it)."""
        stack = self._ready()
        lease_s = self.settings.database.job_lease_s
        with claimed_job(stack.catalog, self.worker_id, lease_s, job_id) as job:
            if job is None:
                return False
            self._run_claimed(stack, job)
        return True

    def _run_claimed(self, stack: LocalStack, job: IngestJob) -> None:
        job_id = job.job_id
        started = time.perf_counter()
        path = Path(job.path)
        if not path.is_file() and not job.source_uri.startswith("upload:"):
            try:
                fetched = self.sources.fetch(job.source_uri, path)
            except PageSightError as exc:
                self._passwords.pop(job_id, None)
                stack.catalog.fail(job, exc.code, exc.stage.value, exc.message)
                self.metrics.jobs.labels(JobState.FAILED.value, exc.code.value).inc()
                return
            if fetched != path:  # a file:// source is read where it is
                job = stack.catalog.advance(job, job.state, path=str(fetched))
        done = stack.ingestor.run(job, self._passwords.pop(job_id, None))
        self.metrics.ingest_seconds.inc(time.perf_counter() - started)
        self.metrics.jobs.labels(done.state.value, done.error_code or "").inc()
        if done.state == JobState.READY and not done.unchanged:
            self.metrics.ingest_pages.inc(done.pages)
        if path.is_relative_to(self.upload_dir):
            path.unlink(missing_ok=True)  # indexed (or failed): the upload is not needed again
        log.info(
            "ingest job finished",
            extra={"job_id": job_id, "state": done.state.value, "pages": done.pages},
        )

    # -- helpers -----------------------------------------------------------------------------

    def _upload_dir(self, tenant: str, doc_id: str) -> Path:
        return self.upload_dir / _digest(tenant) / _digest(doc_id)

    def _catalog(self) -> CatalogRepository:
        return self._ready().catalog

    def _visible_document(self, caller: Caller, doc_id: str) -> Document | None:
        """The catalog's document, if the caller may see it (else as if it did not exist)."""
        doc = self._catalog().document(caller.tenant, doc_id)
        return doc if doc is not None and _access(caller).admits_document(doc) else None

    def _hidden_documents(self, caller: Caller) -> Callable[[str], bool]:
        """``hidden(doc_id)``: the tenant's document exists and the caller may not see it
        (remembered per id, for one listing)."""
        access, catalog = _access(caller), self._catalog()

        @functools.cache
        def hidden(doc_id: str) -> bool:
            doc = catalog.document(caller.tenant, doc_id)
            return doc is not None and not access.admits_document(doc)

        return hidden

    def _claim(self, caller: Caller, doc_id: str) -> Document | None:
        """The document ``doc_id`` a write would replace (None: it would be created). A
        document of the tenant the caller cannot see is not overwritten: CONFLICT (this tells a
        writer of the tenant that the id is taken, and nothing else about it)."""
        existing = self._catalog().document(caller.tenant, doc_id)
        if existing is not None and not _access(caller).admits_document(existing):
            raise PageSightError(
                ErrorCode.CONFLICT, Stage.INPUT, f"doc_id {doc_id!r} is taken; choose another"
            )
        return existing

    def _named_upload(
        self, caller: Caller, source_uri: str, digest: str
    ) -> tuple[str, Document | None]:
        """``replace=true`` without a doc_id: the caller's one visible upload of this name."""
        access = _access(caller)
        named = [
            d
            for d in self._catalog().documents(caller.tenant)
            if d.source_uri == source_uri and access.admits_document(d)
        ]
        if len(named) > 1:
            raise PageSightError(
                ErrorCode.CONFLICT,
                Stage.INPUT,
                f"{len(named)} documents are named {source_uri.removeprefix('upload:')!r}: "
                "pass the doc_id of the one to replace",
            )
        if named:
            return named[0].doc_id, named[0]
        return make_doc_id(caller.tenant, f"{source_uri}\x00{digest}"), None

    def _ready(self) -> LocalStack:
        if self._stack is None:
            raise PageSightError(
                ErrorCode.UNAVAILABLE, Stage.GATEWAY, "the index service is not ready yet"
            )
        return self._stack

    def _trace_store(self) -> TraceRepository:
        self._ready()
        assert self._traces is not None
        return self._traces
