"""The OpenAI-compatible chat client (:mod:`pagesight.models.llm`) against a scripted server.

The server (tests/openai_stub.py) runs for the module. Each test queues the answers it wants
(:class:`Step`: a status, a body or a reply text, headers, a delay, stream chunks) and reads back
the requests that came in. One test drives the same server with the official ``openai`` package,
which proves the server speaks the real protocol, so what our client sends and parses here is
what a vLLM server sends and parses.
"""

from __future__ import annotations

import json
import pickle
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from pydantic import SecretStr

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import LlmOptions
from pagesight.core.types import ChatMessage
from pagesight.models.llm import LlmError, MalformedOutput, OpenAiChatClient
from tests.openai_stub import Script, Step, scripted_server

MODEL = "qwen2.5-7b-instruct"
MESSAGES = [
    ChatMessage("system", "Answer from the evidence only."),
    ChatMessage("user", "What was revenue in 2023?"),
]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "citations": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["answer", "citations"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Script]]:
    """``(base_url, script)`` of the scripted server; ``base_url`` ends in ``/v1``."""
    with scripted_server() as running:
        yield running


@pytest.fixture()
def script(server: tuple[str, Script]) -> Script:
    server[1].reset()
    return server[1]


def make_client(base_url: str, **overrides: Any) -> OpenAiChatClient:
    options = {"base_url": base_url, "model": MODEL, "timeout_s": 2.0, "backoff_s": 0.01}
    return OpenAiChatClient(LlmOptions.model_validate(options | overrides))


# -- structured outputs --


def test_structured_output_round_trip(server: tuple[str, Script], script: Script) -> None:
    answer = {"answer": "EUR 4.2 bn", "citations": [3, 7]}
    script.then(Step(content=json.dumps(answer)))
    with make_client(server[0], api_key=SecretStr("sk-test"), max_tokens=300) as client:
        result = client.complete(MESSAGES, json_schema=SCHEMA, schema_name="grounded_answer")

    assert result.parsed == answer and result.text == json.dumps(answer)
    assert result.finish_reason == "stop" and result.model == MODEL and result.attempts == 1
    assert (result.prompt_tokens, result.completion_tokens) == (17, 5)
    [sent] = script.requests
    assert sent["model"] == MODEL and sent["stream"] is False
    assert sent["messages"] == [
        {"role": "system", "content": "Answer from the evidence only."},
        {"role": "user", "content": "What was revenue in 2023?"},
    ]
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "grounded_answer", "schema": SCHEMA, "strict": True},
    }
    assert sent["max_tokens"] == 300 and sent["temperature"] == 0.0
    assert script.headers[0]["authorization"] == "Bearer sk-test"


def test_plain_completion_has_no_response_format(
    server: tuple[str, Script], script: Script
) -> None:
    script.then(Step(content="Revenue was EUR 4.2 bn [3].", finish_reason="length"))
    with make_client(server[0]) as client:
        result = client.complete(
            [{"role": "user", "content": "Revenue?"}], max_tokens=7, temperature=0.3
        )
    assert result.text == "Revenue was EUR 4.2 bn [3]." and result.parsed is None
    assert result.finish_reason == "length"
    [sent] = script.requests
    assert "response_format" not in sent
    assert (sent["max_tokens"], sent["temperature"]) == (7, 0.3)
    assert "authorization" not in script.headers[0]


def test_malformed_json_is_malformed_output_with_the_raw_text(
    server: tuple[str, Script], script: Script
) -> None:
    raw = 'Sure! Here is the answer: {"answer": "EUR 4.2'
    script.then(Step(content=raw, finish_reason="length"))
    with make_client(server[0]) as client, pytest.raises(MalformedOutput) as caught:
        client.complete(MESSAGES, json_schema=SCHEMA)
    error = caught.value
    assert isinstance(error, PageSightError)
    assert (error.code, error.stage) == (ErrorCode.INTERNAL, Stage.GATEWAY)
    assert error.raw_text == raw and error.finish_reason == "length"
    assert "max_tokens" in error.message
    assert len(script.requests) == 1  # not retried: the caller decides

    again = pickle.loads(pickle.dumps(error))  # noqa: S301  # our own error, pickled as Ray does
    assert isinstance(again, MalformedOutput)
    assert (again.raw_text, again.code, again.finish_reason) == (raw, ErrorCode.INTERNAL, "length")


def test_json_missing_a_required_key_is_malformed_output(
    server: tuple[str, Script], script: Script
) -> None:
    script.then(Step(content='{"answer": "EUR 4.2 bn"}'))
    with make_client(server[0]) as client, pytest.raises(MalformedOutput) as caught:
        client.complete(MESSAGES, json_schema=SCHEMA)
    assert caught.value.raw_text == '{"answer": "EUR 4.2 bn"}'
    assert "citations" in caught.value.message


# -- streaming --


def test_stream_yields_deltas_in_order(server: tuple[str, Script], script: Script) -> None:
    pieces = ["Revenue", " was", " EUR 4.2", " bn", " [3]."]
    script.then(Step(chunks=pieces))
    with make_client(server[0]) as client:
        deltas = list(client.stream(MESSAGES))
    assert deltas == pieces
    [sent] = script.requests
    assert sent["stream"] is True and sent["model"] == MODEL


def test_stream_retries_before_the_first_delta(server: tuple[str, Script], script: Script) -> None:
    script.then(Step(status=503, body={"message": "loading"}), Step(chunks=["a", "b"]))
    with make_client(server[0]) as client:
        assert "".join(client.stream(MESSAGES)) == "ab"
    assert len(script.requests) == 2


def test_closing_a_stream_early_closes_the_connection(
    server: tuple[str, Script], script: Script
) -> None:
    """The caller stops reading (its client went away): the server sees the disconnect and
    stops sending, as vLLM then stops generating."""
    script.then(Step(chunks=["word "] * 200, chunk_delay_s=0.02))
    with make_client(server[0]) as client:
        deltas = client.stream(MESSAGES)
        assert [next(deltas), next(deltas)] == ["word ", "word "]
        deltas.close()
        deadline = time.monotonic() + 5
        while not script.stream_ends and time.monotonic() < deadline:
            time.sleep(0.02)
    [(sent, scripted)] = script.stream_ends
    assert sent < scripted / 2, "the server went on sending after the stream was closed"


def test_stream_error_event_and_cut_stream_raise(
    server: tuple[str, Script], script: Script
) -> None:
    error = {"error": {"object": "error", "message": "context too long", "code": 400}}
    chunk = {"choices": [{"index": 0, "delta": {"content": "Rev"}, "finish_reason": None}]}
    script.then(
        Step(sse_raw=[f"data: {json.dumps(error)}\n\n"]),
        Step(sse_raw=[f"data: {json.dumps(chunk)}\n\n"]),  # no [DONE]
    )
    with make_client(server[0]) as client:
        with pytest.raises(LlmError) as failed:
            list(client.stream(MESSAGES))
        assert failed.value.code == ErrorCode.INVALID_REQUEST
        assert "context too long" in failed.value.message

        received: list[str] = []
        with pytest.raises(LlmError) as cut:
            received.extend(client.stream(MESSAGES))
        assert cut.value.code == ErrorCode.UNAVAILABLE and "[DONE]" in cut.value.message


# -- retries and failures --


def test_timeout_is_retried_then_raises_timeout(server: tuple[str, Script], script: Script) -> None:
    script.then(Step(content="late", delay_s=0.6), Step(content="late", delay_s=0.6))
    client = make_client(server[0], timeout_s=0.2, max_retries=1)
    with client, pytest.raises(LlmError) as caught:
        client.complete(MESSAGES)
    error = caught.value
    assert (error.code, error.stage) == (ErrorCode.TIMEOUT, Stage.GATEWAY)
    assert error.attempts == 2 and error.status is None
    assert len(script.requests) == 2


def test_timeout_then_success(server: tuple[str, Script], script: Script) -> None:
    script.then(Step(content="late", delay_s=0.6), Step(content="on time"))
    with make_client(server[0], timeout_s=0.2) as client:
        result = client.complete(MESSAGES)
    assert result.text == "on time" and result.attempts == 2


def test_5xx_twice_then_success(server: tuple[str, Script], script: Script) -> None:
    script.then(
        Step(status=500, body={"object": "error", "message": "CUDA out of memory"}),
        Step(status=502, body={"detail": "bad gateway"}),
        Step(content="fine"),
    )
    with make_client(server[0], max_retries=2) as client:
        result = client.complete(MESSAGES)
    assert result.text == "fine" and result.attempts == 3
    assert len(script.requests) == 3


def test_5xx_after_the_retries_is_unavailable(server: tuple[str, Script], script: Script) -> None:
    script.then(*[Step(status=503, body={"message": "engine dead"}) for _ in range(2)])
    with make_client(server[0], max_retries=1) as client, pytest.raises(LlmError) as caught:
        client.complete(MESSAGES)
    error = caught.value
    assert error.code == ErrorCode.UNAVAILABLE and error.status == 503 and error.attempts == 2
    assert "engine dead" in error.message

    again = pickle.loads(pickle.dumps(error))  # noqa: S301  # our own error, pickled as Ray does
    assert isinstance(again, LlmError)
    assert (again.code, again.status, again.attempts) == (ErrorCode.UNAVAILABLE, 503, 2)


def test_429_retry_after_is_honoured(server: tuple[str, Script], script: Script) -> None:
    script.then(
        Step(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "1"}),
        Step(content="ok"),
    )
    with make_client(server[0], backoff_s=0.01) as client:
        start = time.monotonic()
        result = client.complete(MESSAGES)
        waited = time.monotonic() - start
    assert result.text == "ok" and result.attempts == 2
    assert waited >= 0.95  # the server's 1 s, not the 10 ms backoff


def test_429_asking_longer_than_the_timeout_gives_up_at_once(
    server: tuple[str, Script], script: Script
) -> None:
    script.then(Step(status=429, body={"error": "busy"}, headers={"Retry-After": "120"}))
    with make_client(server[0], timeout_s=1.0) as client, pytest.raises(LlmError) as caught:
        client.complete(MESSAGES)
    error = caught.value
    assert error.code == ErrorCode.UNAVAILABLE and error.status == 429
    assert error.retry_after_s == 120 and error.attempts == 1
    assert len(script.requests) == 1


def test_400_is_not_retried(server: tuple[str, Script], script: Script) -> None:
    body = {
        "object": "error",
        "message": "max_tokens is too large",
        "type": "BadRequestError",
        "code": 400,
    }
    script.then(Step(status=400, body=body), Step(content="never sent"))
    with make_client(server[0], max_retries=3) as client, pytest.raises(LlmError) as caught:
        client.complete(MESSAGES)
    error = caught.value
    assert (error.code, error.stage) == (ErrorCode.INVALID_REQUEST, Stage.GATEWAY)
    assert error.status == 400 and error.attempts == 1
    assert "max_tokens is too large" in error.message
    assert len(script.requests) == 1


def test_connection_refused_is_unavailable() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with make_client(f"http://127.0.0.1:{port}/v1", max_retries=1) as client:
        with pytest.raises(LlmError) as caught:
            client.complete(MESSAGES)
        assert caught.value.code == ErrorCode.UNAVAILABLE and caught.value.attempts == 2
        with pytest.raises(LlmError) as streamed:
            list(client.stream(MESSAGES))
        assert streamed.value.code == ErrorCode.UNAVAILABLE


# -- options and construction --


def test_no_base_url_means_no_llm() -> None:
    options = LlmOptions()
    assert options.base_url is None
    with pytest.raises(LlmError) as caught:
        OpenAiChatClient(options)
    assert caught.value.code == ErrorCode.UNAVAILABLE


def test_options_validate_and_hide_the_key() -> None:
    with pytest.raises(ValueError, match="model"):
        LlmOptions(base_url="http://vllm:8000/v1")
    with pytest.raises(ValueError):
        LlmOptions(base_url="http://vllm:8000/v1", model=MODEL, temperture=0.5)  # type: ignore[call-arg]
    options = LlmOptions(base_url="http://vllm:8000/v1", model=MODEL, api_key=SecretStr("sk-x"))
    assert "sk-x" not in repr(options)


def test_shared_http_client_is_not_closed(server: tuple[str, Script], script: Script) -> None:
    script.then(Step(content="one"), Step(content="two"))
    options = LlmOptions(base_url=server[0], model=MODEL)
    with httpx.Client() as http:
        with OpenAiChatClient(options, http=http) as client:
            assert client.complete(MESSAGES).text == "one"
        assert not http.is_closed
        assert OpenAiChatClient(options, http=http).complete(MESSAGES).text == "two"


# -- the real protocol --


def test_the_official_openai_client_speaks_to_the_test_server(
    server: tuple[str, Script], script: Script
) -> None:
    """The server's shapes are the OpenAI protocol; our client sends what ``openai`` sends."""
    answer = {"answer": "EUR 4.2 bn", "citations": [3]}
    script.then(Step(content=json.dumps(answer)), Step(chunks=["EUR", " 4.2", " bn"]))
    messages: Any = [m.to_dict() for m in MESSAGES]
    response_format: Any = {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
    }
    with openai.OpenAI(base_url=server[0], api_key="x", max_retries=0) as official:
        reply = official.chat.completions.create(
            model=MODEL,
            messages=messages,
            response_format=response_format,
            max_tokens=512,
            temperature=0.0,
        )
        assert reply.choices[0].message.content == json.dumps(answer)
        assert reply.choices[0].finish_reason == "stop"
        assert reply.usage is not None and reply.usage.completion_tokens == 5

        streamed = official.chat.completions.create(model=MODEL, messages=messages, stream=True)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in streamed)
        assert text == "EUR 4.2 bn"

    script.then(Step(content=json.dumps(answer)))
    with make_client(server[0]) as client:
        ours = client.complete(MESSAGES, json_schema=SCHEMA)
    assert ours.parsed == answer
    theirs, _, mine = script.requests
    for key in ("model", "messages", "response_format", "max_tokens", "temperature"):
        assert mine[key] == theirs[key], key
