"""The index service's interface, as its callers see it: :class:`IndexBackend`.

``pagesight.services.index_service.IndexService`` implements it; the gateway reaches it through
:class:`pagesight.gateway.backend.ServiceClient` (in process or over Ray Serve handles), and the
command line through ``pagesight.entrypoints.cli_session`` (the service in process, or
``HttpBackend`` over the REST API). Every call names its :class:`pagesight.api.caller.Caller`; the
models are :mod:`pagesight.api.models`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

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


class IndexBackend(Protocol):
    """What the gateway asks of the index service (synchronous; see :class:`ServiceClient`)."""

    def search(self, caller: Caller, request: SearchRequest, trace_id: str) -> SearchResponse: ...

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
    ) -> Submitted: ...

    def submit_uri(self, caller: Caller, request: UriIngest, trace_id: str = "") -> Submitted: ...

    def job(self, caller: Caller, job_id: str) -> JobStatus | None: ...

    def jobs(
        self, caller: Caller, limit: int = 100, state: JobState | None = None
    ) -> list[JobStatus]: ...

    def audit(
        self, caller: Caller, doc_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]: ...

    def documents(self, caller: Caller) -> list[Document]: ...

    def document(self, caller: Caller, doc_id: str) -> DocumentDetail | None: ...

    def structure(self, caller: Caller, doc_id: str) -> DocumentStructure | None: ...

    def delete(self, caller: Caller, doc_id: str, trace_id: str = "") -> bool: ...

    def page_image(
        self,
        caller: Caller,
        doc_id: str,
        page_number: int,
        highlight: str | None = None,
        image_format: str = "png",
    ) -> PageImage | None: ...

    def trace(self, caller: Caller, trace_id: str) -> RetrievalTrace | None: ...

    def answer(self, caller: Caller, request: AnswerRequest, trace_id: str) -> AnswerResponse: ...

    def answer_stream(
        self, caller: Caller, request: AnswerRequest, trace_id: str
    ) -> Iterator[AnswerEvent]: ...

    def readiness(self) -> Readiness: ...

    def metrics_text(self) -> bytes: ...
