"""What the routers share: the app's services (from ``app.state``), the caller, and checks.

:func:`pagesight.gateway.app.build_app` puts the services on ``app.state``; the routers
(:mod:`pagesight.gateway.routers`) declare what a handler needs as a parameter (``service:
ServiceDep``, ``caller: CallerDep``, ...) and FastAPI hands it over. The accessors are ``async``:
FastAPI runs a plain ``def`` dependency on its thread pool, a hop no attribute lookup is worth.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Annotated, TypeVar

from fastapi import Depends, Path, Request
from starlette.concurrency import run_in_threadpool

from pagesight.api.caller import Caller
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.ids import DOC_ID_PATTERN
from pagesight.core.settings import GatewayOptions
from pagesight.gateway.auth import KeyRing
from pagesight.gateway.backend import ServiceClient
from pagesight.gateway.limits import ConcurrencyLimiter
from pagesight.gateway.metrics import GatewayMetrics
from pagesight.gateway.serving import ServingAnswers, ServingChat

T = TypeVar("T")

#: Path parameters, checked at the edge (an id that cannot exist is a 422, not a lookup).
DocIdPath = Annotated[str, Path(pattern=DOC_ID_PATTERN, description="document id")]
OpaqueIdPath = Annotated[str, Path(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]


# -- the app's services ----------------------------------------------------------------------------


async def service_client(request: Request) -> ServiceClient:
    client: ServiceClient = request.app.state.service
    return client


async def gateway_options(request: Request) -> GatewayOptions:
    options: GatewayOptions = request.app.state.options
    return options


async def gateway_metrics(request: Request) -> GatewayMetrics:
    metrics: GatewayMetrics = request.app.state.metrics
    return metrics


async def key_ring(request: Request) -> KeyRing:
    keyring: KeyRing = request.app.state.keyring
    return keyring


async def serving_answers(request: Request) -> ServingAnswers:
    answers: ServingAnswers = request.app.state.serving_answers
    return answers


async def serving_chat(request: Request) -> ServingChat:
    chat: ServingChat = request.app.state.serving_chat
    return chat


class Timed:
    """Awaits a service call within the gateway's request timeout, else 504 ``TIMEOUT``."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    async def __call__(self, call: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(call, self.timeout_s)
        except TimeoutError as exc:
            raise PageSightError(
                ErrorCode.TIMEOUT,
                Stage.GATEWAY,
                f"the request took longer than {self.timeout_s:g} s",
            ) from exc


async def timed_calls(request: Request) -> Timed:
    timed: Timed = request.app.state.timed
    return timed


ServiceDep = Annotated[ServiceClient, Depends(service_client)]
OptionsDep = Annotated[GatewayOptions, Depends(gateway_options)]
MetricsDep = Annotated[GatewayMetrics, Depends(gateway_metrics)]
KeyRingDep = Annotated[KeyRing, Depends(key_ring)]
AnswersDep = Annotated[ServingAnswers, Depends(serving_answers)]
ChatDep = Annotated[ServingChat, Depends(serving_chat)]
TimedDep = Annotated[Timed, Depends(timed_calls)]


# -- the caller ------------------------------------------------------------------------------------


async def authenticated(request: Request) -> Caller:
    """The request's caller. Only a due reload of the key stores (files, the database) goes to
    a worker thread, once every ``keys_reload_s``: as a plain ``def`` this ran on FastAPI's
    thread pool on every request, a third of the gateway stack's own CPU (385 -> 275 us a
    request without the hop)."""
    keyring: KeyRing = request.app.state.keyring
    if keyring.refresh_due():
        await run_in_threadpool(keyring.refresh)
    return keyring.authenticate(
        request.headers.get("authorization"), request.headers.get("x-api-key"), refresh=False
    )


async def admitted(
    request: Request, caller: Annotated[Caller, Depends(authenticated)]
) -> AsyncIterator[Caller]:
    """The caller, holding one of its key's in-flight slots for the request."""
    limiter: ConcurrencyLimiter = request.app.state.limiter
    with limiter.slot(caller.key_id, caller.max_concurrency):
        yield caller


CallerDep = Annotated[Caller, Depends(admitted)]


# -- checks ----------------------------------------------------------------------------------------


def check_query(query: str, options: GatewayOptions) -> None:
    if len(query) > options.max_query_chars:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.GATEWAY,
            f"query must be at most {options.max_query_chars} characters",
        )


def not_found(what: str) -> PageSightError:
    return PageSightError(ErrorCode.NOT_FOUND, Stage.GATEWAY, f"{what} not found")
