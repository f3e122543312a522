"""Page images in the answer context (pagesight/query/vision.py, AnswerPipeline with ``vision``):
which questions get images, how pages are sized, cropped and budgeted, how image blocks are
numbered, cited and checked, and the text-only fallback when the model fails on images. The image
source is an in-memory fake; the LLM is the scripted chat model."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from PIL import Image

from pagesight.api.models import AnswerRequest
from pagesight.core.errors import ErrorCode
from pagesight.core.settings import AnswerOptions, ImageContextOptions
from pagesight.core.types import AccessFilter, BBox, Passage, RetrievalTrace, RouteName, RouteTrace
from pagesight.models.llm import LlmError
from pagesight.models.reranker import FusedScoreRanker
from pagesight.query.answer import AnswerPipeline
from pagesight.query.context import approx_tokens, build_context
from pagesight.query.generation import build_messages, build_stream_messages
from pagesight.query.vision import (
    crop_box,
    fit_size,
    image_block_id,
    image_tokens,
    page_image_blocks,
    vision_wanted,
)
from tests.fakes import ScriptedChat, TableSearch

ACCESS = AccessFilter(tenant="acme", principals=["alice"])
A4 = (595.0, 842.0)  # points
TABLE_BOX = BBox(x0=60.0, y0=500.0, x1=540.0, y1=620.0)

CHART = Passage(
    chunk_id="c-chart",
    doc_id="report",
    page_number=3,
    text="Figure 2: Revenue by region, 2021-2023.",
    score=0.9,
    bboxes=[TABLE_BOX],
    title="Annual Report",
)
NOTES = Passage(
    chunk_id="c-notes", doc_id="report", page_number=5, text="Notes on revenue.", score=0.6
)
SAME_PAGE = Passage(
    chunk_id="c-chart-2", doc_id="report", page_number=3, text="Europe grew most.", score=0.5
)


class Pages:
    """An image source of blank A4 pages rendered at ``dpi``; ``hidden`` pages read as None,
    as a document the caller may not read does."""

    def __init__(self, dpi: int = 144, hidden: frozenset[tuple[str, int]] = frozenset()) -> None:
        self.dpi = dpi
        self.hidden = hidden
        self.asked: list[tuple[str, str, int]] = []

    def page_image(
        self, access: AccessFilter, doc_id: str, page_number: int
    ) -> tuple[Image.Image, tuple[float, float]] | None:
        self.asked.append((access.tenant, doc_id, page_number))
        if (doc_id, page_number) in self.hidden:
            return None
        size = (round(A4[0] * self.dpi / 72), round(A4[1] * self.dpi / 72))
        return Image.new("RGB", size, (250, 250, 250)), A4


def reply(*sentences: tuple[str, list[int]], sufficient: list[int] | None = None) -> Any:
    body: dict[str, Any] = {
        "sentences": [{"text": t, "citations": c} for t, c in sentences],
        "abstain": False,
    }
    if sufficient is not None:
        body["sufficient"] = sufficient
    return body


def pipeline(
    llm: ScriptedChat,
    vision: Any = "always",
    source: Pages | None = None,
    passages: tuple[Passage, ...] = (CHART, NOTES),
    **options: Any,
) -> AnswerPipeline:
    return AnswerPipeline(
        TableSearch(default=list(passages)),
        FusedScoreRanker(),
        llm,
        AnswerOptions(abstain_threshold=0.0, **options),
        vision=vision,
        images=source if source is not None else Pages(),
    )


def run(p: AnswerPipeline, query: str = "What does the chart show?", **request: Any) -> Any:
    return p.run(AnswerRequest(query=query, **request), ACCESS, "trace-v")


def image_parts(llm: ScriptedChat, call: int = 0) -> list[dict[str, Any]]:
    user = llm.calls[call]["messages"][-1].content
    return [p for p in user if p["type"] == "image_url"] if isinstance(user, list) else []


def decoded(part: dict[str, Any]) -> Image.Image:
    url = part["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


# -- when images are wanted --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "wanted"),
    [
        ("What does the bar chart on page 4 show?", True),
        ("Which colour is the logo?", True),
        ("In the scanned form, who signed?", True),
        ("売上高のグラフはどうなっていますか", True),
        ("図3の地図に示された工場はどこですか", True),
        ("この施策の意図と特色は何ですか", False),
        ("What was total revenue in 2023?", False),
        ("How many employees did the company have?", False),
    ],
)
def test_auto_wants_images_for_questions_about_what_a_page_shows(query: str, wanted: bool) -> None:
    assert vision_wanted("auto", query, None)[0] is wanted


def test_auto_wants_images_when_the_visual_route_found_pages() -> None:
    def trace(route: RouteTrace) -> RetrievalTrace:
        return RetrievalTrace(
            trace_id="t", query="q", requested_route=RouteName.AUTO, route=RouteName.AUTO,
            routes=[route],
        )  # fmt: skip

    found = RouteTrace(route="visual", weight=1.0, candidates=[("p1", 0.5)])
    skipped = RouteTrace(route="visual", weight=1.0, skipped="no page model")
    assert vision_wanted("auto", "total revenue", trace(found)) == (
        True,
        "the visual route found pages",
    )
    assert vision_wanted("auto", "total revenue", trace(skipped))[0] is False
    assert vision_wanted("off", "the chart", trace(found)) == (False, "vision is off")
    assert vision_wanted("always", "total revenue", None)[0] is True


# -- sizes, tokens, crops ----------------------------------------------------------------------


@pytest.mark.parametrize(("width", "height"), [(1190, 1684), (3000, 200), (50, 50), (28, 5000)])
def test_fit_size_is_whole_tiles_within_the_pixel_limit(width: int, height: int) -> None:
    limit = 256 * 28 * 28
    w, h = fit_size(width, height, limit, 28)
    assert w % 28 == 0 and h % 28 == 0 and w * h <= limit and w >= 28 and h >= 28
    assert w <= max(28, width) and h <= max(28, height)  # never scaled up past a tile
    if width * height > 4 * limit:  # a large page keeps its aspect ratio to within a tile
        assert abs(w / h - width / height) < 0.15 * width / height


def test_image_tokens_count_tiles_and_markers() -> None:
    assert image_tokens(28 * 10, 28 * 20, 28) == 202
    assert image_tokens(29, 28, 28) == 4


def test_crop_box_pads_and_clips_and_gives_up_on_most_of_the_page() -> None:
    box = crop_box(A4, [TABLE_BOX], 0.5)
    assert box is not None
    assert (box.x0, box.y0, box.x1, box.y1) == pytest.approx((36.2, 466.32, 563.8, 653.68))
    edge = crop_box(A4, [BBox(x0=400, y0=10, x1=590, y1=100)], 0.5)  # clipped at the page edge
    assert edge is not None and (edge.x1, edge.y0) == (595.0, 0.0)
    assert crop_box(A4, [], 0.5) is None
    assert crop_box(A4, [BBox(x0=0, y0=0, x1=590, y1=700)], 0.5) is None


def test_large_pages_are_cropped_to_their_evidence_and_small_ones_sent_whole() -> None:
    options = ImageContextOptions(max_pixels=256 * 28 * 28, min_pixels=4 * 28 * 28)
    big = page_image_blocks([CHART], Pages(dpi=144), ACCESS, options, 10_000, approx_tokens)
    small = page_image_blocks([CHART], Pages(dpi=36), ACCESS, options, 10_000, approx_tokens)
    assert big[0].bboxes and big[0].image is not None and big[0].image.box == big[0].bboxes[0]
    assert big[0].image.width > big[0].image.height  # the wide table band, not the tall page
    assert small[0].bboxes == [] and small[0].image is not None and small[0].image.box is None
    assert big[0].chunk_id == image_block_id("report", 3) and big[0].text == ""


def test_image_blocks_stay_within_their_budget_and_limits() -> None:
    options = ImageContextOptions(max_images=2, max_pixels=256 * 28 * 28, min_pixels=16 * 28 * 28)
    third = Passage(chunk_id="c-x", doc_id="other", page_number=1, text="x", score=0.1)
    passages = [CHART, SAME_PAGE, NOTES, third]
    blocks = page_image_blocks(passages, Pages(), ACCESS, options, 10_000, approx_tokens)
    assert [(b.doc_id, b.page_number) for b in blocks] == [("report", 3), ("report", 5)]
    tight = page_image_blocks(passages, Pages(), ACCESS, options, 300, approx_tokens)
    spent = sum(b.image.tokens for b in tight if b.image is not None)
    assert len(tight) == 1 and spent <= 300  # a second image would be below min_pixels
    assert page_image_blocks(passages, Pages(), ACCESS, options, 20, approx_tokens) == []
    hidden = Pages(hidden=frozenset({("report", 3)}))
    blocks = page_image_blocks(passages, hidden, ACCESS, options, 10_000, approx_tokens)
    assert [b.page_number for b in blocks] == [5, 1]


# -- the pipeline ------------------------------------------------------------------------------


def test_image_blocks_follow_the_text_blocks_and_are_cited_and_checked() -> None:
    """Two text blocks (1, 2), then the two pages as images (3, 4); the sentence citing image
    block 3 keeps it as an image citation; the one citing block 7 (never given) is withheld."""
    llm = ScriptedChat.in_order(
        reply(("Europe grew most.", [3]), ("It doubled.", [7])),
        reply(("Europe grew most.", [3]), ("It doubled.", [7])),
    )
    answered = run(pipeline(llm, context_budget_tokens=8000))
    response, trace = answered.response, answered.trace.answer
    assert [s.text for s in response.sentences] == ["Europe grew most."]
    # block 3 is the answer's first (only) citation: numbered 1, by first appearance
    assert [s.citations for s in response.sentences] == [[1]]
    (citation,) = response.citations
    assert (citation.n, citation.kind, citation.doc_id, citation.page_number) == (
        1, "image", "report", 3,
    )  # fmt: skip
    assert citation.quote == "" and citation.chunk_id == image_block_id("report", 3)
    assert citation.page_image_url.startswith("/v1/documents/report/pages/3/image")
    assert trace.vision is not None and trace.vision.sent
    assert [(i.n, i.page_number) for i in trace.vision.images] == [(3, 3), (4, 5)]
    assert trace.context[2:] == [image_block_id("report", 3), image_block_id("report", 5)]
    assert "data:image" not in answered.trace.model_dump_json()  # never the image itself

    parts = llm.calls[0]["messages"][-1].content
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "image_url", "text"]
    assert "<document n=1>" in parts[0]["text"] and "<document n=3>" in parts[0]["text"]
    assert parts[2]["text"].startswith("\n</document>") and "<document n=4>" in parts[2]["text"]
    assert "Question: What does the chart show?" in parts[-1]["text"]
    assert "images of a page" in llm.calls[0]["messages"][0].content
    for part, ref in zip(image_parts(llm), trace.vision.images, strict=True):
        assert decoded(part).size == (ref.width, ref.height)
        assert ref.width * ref.height <= ImageContextOptions().max_pixels


def test_images_and_text_share_the_budget_with_the_reply_reserved() -> None:
    llm = ScriptedChat.in_order(reply(("Europe grew most.", [1])))
    options = {"context_budget_tokens": 1200, "reserve_output_tokens": 200}
    trace = run(pipeline(llm, **options)).trace.answer
    assert trace.vision is not None
    image_cost = sum(i.tokens for i in trace.vision.images)
    assert 0 < image_cost <= (1200 - 200) // 2
    assert trace.context_tokens <= 1200 - 200


def test_vision_off_and_auto_without_reason_send_text_only() -> None:
    for vision, query in (("off", "What does the chart show?"), ("auto", "What was revenue?")):
        llm = ScriptedChat.in_order(reply(("Revenue by region.", [1])))
        source = Pages()
        trace = run(pipeline(llm, vision, source), query).trace.answer
        assert isinstance(llm.calls[0]["messages"][-1].content, str)
        assert source.asked == [] and trace.vision is not None and not trace.vision.sent


def test_without_an_llm_no_image_is_read() -> None:
    source = Pages()
    p = AnswerPipeline(
        TableSearch(default=[CHART]), FusedScoreRanker(), None, vision="always", images=source
    )
    answered = p.run(AnswerRequest(query="revenue by region chart"), ACCESS, "t")
    assert answered.response.mode == "extractive" and source.asked == []
    assert answered.trace.answer is not None and answered.trace.answer.vision is None


def test_a_model_failing_on_images_is_asked_again_with_text_only() -> None:
    refused = LlmError(ErrorCode.INVALID_REQUEST, "this model does not support images", status=400)
    llm = ScriptedChat.in_order(refused, reply(("Revenue by region.", [1])))
    answered = run(pipeline(llm))
    assert answered.response.answer == "Revenue by region." and not answered.response.abstained
    trace = answered.trace.answer
    assert trace.vision is not None and not trace.vision.sent
    assert trace.vision.fallback == "INVALID_REQUEST: this model does not support images"
    assert len(image_parts(llm, 0)) == 2 and image_parts(llm, 1) == []
    assert trace.context == ["c-chart", "c-notes"]


def test_a_failure_without_images_is_not_retried() -> None:
    down = LlmError(ErrorCode.UNAVAILABLE, "server down", status=503)
    llm = ScriptedChat.in_order(down)
    with pytest.raises(LlmError):
        run(pipeline(llm, vision="off"))
    assert len(llm.calls) == 1


def test_strict_abstains_when_no_block_image_or_text_is_sufficient() -> None:
    none = ScriptedChat.in_order(reply(("Europe grew most.", [3]), sufficient=[]))
    answered = run(pipeline(none, context_budget_tokens=8000), policy="strict")
    assert answered.response.abstained
    assert answered.response.reason == (
        "strict policy: the model marked no document as containing the answer"
    )
    image = ScriptedChat.in_order(reply(("Europe grew most.", [3]), sufficient=[3]))
    answered = run(pipeline(image, context_budget_tokens=8000), policy="strict")
    assert not answered.response.abstained and answered.trace.answer.sufficient == [3]


def test_streamed_answers_carry_the_images_too() -> None:
    class Streaming(ScriptedChat):
        def stream(self, messages: Any, **_: Any) -> Any:
            self.calls.append({"messages": messages})
            yield "Europe grew most [3]."

    llm = Streaming(lambda *_: None)
    p = pipeline(llm, context_budget_tokens=8000)
    *tokens, final = p.stream(AnswerRequest(query="the chart?"), ACCESS, "t")
    assert [t.text for t in tokens] == ["Europe grew most [3]."]
    assert final.response.citations[0].kind == "image"
    assert len(image_parts(llm)) == 2


def test_message_builders_without_images_are_plain_text() -> None:
    p = pipeline(ScriptedChat.in_order(), vision="off")
    assert p.vision == "off"
    blocks = build_context([CHART], 3000, 512)
    for build in (build_messages, build_stream_messages):
        system, user = build("q", blocks, 3)
        assert isinstance(user.content, str) and "images of a page" not in str(system.content)
