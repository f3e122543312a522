"""The HTTP gateway (FastAPI): :func:`build_app`, over
:class:`pagesight.gateway.backend.ServiceClient`.

The routes are module-level routers, one module per area (:mod:`pagesight.gateway.routers`:
documents, search, openai, ops), whose handlers take the service, the caller and the serving objects
from ``app.state`` through :mod:`pagesight.gateway.dependencies`. Here is the factory (the app's
state, the routers, the offline API docs) and what applies to every route: the error handlers and
the trace-and-metrics middleware.

Routers only translate HTTP to calls and back; the work is in the index service. What lives
in the gateway is what is HTTP's own: API-key auth (``Authorization: Bearer`` or
``X-API-Key``), per-key concurrency (429 + Retry-After), upload size (413), request timeouts
(504), the trace id of each request (``traceparent`` / ``X-Request-ID`` in, ``X-Trace-Id``
out), error bodies with a stage error code (never a bare 500), and metrics. OpenAPI is at
``/docs``.

A document of another tenant, or one the key's principals may not read, or one past its
``valid_until``, answers exactly like a missing one (404, same body apart from the trace id),
so an API key cannot probe which ids exist. Uploads, replacements and deletes need the key's
``write`` scope (else 403). Every error, including unknown routes and unreadable bodies, is
``{"error": {code, stage, message, trace_id}}``. Every 503 (``UNAVAILABLE``, and
``DATABASE_UNAVAILABLE`` while PostgreSQL is down) carries ``Retry-After``
(``gateway.retry_after_s``): the condition is a dependency's, and passes without a restart.

Answers and chat completions (plain and streamed) are served by :mod:`pagesight.gateway.serving`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pagesight.api.models import ErrorBody, ErrorResponse
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import GatewayOptions
from pagesight.core.tracing import current_trace_id
from pagesight.gateway.auth import KeyRing
from pagesight.gateway.backend import ServiceClient
from pagesight.gateway.dependencies import Timed
from pagesight.gateway.docs import install_offline_docs
from pagesight.gateway.limits import ConcurrencyLimiter, RateLimited
from pagesight.gateway.metrics import GatewayMetrics
from pagesight.gateway.routers import ROUTERS
from pagesight.gateway.serving import ServingAnswers, ServingChat
from pagesight.gateway.tracing import trace_id_from_headers

log = logging.getLogger(__name__)

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
    ErrorCode.INVALID_JSON: 422,
    ErrorCode.ENCRYPTED: 422,
    ErrorCode.CORRUPT: 422,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.DATABASE_UNAVAILABLE: 503,
    ErrorCode.TIMEOUT: 504,
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse} for status in (401, 403, 404, 409, 413, 422, 429, 503, 504)
}


def build_app(
    service: ServiceClient,
    options: GatewayOptions,
    keyring: KeyRing,
    *,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The gateway over ``service``; ``keyring`` decides who may call it.

    Everything a route needs is put on ``app.state`` here and read back by the dependencies
    of :mod:`pagesight.gateway.dependencies`; the routes are those of
    :mod:`pagesight.gateway.routers`."""

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

    metrics = GatewayMetrics()
    answers = ServingAnswers(service, options, metrics)
    app.state.service = service
    app.state.options = options
    app.state.keyring = keyring
    app.state.limiter = ConcurrencyLimiter(options.max_concurrency_per_key, options.retry_after_s)
    app.state.metrics = metrics
    app.state.timed = Timed(options.request_timeout_s)
    app.state.serving_answers = answers
    app.state.serving_chat = ServingChat(answers)

    app.add_middleware(TraceAndMeasure, metrics=metrics)
    app.exception_handler(PageSightError)(on_pagesight_error)
    app.exception_handler(RequestValidationError)(on_invalid)
    app.exception_handler(StarletteHTTPException)(on_http_error)
    app.exception_handler(Exception)(on_crash)
    for router in ROUTERS:
        app.include_router(router)
    return app


# -- errors: every one in the documented body, counted ------------------------------------------


def _error_response(
    request: Request, status: int, body: ErrorBody, headers: dict[str, str] | None = None
) -> JSONResponse:
    body.trace_id = getattr(request.state, "trace_id", None)
    metrics: GatewayMetrics = request.app.state.metrics
    metrics.errors.labels(body.code).inc()
    return JSONResponse(
        ErrorResponse(error=body).model_dump(mode="json"), status_code=status, headers=headers
    )


async def on_pagesight_error(request: Request, exc: PageSightError) -> JSONResponse:
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, RateLimited) else None
    if exc.code == ErrorCode.UNAUTHORIZED:
        headers = {"WWW-Authenticate": "Bearer"}
    status = STATUS.get(exc.code, 500 if exc.code == ErrorCode.INTERNAL else 422)
    if status == 503:  # a dependency down (the database, a replica, the LLM): worth a retry
        options: GatewayOptions = request.app.state.options
        headers = {"Retry-After": str(options.retry_after_s)}
    body = ErrorBody(code=exc.code.value, stage=exc.stage.value, message=exc.message)
    return _error_response(request, status, body, headers)


async def on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    broken = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if broken is not None:
        return _error_response(request, 422, _invalid_json_body(broken, exc.body))
    return _error_response(request, 422, _invalid_body(errors))


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
    return _error_response(request, exc.status_code, body, dict(exc.headers or {}))


async def on_crash(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    body = ErrorBody(
        code=ErrorCode.INTERNAL.value,
        stage=Stage.GATEWAY.value,
        message=f"internal error ({type(exc).__name__}); quote the trace id when reporting",
    )
    return _error_response(request, 500, body)


def _invalid_json_body(error: dict[str, Any], document: Any) -> ErrorBody:
    """A body that is not JSON: where it broke, as a line and column a person can find in what
    they sent (FastAPI reports a character offset and "JSON decode error")."""
    loc = error.get("loc", ())
    offset = loc[-1] if loc and isinstance(loc[-1], int) else None
    reason = str((error.get("ctx") or {}).get("error") or "not JSON").rstrip(".")
    where = ""
    if offset is not None and isinstance(document, str | bytes):
        text = document.decode("utf-8", "replace") if isinstance(document, bytes) else document
        offset = min(offset, len(text))
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        where = f" at line {line}, column {column}"
    return ErrorBody(
        code=ErrorCode.INVALID_JSON.value,
        stage=Stage.GATEWAY.value,
        message=f"the request body is not valid JSON: {reason.lower()}{where}",
    )


def _invalid_body(errors: Any) -> ErrorBody:
    parts = []
    for error in list(errors)[:5]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return ErrorBody(
        code=ErrorCode.INVALID_REQUEST.value, stage=Stage.GATEWAY.value, message="; ".join(parts)
    )


# -- cross-cutting: the trace id and metrics of every request -----------------------------------


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
