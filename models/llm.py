"""A small client of an OpenAI-compatible chat server (vLLM): the LLM behind grounded answers.

PageSight talks to exactly one kind of LLM endpoint, ``POST {base_url}/chat/completions`` as
served by vLLM (or any other OpenAI-compatible server), so this is a thin ``httpx`` client rather
than the ``openai`` package: it owns the few things the answer path needs and nothing else.

* **Structured outputs.** :meth:`OpenAiChatClient.complete` with ``json_schema`` sends
  ``response_format={"type": "json_schema", ...}`` (vLLM enforces it with guided decoding) and
  parses the reply. Guided decoding can still hand back text that is not the promised JSON (the
  answer was cut at ``max_tokens``, or the server ignored the schema), so that is a distinct
  :class:`MalformedOutput` carrying the raw text: the caller decides whether to regenerate,
  fall back to extractive answers, or show the text as is. It is never retried here, because the
  same prompt at temperature 0 would give the same text.
* **Streaming.** :meth:`OpenAiChatClient.stream` yields content deltas from the server-sent
  events (``data: {...}`` lines, ended by ``data: [DONE]``) so the gateway can forward tokens
  as they come.
* **Retries.** Connection failures, timeouts, HTTP 5xx and 429 are retried ``max_retries``
  times with exponential backoff and jitter (a restarting or saturated vLLM recovers within
  seconds; jitter keeps a burst of callers from retrying in lockstep). A 429's ``Retry-After``
  is honoured, unless it asks for longer than the request timeout: then the server is not going
  to answer in time and the error says how long to wait instead. Other 4xx mean the request
  itself is wrong (context too long, unknown model) and would fail again, so they are not.

Every failure is a :class:`LlmError` (a :class:`~core.errors.PageSightError` at stage
``GATEWAY``): ``UNAVAILABLE`` for an unreachable server, 5xx or 429 after the retries,
``TIMEOUT`` when the last attempt timed out, ``INVALID_REQUEST`` for other 4xx; never a bare
``httpx`` exception.

Construction is free: the ``httpx.Client`` (and its TLS context, which costs milliseconds) is
made on first use, so building services with an LLM configured costs nothing until an answer is
asked for. One client holds one connection pool; it is thread-safe, closable, and a context
manager.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any

import httpx

from core.errors import ErrorCode, PageSightError, Stage
from core.settings import LlmOptions
from core.types import ChatMessage, ChatResult

log = logging.getLogger(__name__)

#: Longest single backoff sleep, whatever the attempt number (Retry-After is capped separately).
MAX_BACKOFF_S = 30.0

#: At most this many characters of a server's error body go into an error message.
_ERROR_TEXT_CHARS = 500


class LlmError(PageSightError):
    """A failed call to the LLM server, at stage ``GATEWAY``.

    ``status`` is the HTTP status of the last answer (None when none came: connection error,
    timeout), ``attempts`` how many requests were made, and ``retry_after_s`` the wait a 429
    asked for when it was longer than this client would wait (so a gateway can pass it on).
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        status: int | None = None,
        attempts: int = 1,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(code, Stage.GATEWAY, message)
        self.status = status
        self.attempts = attempts
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps the extra fields across a process boundary (PageSightError's only keeps three).
        return (
            _rebuild_llm_error,
            (type(self), self.code, self.message, self.status, self.attempts, self.retry_after_s),
        )


def _rebuild_llm_error(
    cls: type[LlmError],
    code: ErrorCode,
    message: str,
    status: int | None,
    attempts: int,
    retry_after_s: float | None,
) -> LlmError:
    return cls(code, message, status=status, attempts=attempts, retry_after_s=retry_after_s)


class MalformedOutput(LlmError):
    """The model answered, but not with JSON matching the requested schema (code ``INTERNAL``).

    ``raw_text`` is what it said and ``finish_reason`` why it stopped (``"length"`` means the JSON
    was cut at ``max_tokens``): the caller decides whether to regenerate (perhaps with more
    tokens) or fall back. Not retried by the client.
    """

    def __init__(
        self,
        message: str,
        raw_text: str,
        *,
        finish_reason: str | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(ErrorCode.INTERNAL, message, status=200, attempts=attempts)
        self.raw_text = raw_text
        self.finish_reason = finish_reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_malformed,
            (self.message, self.raw_text, self.finish_reason, self.attempts),
        )


def _rebuild_malformed(
    message: str, raw_text: str, finish_reason: str | None, attempts: int
) -> MalformedOutput:
    return MalformedOutput(message, raw_text, finish_reason=finish_reason, attempts=attempts)


@dataclass(slots=True)
class _Failure:
    """Why one attempt failed, and whether another attempt could succeed."""

    code: ErrorCode
    message: str
    retryable: bool
    status: int | None = None
    retry_after_s: float | None = None


class OpenAiChatClient:
    """Synchronous client of ``{base_url}/chat/completions``; pass ``http`` to share a client.

    Raises :class:`LlmError` (``UNAVAILABLE``) at construction when ``options.base_url`` is unset,
    so "no LLM configured" is found where the client is built, not on the first question.
    """

    def __init__(self, options: LlmOptions, *, http: httpx.Client | None = None) -> None:
        if not options.base_url:
            raise LlmError(ErrorCode.UNAVAILABLE, "no LLM is configured (set llm.base_url)")
        self.options = options
        self._url = options.base_url.rstrip("/") + "/chat/completions"
        self._http = http
        self._owned = http is None
        self._headers = (
            {"Authorization": f"Bearer {options.api_key.get_secret_value()}"}
            if options.api_key is not None
            else {}
        )
        self._timeout = httpx.Timeout(options.timeout_s)
        self._lock = threading.Lock()

    # -- public API --

    def complete(
        self,
        messages: Sequence[ChatMessage | Mapping[str, Any]],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        """One reply to ``messages``; with ``json_schema``, a reply constrained to and parsed as it.

        Raises :class:`MalformedOutput` when ``json_schema`` was given and the text is not JSON,
        or lacks a key the schema's top level requires; :class:`LlmError` for everything else.
        """
        body = self._body(messages, max_tokens=max_tokens, temperature=temperature, stream=False)
        if json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": json_schema, "strict": True},
            }

        response, attempts = self._send(body)
        data = _json_body(response, attempts)
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            finish_reason = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LlmError(
                ErrorCode.UNAVAILABLE,
                f"the LLM server's reply has no choices[0].message: {_clip(response.text)}",
                status=response.status_code,
                attempts=attempts,
            ) from exc
        usage = data.get("usage") or {}
        parsed = None
        if json_schema is not None:
            parsed = _parse_structured(text, json_schema, finish_reason, attempts)
        return ChatResult(
            text=text,
            parsed=parsed,
            finish_reason=finish_reason,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            model=str(data.get("model") or self.options.model),
            attempts=attempts,
        )

    def stream(
        self,
        messages: Sequence[ChatMessage | Mapping[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Iterator[str]:
        """Yield the reply's content deltas as the server sends them (non-empty strings).

        A generator: nothing is sent until the first ``next()``. Failures before the first delta
        are retried like :meth:`complete`; after it they raise at once, since a retry would
        repeat text the caller has already forwarded. Closing the generator early closes the
        connection, which makes vLLM stop generating. Structured outputs are not offered here:
        JSON can only be checked once complete, so use :meth:`complete` for them.
        """
        body = self._body(messages, max_tokens=max_tokens, temperature=temperature, stream=True)
        attempt = 0
        while True:
            attempt += 1
            started = False
            try:
                with self._client().stream(
                    "POST", self._url, json=body, headers=self._headers, timeout=self._timeout
                ) as response:
                    if response.is_success:
                        for delta in _sse_deltas(response, attempt):
                            started = True
                            yield delta
                        return
                    response.read()
                    failure = _http_failure(response)
            except httpx.HTTPError as exc:
                failure = _transport_failure(exc, self.options.timeout_s)
                if started:
                    raise LlmError(
                        failure.code,
                        f"the LLM stream broke off: {failure.message}",
                        attempts=attempt,
                    ) from exc
            self._pause_or_raise(failure, attempt)

    def close(self) -> None:
        """Close the connection pool (if this client made it); a later call would reopen it."""
        with self._lock:
            if self._http is not None and self._owned:
                self._http.close()
                self._http = None

    def __enter__(self) -> OpenAiChatClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing --

    def _client(self) -> httpx.Client:
        http = self._http
        if http is not None:
            return http
        with self._lock:
            if self._http is None:
                self._http = httpx.Client(timeout=self._timeout)
            return self._http

    def _body(
        self,
        messages: Sequence[ChatMessage | Mapping[str, Any]],
        *,
        max_tokens: int | None,
        temperature: float | None,
        stream: bool,
    ) -> dict[str, Any]:
        if not messages:
            raise LlmError(ErrorCode.INVALID_REQUEST, "a chat completion needs at least a message")
        return {
            "model": self.options.model,
            "messages": [m.to_dict() if isinstance(m, ChatMessage) else dict(m) for m in messages],
            "max_tokens": max_tokens if max_tokens is not None else self.options.max_tokens,
            "temperature": temperature if temperature is not None else self.options.temperature,
            "stream": stream,
        }

    def _send(self, body: dict[str, Any]) -> tuple[httpx.Response, int]:
        """POST ``body`` with retries; the successful response and the attempts it took."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._client().post(
                    self._url, json=body, headers=self._headers, timeout=self._timeout
                )
            except httpx.HTTPError as exc:
                failure = _transport_failure(exc, self.options.timeout_s)
            else:
                if response.is_success:
                    return response, attempt
                failure = _http_failure(response)
            self._pause_or_raise(failure, attempt)

    def _pause_or_raise(self, failure: _Failure, attempt: int) -> None:
        """Sleep before the next attempt, or raise ``failure`` when there should be none."""
        options = self.options
        too_long = failure.retry_after_s is not None and failure.retry_after_s > options.timeout_s
        if not failure.retryable or attempt > options.max_retries or too_long:
            tries = f" after {attempt} attempts" if attempt > 1 else ""
            raise LlmError(
                failure.code,
                f"{failure.message}{tries}",
                status=failure.status,
                attempts=attempt,
                retry_after_s=failure.retry_after_s if too_long else None,
            )
        if failure.retry_after_s is not None:
            delay = failure.retry_after_s
        else:
            delay = min(options.backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S)
            delay *= 0.5 + random.random() / 2  # jitter: callers that failed together spread out
        log.warning(
            "LLM call failed (%s), retry %d/%d in %.2f s",
            failure.message,
            attempt,
            options.max_retries,
            delay,
        )
        time.sleep(delay)


def _transport_failure(exc: httpx.HTTPError, timeout_s: float) -> _Failure:
    if isinstance(exc, httpx.TimeoutException):
        return _Failure(
            ErrorCode.TIMEOUT,
            f"the LLM server did not answer within {timeout_s:g} s ({type(exc).__name__})",
            retryable=True,
        )
    return _Failure(
        ErrorCode.UNAVAILABLE,
        f"cannot reach the LLM server: {type(exc).__name__}: {exc}",
        retryable=True,
    )


def _http_failure(response: httpx.Response) -> _Failure:
    status = response.status_code
    detail = _error_text(response)
    if status == 429:
        return _Failure(
            ErrorCode.UNAVAILABLE,
            f"the LLM server is overloaded (HTTP 429): {detail}",
            retryable=True,
            status=status,
            retry_after_s=_retry_after(response.headers.get("retry-after")),
        )
    if status >= 500:
        return _Failure(
            ErrorCode.UNAVAILABLE,
            f"the LLM server failed (HTTP {status}): {detail}",
            retryable=True,
            status=status,
        )
    return _Failure(
        ErrorCode.INVALID_REQUEST,
        f"the LLM server rejected the request (HTTP {status}): {detail}",
        retryable=False,
        status=status,
    )


def _error_text(response: httpx.Response) -> str:
    """The message of an OpenAI (``{"error": {...}}``) or vLLM (``{"message": ...}``) error."""
    try:
        data = response.json()
    except ValueError:
        return _clip(response.text) or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return _clip(str(error["message"]))
        if isinstance(error, str):
            return _clip(error)
        if data.get("message"):
            return _clip(str(data["message"]))
        if data.get("detail"):
            return _clip(str(data["detail"]))
    return _clip(response.text)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _json_body(response: httpx.Response, attempts: int) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError as exc:
        raise LlmError(
            ErrorCode.UNAVAILABLE,
            f"the LLM server's reply is not JSON: {_clip(response.text)}",
            status=response.status_code,
            attempts=attempts,
        ) from exc
    if not isinstance(data, dict):
        raise LlmError(
            ErrorCode.UNAVAILABLE,
            f"the LLM server's reply is not a JSON object: {_clip(response.text)}",
            status=response.status_code,
            attempts=attempts,
        )
    return data


def _sse_deltas(response: httpx.Response, attempts: int) -> Iterator[str]:
    """Content deltas from an OpenAI-style event stream, up to ``data: [DONE]``.

    Each event is one ``data:`` line holding a chunk (``choices[0].delta.content``); comments,
    blank lines and other fields are skipped. vLLM reports a failure mid-stream as a chunk with
    an ``error`` object, which becomes an :class:`LlmError`.
    """
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            chunk = json.loads(payload)
        except ValueError as exc:
            raise LlmError(
                ErrorCode.UNAVAILABLE,
                f"the LLM server sent an unreadable stream event: {_clip(payload)}",
                status=response.status_code,
                attempts=attempts,
            ) from exc
        if not isinstance(chunk, dict):
            continue
        error = chunk.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            status = error.get("code") if isinstance(error, dict) else None
            code = (
                ErrorCode.INVALID_REQUEST
                if isinstance(status, int) and 400 <= status < 500
                else ErrorCode.UNAVAILABLE
            )
            raise LlmError(
                code,
                f"the LLM stream failed: {_clip(str(message))}",
                status=status if isinstance(status, int) else None,
                attempts=attempts,
            )
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                yield content
    # A stream that ends without [DONE] was cut (server restart, proxy timeout).
    raise LlmError(
        ErrorCode.UNAVAILABLE,
        "the LLM stream ended before [DONE]",
        status=response.status_code,
        attempts=attempts,
    )


def _parse_structured(
    text: str, schema: Mapping[str, Any], finish_reason: str | None, attempts: int
) -> Any:
    """``text`` as JSON that has the schema's required top-level keys, or MalformedOutput.

    Only the top level is checked: guided decoding already enforces the schema token by token,
    so what slips through is text cut short or a server that ignored ``response_format``, and
    both show at the top. A full JSON Schema validator would be a dependency for no gain.
    """
    cut = " (cut at max_tokens)" if finish_reason == "length" else ""
    try:
        # strict=False: guided decoding (xgrammar) can emit raw control characters inside a
        # string, which strict JSON forbids though the reply is otherwise complete and valid.
        parsed = json.loads(text, strict=False)
    except ValueError as exc:
        raise MalformedOutput(
            f"the model's reply is not valid JSON{cut}: {exc}",
            text,
            finish_reason=finish_reason,
            attempts=attempts,
        ) from exc
    if schema.get("type") == "object" and not isinstance(parsed, dict):
        raise MalformedOutput(
            f"the model's reply is JSON but not an object{cut}",
            text,
            finish_reason=finish_reason,
            attempts=attempts,
        )
    required = schema.get("required") or []
    if required and isinstance(parsed, dict):
        missing = [key for key in required if key not in parsed]
        if missing:
            raise MalformedOutput(
                f"the model's reply lacks required keys {missing}{cut}",
                text,
                finish_reason=finish_reason,
                attempts=attempts,
            )
    return parsed


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _ERROR_TEXT_CHARS else text[:_ERROR_TEXT_CHARS] + "…"
