"""The client of an OpenAI-compatible chat server (vLLM): the LLM behind grounded answers.

PageSight talks to one kind of LLM endpoint, ``POST {base_url}/chat/completions`` as served by
vLLM (or any other OpenAI-compatible server), through the official ``openai`` SDK: the SDK owns
HTTP, retries with their sleeps, timeouts and the server-sent-event decoding; this module owns
what PageSight adds on top, its policy and its errors.

* **Sync, not async.** It wraps the SDK's synchronous ``openai.OpenAI``, not ``AsyncOpenAI``:
  everything that calls it (the answer pipeline, the query planner, corrective search, the VLM
  page parser's thread pool) is synchronous code that runs on worker threads, and the gateway
  already moves it off its event loop. ``AsyncOpenAI`` behind this interface would need an event
  loop per call, or a loop thread and a queue to turn its async stream into this generator:
  machinery for no gain, since both SDK clients share the retry, timeout and SSE code.
* **Structured outputs.** :meth:`OpenAiChatClient.complete` with ``json_schema`` sends
  ``response_format={"type": "json_schema", ...}`` (vLLM enforces it with guided decoding) and
  parses the reply. Guided decoding can still hand back text that is not the promised JSON (the
  answer was cut at ``max_tokens``, or the server ignored the schema), so that is a distinct
  :class:`MalformedOutput` carrying the raw text: the caller decides whether to regenerate,
  fall back to extractive answers, or show the text as is. It is never retried here, because the
  same prompt at temperature 0 would give the same text.
* **Streaming.** :meth:`OpenAiChatClient.stream` iterates the SDK's ``stream=True`` chunks and
  yields their content deltas, so the gateway can forward tokens as they come. Closing the
  generator closes the SDK's stream, hence the HTTP response, and vLLM stops generating. The
  SDK ends a stream at ``data: [DONE]`` and at the end of the body alike, so a reply counts as
  complete when a chunk carried a ``finish_reason`` (vLLM's last chunk before ``[DONE]``).
* **Retries** are the SDK's loop (``max_retries`` from
  :class:`~pagesight.core.settings.LlmOptions`),
  with PageSight's policy in its two hooks: connection failures, timeouts, HTTP 5xx and 429
  are retried (a restarting or saturated vLLM recovers within seconds); other 4xx mean the
  request itself is wrong (context too long, unknown model) and would fail again, so they are
  not. The delay is ``backoff_s`` doubled per retry with jitter (50-100 %), at most
  :data:`MAX_BACKOFF_S`. A 429's ``Retry-After`` is honoured, unless it asks for longer than
  the request timeout: then the server is not going to answer in time and the error says how
  long to wait instead (a 5xx's is honoured up to the timeout, else the backoff applies). The
  SDK's ``x-stainless-retry-count`` request header tells how many attempts a call took.
* **Timeouts.** ``timeout_s`` is the SDK client's ``timeout``: its HTTP client (``httpx2``, the
  SDK's httpx, or a shared ``httpx.Client``) makes it a ``Timeout`` of that many seconds to
  connect, to write, to get a pooled connection and for each read (the whole reply, or the next
  streamed chunk), as before.

Every failure is a :class:`LlmError` (a :class:`~pagesight.core.errors.PageSightError` at stage
``GATEWAY``): ``UNAVAILABLE`` for an unreachable server, 5xx or 429 after the retries,
``TIMEOUT`` when the last attempt timed out, ``INVALID_REQUEST`` for other 4xx; never a bare
``openai`` or ``httpx`` exception.

Construction is free: the SDK client (whose HTTP client builds a TLS context, which costs
milliseconds) is made on first use, so building services with an LLM configured costs nothing
until an answer is asked for. One client holds one connection pool; it is thread-safe,
closable, and a context manager. The SDK reads no credentials from the environment here: the
key is ``llm.api_key`` or none (no ``Authorization`` header), and no organization or project
header is sent.
"""

from __future__ import annotations

import json
import logging
import math
import random
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

import httpx
import openai

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import LlmOptions
from pagesight.core.types import ChatMessage, ChatResult

if TYPE_CHECKING:
    import httpx2
    from openai._models import FinalRequestOptions

__all__ = ["MAX_BACKOFF_S", "ChatMessage", "LlmError", "MalformedOutput", "OpenAiChatClient"]

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


class PageSightOpenAI(openai.OpenAI):
    """The SDK's client with PageSight's retry policy in the two hooks its retry loop calls.

    Both hooks are private methods of the SDK, which is why ``openai`` is pinned exactly.
    """

    #: first retry delay (``LlmOptions.backoff_s``)
    backoff_s: float = 0.5
    #: the longest Retry-After waited out (``LlmOptions.timeout_s``)
    patience_s: float = 60.0

    def retry_after_s(self, headers: Any) -> float | None:
        """Seconds a ``Retry-After`` (or ``retry-after-ms``) header asks for; None if none."""
        return self._parse_retry_after_header(headers)

    def _should_retry(self, response: httpx2.Response) -> bool:
        # 5xx and 429 only (not the SDK's 408/409): any other status is the request's fault. A
        # 429 asking for a longer wait than the timeout is not waited out.
        if response.status_code >= 500:
            return True
        if response.status_code != 429:
            return False
        wait = self.retry_after_s(response.headers)
        return wait is None or wait <= self.patience_s

    def _calculate_retry_timeout(
        self,
        remaining_retries: int,
        options: FinalRequestOptions,
        response_headers: httpx2.Headers | None = None,
    ) -> float:
        max_retries = options.get_max_retries(self.max_retries)
        retry = max_retries - remaining_retries + 1
        wait = self.retry_after_s(response_headers)
        if wait is not None and math.isfinite(wait) and wait <= self.patience_s:
            delay = max(0.0, wait)
        else:
            delay = min(self.backoff_s * 2 ** (retry - 1), MAX_BACKOFF_S)
            # jitter: callers that failed together spread out
            delay *= 0.5 + random.random() / 2  # noqa: S311  # retry jitter, not a secret
        log.warning("LLM call failed, retry %d/%d in %.2f s", retry, max_retries, delay)
        return delay


class OpenAiChatClient:
    """Synchronous client of ``{base_url}/chat/completions``; pass ``http`` to share a client.

    Raises :class:`LlmError` (``UNAVAILABLE``) at construction when ``options.base_url`` is unset,
    so "no LLM configured" is found where the client is built, not on the first question. A
    shared ``http`` client is used by the SDK and never closed here.
    """

    def __init__(self, options: LlmOptions, *, http: httpx.Client | None = None) -> None:
        if not options.base_url:
            raise LlmError(ErrorCode.UNAVAILABLE, "no LLM is configured (set llm.base_url)")
        self.options = options
        self._http = http
        self._sdk_client: PageSightOpenAI | None = None
        self._lock = threading.Lock()
        # vLLM without --api-key: no Authorization header at all (the SDK wants it omitted
        # explicitly, per request).
        self._headers: Any = {"Authorization": openai.omit} if options.api_key is None else None

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
        sent = self._messages(messages)
        response_format: Any = openai.omit
        if json_schema is not None:
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": json_schema, "strict": True},
            }
        try:
            raw = self._sdk().chat.completions.with_raw_response.create(
                model=self.options.model,
                messages=sent,
                max_tokens=self._max_tokens(max_tokens),
                temperature=self._temperature(temperature),
                response_format=response_format,
                stream=False,
                extra_headers=self._headers,
            )
            completion = raw.parse()
        except openai.APIError as exc:
            raise self._error(exc) from exc
        attempts = raw.retries_taken + 1
        try:
            choice = completion.choices[0]
            text = choice.message.content or ""
            finish_reason: str | None = choice.finish_reason
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LlmError(
                ErrorCode.UNAVAILABLE,
                "the LLM server's reply has no choices[0].message: "
                f"{_clip(raw.http_response.text)}",
                status=raw.status_code,
                attempts=attempts,
            ) from exc
        usage = getattr(completion, "usage", None)
        parsed = None
        if json_schema is not None:
            parsed = _parse_structured(text, json_schema, finish_reason, attempts)
        return ChatResult(
            text=text,
            parsed=parsed,
            finish_reason=finish_reason,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            model=str(getattr(completion, "model", None) or self.options.model),
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
        sent = self._messages(messages)
        try:
            raw = self._sdk().chat.completions.with_raw_response.create(
                model=self.options.model,
                messages=sent,
                max_tokens=self._max_tokens(max_tokens),
                temperature=self._temperature(temperature),
                stream=True,
                extra_headers=self._headers,
            )
            chunks = raw.parse()
        except openai.APIError as exc:
            raise self._error(exc) from exc
        attempts = raw.retries_taken + 1
        finished = False
        try:
            for chunk in chunks:
                for choice in chunk.choices or ():
                    finished = finished or choice.finish_reason is not None
                    content = choice.delta.content if choice.delta is not None else None
                    if content:
                        yield content
        except openai.APIError as exc:
            raise self._stream_error(exc, attempts) from exc
        except ValueError as exc:  # the SDK's SSE decoder met an event that is not JSON
            raise LlmError(
                ErrorCode.UNAVAILABLE,
                f"the LLM server sent an unreadable stream event: {exc}",
                status=raw.status_code,
                attempts=attempts,
            ) from exc
        finally:
            chunks.close()  # also on an early close: the server sees the disconnect
        if not finished:
            # A stream that ends without its last chunk was cut (server restart, proxy timeout).
            raise LlmError(
                ErrorCode.UNAVAILABLE,
                "the LLM stream ended before [DONE]: no chunk carried a finish_reason",
                status=raw.status_code,
                attempts=attempts,
            )

    def close(self) -> None:
        """Close the connection pool (unless ``http`` was shared); a later call would reopen it."""
        with self._lock:
            sdk, self._sdk_client = self._sdk_client, None
        if sdk is not None and self._http is None:
            sdk.close()

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

    def _sdk(self) -> PageSightOpenAI:
        sdk = self._sdk_client
        if sdk is not None:
            return sdk
        with self._lock:
            if self._sdk_client is None:
                self._sdk_client = _make_sdk(self.options, self._http)
            return self._sdk_client

    def _messages(self, messages: Sequence[ChatMessage | Mapping[str, Any]]) -> Any:
        if not messages:
            raise LlmError(ErrorCode.INVALID_REQUEST, "a chat completion needs at least a message")
        return [m.to_dict() if isinstance(m, ChatMessage) else dict(m) for m in messages]

    def _max_tokens(self, max_tokens: int | None) -> int:
        return max_tokens if max_tokens is not None else self.options.max_tokens

    def _temperature(self, temperature: float | None) -> float:
        return temperature if temperature is not None else self.options.temperature

    def _error(self, exc: openai.APIError) -> LlmError:
        """The :class:`LlmError` for a call that failed before a reply (after the retries)."""
        attempts = _attempts(exc)
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        if isinstance(exc, openai.APITimeoutError):
            kind = type(exc.__cause__).__name__ if exc.__cause__ is not None else "timeout"
            return LlmError(
                ErrorCode.TIMEOUT,
                f"the LLM server did not answer within {self.options.timeout_s:g} s "
                f"({kind}){tries}",
                attempts=attempts,
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
            return LlmError(
                ErrorCode.UNAVAILABLE,
                f"cannot reach the LLM server: {detail}{tries}",
                attempts=attempts,
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = _error_text(exc.response)
            if status == 429:
                wait = self._sdk().retry_after_s(exc.response.headers)
                too_long = wait is not None and wait > self.options.timeout_s
                return LlmError(
                    ErrorCode.UNAVAILABLE,
                    f"the LLM server is overloaded (HTTP 429): {detail}{tries}",
                    status=status,
                    attempts=attempts,
                    retry_after_s=wait if too_long else None,
                )
            if status >= 500:
                return LlmError(
                    ErrorCode.UNAVAILABLE,
                    f"the LLM server failed (HTTP {status}): {detail}{tries}",
                    status=status,
                    attempts=attempts,
                )
            return LlmError(
                ErrorCode.INVALID_REQUEST,
                f"the LLM server rejected the request (HTTP {status}): {detail}{tries}",
                status=status,
                attempts=attempts,
            )
        return LlmError(
            ErrorCode.UNAVAILABLE,
            f"the LLM server's reply is not a chat completion: {_clip(exc.message)}",
            status=(
                exc.status_code if isinstance(exc, openai.APIResponseValidationError) else None
            ),
            attempts=attempts,
        )

    def _stream_error(self, exc: openai.APIError, attempts: int) -> LlmError:
        """The :class:`LlmError` for a stream that failed after its response began."""
        if isinstance(exc, openai.APIConnectionError):  # timeouts included
            broken = self._error(exc)
            return LlmError(
                broken.code, f"the LLM stream broke off: {broken.message}", attempts=attempts
            )
        # An error event: vLLM reports a failure mid-stream as {"error": {"message", "code"}}.
        body = exc.body
        message: Any = exc.message
        status: Any = None
        if isinstance(body, Mapping):
            message = body.get("message") or message
            status = body.get("code")
        elif isinstance(body, str) and body:
            message = body
        status = status if isinstance(status, int) else None
        code = (
            ErrorCode.INVALID_REQUEST
            if status is not None and 400 <= status < 500
            else ErrorCode.UNAVAILABLE
        )
        return LlmError(
            code, f"the LLM stream failed: {_clip(str(message))}", status=status, attempts=attempts
        )


def _make_sdk(options: LlmOptions, http: httpx.Client | None) -> PageSightOpenAI:
    key = options.api_key.get_secret_value() if options.api_key is not None else ""
    # The organization and project headers from OPENAI_ORG_ID / OPENAI_PROJECT_ID are not ours.
    sdk = PageSightOpenAI(
        # Without a key, a placeholder (never sent: see _headers) stops a read of OPENAI_API_KEY.
        api_key=key or "unused",
        base_url=options.base_url,
        timeout=options.timeout_s,
        max_retries=options.max_retries,
        default_headers=cast(
            dict[str, str], {"OpenAI-Organization": openai.omit, "OpenAI-Project": openai.omit}
        ),
        http_client=http,  # type: ignore[arg-type]  # the SDK takes httpx clients too
    )
    sdk.backoff_s = options.backoff_s
    sdk.patience_s = options.timeout_s
    return sdk


def _attempts(exc: openai.APIError) -> int:
    """The requests a failed call made: the SDK numbers its retries in a request header."""
    try:
        return int(exc.request.headers.get("x-stainless-retry-count", "0")) + 1
    except (AttributeError, ValueError):
        return 1


def _error_text(response: Any) -> str:
    """The message of an OpenAI (``{"error": {...}}``) or vLLM (``{"message": ...}``) error."""
    try:
        data = response.json()
    except ValueError:
        return _clip(response.text) or str(response.reason_phrase)
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
