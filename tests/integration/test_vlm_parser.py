"""VLM page parsing against a scripted OpenAI-compatible server, on real eval pages.

Two real chart pages of ../shared/eval/pdfs: a born-digital paper page with two line charts
and a table (2310.05634v2.pdf p. 8, asked about as a chart), and a scanned slide with a bar
chart (ecommerceopportunityindia p. 12, asked "what multiple of the 2014 e-commerce sales was
achieved in 2018?"). The scripted server answers what a VLM such as Qwen2.5-VL would: the
elements of the page with boxes in thousandths of the image. The scanned slide goes through
the real ingestion path (child process, chunking, index); Tesseract reads it, being the faster
OCR engine here.
"""

from __future__ import annotations

import base64
import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from PIL import Image

from pagesight.core.errors import ErrorCode
from pagesight.core.ids import element_id
from pagesight.core.settings import ParseOptions, Settings, TesseractOptions, VlmOptions
from pagesight.core.types import BBox, ElementKind, JobState
from pagesight.ingestion.parse.blocks import RawBlock
from pagesight.ingestion.parse.vlm import (
    BOX_SCALE,
    PAGE_ELEMENTS_SCHEMA,
    OpenAiVlmEngine,
    VlmFailure,
    figure_coverage,
    parse_pages,
    select_vlm_pages,
)
from pagesight.ingestion.pipeline import DocumentParser
from pagesight.ingestion.render import RenderedPage
from pagesight.services.stack import LocalStack
from tests.conftest import extract_pages
from tests.openai_stub import Script, Step, scripted_server

pytestmark = pytest.mark.integration

MODEL = "qwen2.5-vl-7b-instruct"
PARSER = f"vlm:{MODEL}"
CHART_DOC, CHART_PAGE = "2310.05634v2.pdf", 8
SCAN_DOC, SCAN_PAGE = "ecommerceopportunityindia-141124010546-conversion-gate01_95.pdf", 12
DPI = 100  # page images sent in these tests: enough to read, quick to encode


def thousandths(rect: tuple[float, float, float, float], size: tuple[float, float]) -> list[int]:
    """A box in points as the VLM reports it: thousandths of the page image."""
    width, height = size
    x0, y0, x1, y1 = rect
    return [round(v * BOX_SCALE) for v in (x0 / width, y0 / height, x1 / width, y1 / height)]


def element(
    kind: str,
    box: list[int],
    text: str = "",
    caption: str = "",
    key_values: dict[str, str] | None = None,
) -> dict[str, Any]:
    pairs = [{"key": k, "value": v} for k, v in (key_values or {}).items()]
    return {"kind": kind, "box": box, "text": text, "caption": caption, "key_values": pairs}


def reply_step(elements: list[dict[str, Any]]) -> Step:
    return Step(content=json.dumps({"elements": elements}))


def page_size(pdf: Path) -> tuple[float, float]:
    with pymupdf.open(pdf) as doc:
        rect = doc[0].rect
        return rect.width, rect.height


def vlm_settings(tmp_path: Path, url: str, **vlm: Any) -> Settings:
    options = VlmOptions(base_url=url, model=MODEL, dpi=DPI, timeout_s=20, **vlm)
    return Settings(
        data_dir=tmp_path / "var", parse=ParseOptions(ocr=TesseractOptions(), vlm=options)
    )


def assert_inside(box: BBox | None, size: tuple[float, float]) -> None:
    assert box is not None
    assert 0 <= box.x0 < box.x1 <= size[0] + 1e-6 and 0 <= box.y0 < box.y1 <= size[1] + 1e-6


def sent_image(request: dict[str, Any]) -> Image.Image:
    """The page image a chat request carried, from its data URL."""
    parts = request["messages"][-1]["content"]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert len(urls) == 1 and urls[0].startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(urls[0].split(",", 1)[1])))


def closed_port_url() -> str:
    """A URL nothing listens on: connections are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture()
def chart_pdf(eval_dir: Path, tmp_path: Path) -> Path:
    return extract_pages(eval_dir / "pdfs" / CHART_DOC, [CHART_PAGE], tmp_path / "chart.pdf")


@pytest.fixture()
def scan_pdf(eval_dir: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    return extract_pages(eval_dir / "pdfs" / SCAN_DOC, [SCAN_PAGE], folder / "slide.pdf")


@pytest.fixture()
def server() -> Iterator[tuple[str, Script]]:
    with scripted_server() as running:
        yield running


# -- the chart page's VLM reply (2310.05634v2.pdf p. 8), boxes where the page prints them ----

FIGURE_4 = (70.0, 75.0, 290.0, 246.0)
FIGURE_5 = (306.0, 75.0, 525.0, 270.0)
TABLE_6 = (306.0, 285.0, 524.0, 361.0)
TABLE_6_MARKDOWN = (
    "| | Alignment | Human Avg. |\n|---|---|---|\n| ChatGPT(0.5) | 84.5 | 82.0 |\n"
    "| LLaMA-7B | 47.8 | 45.5 |\n| Vicuna-13B | 66.9 | 64.5 |"
)


def chart_page_reply(size: tuple[float, float]) -> list[dict[str, Any]]:
    return [
        element(
            "figure",
            thousandths(FIGURE_4, size),
            "Line chart of precision, recall and F1-Score as knowledge is removed.",
            "Figure 4: Precision, Recall, and F1-Score for [NA].",
            {
                "precision, one removed": "13.2",
                "precision, three removed": "25.0",
                "recall, one removed": "15.0",
                "F1_Score, three removed": "19.0",
            },
        ),
        element(
            "text",
            thousandths((70, 272, 291, 417), size),
            "From Figure 4, The recall is stable at about 15 regardless of the number of "
            "absent knowledge.",
        ),
        element("title", thousandths((71, 433, 180, 443), size), "5.3 Retrieval Analysis"),
        element(
            "figure",
            thousandths(FIGURE_5, size),
            "Line chart of citation metrics against retrieval accuracy.",
            "Figure 5: Citation evaluation (Micro) of generated texts using knowledge graphs "
            "with retrieval accuracy 100 (gold), 80, 60,40, and 20.",
            {"correctness, gold": "94.8", "recall, gold": "57.1", "correctness, 20": "74.2"},
        ),
        element(
            "table",
            thousandths(TABLE_6, size),
            TABLE_6_MARKDOWN,
            "Table 6: Result of Human Evaluation on text-citation alignment",
        ),
    ]


def test_chart_page_with_text_layer_gets_vlm_figures_and_table(
    chart_pdf: Path, tmp_path: Path, server: tuple[str, Script]
) -> None:
    url, script = server
    size = page_size(chart_pdf)
    script.responder = lambda request: reply_step(chart_page_reply(size))
    settings = vlm_settings(tmp_path, url, pages="figure-heavy")

    parsed = DocumentParser(settings).parse(chart_pdf)

    # The request: one page, its PNG as a data URL, PageSight's schema as a strict format.
    assert len(script.requests) == 1
    request = script.requests[0]
    assert request["model"] == MODEL
    image = sent_image(request)
    assert image.format == "PNG" and abs(image.width - size[0] * DPI / 72) <= 2
    response_format = request["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"] == PAGE_ELEMENTS_SCHEMA
    assert response_format["json_schema"]["strict"] is True

    # Complement: the VLM's charts and table replace the layout model's, text stays exact.
    assert not parsed.warnings
    figures = [e for e in parsed.elements if e.kind == ElementKind.FIGURE]
    tables = [e for e in parsed.elements if e.kind == ElementKind.TABLE]
    assert [f.parser for f in figures] == [PARSER, PARSER]
    assert "precision, three removed: 25.0" in figures[0].text
    assert (figures[0].caption or "").startswith("Figure 4: Precision, Recall")
    assert "recall, gold: 57.1" in figures[1].text
    assert (figures[1].caption or "").startswith("Figure 5: Citation evaluation")
    assert len(tables) == 1 and tables[0].parser == PARSER
    assert tables[0].text == TABLE_6_MARKDOWN
    assert tables[0].caption == "Table 6: Result of Human Evaluation on text-citation alignment"
    texts = [e for e in parsed.elements if e.kind in (ElementKind.TEXT, ElementKind.TITLE)]
    assert texts and all(e.parser == "text-layer" for e in texts)
    assert any(e.text.startswith("From Figure 4, The recall is stable") for e in texts)
    assert any(e.text == "5.3 Retrieval Analysis" for e in texts)
    assert parsed.pages[0].parser == "text-layer"
    # The charts' tick labels are said once, by the figures' key values, not as loose text.
    for figure in figures:
        assert figure.bbox is not None
        assert not any(
            t.bbox is not None and figure.bbox.intersection_area(t.bbox) >= 0.9 * t.bbox.area
            for t in texts
            if t.kind == ElementKind.TEXT
        )
    for e in parsed.elements:
        assert_inside(e.bbox, size)
    doc = parsed.document
    assert [e.element_id for e in parsed.elements] == [
        element_id(doc.doc_id, doc.version, 1, seq) for seq in range(len(parsed.elements))
    ]
    again = DocumentParser(settings).parse(chart_pdf)
    assert [(e.element_id, e.text) for e in again.elements] == [
        (e.element_id, e.text) for e in parsed.elements
    ]


# -- the scanned slide (image-only page): the VLM's elements replace the OCR elements --------

SLIDE_SIZE = (768.0, 432.0)


def slide_reply() -> list[dict[str, Any]]:
    def box(rect: tuple[float, float, float, float]) -> list[int]:
        return thousandths(rect, SLIDE_SIZE)

    drivers = [
        "Infrastructure Development",
        "Smartphone Penetration",
        "Payments",
        "Best Prices available online",
        "Convenience",
        "Value Prop for customers",
    ]
    return [
        element("title", box((12, 8, 470, 48)), "SHOW ME THE MONEY, HONEY!"),
        element(
            "figure",
            box((10, 95, 350, 375)),
            "Stacked bar chart of India's eCommerce sales by segment in 2014 and 2018.",
            "eCommerce Sales (In Billion $)",
            {
                "2014, Product eCommerce": "$3 Billion",
                "2014, Travel and Others": "$8 Billion",
                "2014, total": "$11 Billion",
                "2018, Product eCommerce": "$13 Billion",
                "2018, Travel and Others": "$30 Billion",
                "2018, total": "$43 Billion",
            },
        ),
        element(
            "table",
            box((480, 155, 760, 290)),
            "| Drivers of growth |\n|---|\n" + "\n".join(f"| {d} |" for d in drivers),
            "Drivers of growth",
        ),
        element("text", box((10, 395, 240, 410)), "Source: Nomura Research, November 2014"),
        element("text", box((600, 400, 765, 415)), "Source: Accel, KPMG Reports"),
        # What validation removes: a box wholly off the page, an element with no text.
        element("text", [1200, 1100, 1400, 1300], "a line off the page"),
        element("text", box((300, 10, 320, 20)), "   "),
    ]


def test_scanned_chart_page_is_read_by_the_vlm_and_indexed(
    scan_pdf: Path, tmp_path: Path, server: tuple[str, Script]
) -> None:
    url, script = server
    script.responder = lambda request: reply_step(slide_reply())
    with LocalStack(vlm_settings(tmp_path, url)) as stack:  # default profile: image-only
        job = stack.ingestor.ingest([stack.request(scan_pdf)])[0]
        assert job.state == JobState.READY and job.warnings == []
        page = stack.catalog.pages("default", job.doc_id)[0]
        payloads = [p.payload for p in stack.store.points_of_document("default", job.doc_id)]

    assert len(script.requests) == 1
    assert abs(sent_image(script.requests[0]).width - SLIDE_SIZE[0] * DPI / 72) <= 2
    assert not page.has_text_layer and page.parser == PARSER
    # Replace: every indexed chunk comes from the VLM, OCR lines are gone.
    assert payloads and all(p["parser"] == [PARSER] for p in payloads)
    text = "\n".join(str(p["text"]) for p in payloads)
    assert "2018, total: $43 Billion" in text and "2014, total: $11 Billion" in text
    assert "| Smartphone Penetration |" in text
    assert "a line off the page" not in text
    kinds = {k for p in payloads for k in p["kinds"]}
    assert {"figure", "table", "title"} <= kinds
    for p in payloads:
        for _page, box in p["bboxes"]:
            assert_inside(BBox.of(box), SLIDE_SIZE)


# -- failures: the page keeps what the text layer / OCR found, the job warns -----------------


def test_vlm_down_keeps_text_layer_elements_and_warns(chart_pdf: Path, tmp_path: Path) -> None:
    settings = vlm_settings(tmp_path, closed_port_url(), pages="all", max_retries=0)
    with LocalStack(settings) as stack:
        job = stack.ingestor.ingest([stack.request(chart_pdf)])[0]
        payloads = [p.payload for p in stack.store.points_of_document("default", job.doc_id)]
    assert job.state == JobState.READY and job.chunks > 0
    assert len(job.warnings) == 1 and job.warnings[0].startswith(f"{ErrorCode.VLM_FAILED}: ")
    assert "page 1 keeps its text-layer elements" in job.warnings[0]
    assert payloads and all(p["parser"] == ["text-layer"] for p in payloads)
    assert "Table 6" in "\n".join(str(p["text"]) for p in payloads)


def test_garbage_reply_keeps_ocr_elements_and_warns(
    scan_pdf: Path, tmp_path: Path, server: tuple[str, Script]
) -> None:
    url, script = server
    script.responder = lambda request: Step(content="Sorry, I cannot read this page.")
    with LocalStack(vlm_settings(tmp_path, url)) as stack:
        job = stack.ingestor.ingest([stack.request(scan_pdf)])[0]
        page = stack.catalog.pages("default", job.doc_id)[0]
        payloads = [p.payload for p in stack.store.points_of_document("default", job.doc_id)]
    assert len(script.requests) == 1  # a bad reply is not retried: same page, same answer
    assert job.state == JobState.READY
    assert len(job.warnings) == 1 and job.warnings[0].startswith(f"{ErrorCode.VLM_FAILED}: ")
    assert "page 1 keeps its OCR elements" in job.warnings[0]
    assert "not schema-valid" in job.warnings[0]
    assert page.parser == "tesseract"
    assert payloads and all(p["parser"] == ["tesseract"] for p in payloads)
    assert "MONEY" in "\n".join(str(p["text"]) for p in payloads)


# -- Docling's VlmPipeline against the same API (DocTags) ------------------------------------


def doctags_loc(rect: tuple[float, float, float, float], size: tuple[float, float]) -> str:
    """A DocTags location: four <loc_n> tokens on Docling's 0..500 grid."""
    x0, y0, x1, y1 = rect
    values = (x0 / size[0], y0 / size[1], x1 / size[0], y1 / size[1])
    return "".join(f"<loc_{round(v * 500)}>" for v in values)


def chart_page_doctags(size: tuple[float, float]) -> str:
    def loc(rect: tuple[float, float, float, float]) -> str:
        return doctags_loc(rect, size)

    return (
        "<doctag>"
        f"<chart>{loc(FIGURE_4)}<caption>{loc((78, 236, 283, 245))}"
        "Figure 4: Precision, Recall, and F1-Score for [NA].</caption></chart>"
        f"<text>{loc((70, 272, 291, 417))}From Figure 4, The recall is stable at about 15 "
        "regardless of the number of absent knowledge.</text>"
        f"<section_header_level_1>{loc((71, 433, 180, 443))}5.3 Retrieval Analysis"
        "</section_header_level_1>"
        f"<chart>{loc(FIGURE_5)}<caption>{loc((306, 236, 524, 269))}Figure 5: Citation "
        "evaluation (Micro) of generated texts</caption></chart>"
        f"<otsl>{loc(TABLE_6)}<ecel><ched>Alignment<ched>Human Avg.<nl>"
        "<rhed>ChatGPT(0.5)<fcel>84.5<fcel>82.0<nl><rhed>LLaMA-7B<fcel>47.8<fcel>45.5<nl>"
        "<rhed>Vicuna-13B<fcel>66.9<fcel>64.5<nl>"
        f"<caption>{loc((306, 362, 524, 380))}Table 6: Result of Human Evaluation on "
        "text-citation alignment</caption></otsl>"
        "</doctag>"
    )


def test_docling_vlm_pipeline_reads_the_chart_page(
    chart_pdf: Path, tmp_path: Path, server: tuple[str, Script]
) -> None:
    pytest.importorskip("docling.pipeline.vlm_pipeline")
    url, script = server
    size = page_size(chart_pdf)
    script.responder = lambda request: Step(content=chart_page_doctags(size))
    settings = vlm_settings(tmp_path, url, kind="docling", pages="figure-heavy")

    parsed = DocumentParser(settings).parse(chart_pdf)

    assert len(script.requests) == 1
    request = script.requests[0]
    assert request["model"] == MODEL
    assert abs(sent_image(request).width - size[0] * DPI / 72) <= 2
    assert not parsed.warnings
    figures = [e for e in parsed.elements if e.kind == ElementKind.FIGURE]
    tables = [e for e in parsed.elements if e.kind == ElementKind.TABLE]
    assert [f.parser for f in figures] == [PARSER, PARSER]
    assert (figures[0].caption or "").startswith("Figure 4: Precision, Recall")
    assert len(tables) == 1 and tables[0].parser == PARSER
    assert "| ChatGPT(0.5) | 84.5 | 82.0 |" in tables[0].text
    texts = [e for e in parsed.elements if e.kind == ElementKind.TEXT]
    assert texts and all(e.parser == "text-layer" for e in texts)
    for e in parsed.elements:
        assert_inside(e.bbox, size)
    # Docling's boxes land where DocTags put them (0..500 grid: within ~1.2 pt on this page).
    assert tables[0].bbox is not None
    assert all(abs(a - b) < 2.0 for a, b in zip(tables[0].bbox.as_tuple(), TABLE_6, strict=True))


def test_docling_engine_down_is_a_vlm_failure(tmp_path: Path) -> None:
    pytest.importorskip("docling.pipeline.vlm_pipeline")
    from pagesight.ingestion.parse.vlm import DoclingVlmEngine

    engine = DoclingVlmEngine(VlmOptions(base_url=closed_port_url(), model=MODEL, kind="docling"))
    page = RenderedPage(1, Image.new("RGB", (200, 100), "white"), 36.0, 400.0, 200.0)
    with pytest.raises(VlmFailure) as failure:
        engine.parse_page(page)
    assert failure.value.code == ErrorCode.VLM_FAILED and failure.value.server_down


# -- validation, selection and the down-server cut-off, without a document -------------------


def blank_page() -> RenderedPage:
    """A 400 x 200 pt page rendered at 36 dpi."""
    return RenderedPage(1, Image.new("RGB", (200, 100), "white"), 36.0, 400.0, 200.0)


def test_reply_boxes_are_clamped_or_dropped_and_text_normalised(
    server: tuple[str, Script],
) -> None:
    url, script = server
    script.then(
        reply_step(
            [
                # Overshoots the frame at the edges (a server that ignored the schema's bounds).
                {**element("text", [0, 0, 500, 100], "edge"), "box": [-20, -5, 500, 100]},
                element("text", [1100, 1100, 1300, 1200], "off the page"),
                element("text", [100, 100, 200, 200], "  "),
                element("equation", [100, 500, 600, 600], "$$ E = mc^2 $$"),
                element("figure", [600, 700, 200, 300], "", "Figure 1: Sales"),
                element("figure", [10, 10, 20, 20]),  # nothing to index it by
            ]
        )
    )
    engine = OpenAiVlmEngine(VlmOptions(base_url=url, model=MODEL))
    blocks = engine.parse_page(blank_page())
    assert [(b.kind, b.text, b.caption) for b in blocks] == [
        (ElementKind.TEXT, "edge", None),
        (ElementKind.EQUATION, "E = mc^2", None),
        (ElementKind.FIGURE, "", "Figure 1: Sales"),
    ]
    assert blocks[0].bbox == BBox(x0=0.0, y0=0.0, x1=200.0, y1=20.0)
    assert blocks[2].bbox == BBox(x0=80.0, y0=60.0, x1=240.0, y1=140.0)  # corners reordered
    assert all(b.parser == PARSER for b in blocks)


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"elements": [element("chart", [0, 0, 10, 10], "a chart")]}),
        json.dumps({"elements": [{"kind": "text", "box": [0, 0, 10], "text": "short box"}]}),
        json.dumps({"pages": []}),
        "not json at all",
    ],
    ids=["unknown-kind", "three-number-box", "no-elements-key", "not-json"],
)
def test_schema_invalid_reply_is_a_vlm_failure(content: str, server: tuple[str, Script]) -> None:
    url, script = server
    script.then(Step(content=content))
    engine = OpenAiVlmEngine(VlmOptions(base_url=url, model=MODEL))
    with pytest.raises(VlmFailure, match="not schema-valid") as failure:
        engine.parse_page(blank_page())
    assert failure.value.code == ErrorCode.VLM_FAILED and not failure.value.server_down


def test_fenced_json_from_a_server_that_ignored_the_schema_is_used(
    server: tuple[str, Script],
) -> None:
    url, script = server
    body = json.dumps({"elements": [element("title", [0, 0, 500, 100], "Results")]})
    script.then(Step(content=f"```json\n{body}\n```"))
    engine = OpenAiVlmEngine(VlmOptions(base_url=url, model=MODEL))
    assert [b.text for b in engine.parse_page(blank_page())] == ["Results"]


class _DownEngine:
    name = PARSER

    def __init__(self) -> None:
        self.calls: list[int] = []

    def parse_page(self, page: RenderedPage) -> list[RawBlock]:
        self.calls.append(page.page_number)
        raise VlmFailure("cannot reach the VLM server", server_down=True)

    def close(self) -> None:
        pass


def test_a_down_server_is_not_asked_for_every_page() -> None:
    def render(n: int) -> RenderedPage:
        return RenderedPage(n, Image.new("RGB", (10, 10)), 72.0, 10.0, 10.0)

    engine = _DownEngine()
    outcomes = parse_pages(engine, [1, 2, 3, 4], render, concurrency=1)
    assert engine.calls == [1]
    assert all(isinstance(outcomes[n], VlmFailure) for n in (1, 2, 3, 4))
    assert "not sent" in str(outcomes[4])


def test_page_profiles_and_cap() -> None:
    coverage = {1: 0.0, 2: 0.12, 3: 0.01, 4: 0.3, 5: 0.0}.__getitem__
    pages, image_only = [1, 2, 3, 4, 5], {5}

    def select(**options: Any) -> tuple[list[int], list[int]]:
        vlm = VlmOptions(base_url="http://vlm/v1", model=MODEL, **options)
        return select_vlm_pages(vlm, pages, image_only, coverage)

    assert select(pages="image-only") == ([5], [])
    assert select(pages="figure-heavy") == ([2, 4, 5], [])
    assert select(pages="all") == ([1, 2, 3, 4, 5], [])
    # Under the cap, image-only pages go first: without the VLM they only have OCR text.
    assert select(pages="figure-heavy", max_pages=2) == ([2, 5], [4])


def test_figure_coverage_finds_chart_pages_not_table_rules(eval_dir: Path) -> None:
    pdfs = eval_dir / "pdfs"
    with pymupdf.open(pdfs / CHART_DOC) as paper, pymupdf.open(pdfs / "3M_2018_10K.pdf") as tenk:
        assert figure_coverage(paper[CHART_PAGE - 1]) >= VlmOptions().figure_min_coverage
        assert figure_coverage(paper[0]) >= VlmOptions().figure_min_coverage  # Figure 1
        assert figure_coverage(tenk[59]) == 0.0  # a table with shaded rows
        assert figure_coverage(tenk[29]) == 0.0  # text only
