"""A small typed Python client of the gateway (``/v1``): the CLI's remote mode and the tests.

    with PageSightClient("http://127.0.0.1:8000", api_key="ps_...") as client:
        job = client.upload("report.pdf")
        client.wait_for_job(job.job_id)
        for hit in client.search("revenue by segment chart", route="hybrid").hits:
            print(hit.doc_id, hit.page_number, hit.score)
        for event in client.answer_stream("What drove fuel costs?"):
            if isinstance(event, AnswerToken):
                print(event.text, end="", flush=True)  # provisional: replaced by the answer
            else:
                print("\n", event.answer, event.citations)  # the checked answer, always last

Errors come back as :class:`ApiError` with the HTTP status and the server's stage error code,
never as a bare ``httpx`` exception.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn
from urllib.parse import quote

import httpx

from pagesight.api.models import (
    API_PREFIX,
    AnswerRequest,
    AuditList,
    Deleted,
    DocumentDetail,
    DocumentList,
    ErrorResponse,
    JobAccepted,
    JobList,
    SearchRequest,
    SearchResponse,
    TraceResponse,
    UriIngest,
)
from pagesight.core.types import (
    AnswerEvent,
    AnswerResponse,
    AnswerToken,
    AuditEntry,
    BBox,
    Document,
    DocumentStructure,
    JobState,
    JobStatus,
    RetrievalTrace,
    RouteName,
    SearchFilters,
)


class ApiError(Exception):
    """A non-2xx answer: ``status``, ``code`` (e.g. NOT_FOUND), ``stage``, ``message``."""

    def __init__(
        self,
        status: int,
        code: str,
        stage: str,
        message: str,
        trace_id: str | None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"HTTP {status} {code} ({stage}): {message}")
        self.status = status
        self.code = code
        self.stage = stage
        self.message = message
        self.trace_id = trace_id
        self.retry_after = retry_after


class PageSightClient:
    """Synchronous client; pass ``http`` to reuse a client (or a test client of the app)."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        *,
        timeout_s: float = 60.0,
        http: httpx.Client | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if http is None:
            self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)
            self._owned = True
        else:
            self._http = http
            self._http.headers.update(headers)
            self._owned = False

    # -- documents and jobs --

    def upload(
        self,
        path: Path | str,
        *,
        doc_id: str | None = None,
        acl: list[str] | None = None,
        valid_until: datetime | None = None,
        data: bytes | None = None,
        replace: bool = False,
        password: str | None = None,
    ) -> JobAccepted:
        """Upload a file (or ``data`` under ``path``'s name); returns the queued job and
        whether it creates, replaces or leaves unchanged a document."""
        path = Path(path)
        content = data if data is not None else path.read_bytes()
        fields: dict[str, str] = {}
        if doc_id:
            fields["doc_id"] = doc_id
        if acl:
            fields["acl"] = ",".join(acl)
        if valid_until:
            fields["valid_until"] = valid_until.isoformat()
        if replace:
            fields["replace"] = "true"
        if password:
            fields["password"] = password
        response = self._request(
            "POST",
            "/documents",
            files={"file": (path.name, content, "application/octet-stream")},
            data=fields,
        )
        return JobAccepted.model_validate(response.json())

    def ingest_uri(
        self,
        uri: str,
        *,
        doc_id: str | None = None,
        acl: list[str] | None = None,
        valid_until: datetime | None = None,
        password: str | None = None,
    ) -> JobAccepted:
        body = UriIngest(uri=uri, doc_id=doc_id, acl=list(acl or []), valid_until=valid_until)
        payload = body.model_dump(mode="json", exclude={"password"})
        if password:
            payload["password"] = password  # a SecretStr would serialise masked
        response = self._request("POST", "/documents", json=payload)
        return JobAccepted.model_validate(response.json())

    def job(self, job_id: str) -> JobStatus:
        return JobStatus.model_validate(self._request("GET", f"/jobs/{_q(job_id)}").json())

    def jobs(self, limit: int = 100, state: JobState | None = None) -> list[JobStatus]:
        params: dict[str, Any] = {"limit": limit}
        if state is not None:
            params["state"] = state.value
        response = self._request("GET", "/jobs", params=params)
        return JobList.model_validate(response.json()).jobs

    def audit(self, doc_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """The tenant's deletes and replacements, newest first."""
        params: dict[str, Any] = {"limit": limit}
        if doc_id is not None:
            params["doc_id"] = doc_id
        response = self._request("GET", "/audit", params=params)
        return AuditList.model_validate(response.json()).entries

    def wait_for_job(
        self, job_id: str, timeout_s: float = 300.0, poll_s: float = 0.25
    ) -> JobStatus:
        """Poll until the job is READY or FAILED (returned either way), or raise TimeoutError."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.job(job_id)
            if job.state.terminal:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job.state.value} after {timeout_s:g} s")
            time.sleep(poll_s)

    def documents(self) -> list[Document]:
        return DocumentList.model_validate(self._request("GET", "/documents").json()).documents

    def document(self, doc_id: str) -> DocumentDetail:
        return DocumentDetail.model_validate(
            self._request("GET", f"/documents/{_q(doc_id)}").json()
        )

    def structure(self, doc_id: str) -> DocumentStructure:
        """Pages with their labels, sections, numbered figures and tables of a document."""
        response = self._request("GET", f"/documents/{_q(doc_id)}/structure")
        return DocumentStructure.model_validate(response.json())

    def delete(self, doc_id: str) -> Deleted:
        return Deleted.model_validate(self._request("DELETE", f"/documents/{_q(doc_id)}").json())

    def page_image(
        self,
        doc_id: str,
        page_number: int,
        *,
        highlight: list[BBox] | None = None,
        image_format: str = "png",
    ) -> bytes:
        params: dict[str, str] = {"format": image_format}
        if highlight:
            params["highlight"] = ";".join(f"{b.x0},{b.y0},{b.x1},{b.y1}" for b in highlight)
        response = self._request(
            "GET", f"/documents/{_q(doc_id)}/pages/{page_number}/image", params=params
        )
        return response.content

    # -- search --

    def search(
        self,
        query: str,
        *,
        route: RouteName | str = RouteName.AUTO,
        top_k: int = 10,
        doc_ids: list[str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> SearchResponse:
        body = SearchRequest(
            query=query,
            route=RouteName(route),
            top_k=top_k,
            filters=SearchFilters(doc_ids=doc_ids),
        )
        response = self._request(
            "POST", "/search", json=body.model_dump(mode="json"), headers=headers
        )
        return SearchResponse.model_validate(response.json())

    def answer(
        self,
        query: str,
        *,
        route: RouteName | str = RouteName.AUTO,
        policy: str = "standard",
        doc_ids: list[str] | None = None,
    ) -> AnswerResponse:
        body = AnswerRequest.model_validate(
            {"query": query, "route": route, "policy": policy, "filters": {"doc_ids": doc_ids}}
        )
        response = self._request("POST", "/answer", json=body.model_dump(mode="json"))
        return AnswerResponse.model_validate(response.json())

    def answer_stream(
        self,
        query: str,
        *,
        route: RouteName | str = RouteName.AUTO,
        policy: str = "standard",
        doc_ids: list[str] | None = None,
    ) -> Iterator[AnswerEvent]:
        """:meth:`answer` as it is written: :class:`AnswerToken` s, then the checked
        :class:`AnswerResponse`, always last. Show the tokens while they come, then replace them
        with the final ``answer`` (sentences that failed the citation check were already sent:
        they are in its ``withheld``, not in its ``answer``).

        An error before the stream starts raises :class:`ApiError` as any call does; one in the
        middle (``event: error``) raises it with ``status`` 200, the status already sent.
        Closing the iterator early closes the connection, which stops the generation.
        """
        body = AnswerRequest.model_validate(
            {
                "query": query,
                "route": route,
                "policy": policy,
                "filters": {"doc_ids": doc_ids},
                "stream": True,
            }
        )
        with self._http.stream(
            "POST", API_PREFIX + "/answer", json=body.model_dump(mode="json")
        ) as response:
            if not response.is_success:
                response.read()
                _raise_for(response)
            for event, data in _sse_events(response.iter_lines()):
                if event == "token":
                    yield AnswerToken.model_validate_json(data)
                elif event == "answer":
                    yield AnswerResponse.model_validate_json(data)
                    return
                elif event == "error":
                    error = ErrorResponse.model_validate_json(data).error
                    raise ApiError(
                        response.status_code,
                        error.code,
                        error.stage,
                        error.message,
                        error.trace_id,
                    )
        raise ApiError(
            response.status_code,
            "HTTP_ERROR",
            "transport",
            "the answer stream ended without an answer event",
            response.headers.get("x-trace-id"),
        )

    def trace(self, trace_id: str) -> RetrievalTrace:
        response = self._request("GET", f"/traces/{_q(trace_id)}")
        return TraceResponse.model_validate(response.json()).trace

    # -- operations --

    def ready(self) -> bool:
        return self._http.get("/readyz").status_code == 200

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if self.ready():
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"the gateway was not ready after {timeout_s:g} s")

    # -- plumbing --

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._http.request(method, API_PREFIX + path, **kwargs)
        if response.is_success:
            return response
        _raise_for(response)

    def close(self) -> None:
        if self._owned:
            self._http.close()

    def __enter__(self) -> PageSightClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _raise_for(response: httpx.Response) -> NoReturn:
    """The :class:`ApiError` of a non-2xx response (its body read already)."""
    retry_after = response.headers.get("retry-after")
    try:
        error = ErrorResponse.model_validate(response.json()).error
        code, stage, message, trace_id = error.code, error.stage, error.message, error.trace_id
    except Exception:  # not our error body (a proxy in between): keep what there is
        code, stage, message = "HTTP_ERROR", "transport", response.text[:500]
        trace_id = response.headers.get("x-trace-id")
    raise ApiError(
        response.status_code,
        code,
        stage,
        message,
        trace_id,
        float(retry_after) if retry_after else None,
    )


def _sse_events(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """``(event, data)`` of each server-sent event (``message`` when unnamed); comments and
    other fields are skipped, several ``data:`` lines are joined with newlines."""
    event = "message"
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield event, "\n".join(data)


def _q(value: str) -> str:
    return quote(value, safe="")
