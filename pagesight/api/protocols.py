"""The index service's interface, as its callers see it: two roles and their union.

- :class:`QueryBackend`: the reads of the index (searches, answers, traces, documents, page
  images); with ``read_path: query`` a Query deployment of N replicas answers them.
- :class:`DocumentBackend`: what changes the index and what follows those changes (uploads,
  URIs to fetch, deletes; their jobs and the audit log); the writers answer it.
- :class:`IndexBackend`: both, plus the service's own readiness and metrics (what the gateway,
  the command line and the tests hold).

``pagesight.services.index_service.IndexService`` implements :class:`IndexBackend` (by owning
``QueryService``, ``DocumentService`` and ``IngestWorker``); the gateway reaches it through
:class:`pagesight.gateway.backend.ServiceClient`, a client *generated* from these protocols (in
process or over Ray Serve handles), and the command line through
``pagesight.entrypoints.cli_session`` (the service in process, or ``HttpBackend`` over the REST
API). Every call names its :class:`pagesight.api.caller.Caller`; the models are
:mod:`pagesight.api.models`.

Two markers describe a method where its signature cannot: :func:`streamed` (the result is a
stream of items, a generator on the service) and :func:`reads` (a :class:`DocumentBackend`
method that only reads, so a Query replica may answer it). Clients and the Serve application
read them through :func:`backend_methods`, :func:`is_streamed` and :func:`is_read`: a new method
declared here needs no edit in either.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

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

_Method = TypeVar("_Method", bound=Callable[..., Any])

_STREAMED = "__pagesight_streamed__"
_READS = "__pagesight_reads__"


def streamed(method: _Method) -> _Method:
    """Marks a method whose result is a stream of items (the service's method is a generator):
    a client hands it out as an async iterator, Serve must call it with ``stream=True``."""
    setattr(method, _STREAMED, True)
    return method


def reads(method: _Method) -> _Method:
    """Marks a :class:`DocumentBackend` method that only reads (the catalog's jobs, the audit
    log): with a Query deployment, it runs there (every :class:`QueryBackend` method does)."""
    setattr(method, _READS, True)
    return method


class QueryBackend(Protocol):
    """The reads: every method only reads, so any Query replica may answer it."""

    def search(self, caller: Caller, request: SearchRequest, trace_id: str) -> SearchResponse: ...

    def answer(self, caller: Caller, request: AnswerRequest, trace_id: str) -> AnswerResponse: ...

    @streamed
    def answer_stream(
        self, caller: Caller, request: AnswerRequest, trace_id: str
    ) -> Iterator[AnswerEvent]: ...

    def trace(self, caller: Caller, trace_id: str) -> RetrievalTrace | None: ...

    def documents(self, caller: Caller) -> list[Document]: ...

    def document(self, caller: Caller, doc_id: str) -> DocumentDetail | None: ...

    def structure(self, caller: Caller, doc_id: str) -> DocumentStructure | None: ...

    def page_image(
        self,
        caller: Caller,
        doc_id: str,
        page_number: int,
        highlight: str | None = None,
        image_format: str = "png",
    ) -> PageImage | None: ...


class DocumentBackend(Protocol):
    """The writes (uploads, URIs, deletes) and what records them (jobs, the audit log)."""

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
    ) -> Submitted: ...

    def submit_uri(self, caller: Caller, request: UriIngest, trace_id: str = "") -> Submitted: ...

    @reads
    def job(self, caller: Caller, job_id: str) -> JobStatus | None: ...

    @reads
    def jobs(
        self, caller: Caller, limit: int = 100, state: JobState | None = None
    ) -> list[JobStatus]: ...

    def delete(self, caller: Caller, doc_id: str, trace_id: str = "") -> bool: ...

    @reads
    def audit(
        self, caller: Caller, doc_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]: ...


class IndexBackend(QueryBackend, DocumentBackend, Protocol):
    """Both roles, and the service's health: what the gateway asks of the index service
    (synchronous; :class:`pagesight.gateway.backend.ServiceClient` makes it async). Readiness
    and metrics are the writers' (the ingest worker's queue and life), never a Query
    replica's."""

    def readiness(self) -> Readiness: ...

    def metrics_text(self) -> bytes: ...


@functools.cache
def backend_methods(protocol: type = IndexBackend) -> Mapping[str, Callable[..., Any]]:
    """The public methods ``protocol`` declares (its own and its bases'), by name, as the
    protocol's functions (their signatures and markers are the contract)."""
    found: dict[str, Callable[..., Any]] = {}
    for klass in reversed(protocol.__mro__):
        if klass is object or klass is Protocol or getattr(klass, "_is_protocol", False) is False:
            continue
        for name, value in vars(klass).items():
            if not name.startswith("_") and inspect.isfunction(value):
                found[name] = value
    return MappingProxyType(found)


def is_streamed(name: str) -> bool:
    """Whether :class:`IndexBackend`'s ``name`` answers with a stream of items."""
    return bool(getattr(backend_methods().get(name), _STREAMED, False))


def is_read(name: str) -> bool:
    """Whether :class:`IndexBackend`'s ``name`` only reads (a Query replica may answer it)."""
    return name in backend_methods(QueryBackend) or bool(
        getattr(backend_methods(DocumentBackend).get(name), _READS, False)
    )
