"""A scripted OpenAI-compatible chat server for tests: what vLLM's server would answer, on cue.

A FastAPI app on a free 127.0.0.1 port, run by uvicorn in a background thread. A test queues the
answers it wants (:class:`Step`: a status, a body or a reply text, headers, a delay, stream
chunks) or installs a ``responder`` that picks the answer from the request (for callers that send
requests concurrently, in no fixed order), and reads back the requests that came in.
tests/contract/test_llm_client.py drives it with the official ``openai`` package, which proves it
speaks the real protocol.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from tests.asgi_server import serving


@dataclass
class Step:
    """One scripted answer: ``content`` becomes a completion (or stream), ``body`` is sent raw."""

    status: int = 200
    content: str | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    chunks: list[str] | None = None
    finish_reason: str = "stop"
    sse_raw: list[str] | None = None
    #: pause between streamed events (a client sees the text arrive in several reads)
    chunk_delay_s: float = 0.0


class Script:
    """What the server answers next, and what it was asked."""

    def __init__(self) -> None:
        self.steps: deque[Step] = deque()
        #: answers a request when no step is queued (``None``: a 500 "no step")
        self.responder: Callable[[dict[str, Any]], Step] | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        #: per finished stream, ``(events sent, events scripted)``: fewer sent, the client went away
        self.stream_ends: list[tuple[int, int]] = []

    def then(self, *steps: Step) -> Script:
        self.steps.extend(steps)
        return self

    def reset(self) -> None:
        self.steps.clear()
        self.responder = None
        self.requests.clear()
        self.headers.clear()
        self.stream_ends.clear()


def completion(model: str, content: str, finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 17, "completion_tokens": 5, "total_tokens": 22},
    }


def sse_events(model: str, chunks: list[str], finish_reason: str) -> list[str]:
    """The event stream vLLM sends: a role-only delta, the content deltas, a finish, [DONE]."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        return f"data: {json.dumps(body)}\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in chunks]
    events.append(chunk({}, finish_reason))
    events.append("data: [DONE]\n\n")
    return events


def make_app(script: Script) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        script.requests.append(body)
        script.headers.append(dict(request.headers))
        if script.steps:
            step = script.steps.popleft()
        elif script.responder is not None:
            step = script.responder(body)
        else:
            step = Step(status=500, body="no step")
        if step.delay_s:
            await asyncio.sleep(step.delay_s)
        model = body.get("model", "")
        if step.body is not None or step.status != 200:
            return JSONResponse(step.body, status_code=step.status, headers=step.headers)
        if body.get("stream"):
            events = step.sse_raw or sse_events(
                model, step.chunks or [step.content or ""], step.finish_reason
            )

            async def send() -> AsyncIterator[str]:
                sent = 0
                try:
                    for event in events:
                        yield event
                        sent += 1
                        await asyncio.sleep(step.chunk_delay_s)
                finally:
                    script.stream_ends.append((sent, len(events)))

            return StreamingResponse(send(), media_type="text/event-stream")
        return JSONResponse(completion(model, step.content or "", step.finish_reason))

    return app


@contextmanager
def scripted_server(script: Script | None = None) -> Iterator[tuple[str, Script]]:
    """``(base_url, script)`` of a running scripted server; ``base_url`` ends in ``/v1``."""
    script = script or Script()
    with serving(make_app(script), lifespan="off") as url:
        yield f"{url}/v1", script
