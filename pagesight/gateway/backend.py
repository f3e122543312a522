"""The service behind the gateway, as the routers see it: typed async calls.

The routers never know whether the index service runs in this process (tests, the single-
process server) or in a Ray Serve deployment: both are reached through :class:`ServiceClient`,
built with an *invoker* that turns ``(method name, args, kwargs)`` into an awaitable. In
process that is a call on a worker thread; under Ray it is ``handle.<method>.remote(...)``
(:mod:`pagesight.entrypoints.serve_app`). :class:`pagesight.api.protocols.IndexBackend` is the
interface the service implements (``pagesight.services.index_service.IndexService``).

Streamed results (a streamed answer) go through a *stream invoker* instead, which turns a
generator method of the service into an async iterator: in process, each ``next()`` runs on a
worker thread (:func:`iterate_on`); under Ray, ``handle.options(stream=True).<method>``
streams the items of the deployment's generator method.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pagesight.api.caller import Caller
from pagesight.api.images import PageImage
from pagesight.api.models import (
    DocumentDetail,
    Readiness,
    SearchRequest,
    SearchResponse,
    Submitted,
    UriIngest,
)
from pagesight.api.protocols import IndexBackend
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.types import (
    AuditEntry,
    Document,
    DocumentStructure,
    JobState,
    JobStatus,
    RetrievalTrace,
)

if TYPE_CHECKING:
    from pagesight.api.models import AnswerRequest
    from pagesight.core.types import AnswerEvent, AnswerResponse

#: (method name, positional args, keyword args) -> the awaitable result
Invoker = Callable[[str, tuple[Any, ...], dict[str, Any]], Awaitable[Any]]
#: (generator method name, positional args, keyword args) -> its items, asynchronously
StreamInvoker = Callable[[str, tuple[Any, ...], dict[str, Any]], AsyncIterator[Any]]


class ServiceClient:
    """Async, typed calls of an :class:`IndexBackend`, however it is reached."""

    def __init__(self, invoke: Invoker, stream: StreamInvoker | None = None) -> None:
        self._invoke = invoke
        self._stream = stream or _no_streams

    @classmethod
    def in_process(cls, service: IndexBackend, threads: int = 8) -> ServiceClient:
        """Call ``service`` on a pool of worker threads (its methods block on I/O and models)."""
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pagesight-svc")

        async def invoke(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            method = getattr(service, name)
            return await asyncio.get_running_loop().run_in_executor(
                pool, lambda: method(*args, **kwargs)
            )

        def stream(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AsyncIterator[Any]:
            return iterate_on(pool, functools.partial(getattr(service, name), *args, **kwargs))

        return cls(invoke, stream)

    async def search(self, caller: Caller, request: SearchRequest, trace_id: str) -> SearchResponse:
        result: SearchResponse = await self._invoke("search", (caller, request, trace_id), {})
        return result

    async def submit_upload(
        self,
        caller: Caller,
        filename: str,
        data: bytes,
        *,
        doc_id: str | None,
        acl: list[str],
        valid_until: datetime | None,
        replace: bool,
        password: str | None,
        trace_id: str,
    ) -> Submitted:
        kwargs = {
            "doc_id": doc_id,
            "acl": acl,
            "valid_until": valid_until,
            "replace": replace,
            "password": password,
            "trace_id": trace_id,
        }
        done: Submitted = await self._invoke("submit_upload", (caller, filename, data), kwargs)
        return done

    async def submit_uri(self, caller: Caller, request: UriIngest, trace_id: str) -> Submitted:
        done: Submitted = await self._invoke("submit_uri", (caller, request, trace_id), {})
        return done

    async def job(self, caller: Caller, job_id: str) -> JobStatus | None:
        job: JobStatus | None = await self._invoke("job", (caller, job_id), {})
        return job

    async def jobs(self, caller: Caller, limit: int, state: JobState | None) -> list[JobStatus]:
        jobs: list[JobStatus] = await self._invoke("jobs", (caller, limit, state), {})
        return jobs

    async def audit(self, caller: Caller, doc_id: str | None, limit: int) -> list[AuditEntry]:
        entries: list[AuditEntry] = await self._invoke("audit", (caller, doc_id, limit), {})
        return entries

    async def documents(self, caller: Caller) -> list[Document]:
        docs: list[Document] = await self._invoke("documents", (caller,), {})
        return docs

    async def document(self, caller: Caller, doc_id: str) -> DocumentDetail | None:
        doc: DocumentDetail | None = await self._invoke("document", (caller, doc_id), {})
        return doc

    async def structure(self, caller: Caller, doc_id: str) -> DocumentStructure | None:
        found: DocumentStructure | None = await self._invoke("structure", (caller, doc_id), {})
        return found

    async def delete(self, caller: Caller, doc_id: str, trace_id: str) -> bool:
        deleted: bool = await self._invoke("delete", (caller, doc_id, trace_id), {})
        return deleted

    async def page_image(
        self,
        caller: Caller,
        doc_id: str,
        page_number: int,
        highlight: str | None,
        image_format: str,
    ) -> PageImage | None:
        args = (caller, doc_id, page_number, highlight, image_format)
        image: PageImage | None = await self._invoke("page_image", args, {})
        return image

    async def answer(self, caller: Caller, request: AnswerRequest, trace_id: str) -> AnswerResponse:
        result: AnswerResponse = await self._invoke("answer", (caller, request, trace_id), {})
        return result

    def answer_stream(
        self, caller: Caller, request: AnswerRequest, trace_id: str
    ) -> AsyncIterator[AnswerEvent]:
        """The streamed answer's events (tokens, then the checked answer); nothing is asked of
        the service until the first item is awaited."""
        return self._stream("answer_stream", (caller, request, trace_id), {})

    async def trace(self, caller: Caller, trace_id: str) -> RetrievalTrace | None:
        trace: RetrievalTrace | None = await self._invoke("trace", (caller, trace_id), {})
        return trace

    async def readiness(self) -> Readiness:
        ready: Readiness = await self._invoke("readiness", (), {})
        return ready

    async def metrics_text(self) -> bytes:
        text: bytes = await self._invoke("metrics_text", (), {})
        return text


_END = object()


async def iterate_on(pool: Executor, start: Callable[[], Iterator[Any]]) -> AsyncIterator[Any]:
    """The items of the blocking iterator ``start()`` returns, each ``next()`` run on ``pool``.

    Steps never overlap (each is awaited before the next is submitted), and all of them run in
    one copied context, so a context variable the generator sets (the trace id) holds across
    its steps whichever worker thread runs them. When this iterator is closed early (the client
    went away, a timeout), the generator is closed on the pool after any step still running,
    never concurrently with it: closing the answer generator closes the LLM's stream.
    """
    context = contextvars.copy_context()
    iterator = context.run(start)
    pending: Future[Any] | None = None
    try:
        while True:
            pending = pool.submit(functools.partial(context.run, _step, iterator))
            item = await asyncio.wrap_future(pending)
            pending = None
            if item is _END:
                return
            yield item
    finally:
        close = functools.partial(pool.submit, context.run, _close, iterator)
        if pending is None:
            close()
        else:  # a step is still running on a worker: close after it, not beside it
            pending.add_done_callback(lambda _done: close())


def _step(iterator: Iterator[Any]) -> Any:
    return next(iterator, _END)


def _close(iterator: Iterator[Any]) -> None:
    closer = getattr(iterator, "close", None)
    if closer is not None:
        closer()


async def _no_streams(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> AsyncIterator[Any]:
    """The stream invoker of a client built without one: streamed calls are unavailable."""
    raise PageSightError(
        ErrorCode.UNAVAILABLE, Stage.GATEWAY, f"this backend cannot stream ({name})"
    )
    yield  # pragma: no cover  (makes this an async generator)
