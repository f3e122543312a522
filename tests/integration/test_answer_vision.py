"""Page images in answers, end to end over the real index service and gateway, the model a
scripted OpenAI-compatible server: ``/v1/answer``, its stream and ``/v1/chat/completions``
send the stored page image when ``PAGESIGHT_LLM__VISION`` says so, image citations are
checked like text ones, traces keep image references and never the image, and a model that
refuses images is asked again with text alone.

The service, document and scripted server are test_answer_stream.py's fixtures (built once more
for this module); vision is switched on per test on the service's pipeline, where the setting
puts it.
"""

# ruff: noqa: F811  # the fixtures imported from test_answer_stream are the tests' parameters

from __future__ import annotations

import base64
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from pagesight.core.types import AnswerResponse, AnswerToken
from pagesight.services.index_service import IndexService
from tests.integration.test_answer_stream import (  # noqa: F401  # fixtures pytest finds by name
    FACT,
    KEY_A,
    KEY_B,
    QUESTION,
    _client,
    doc_id,
    http,
    llm,
    script,
    served,
    service,
)
from tests.openai_stub import Script, Step

pytestmark = pytest.mark.integration

CHART_QUESTION = "What does the chart of parcels moved by Northwind Logistics show?"


@pytest.fixture()
def vision(service: IndexService) -> Iterator[None]:
    """The service's answers with ``PAGESIGHT_LLM__VISION=auto`` (set back afterwards)."""
    pipeline = service.query_service.answers
    assert pipeline is not None and pipeline.images is not None
    before = pipeline.vision
    pipeline.vision = "auto"
    yield
    pipeline.vision = before


def _image_block(request: dict[str, Any]) -> int:
    """The number of the (first) image block in a chat request the pipeline sent."""
    parts = _documents(request)
    assert isinstance(parts, list), "no content parts: the request carried no image"
    texts = [p["text"] for p in parts if p["type"] == "text"]
    numbers = [int(n) for text in texts for n in re.findall(r"<document n=(\d+)>", text)]
    for text in texts:
        match = re.search(r"<document n=(\d+)>\n\[[^\]]*image of", text)
        if match:
            return int(match.group(1))
    raise AssertionError(f"no image block among {numbers}")


def _documents(request: dict[str, Any]) -> str | list[dict[str, Any]]:
    """The content of the request's first user message: the numbered documents (a correction
    turn may follow it)."""
    content: str | list[dict[str, Any]] = request["messages"][1]["content"]
    return content


def _images(request: dict[str, Any]) -> list[Image.Image]:
    parts = _documents(request)
    if isinstance(parts, str):
        return []
    found = []
    for part in parts:
        if part["type"] == "image_url":
            url = part["image_url"]["url"]
            assert url.startswith("data:image/jpeg;base64,")
            found.append(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    return found


def _cite_the_image(request: dict[str, Any]) -> Step:
    """A structured reply citing the request's image block, and a block never given (99)."""
    n = _image_block(request)
    body = {
        "sentences": [
            {"text": "The chart shows 4.2 million parcels in 2024.", "citations": [n]},
            {"text": "It also shows the Moon.", "citations": [99]},
        ],
        "abstain": False,
        "sufficient": [n],
    }
    return Step(content=json.dumps(body))


def test_answer_sends_the_page_image_and_checks_its_citation(
    http: TestClient, script: Script, doc_id: str, vision: None
) -> None:
    script.responder = _cite_the_image
    client = _client(http)
    answer = client.answer(CHART_QUESTION, route="text")
    assert not answer.abstained and answer.answer == "The chart shows 4.2 million parcels in 2024."
    (citation,) = answer.citations
    assert citation.kind == "image" and (citation.doc_id, citation.page_number) == (doc_id, 1)
    assert citation.page_image_url.startswith(f"/v1/documents/{doc_id}/pages/1/image")
    assert citation.quote == ""

    first = script.requests[0]
    (image,) = _images(first)
    assert image.width % 28 == 0 and image.height % 28 == 0
    assert image.width * image.height <= 1024 * 28 * 28
    assert "images of a page" in first["messages"][0]["content"]
    assert first["response_format"]["type"] == "json_schema"
    assert len(script.requests) == 2  # the invented block 99 earned one regeneration

    trace = client.trace(answer.trace_id)
    assert trace.answer is not None and trace.answer.vision is not None
    vision_trace = trace.answer.vision
    assert vision_trace.sent and "chart" in vision_trace.reason
    ((ref_doc, ref_page, ref_size),) = [
        (i.doc_id, i.page_number, (i.width, i.height)) for i in vision_trace.images
    ]
    assert (ref_doc, ref_page, ref_size) == (doc_id, 1, image.size)
    assert "data:image" not in trace.model_dump_json()
    # the image route the citation links to serves that page to the same caller
    http.headers.clear()
    page = http.get(citation.page_image_url, headers={"Authorization": f"Bearer {KEY_A}"})
    assert page.status_code == 200 and page.headers["content-type"] == "image/png"


def test_a_question_about_text_sends_no_image(
    http: TestClient, script: Script, vision: None
) -> None:
    script.then(Step(content=json.dumps({"sentences": [{"text": FACT, "citations": [1]}],
                                         "abstain": False})))  # fmt: skip
    answer = _client(http).answer(QUESTION, route="text")
    assert answer.answer == FACT and _images(script.requests[0]) == []
    trace = _client(http).trace(answer.trace_id).answer
    assert trace is not None and trace.vision is not None and not trace.vision.sent


def test_a_model_refusing_images_answers_from_text(
    http: TestClient, script: Script, vision: None
) -> None:
    refusal = {"error": {"message": "this model does not accept image inputs", "code": 400}}
    reply = json.dumps({"sentences": [{"text": FACT, "citations": [1]}], "abstain": False})
    script.then(Step(status=400, body=refusal), Step(content=reply))
    client = _client(http)
    answer = client.answer(CHART_QUESTION, route="text")
    assert answer.answer == FACT and answer.citations[0].kind == "text"
    first, second = script.requests
    assert len(_images(first)) == 1 and _images(second) == []
    trace = client.trace(answer.trace_id).answer
    assert trace is not None and trace.vision is not None and not trace.vision.sent
    assert trace.vision.fallback is not None and "image inputs" in trace.vision.fallback


def test_streamed_answer_with_the_page_image(
    http: TestClient, script: Script, doc_id: str, vision: None
) -> None:
    def prose(request: dict[str, Any]) -> Step:
        return Step(chunks=[f"The chart shows 4.2 million parcels [{_image_block(request)}]."])

    script.responder = prose
    *tokens, final = _client(http).answer_stream(CHART_QUESTION, route="text")
    assert all(isinstance(t, AnswerToken) for t in tokens)
    assert isinstance(final, AnswerResponse) and not final.abstained
    assert [c.kind for c in final.citations] == ["image"]
    (asked,) = script.requests
    assert asked["stream"] is True and len(_images(asked)) == 1


def test_openai_chat_completion_with_the_page_image(
    served: str, script: Script, vision: None
) -> None:
    script.responder = _cite_the_image
    with openai.OpenAI(base_url=f"{served}/v1", api_key=KEY_A, max_retries=0) as client:
        completion = client.chat.completions.create(
            model="pagesight",
            messages=[{"role": "user", "content": CHART_QUESTION}],
            extra_body={"pagesight": {"route": "text"}},
        )
    assert completion.model_extra is not None
    answer = AnswerResponse.model_validate(completion.model_extra["pagesight"])
    assert [c.kind for c in answer.citations] == ["image"]
    assert "Moon" not in json.dumps(completion.model_dump())
    assert len(_images(script.requests[0])) == 1


def test_another_tenant_gets_no_image(http: TestClient, script: Script, vision: None) -> None:
    """Tenant B reads no document: nothing is retrieved, no model call, no image read."""
    answer = _client(http, KEY_B).answer(CHART_QUESTION, route="text")
    assert answer.abstained and script.requests == []
