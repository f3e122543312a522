"""OpenAI-compatible routes: chat completions (:class:`pagesight.gateway.serving.ServingChat`),
models."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from pagesight.api.models import API_PREFIX
from pagesight.gateway.dependencies import CallerDep, ChatDep, OptionsDep, check_query
from pagesight.gateway.openai_protocol import (
    MODEL_ID,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ModelCard,
    ModelList,
)
from pagesight.gateway.serving import SSE_SCHEMA

router = APIRouter(tags=["openai"])


@router.post(
    f"{API_PREFIX}/chat/completions",
    response_model=ChatCompletionResponse,
    responses={200: {"content": {"text/event-stream": {"schema": SSE_SCHEMA}}}},
)
async def chat_completions(
    body: ChatCompletionRequest,
    request: Request,
    caller: CallerDep,
    chat: ChatDep,
    options: OptionsDep,
) -> Response:
    """OpenAI-compatible chat completions (the ``openai`` client works as is): the last
    user message is answered as by ``/v1/answer``; the citations are in ``pagesight``.
    With ``stream: true``, ``chat.completion.chunk`` events, the last one carrying
    ``pagesight``, then ``data: [DONE]``."""
    caller.require("read")
    question = body.to_answer_request()
    check_query(question.query, options)
    return await chat.create(caller, body, question, request.state.trace_id)


@router.get(f"{API_PREFIX}/models", response_model=ModelList)
async def list_models(caller: CallerDep) -> ModelList:
    """The one model chat completions answer with (for clients that list models first)."""
    return ModelList(data=[ModelCard(id=MODEL_ID)])
