"""Serving classes behind the answer and chat routes: the logic the thin routers call.

Answers stream as server-sent events (:class:`ServingAnswers`): ``POST /v1/answer`` with
``stream: true`` sends ``event: token`` (``{"text"}``) as the answer is written, then one
``event: answer`` (the full :class:`~pagesight.query.answer.AnswerResponse`, the authority: tokens
cannot be unsent, and sentences that failed the citation check are listed in its
``withheld``), or ``event: error`` (``{"error": {code, stage, message, trace_id}}``) when
something fails after the first event; then the stream ends. The response starts only once the
first event exists, so everything that fails before it (auth, limits, a bad request, retrieval,
an LLM that is down) is an ordinary HTTP error with the usual body. ``request_timeout_s``
bounds the wait for each event, not the whole stream. ``POST /v1/chat/completions``
(:class:`ServingChat`, shapes in :mod:`pagesight.gateway.openai_protocol`) is the same answer for
the official ``openai`` client and anything built on it: citations in the ``pagesight`` field.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import anyio
from fastapi import Response
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from pagesight.api.caller import Caller
from pagesight.api.models import AnswerRequest, ErrorBody, ErrorResponse
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import GatewayOptions
from pagesight.core.types import AnswerEvent, AnswerResponse, AnswerToken
from pagesight.gateway.backend import ServiceClient
from pagesight.gateway.metrics import GatewayMetrics
from pagesight.gateway.openai_protocol import (
    MODEL_ID,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatMessageOut,
    DeltaMessage,
)
from pagesight.query.generation import render_cited

log = logging.getLogger(__name__)

T = TypeVar("T")

SSE_SCHEMA: dict[str, Any] = {
    "type": "string",
    "description": "server-sent events (with stream: true); see the route's description",
}


class ServingAnswers:
    """Answers over the service, bounded in time: one JSON answer, or its events.

    A stream is opened only once its first event has come: until then nothing is sent, so a
    failure is still an ordinary HTTP error (status, error body, the openai client's exception
    types). After that the status line is out, and a failure can only be an event in the
    stream. Each event must come within ``request_timeout_s`` of the previous one: a stream
    may run longer than a request, but never sits silent that long.
    """

    def __init__(
        self, service: ServiceClient, options: GatewayOptions, metrics: GatewayMetrics
    ) -> None:
        self.service = service
        self.options = options
        self.metrics = metrics

    async def answer(self, caller: Caller, body: AnswerRequest, trace_id: str) -> AnswerResponse:
        return await self._within(self.service.answer(caller, body, trace_id))

    async def events(
        self, caller: Caller, body: AnswerRequest, trace_id: str
    ) -> AsyncIterator[AnswerEvent]:
        """The answer's events, once the first one has come (a failure before it raises)."""
        source = self.service.answer_stream(caller, body, trace_id)
        try:
            first = await self._next(source)
        except BaseException:
            await _aclose(source)
            raise
        return self._after(first, source)

    async def stream(self, caller: Caller, body: AnswerRequest, trace_id: str) -> Response:
        """``POST /v1/answer`` with ``stream: true``: token events, then answer (or error)."""
        events = await self.events(caller, body, trace_id)
        return _event_stream(self._answer_frames(events, trace_id))

    def failure(self, exc: Exception, trace_id: str) -> ErrorResponse:
        """The error body for a failure after a stream's first event (counted, like any)."""
        if isinstance(exc, PageSightError):
            body = ErrorBody(code=exc.code.value, stage=exc.stage.value, message=exc.message)
        else:
            log.error("answer stream failed", exc_info=exc)
            body = ErrorBody(
                code=ErrorCode.INTERNAL.value,
                stage=Stage.GATEWAY.value,
                message=f"internal error ({type(exc).__name__}); quote the trace id when reporting",
            )
        body.trace_id = trace_id
        self.metrics.errors.labels(body.code).inc()
        return ErrorResponse(error=body)

    async def _after(
        self, first: AnswerEvent, source: AsyncIterator[AnswerEvent]
    ) -> AsyncIterator[AnswerEvent]:
        """``first``, then the rest up to the answer, which ends the stream."""
        event = first
        try:
            while True:
                yield event
                if not isinstance(event, AnswerToken):
                    await self._finish(source)
                    return
                event = await self._next(source)
        finally:
            await _aclose(source)

    async def _finish(self, source: AsyncIterator[AnswerEvent]) -> None:
        """Let the source end by itself after its answer: closing it early would cancel a Ray
        stream that was about to complete. Nothing may follow the answer event, so anything
        that does is logged, not sent."""
        try:
            extra = await self._within(anext(source))
        except StopAsyncIteration:
            return
        except Exception:
            log.warning("the answer stream failed after its answer", exc_info=True)
            return
        log.warning("the answer stream went on after its answer (%s)", type(extra).__name__)

    async def _next(self, source: AsyncIterator[AnswerEvent]) -> AnswerEvent:
        try:
            return await self._within(anext(source))
        except StopAsyncIteration:
            raise PageSightError(
                ErrorCode.INTERNAL, Stage.GATEWAY, "the answer stream ended without an answer"
            ) from None

    async def _answer_frames(
        self, events: AsyncIterator[AnswerEvent], trace_id: str
    ) -> AsyncIterator[str]:
        try:
            async for event in events:
                name = "token" if isinstance(event, AnswerToken) else "answer"
                yield _sse(event.model_dump_json(), name)
        except Exception as exc:
            yield _sse(self.failure(exc, trace_id).model_dump_json(), "error")
        finally:
            await _aclose(events)

    async def _within(self, call: Awaitable[T]) -> T:
        timeout = self.options.request_timeout_s
        try:
            return await asyncio.wait_for(call, timeout)
        except TimeoutError as exc:
            raise PageSightError(
                ErrorCode.TIMEOUT, Stage.GATEWAY, f"no answer came within {timeout:g} s"
            ) from exc


class ServingChat:
    """``POST /v1/chat/completions``: an answer in OpenAI's chat-completion shapes.

    The content is the answer with ``[n]`` markers (:func:`~pagesight.query.answer.render_cited`);
    the ``pagesight`` field is the full answer. Streamed, the content deltas are the answer's
    tokens as written (an answer that streams no token, an abstention, is sent as one delta so
    that chat clients show it), the last chunk carries ``finish_reason`` and ``pagesight``,
    then ``data: [DONE]``; a failure mid-stream is ``data: {"error": ...}``, which the openai
    client raises as ``APIError``. Token counts are not reported (``usage`` is left out):
    they are in the answer's trace.
    """

    def __init__(self, answers: ServingAnswers) -> None:
        self.answers = answers

    async def create(
        self,
        caller: Caller,
        request: ChatCompletionRequest,
        question: AnswerRequest,
        trace_id: str,
    ) -> Response:
        model = request.model or MODEL_ID
        completion_id = f"chatcmpl-{trace_id}"
        created = int(time.time())
        if not request.stream:
            answer = await self.answers.answer(caller, question, trace_id)
            completion = ChatCompletionResponse(
                id=completion_id,
                created=created,
                model=model,
                choices=[ChatChoice(message=ChatMessageOut(content=render_cited(answer)))],
                pagesight=answer,
            )
            return Response(completion.model_dump_json(), media_type="application/json")
        events = await self.answers.events(caller, question, trace_id)

        def chunk(delta: DeltaMessage, answer: AnswerResponse | None = None) -> str:
            choice = ChatChunkChoice(delta=delta)
            if answer is not None:
                choice.finish_reason = "stop"
            return _sse(
                ChatCompletionChunk(
                    id=completion_id,
                    created=created,
                    model=model,
                    choices=[choice],
                    pagesight=answer,
                ).model_dump_json()
            )

        return _event_stream(self._chunks(events, chunk, trace_id))

    async def _chunks(
        self,
        events: AsyncIterator[AnswerEvent],
        chunk: Callable[..., str],
        trace_id: str,
    ) -> AsyncIterator[str]:
        sent = False
        try:
            yield chunk(DeltaMessage(role="assistant", content=""))
            async for event in events:
                if isinstance(event, AnswerToken):
                    sent = True
                    yield chunk(DeltaMessage(content=event.text))
                    continue
                if not sent:
                    yield chunk(DeltaMessage(content=render_cited(event)))
                yield chunk(DeltaMessage(), event)
        except Exception as exc:
            yield _sse(self.answers.failure(exc, trace_id).model_dump_json())
        finally:
            await _aclose(events)
        yield _sse("[DONE]")


def _sse(data: str, event: str | None = None) -> str:
    """One server-sent event; ``data`` is one line (compact JSON has no newline)."""
    return f"event: {event}\ndata: {data}\n\n" if event else f"data: {data}\n\n"


class _EventStream(StreamingResponse):
    """Server-sent events whose source is closed as soon as the response ends, however it ends.

    Starlette stops iterating when the client goes away, but under ASGI 2.4 servers it leaves
    the generator suspended until garbage collection; closing it here closes the LLM's stream
    at once, so an abandoned answer stops costing GPU time.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await _aclose(self.body_iterator)


def _event_stream(frames: AsyncIterator[str]) -> StreamingResponse:
    # no-cache and X-Accel-Buffering: proxies (nginx) must pass events on as they come
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return _EventStream(frames, media_type="text/event-stream", headers=headers)


async def _aclose(events: AsyncIterable[Any]) -> None:
    """Close an event source early (client gone, failure): that closes the service's stream,
    and with it the LLM's. Shielded: it runs while the request is being cancelled."""
    close = getattr(events, "aclose", None)
    if close is not None:
        with anyio.CancelScope(shield=True):
            await close()
