"""The OpenAI chat-completions protocol as ``POST /v1/chat/completions`` speaks it.

Only what a grounded-answer endpoint can honour is modelled; the official ``openai`` client (and
anything built on it) parses the responses. Compatibility choices, and why:

* **The question is the last message**, which must be the user's, in text (a string or text
  content parts). Earlier turns, and system or developer messages, are accepted and ignored:
  each request is answered on its own, so a follow-up must name what it asks about. Using a
  client's system prompt would let a caller rewrite the grounding rules, and condensing a
  conversation into a question would be a second model call whose output nobody checks.
* **Generation parameters are the server's.** ``temperature``, ``top_p``, ``max_tokens``,
  ``seed``, ``stop``, ``tools`` and any other field are accepted and ignored: answers come from
  the server's answer pipeline (``PAGESIGHT_ANSWER__*``, ``PAGESIGHT_LLM__*``), deterministic
  and checked. Fields whose promise cannot be kept are refused with 422: ``n`` above 1, a
  ``response_format`` other than text, image content. ``model`` is echoed back.
* **Citations travel in an extra field.** A completion (and the final chunk of a stream)
  carries ``pagesight``: the full :class:`~pagesight.query.answer.AnswerResponse` of ``/v1/answer``
  (citations with doc, page, element ids, boxes and page image URL; sentences; withheld
  sentences of a stream; abstained, confidence, trace id). The ``openai`` client keeps unknown
  fields: ``completion.model_extra["pagesight"]``. The message content is the answer with
  ``[n]`` markers naming those citations.
* **PageSight options travel in an extra request field**, ``pagesight`` (route, policy,
  top_k_context, filters), e.g. ``extra_body={"pagesight": {"route": "text"}}``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagesight.api.models import AnswerRequest
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.types import AnswerResponse, Policy, RouteName, SearchFilters, UnicodeText

#: The model id ``GET /v1/models`` lists, and completions name when the request named none.
MODEL_ID = "pagesight"


def _drop_none(value: Any) -> bool:
    return value is None


class ContentPart(BaseModel):
    """One part of a message's content; only ``text`` parts can be answered."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: UnicodeText | None = None


class ChatMessageParam(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: UnicodeText | list[ContentPart] | None = None
    name: str | None = None

    def text(self) -> str:
        """The message's text; content parts other than text are refused (422)."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        kinds = sorted({part.type for part in self.content if part.type != "text"})
        if kinds:
            raise _invalid(f"only text content can be answered, not {', '.join(kinds)}")
        return "\n".join(part.text or "" for part in self.content)


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["text"] = Field(description="answers are text with [n] citation markers")


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool | None = None


class PageSightOptions(BaseModel):
    """The ``/v1/answer`` options a chat request may set, in its ``pagesight`` field."""

    model_config = ConfigDict(extra="forbid")

    route: RouteName = RouteName.AUTO
    policy: Policy = "standard"
    top_k_context: int = Field(default=8, ge=1, le=50)
    filters: SearchFilters = Field(default_factory=SearchFilters)


class ChatCompletionRequest(BaseModel):
    """An OpenAI chat completion request; unknown fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: UnicodeText | None = None  # echoed back in the response
    messages: list[ChatMessageParam] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, ge=1, le=1, description="one choice only")
    response_format: ResponseFormat | None = None
    temperature: float | None = Field(default=None, ge=0, le=2, description="ignored")
    top_p: float | None = Field(default=None, ge=0, le=1, description="ignored")
    max_tokens: int | None = Field(default=None, ge=1, description="ignored")
    max_completion_tokens: int | None = Field(default=None, ge=1, description="ignored")
    pagesight: PageSightOptions = Field(default_factory=PageSightOptions)

    def to_answer_request(self) -> AnswerRequest:
        """The ``/v1/answer`` request this asks: the last message, the user's, is the question
        (earlier turns are ignored, see the module doc)."""
        last = self.messages[-1]
        if last.role != "user":
            raise _invalid(
                f"the last message must be the user's question (role 'user'), not {last.role!r}"
            )
        question = last.text()
        if not question.strip():
            raise _invalid("the last user message has no text")
        options = self.pagesight
        try:
            return AnswerRequest(
                query=question,
                route=options.route,
                policy=options.policy,
                top_k_context=options.top_k_context,
                filters=options.filters,
                stream=self.stream,
            )
        except ValidationError as exc:  # a question /v1/answer would refuse: 422 here too
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors()
            )
            raise _invalid(f"the last user message cannot be answered: {problems}") from None


# -- responses -----------------------------------------------------------------------------------


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatChoice(BaseModel):
    index: int = 0
    message: ChatMessageOut
    finish_reason: Literal["stop", "length"] = "stop"
    logprobs: None = None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletionResponse(BaseModel):
    """``chat.completion``, plus ``pagesight``: the answer with its citations."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage | None = Field(default=None, exclude_if=_drop_none)
    pagesight: AnswerResponse = Field(
        description="the answer as /v1/answer gives it: citations, sentences, trace id, ..."
    )


class DeltaMessage(BaseModel):
    role: Literal["assistant"] | None = Field(default=None, exclude_if=_drop_none)
    content: str | None = Field(default=None, exclude_if=_drop_none)


class ChatChunkChoice(BaseModel):
    index: int = 0
    delta: DeltaMessage
    finish_reason: Literal["stop", "length"] | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    """``chat.completion.chunk``; the last one (``finish_reason`` set) carries ``pagesight``,
    the checked answer, which is the authority over the content streamed before it."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatChunkChoice]
    pagesight: AnswerResponse | None = Field(default=None, exclude_if=_drop_none)


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "pagesight"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


def _invalid(message: str) -> PageSightError:
    return PageSightError(ErrorCode.INVALID_REQUEST, Stage.GATEWAY, message)
