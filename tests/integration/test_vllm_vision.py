"""Answers with page images against a real vLLM server on CPU serving a tiny random Qwen2-VL.

The scripted-server tests (test_answer_vision.py, tests/unit/query/test_vision.py) fix what the
pipeline sends and how it checks replies; this proves that a real VLM server accepts it: the
``image_url`` data-URL parts inside numbered blocks, next to text blocks, with ``response_format``
json_schema and with streaming, and that the image budget holds by the server's own token count.
The model is :func:`pagesight.models.testing.tiny_qwen2_vl.build_tiny_qwen2_vl` (random weights:
whatever it writes is noise, so the assertions are about acceptance, budgets and the citation check,
never about what it says).

vLLM's Qwen2-VL support needs torchvision importable; PyPI's is CUDA-linked, so it is installed
beside .venv-vllm and made importable by tests/vllm_torchvision (``make test-vllm`` sets
``PAGESIGHT_VLLM_VISION_PATH``; unset, these tests skip). The server starts in ~60-100 s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pagesight.api.models import AnswerRequest
from pagesight.core.settings import AnswerOptions, GatewayOptions, ImageContextOptions, Settings
from pagesight.core.types import (
    AccessFilter,
    AnswerResponse,
    AnswerToken,
    ChatMessage,
    JobState,
    Passage,
)
from pagesight.gateway.app import build_app
from pagesight.gateway.auth import KeyRing, new_key
from pagesight.gateway.backend import ServiceClient
from pagesight.gateway.client import PageSightClient
from pagesight.ingestion import samples
from pagesight.models.llm import OpenAiChatClient
from pagesight.models.reranker import FusedScoreRanker
from pagesight.models.testing.tiny_qwen2_vl import TINY_MAX_VISUAL_TOKENS, build_tiny_qwen2_vl
from pagesight.query.answer import AnsweredQuery, AnswerPipeline
from pagesight.query.context import approx_tokens, build_context
from pagesight.query.generation import build_messages
from pagesight.query.vision import image_block_id, numbered_after, page_image_blocks
from pagesight.services.index_service import IndexService
from tests.fakes import TableSearch
from tests.unit.query.test_vision import Pages
from tests.vllm import VllmServer, report, serve, vision_path

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVED_MODEL = "tiny-qwen2-vl"
KEY, KEY_RECORD = new_key("vlm-test", "tenant-vlm")
QUESTION = "What does the chart of parcels moved show?"
PASSAGES = [
    Passage(
        chunk_id="doc-parcels/1/c0",
        doc_id="doc-parcels",
        page_number=1,
        text="Figure 1: parcels moved per year. Northwind Logistics moved 4.2 million parcels.",
        score=0.9,
    ),
    Passage(
        chunk_id="doc-risk/1/c0",
        doc_id="doc-risk",
        page_number=3,
        text="Fuel prices remain the largest cost risk.",
        score=0.6,
    ),
]
ACCESS = AccessFilter(tenant="t")
#: Images no larger than the tiny model's processor takes (so it keeps them as sent), within a
#: budget that fits its 4,096-token window with the reply.
OPTIONS = AnswerOptions(
    abstain_threshold=0.0,
    context_budget_tokens=3000,
    reserve_output_tokens=256,
    images=ImageContextOptions(max_pixels=TINY_MAX_VISUAL_TOKENS * 28 * 28),
)


@pytest.fixture(scope="module")
def vlm_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VllmServer]:
    path = vision_path()
    root = tmp_path_factory.mktemp("vlm")
    model = build_tiny_qwen2_vl(root / SERVED_MODEL)
    images = ["--limit-mm-per-prompt", json.dumps({"image": OPTIONS.images.max_images, "video": 0})]
    with serve(
        request, root, model, SERVED_MODEL, extra_args=images, extra_env={"PYTHONPATH": path}
    ) as server:
        yield server


@pytest.fixture(scope="module")
def vlm(vlm_server: VllmServer) -> Iterator[OpenAiChatClient]:
    with OpenAiChatClient(vlm_server.llm_options()) as client:
        yield client


def _pipeline(client: OpenAiChatClient) -> AnswerPipeline:
    return AnswerPipeline(
        TableSearch(default=PASSAGES),
        FusedScoreRanker(),
        client,
        OPTIONS,
        vision="always",
        images=Pages(dpi=72),
    )


def _check(answered: AnsweredQuery) -> None:
    """The request carried its images and was accepted (no fallback); the server's prompt count
    covers them; every citation is a block that was given."""
    trace = answered.trace.answer
    assert trace is not None and trace.vision is not None
    assert trace.vision.sent and trace.vision.fallback is None, trace.vision
    images = trace.vision.images
    assert images and all(i.width * i.height <= OPTIONS.images.max_pixels for i in images)
    budget = min(OPTIONS.images.budget_tokens, (3000 - 256) // 2)
    assert sum(i.tokens for i in images) <= budget
    # citations are numbered by first appearance in the answer, not by block: each names a
    # block that was given
    given = set(trace.context)
    for citation in answered.response.citations:
        assert citation.chunk_id in given, "a citation of a block never given"
        if citation.kind == "image":
            assert citation.chunk_id == image_block_id(citation.doc_id, citation.page_number)


def test_the_vlm_counts_each_image_as_the_budget_does(vlm: OpenAiChatClient) -> None:
    """The same prompt with and without its image parts: the server's prompt counts differ by
    exactly the image tokens the budget reserved (tiles of 28 pixels, plus two markers)."""
    options = OPTIONS.images
    images = page_image_blocks(PASSAGES, Pages(dpi=72), ACCESS, options, 2000, approx_tokens)
    text = build_context(PASSAGES, 2000, 256)
    blocks = text + numbered_after(images, len(text) + 1)
    system, user = build_messages(QUESTION, blocks, 3)
    assert isinstance(user.content, list)
    without = [part for part in user.content if part["type"] != "image_url"]
    seen = vlm.complete([system, user], max_tokens=4)
    blind = vlm.complete([system, ChatMessage("user", without)], max_tokens=4)
    assert seen.prompt_tokens is not None and blind.prompt_tokens is not None
    expected = sum(block.image.tokens for block in images if block.image is not None)
    assert len(images) == 2 and seen.prompt_tokens - blind.prompt_tokens == expected


def test_the_vlm_accepts_page_images_in_the_structured_request(
    vlm: OpenAiChatClient, request: pytest.FixtureRequest
) -> None:
    """The pipeline's structured request with images is accepted (no fallback); whatever the
    random model writes, every citation is a block that was given."""
    answered = _pipeline(vlm).run(AnswerRequest(query=QUESTION), ACCESS, "v1")
    _check(answered)
    trace = answered.trace.answer
    assert trace is not None and trace.vision is not None
    report(
        request,
        f"VLM answer: mode={answered.response.mode} reason={answered.response.reason!r} "
        f"attempts={trace.attempts} prompt_tokens={trace.prompt_tokens} "
        f"images={[(i.width, i.height, i.tokens) for i in trace.vision.images]}",
    )


def test_the_vlm_streams_an_answer_to_page_images(vlm: OpenAiChatClient) -> None:
    events = list(
        _pipeline(vlm).stream(AnswerRequest(query=QUESTION), AccessFilter(tenant="t"), "v2")
    )
    *tokens, final = events
    assert all(isinstance(t, AnswerToken) for t in tokens)
    assert isinstance(final, AnsweredQuery)
    _check(final)


# -- the gateway end to end ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(
    vlm_server: VllmServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PageSightClient, TestClient, IndexService]]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("vlm-gateway") / "var",
        gateway=GatewayOptions(api_keys=[KEY_RECORD]),
        llm=vlm_server.llm_options(vision="always"),
        answer=OPTIONS,
    )
    service = IndexService(settings)
    service.warm_up()
    app = build_app(
        ServiceClient.in_process(service), settings.gateway, KeyRing.from_options(settings.gateway)
    )
    try:
        with TestClient(app) as http:
            client = PageSightClient(api_key=KEY, http=http)
            pdf = samples.text_pdf(tmp_path_factory.mktemp("vlm-docs") / "northwind.pdf")
            accepted = client.upload(pdf)
            assert service.wait_idle(120)
            assert client.wait_for_job(accepted.job_id, timeout_s=5).state == JobState.READY
            yield client, http, service
    finally:
        service.close()


def _trace_checked(client: PageSightClient, response: AnswerResponse) -> None:
    trace = client.trace(response.trace_id).answer
    assert trace is not None and trace.vision is not None
    assert trace.vision.sent and trace.vision.fallback is None and trace.vision.images
    assert "data:image" not in trace.model_dump_json()
    given = dict(enumerate(trace.context, start=1))
    for citation in response.citations:
        assert given.get(citation.n) == citation.chunk_id


def test_answer_stream_and_chat_completions_send_the_stored_pages(
    gateway: tuple[PageSightClient, TestClient, IndexService], tmp_path: Path
) -> None:
    client, http, _ = gateway
    _trace_checked(client, client.answer(QUESTION, route="text"))

    *_, final = client.answer_stream(QUESTION, route="text")
    assert isinstance(final, AnswerResponse)
    _trace_checked(client, final)

    completion = http.post(
        "/v1/chat/completions",
        json={
            "model": "pagesight",
            "messages": [{"role": "user", "content": QUESTION}],
            "pagesight": {"route": "text"},
        },
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert completion.status_code == 200, completion.text
    _trace_checked(client, AnswerResponse.model_validate(completion.json()["pagesight"]))
