"""Search, answers (:class:`pagesight.gateway.serving.ServingAnswers`) and retrieval traces."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from pagesight.api.models import (
    API_PREFIX,
    AnswerRequest,
    SearchRequest,
    SearchResponse,
    TraceResponse,
)
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.types import AnswerResponse
from pagesight.gateway.dependencies import (
    AnswersDep,
    CallerDep,
    OpaqueIdPath,
    OptionsDep,
    ServiceDep,
    TimedDep,
    check_query,
    not_found,
)
from pagesight.gateway.serving import SSE_SCHEMA

router = APIRouter(tags=["search"])


@router.post(f"{API_PREFIX}/search", response_model=SearchResponse)
async def search(
    body: SearchRequest,
    request: Request,
    caller: CallerDep,
    service: ServiceDep,
    options: OptionsDep,
    timed: TimedDep,
) -> Response:
    if body.top_k > options.max_top_k:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST, Stage.GATEWAY, f"top_k must be <= {options.max_top_k}"
        )
    check_query(body.query, options)
    found = await timed(service.search(caller, body, request.state.trace_id))
    # Serialised once, here: returning the model would make FastAPI validate it again.
    return Response(found.model_dump_json(), media_type="application/json")


@router.post(
    f"{API_PREFIX}/answer",
    response_model=AnswerResponse,
    responses={200: {"content": {"text/event-stream": {"schema": SSE_SCHEMA}}}},
)
async def answer(
    body: AnswerRequest,
    request: Request,
    caller: CallerDep,
    service: ServiceDep,
    answers: AnswersDep,
    options: OptionsDep,
    timed: TimedDep,
) -> Response:
    """A grounded answer: sentences quoting (extractive) or generated from (LLM) the
    retrieved passages, each citing doc, page, elements and boxes; or an abstention.

    With ``stream: true``, server-sent events: ``token`` ``{"text"}`` as it is written,
    then ``answer`` (this response, the authority) or ``error`` (the error body)."""
    caller.require("read")  # here, not only in the service: a stream has sent 200 by then
    check_query(body.query, options)
    if body.stream:
        return await answers.stream(caller, body, request.state.trace_id)
    found = await timed(service.answer(caller, body, request.state.trace_id))
    return Response(found.model_dump_json(), media_type="application/json")


@router.get(f"{API_PREFIX}/traces/{{trace_id}}", response_model=TraceResponse)
async def get_trace(
    trace_id: OpaqueIdPath, caller: CallerDep, service: ServiceDep, timed: TimedDep
) -> TraceResponse:
    trace = await timed(service.trace(caller, trace_id))
    if trace is None:
        raise not_found(f"trace {trace_id!r}")
    return TraceResponse(trace=trace)
