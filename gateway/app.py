"""The HTTP gateway (FastAPI): thin routers over :class:`gateway.backend.ServiceClient`.

Routers only translate HTTP to calls and back; the work is in the index service. What lives
here is what is HTTP's own: API-key auth (``Authorization: Bearer`` or ``X-API-Key``),
per-key concurrency (429 + Retry-After), upload size (413), request timeouts (504), the trace
id of each request (``traceparent`` / ``X-Request-ID`` in, ``X-Trace-Id`` out), error bodies
with a stage error code (never a bare 500), and metrics. OpenAPI is at ``/docs``.

A document of another tenant, or one the key's principals may not read, or one past its
``valid_until``, answers exactly like a missing one (404, same body apart from the trace id),
so an API key cannot probe which ids exist. Uploads, replacements and deletes need the key's
``write`` scope (else 403). Every error, including unknown routes and unreadable bodies, is
``{"error": {code, stage, message, trace_id}}``.

Answers and chat completions (plain and streamed) are served by :mod:`gateway.serving`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.datastructures import Headers, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.errors import ErrorCode, PageSightError, Stage
from core.ids import DOC_ID_PATTERN, check_doc_id
from core.settings import GatewayOptions
from core.types import AnswerResponse, Document, JobState, JobStatus
from gateway.auth import Caller, KeyRing
from gateway.backend import ServiceClient
from gateway.docs import install_offline_docs
from gateway.limits import ConcurrencyLimiter, RateLimited
from gateway.metrics import CONTENT_TYPE, GatewayMetrics
from gateway.openai_protocol import (
    MODEL_ID,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ModelCard,
    ModelList,
)
from gateway.protocol import (
    API_PREFIX,
    AnswerRequest,
    AuditList,
    Deleted,
    DocumentDetail,
    DocumentList,
    ErrorBody,
    ErrorResponse,
    JobAccepted,
    JobList,
    Readiness,
    SearchRequest,
    SearchResponse,
    TraceResponse,
    UriIngest,
)
from gateway.serving import SSE_SCHEMA, ServingAnswers, ServingChat
from gateway.tracing import current_trace_id, trace_id_from_headers

log = logging.getLogger(__name__)

T = TypeVar("T")

STATUS = {
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.CONFLICT: 409,
    ErrorCode.ROUTE_UNAVAILABLE: 409,
    ErrorCode.SOURCE_NOT_ALLOWED: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.TOO_LARGE: 413,
    ErrorCode.UNSUPPORTED_FORMAT: 415,
    ErrorCode.INVALID_REQUEST: 422,
    ErrorCode.ENCRYPTED: 422,
    ErrorCode.CORRUPT: 422,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.TIMEOUT: 504,
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse} for status in (401, 403, 404, 409, 413, 422, 429, 503, 504)
}
#: Path parameters, checked at the edge (an id that cannot exist is a 422, not a lookup).
DocIdPath = Annotated[str, Path(pattern=DOC_ID_PATTERN, description="document id")]
OpaqueIdPath = Annotated[str, Path(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]
#: Multipart form limits: text fields (doc_id, acl, valid_until, replace, password).
_MAX_ACL_ENTRIES = 100
_MAX_FIELD_CHARS = 4096


def create_app(
    service: ServiceClient,
    options: GatewayOptions,
    keyring: KeyRing,
    *,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The gateway over ``service``; ``keyring`` decides who may call it."""
    metrics = GatewayMetrics()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        if on_shutdown is not None:
            on_shutdown()

    app = FastAPI(
        title="PageSight gateway",
        version="1",
        description="Visual-document retrieval: upload documents, search pages, fetch images.",
        lifespan=lifespan,
        responses=_ERRORS,
        docs_url=None,
        redoc_url=None,
    )
    install_offline_docs(app)
    app.state.keyring = keyring
    app.state.limiter = ConcurrencyLimiter(options.max_concurrency_per_key, options.retry_after_s)
    answers = ServingAnswers(service, options, metrics)
    chat = ServingChat(answers)

    # -- cross-cutting: trace id, metrics, errors -------------------------------------------

    app.add_middleware(TraceAndMeasure, metrics=metrics)

    def error_response(
        request: Request, status: int, body: ErrorBody, headers: dict[str, str] | None = None
    ) -> JSONResponse:
        body.trace_id = getattr(request.state, "trace_id", None)
        metrics.errors.labels(body.code).inc()
        return JSONResponse(
            ErrorResponse(error=body).model_dump(mode="json"), status_code=status, headers=headers
        )

    @app.exception_handler(PageSightError)
    async def on_pagesight_error(request: Request, exc: PageSightError) -> JSONResponse:
        headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, RateLimited) else None
        if exc.code == ErrorCode.UNAUTHORIZED:
            headers = {"WWW-Authenticate": "Bearer"}
        status = STATUS.get(exc.code, 500 if exc.code == ErrorCode.INTERNAL else 422)
        body = ErrorBody(code=exc.code.value, stage=exc.stage.value, message=exc.message)
        return error_response(request, status, body, headers)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(request, 422, _invalid_body(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Starlette's and FastAPI's own errors (no such route, wrong method, a body that
        cannot be parsed, a malformed multipart form) in the documented error body."""
        if exc.status_code == 404:
            code, message = ErrorCode.NOT_FOUND, f"no route {request.method} {request.url.path}"
        elif exc.status_code == 413:
            code, message = ErrorCode.TOO_LARGE, str(exc.detail)
        else:
            code, message = ErrorCode.INVALID_REQUEST, str(exc.detail)
        body = ErrorBody(code=code.value, stage=Stage.GATEWAY.value, message=message)
        return error_response(request, exc.status_code, body, dict(exc.headers or {}))

    @app.exception_handler(Exception)
    async def on_crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        body = ErrorBody(
            code=ErrorCode.INTERNAL.value,
            stage=Stage.GATEWAY.value,
            message=f"internal error ({type(exc).__name__}); quote the trace id when reporting",
        )
        return error_response(request, 500, body)

    async def timed(call: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(call, options.request_timeout_s)
        except TimeoutError as exc:
            raise PageSightError(
                ErrorCode.TIMEOUT,
                Stage.GATEWAY,
                f"the request took longer than {options.request_timeout_s:g} s",
            ) from exc

    def check_query(query: str) -> None:
        if len(query) > options.max_query_chars:
            raise PageSightError(
                ErrorCode.INVALID_REQUEST,
                Stage.GATEWAY,
                f"query must be at most {options.max_query_chars} characters",
            )

    def not_found(what: str) -> PageSightError:
        return PageSightError(ErrorCode.NOT_FOUND, Stage.GATEWAY, f"{what} not found")

    # -- documents and jobs --------------------------------------------------------------------

    @app.post(
        f"{API_PREFIX}/documents",
        status_code=202,
        response_model=JobAccepted,
        tags=["documents"],
        openapi_extra={
            "requestBody": {
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "required": ["file"],
                            "properties": {
                                "file": {"type": "string", "format": "binary"},
                                "doc_id": {
                                    "type": "string",
                                    "pattern": DOC_ID_PATTERN,
                                    "description": "replace (or create) this document",
                                },
                                "replace": {
                                    "type": "boolean",
                                    "description": "replace the one document of this file name",
                                },
                                "acl": {"type": "string", "description": "comma-separated"},
                                "valid_until": {"type": "string", "format": "date-time"},
                                "password": {
                                    "type": "string",
                                    "format": "password",
                                    "description": "opens an encrypted PDF; never stored",
                                },
                            },
                        }
                    },
                    "application/json": {"schema": UriIngest.model_json_schema()},
                },
                "required": True,
            }
        },
    )
    async def add_document(request: Request, caller: CallerDep) -> JobAccepted:
        """Upload a file (multipart ``file``) or name a URI on the allowlist (JSON ``uri``);
        ingestion runs in the background: poll ``status_url``.

        Needs the ``write`` scope. An upload without ``doc_id`` is a new document unless the
        same file name with the same bytes is already there (``unchanged``); ``doc_id`` (or
        ``replace=true``: the one document of this file name) replaces explicitly."""
        trace_id = request.state.trace_id
        caller.require("write")
        content_type = request.headers.get("content-type", "")
        if content_type.startswith("application/json"):
            uri_request = _parse_json(UriIngest, await request.body())
            done = await timed(service.submit_uri(caller, uri_request, trace_id))
        elif content_type.startswith("multipart/form-data"):
            filename, data, fields = await _read_upload(request, options.max_upload_bytes)
            doc_id = fields.get("doc_id") or None
            done = await timed(
                service.submit_upload(
                    caller,
                    filename,
                    data,
                    doc_id=check_doc_id(doc_id) if doc_id is not None else None,
                    acl=_parse_acl(fields.get("acl", "")),
                    valid_until=_parse_datetime(fields.get("valid_until")),
                    replace=_parse_bool("replace", fields.get("replace")),
                    password=fields.get("password") or None,
                    trace_id=trace_id,
                )
            )
        else:
            raise PageSightError(
                ErrorCode.INVALID_REQUEST,
                Stage.GATEWAY,
                "send multipart/form-data with a 'file' field, or JSON with a 'uri'",
            )
        return JobAccepted(
            job_id=done.job.job_id,
            doc_id=done.job.doc_id,
            state=done.job.state.value,
            outcome=done.outcome,
            status_url=f"{API_PREFIX}/jobs/{done.job.job_id}",
        )

    @app.get(f"{API_PREFIX}/jobs/{{job_id}}", response_model=JobStatus, tags=["documents"])
    async def get_job(job_id: OpaqueIdPath, caller: CallerDep) -> JobStatus:
        job = await timed(service.job(caller, job_id))
        if job is None:
            raise not_found(f"job {job_id!r}")
        return job

    @app.get(f"{API_PREFIX}/jobs", response_model=JobList, tags=["documents"])
    async def list_jobs(
        caller: CallerDep,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        state: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
    ) -> JobList:
        """The newest jobs the key may see: its own, and those whose ACL admits it."""
        return JobList(jobs=await timed(service.jobs(caller, limit, state)))

    @app.get(f"{API_PREFIX}/audit", response_model=AuditList, tags=["documents"])
    async def audit_log(
        caller: CallerDep,
        doc_id: Annotated[str | None, Query(pattern=DOC_ID_PATTERN)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> AuditList:
        """Deletes and replacements of the tenant's documents, newest first: who (key id),
        what (document, versions), when; entries of documents the key may not read are left
        out."""
        return AuditList(entries=await timed(service.audit(caller, doc_id, limit)))

    @app.get(f"{API_PREFIX}/documents", response_model=DocumentList, tags=["documents"])
    async def list_documents(caller: CallerDep) -> DocumentList:
        docs: list[Document] = await timed(service.documents(caller))
        return DocumentList(documents=docs)

    @app.get(
        f"{API_PREFIX}/documents/{{doc_id}}", response_model=DocumentDetail, tags=["documents"]
    )
    async def get_document(doc_id: DocIdPath, caller: CallerDep) -> DocumentDetail:
        detail = await timed(service.document(caller, doc_id))
        if detail is None:
            raise not_found(f"document {doc_id!r}")
        return detail

    @app.delete(f"{API_PREFIX}/documents/{{doc_id}}", response_model=Deleted, tags=["documents"])
    async def delete_document(doc_id: DocIdPath, request: Request, caller: CallerDep) -> Deleted:
        """Remove the document everywhere: points, page images, jobs and traces naming it (the
        audit log keeps who did it). Needs the ``write`` scope."""
        caller.require("write")
        if not await timed(service.delete(caller, doc_id, request.state.trace_id)):
            raise not_found(f"document {doc_id!r}")
        return Deleted(doc_id=doc_id, deleted=True)

    @app.get(
        f"{API_PREFIX}/documents/{{doc_id}}/pages/{{page_number}}/image",
        response_class=Response,
        responses={200: {"content": {"image/png": {}, "image/jpeg": {}}}},
        tags=["documents"],
    )
    async def page_image(
        doc_id: DocIdPath,
        page_number: Annotated[int, Path(ge=1)],
        caller: CallerDep,
        highlight: Annotated[
            str | None, Query(description="boxes in PDF points: 'x0,y0,x1,y1;...'")
        ] = None,
        image_format: Annotated[str, Query(alias="format", pattern="^(png|jpeg)$")] = "png",
    ) -> Response:
        image = await timed(
            service.page_image(caller, doc_id, page_number, highlight, image_format)
        )
        if image is None:
            raise not_found(f"page {page_number} of document {doc_id!r}")
        return Response(
            image.data, media_type=image.media_type, headers={"Cache-Control": "private"}
        )

    # -- search and traces ---------------------------------------------------------------------

    @app.post(f"{API_PREFIX}/search", response_model=SearchResponse, tags=["search"])
    async def search(body: SearchRequest, request: Request, caller: CallerDep) -> Response:
        if body.top_k > options.max_top_k:
            raise PageSightError(
                ErrorCode.INVALID_REQUEST, Stage.GATEWAY, f"top_k must be <= {options.max_top_k}"
            )
        check_query(body.query)
        found = await timed(service.search(caller, body, request.state.trace_id))
        # Serialised once, here: returning the model would make FastAPI validate it again.
        return Response(found.model_dump_json(), media_type="application/json")

    @app.post(
        f"{API_PREFIX}/answer",
        response_model=AnswerResponse,
        tags=["search"],
        responses={200: {"content": {"text/event-stream": {"schema": SSE_SCHEMA}}}},
    )
    async def answer(body: AnswerRequest, request: Request, caller: CallerDep) -> Response:
        """A grounded answer: sentences quoting (extractive) or generated from (LLM) the
        retrieved passages, each citing doc, page, elements and boxes; or an abstention.

        With ``stream: true``, server-sent events: ``token`` ``{"text"}`` as it is written,
        then ``answer`` (this response, the authority) or ``error`` (the error body)."""
        caller.require("read")  # here, not only in the service: a stream has sent 200 by then
        check_query(body.query)
        if body.stream:
            return await answers.stream(caller, body, request.state.trace_id)
        found = await timed(service.answer(caller, body, request.state.trace_id))
        return Response(found.model_dump_json(), media_type="application/json")

    @app.post(
        f"{API_PREFIX}/chat/completions",
        response_model=ChatCompletionResponse,
        tags=["openai"],
        responses={200: {"content": {"text/event-stream": {"schema": SSE_SCHEMA}}}},
    )
    async def chat_completions(
        body: ChatCompletionRequest, request: Request, caller: CallerDep
    ) -> Response:
        """OpenAI-compatible chat completions (the ``openai`` client works as is): the last
        user message is answered as by ``/v1/answer``; the citations are in ``pagesight``.
        With ``stream: true``, ``chat.completion.chunk`` events, the last one carrying
        ``pagesight``, then ``data: [DONE]``."""
        caller.require("read")
        question = body.to_answer_request()
        check_query(question.query)
        return await chat.create(caller, body, question, request.state.trace_id)

    @app.get(f"{API_PREFIX}/models", response_model=ModelList, tags=["openai"])
    async def list_models(caller: CallerDep) -> ModelList:
        """The one model chat completions answer with (for clients that list models first)."""
        return ModelList(data=[ModelCard(id=MODEL_ID)])

    @app.get(f"{API_PREFIX}/traces/{{trace_id}}", response_model=TraceResponse, tags=["search"])
    async def get_trace(trace_id: OpaqueIdPath, caller: CallerDep) -> TraceResponse:
        trace = await timed(service.trace(caller, trace_id))
        if trace is None:
            raise not_found(f"trace {trace_id!r}")
        return TraceResponse(trace=trace)

    # -- operations ----------------------------------------------------------------------------

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        """The gateway process answers (liveness)."""
        return {"status": "ok"}

    @app.get("/readyz", response_model=Readiness, tags=["ops"])
    async def readyz() -> JSONResponse:
        """Models loaded, index open, ingest worker alive (readiness)."""
        try:
            ready = await asyncio.wait_for(service.readiness(), 10)
        except Exception as exc:  # the service is not reachable: not ready, say why
            ready = Readiness(
                ready=False,
                checks={"index_service": False},
                detail={"error": f"{type(exc).__name__}: {exc}"},
            )
        ready.checks["api_keys_loaded"] = len(keyring) > 0
        ready.ready = ready.ready and ready.checks["api_keys_loaded"]
        return JSONResponse(ready.model_dump(), status_code=200 if ready.ready else 503)

    @app.get("/metrics", tags=["ops"], response_class=Response)
    async def prometheus_metrics() -> Response:
        text = metrics.render()
        try:
            text += await asyncio.wait_for(service.metrics_text(), 5)
        except Exception:  # the gateway's own series are still worth scraping
            log.warning("index service metrics unavailable", exc_info=True)
        return Response(text, media_type=CONTENT_TYPE)

    return app


class TraceAndMeasure:
    """Pure ASGI middleware: the request's trace id (state, context variable, ``X-Trace-Id``
    header) and its metrics. (Starlette's ``@app.middleware("http")`` wraps every response in
    extra tasks and streams; at 30+ requests/s on two cores that overhead shows.)"""

    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        trace_id = trace_id_from_headers(headers.get("traceparent"), headers.get("x-request-id"))
        scope.setdefault("state", {})["trace_id"] = trace_id
        token = current_trace_id.set(trace_id)
        started = time.perf_counter()
        status = 500
        trace_header = (b"x-trace-id", trace_id.encode())

        async def send_with_trace(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), trace_header]
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_with_trace)
        finally:
            self.metrics.in_flight.dec()
            template = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"]
            self.metrics.latency.labels(template, method).observe(time.perf_counter() - started)
            self.metrics.requests.labels(template, method, str(status)).inc()
            current_trace_id.reset(token)


# -- dependencies (module level: FastAPI resolves annotations in this module's globals) ----------


def authenticated(request: Request) -> Caller:
    keyring: KeyRing = request.app.state.keyring
    return keyring.authenticate(
        request.headers.get("authorization"), request.headers.get("x-api-key")
    )


async def admitted(
    request: Request, caller: Annotated[Caller, Depends(authenticated)]
) -> AsyncIterator[Caller]:
    """The caller, holding one of its key's in-flight slots for the request."""
    limiter: ConcurrencyLimiter = request.app.state.limiter
    with limiter.slot(caller.key_id, caller.max_concurrency):
        yield caller


CallerDep = Annotated[Caller, Depends(admitted)]


# -- request parsing helpers ---------------------------------------------------------------------


def _invalid_body(errors: Any) -> ErrorBody:
    parts = []
    for error in list(errors)[:5]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return ErrorBody(
        code=ErrorCode.INVALID_REQUEST.value, stage=Stage.GATEWAY.value, message="; ".join(parts)
    )


def _parse_json(model: type[UriIngest], raw: bytes) -> UriIngest:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:  # malformed JSON included: pydantic reports it as one
        raise RequestValidationError(exc.errors()) from exc


def _parse_acl(value: str) -> list[str]:
    """A comma-separated ACL field: at most 100 principals of at most 256 characters."""
    acl = [a.strip() for a in value.split(",") if a.strip()]
    if len(acl) > _MAX_ACL_ENTRIES or any(len(a) > 256 for a in acl):
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.GATEWAY,
            f"acl: at most {_MAX_ACL_ENTRIES} principals of at most 256 characters",
        )
    return acl


def _parse_bool(name: str, value: str | None) -> bool:
    if value is None or value.strip().lower() in ("", "false", "0", "no"):
        return False
    if value.strip().lower() in ("true", "1", "yes"):
        return True
    raise PageSightError(ErrorCode.INVALID_REQUEST, Stage.GATEWAY, f"{name} must be true or false")


def _parse_datetime(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.GATEWAY,
            f"valid_until must be an ISO 8601 date-time, got {value!r}",
        ) from exc


async def _read_upload(request: Request, limit: int) -> tuple[str, bytes, dict[str, str]]:
    """The multipart ``file`` (at most ``limit`` bytes, else 413) and the text fields."""
    too_large = PageSightError(
        ErrorCode.TOO_LARGE, Stage.INPUT, f"uploads are limited to {limit} bytes"
    )
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + 64 * 1024:
        raise too_large  # refuse before reading the body
    form = await request.form(max_files=1, max_fields=20)
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise PageSightError(
                ErrorCode.INVALID_REQUEST, Stage.GATEWAY, "multipart field 'file' is required"
            )
        data = await upload.read(limit + 1)
        if len(data) > limit:
            raise too_large
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        if any(len(v) > _MAX_FIELD_CHARS for v in fields.values()):
            raise PageSightError(
                ErrorCode.INVALID_REQUEST,
                Stage.GATEWAY,
                f"form fields are limited to {_MAX_FIELD_CHARS} characters",
            )
        return (upload.filename or "upload")[:255], data, fields
    finally:
        await form.close()
