"""Where the command line's calls go: the local index service, or a running gateway.

Every command that reads or writes the index talks to an
:class:`pagesight.api.protocols.IndexBackend` through a :class:`CliSession`, so the two modes share
one code path:

- **local** (the default): an :class:`pagesight.services.index_service.IndexService` over the data
  directory, in this process. The caller is the machine's user acting for ``--tenant``: with
  ``--principal`` it sees what those principals may see, without it every document of the
  tenant (an administrator). Files are ingested by their path (``file://`` URIs), so a file's
  document id follows its location, as ``sync`` expects.
- **remote** (``--server URL --api-key KEY``): :class:`HttpBackend`, the same calls over the
  gateway's REST API. The key decides tenant and principals, so ``--tenant`` and ``--principal``
  are refused there rather than ignored; files are uploaded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pagesight.api.caller import Caller
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
from pagesight.core.settings import ALL_SCOPES, Settings
from pagesight.core.types import (
    AuditEntry,
    Document,
    DocumentStructure,
    JobState,
    JobStatus,
    RetrievalTrace,
)

if TYPE_CHECKING:
    from pagesight.api.images import PageImage
    from pagesight.api.models import AnswerRequest
    from pagesight.core.types import AnswerEvent, AnswerResponse
    from pagesight.gateway.client import PageSightClient

#: How often a waiting command asks for its jobs' state.
POLL_S = 0.2


def usage_error(message: str) -> PageSightError:
    """An option the chosen mode cannot honour, or a missing one."""
    return PageSightError(ErrorCode.INVALID_REQUEST, Stage.INPUT, message)


class HttpBackend:
    """:class:`IndexBackend` over the gateway's REST API (the ``caller`` argument is the API
    key's, decided by the server: it is not sent)."""

    def __init__(self, client: PageSightClient) -> None:
        self.client = client

    def search(self, caller: Caller, request: SearchRequest, trace_id: str) -> SearchResponse:
        return self.client.search(
            request.query,
            route=request.route,
            top_k=request.top_k,
            doc_ids=request.filters.doc_ids,
        )

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
        accepted = self.client.upload(
            filename,
            data=data,
            doc_id=doc_id,
            acl=acl,
            valid_until=valid_until,
            replace=replace,
            password=password,
        )
        return Submitted(job=self.client.job(accepted.job_id), outcome=accepted.outcome)

    def submit_uri(self, caller: Caller, request: UriIngest, trace_id: str = "") -> Submitted:
        accepted = self.client.ingest_uri(
            request.uri,
            doc_id=request.doc_id,
            acl=request.acl,
            valid_until=request.valid_until,
            password=request.password.get_secret_value() if request.password else None,
        )
        return Submitted(job=self.client.job(accepted.job_id), outcome=accepted.outcome)

    def job(self, caller: Caller, job_id: str) -> JobStatus | None:
        return self.client.job(job_id)

    def jobs(
        self, caller: Caller, limit: int = 100, state: JobState | None = None
    ) -> list[JobStatus]:
        return self.client.jobs(limit, state)

    def audit(
        self, caller: Caller, doc_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        return self.client.audit(doc_id, limit)

    def documents(self, caller: Caller) -> list[Document]:
        return self.client.documents()

    def document(self, caller: Caller, doc_id: str) -> DocumentDetail | None:
        return self.client.document(doc_id)

    def structure(self, caller: Caller, doc_id: str) -> DocumentStructure | None:
        return self.client.structure(doc_id)

    def delete(self, caller: Caller, doc_id: str, trace_id: str = "") -> bool:
        return self.client.delete(doc_id).deleted

    def page_image(
        self,
        caller: Caller,
        doc_id: str,
        page_number: int,
        highlight: str | None = None,
        image_format: str = "png",
    ) -> PageImage | None:
        from pagesight.api.images import PageImage, media_type_of, parse_highlight

        data = self.client.page_image(
            doc_id, page_number, highlight=parse_highlight(highlight), image_format=image_format
        )
        return PageImage(data=data, media_type=media_type_of(image_format))

    def trace(self, caller: Caller, trace_id: str) -> RetrievalTrace | None:
        return self.client.trace(trace_id)

    def answer(self, caller: Caller, request: AnswerRequest, trace_id: str) -> AnswerResponse:
        return self.client.answer(
            request.query,
            route=request.route,
            policy=request.policy,
            doc_ids=request.filters.doc_ids,
        )

    def answer_stream(
        self, caller: Caller, request: AnswerRequest, trace_id: str
    ) -> Iterator[AnswerEvent]:
        return self.client.answer_stream(
            request.query,
            route=request.route,
            policy=request.policy,
            doc_ids=request.filters.doc_ids,
        )

    def readiness(self) -> Readiness:
        return Readiness(ready=self.client.ready(), checks={})

    def metrics_text(self) -> bytes:
        raise usage_error("metrics are scraped from the gateway's /metrics")


#: HttpBackend implements both roles of the protocol: the type checker proves it here, and
#: tests/unit/services/test_backend_protocols.py that its parameters are named as the protocol's.
_HTTP_BACKEND: type[IndexBackend] = HttpBackend


@dataclass
class CliSession:
    """One command's backend and the caller it acts as."""

    backend: IndexBackend
    caller: Caller
    remote: bool

    def submit_file(
        self,
        path: Path,
        *,
        acl: list[str],
        password: str | None,
        replace: bool = False,
    ) -> Submitted:
        """Queue one file: by its location locally (the document id follows the path), as an
        upload to a gateway."""
        if self.remote:
            return self.backend.submit_upload(
                self.caller,
                path.name,
                path.read_bytes(),
                acl=acl,
                replace=replace,
                password=password,
            )
        if replace:
            raise usage_error(
                "--replace is for --server uploads; a local file's document follows its path"
            )
        request = UriIngest.model_validate(
            {"uri": path.resolve().as_uri(), "acl": acl, "password": password}
        )
        return self.backend.submit_uri(self.caller, request)

    def wait(self, job_id: str, timeout_s: float) -> JobStatus:
        """Poll until the job is READY or FAILED."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.backend.job(self.caller, job_id)
            if job is None:
                raise PageSightError(ErrorCode.NOT_FOUND, Stage.INPUT, f"job {job_id} vanished")
            if job.state.terminal:
                return job
            if time.monotonic() > deadline:
                raise PageSightError(
                    ErrorCode.TIMEOUT,
                    Stage.INPUT,
                    f"job {job_id} still {job.state.value} after {timeout_s:g} s",
                )
            time.sleep(POLL_S)


@contextmanager
def open_session(
    settings: Settings,
    *,
    server: str | None,
    api_key: str | None,
    tenant: str | None,
    principals: list[str] | None,
    ingest: bool = False,
) -> Iterator[CliSession]:
    """The session a command runs in; ``ingest`` starts the local ingest worker."""
    if server:
        from pagesight.gateway.client import PageSightClient

        options = (("--tenant", tenant), ("--principal", principals))
        refused = [name for name, value in options if value]
        if refused:
            raise usage_error(
                f"{' and '.join(refused)} cannot be used with --server: the API key decides "
                "the tenant and principals"
            )
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise usage_error(f"--server must be an http:// or https:// URL, not {server!r}")
        if not api_key:
            raise PageSightError(
                ErrorCode.UNAUTHORIZED,
                Stage.AUTH,
                "--api-key (or PAGESIGHT_API_KEY) is required with --server",
            )
        with PageSightClient(server, api_key=api_key) as client:
            caller = Caller(key_id="remote", tenant="", principals=[])
            yield CliSession(HttpBackend(client), caller, remote=True)
        return
    from pagesight.services.index_service import IndexService
    from pagesight.services.stack import cli_actor

    local = settings.model_copy(deep=True)
    # The local user may read any file it can open: file:// paths are its own to ingest.
    local.gateway.uri_allowlist = ["file:///"]
    service = IndexService(local)
    service.warm_up(worker=ingest)
    caller = Caller(
        key_id=cli_actor(),
        tenant=tenant or "default",
        principals=principals or None,
        scopes=frozenset(ALL_SCOPES),
    )
    try:
        yield CliSession(service, caller, remote=False)
    finally:
        service.close()
