"""Page elements read by a vision-language model (VLM) behind an OpenAI-compatible API.

A text layer or OCR gets the words of a page but not what its pictures say: a chart's text
layer is a scatter of tick labels, a scan's OCR loses the rows and columns of its tables, an
equation's glyphs lose their structure. A VLM that sees the page image can say what a chart
shows (its caption and key values), write a table as markdown and an equation as LaTeX. It is
also slow, remote and sometimes wrong, so it is an addition to the text-layer/OCR path, never a
replacement of it: the pipeline runs the VLM on the pages a profile selects *after* that path,
and a page whose VLM call fails keeps what the path found.

Two engines with one contract, ``parse_page(RenderedPage) -> list[RawBlock]``:

* :class:`OpenAiVlmEngine` sends the page PNG as a data URL (OpenAI image input, which vLLM
  serves for Qwen2.5-VL and similar) and asks for PageSight's own JSON schema
  (:data:`PAGE_ELEMENTS_SCHEMA`): elements with a kind, a box in thousandths of the image, the
  text (markdown for tables, LaTeX for equations) and, for tables and figures, a caption and
  key values. vLLM enforces the schema with guided decoding; the reply is still validated here.
* :class:`DoclingVlmEngine` runs Docling's ``VlmPipeline`` with ``ApiVlmOptions`` against the
  same API (one POST per page, the page PNG as a data URL) and reads DocTags, the output of
  models trained for Docling (granite-docling, SmolDocling). Its ``DoclingDocument`` is mapped
  by :func:`pagesight.ingestion.parse.docling_formats.docling_to_parsed`, like every Docling result
  here.

Both return :class:`RawBlock` lists with ``parser = "vlm:<model>"``, so VLM pages go through the
same :class:`~pagesight.ingestion.parse.blocks.ElementAssembler` as every other page (deterministic
ids, section paths, captions) and are indexed like any other parser's elements.

Every failure is a :class:`VlmFailure` (``VLM_FAILED``, stage ``vlm``): the server is down or
timed out, the reply is not schema-valid JSON, or nothing usable is left after validation
(boxes outside the page, empty elements). The caller turns it into a page warning; the
document does not fail.

Docling is imported inside :class:`DoclingVlmEngine` only: it costs seconds to import and the
default engine does not need it.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import threading
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import LlmOptions, VlmOptions
from pagesight.core.types import ATOMIC_KINDS, BBox, Document, ElementKind
from pagesight.ingestion.parse.blocks import RawBlock

if TYPE_CHECKING:
    import pymupdf
    from docling.pipeline.vlm_pipeline import VlmPipeline
    from PIL import Image

    from pagesight.ingestion.render import RenderedPage
    from pagesight.models.llm import OpenAiChatClient

log = logging.getLogger(__name__)

#: ``Element.parser`` / ``Page.parser`` of VLM output is this prefix and the served model name.
VLM_PARSER_PREFIX = "vlm:"

#: Boxes come back in thousandths of the image width and height (Qwen2-VL's grounding frame),
#: whatever the resolution sent: a model cannot be trusted to know the pixel size it saw.
BOX_SCALE = 1000

#: A block this much inside a VLM table/figure is one of its cells or labels (complement mode).
_INSIDE_SHARE = 0.9
#: A VLM atomic block overlapping a layout atomic block this much (of the smaller) replaces it.
_SAME_REGION_SHARE = 0.5
#: A VLM box over more than this share of the page did not box a figure but the page: it never
#: removes text-layer blocks.
_MAX_SWALLOW_SHARE = 0.5
#: figure-heavy test: graphics smaller than this on either side (points) are icons and rules.
_FIGURE_MIN_SIDE_PT = 72.0


def vlm_parser_name(model: str) -> str:
    return f"{VLM_PARSER_PREFIX}{model}"


class VlmFailure(PageSightError):
    """The VLM gave nothing usable for a page (``VLM_FAILED`` at stage ``vlm``).

    ``server_down`` says the server itself is unreachable or timing out (not this page's
    reply): the caller then stops sending the document's other pages instead of waiting out
    the same failure on each of them.
    """

    def __init__(self, message: str, *, server_down: bool = False) -> None:
        super().__init__(ErrorCode.VLM_FAILED, Stage.VLM, message)
        self.server_down = server_down

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_failure, (self.message, self.server_down))


def _rebuild_failure(message: str, server_down: bool) -> VlmFailure:
    return VlmFailure(message, server_down=server_down)


class VlmPageEngine(Protocol):
    """Reads one rendered page into blocks in PDF points; raises :class:`VlmFailure`."""

    #: ``"vlm:<model>"``: recorded on every block it returns.
    name: str

    def parse_page(self, page: RenderedPage) -> list[RawBlock]: ...

    def close(self) -> None: ...


def build_vlm_engine(options: VlmOptions) -> VlmPageEngine:
    """The engine ``options.kind`` names (construction is cheap: nothing connects yet)."""
    if not options.active:
        raise VlmFailure("no VLM is configured (set parse.vlm.base_url)")
    if options.kind == "docling":
        return DoclingVlmEngine(options)
    return OpenAiVlmEngine(options)


# --------------------------------------------------------------------------------------------
# The reply schema (OpenAiVlmEngine).

#: Kinds the model may use: exactly PageSight's element kinds, so nothing needs mapping.
VLM_KINDS = [kind.value for kind in ElementKind]

_KEY_VALUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
    "required": ["key", "value"],
    "additionalProperties": False,
}

_ELEMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": VLM_KINDS},
        # Bounded integers: guided decoding cannot run away with digits (STACK-FACTS, vLLM).
        "box": {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": BOX_SCALE},
            "minItems": 4,
            "maxItems": 4,
        },
        "text": {"type": "string"},
        "caption": {"type": "string"},
        "key_values": {"type": "array", "items": _KEY_VALUE_SCHEMA},
    },
    # Strict structured outputs (OpenAI, vLLM) want every property required and no others.
    "required": ["kind", "box", "text", "caption", "key_values"],
    "additionalProperties": False,
}

#: What :class:`OpenAiVlmEngine` asks for with ``response_format`` (strict JSON schema).
PAGE_ELEMENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"elements": {"type": "array", "items": _ELEMENT_SCHEMA}},
    "required": ["elements"],
    "additionalProperties": False,
}

SYSTEM_PROMPT = f"""\
You read one page image of a document and return its content as JSON, element by element, in \
reading order. Element kinds:
- title: a heading; text: a paragraph; list: a list item; code: program code;
- table: the whole table as a GitHub markdown table, header row first, every cell transcribed;
- figure: a chart, diagram or photo. text: one sentence on what it shows; key_values: the data \
it shows, one pair per value, e.g. {{"key": "Unfavorable, 2020", "value": "73%"}};
- equation: the formula in LaTeX, without $ delimiters;
- caption: a caption that belongs to no table or figure.
A table's or figure's title or caption goes in its "caption" field, not in an element of its \
own; other elements have an empty caption and no key_values.
box: [x0, y0, x1, y1] around the element, in thousandths of the image width and height \
(0 to {BOX_SCALE}, origin top left).
Transcribe text exactly as printed; never invent content. Leave out running headers, footers \
and page numbers."""

USER_PROMPT = "Return the elements of this page."


class VlmKeyValue(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    value: str


class VlmReplyElement(BaseModel):
    """One element as the schema describes it. Numbers in ``box`` may be floats: a server that
    ignored the schema's integer type still gave a usable box; the kind, however, must be one
    of ours, since guessing what an unknown kind meant would index garbage."""

    model_config = ConfigDict(extra="forbid")

    kind: ElementKind
    box: Annotated[list[float], Field(min_length=4, max_length=4)]
    text: str
    caption: str = ""
    key_values: list[VlmKeyValue] = Field(default_factory=list)


class VlmReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    elements: list[VlmReplyElement]


def box_to_points(box: list[float], width_pt: float, height_pt: float) -> BBox | None:
    """A 0..1000 box as PDF points; clamped into the page, None when nothing of it is inside.

    Models overshoot the frame by a few units at page edges (clamping keeps those), and a box
    wholly outside the page (or of zero area) says the model did not locate anything real.
    """
    x0, y0, x1, y1 = (min(max(float(v), 0.0), float(BOX_SCALE)) for v in box)
    x0, x1 = sorted((x0, x1))
    y0, y1 = sorted((y0, y1))
    if x1 - x0 <= 0 or y1 - y0 <= 0:
        return None
    sx, sy = width_pt / BOX_SCALE, height_pt / BOX_SCALE
    return BBox(x0=x0 * sx, y0=y0 * sy, x1=x1 * sx, y1=y1 * sy)


_MATH_DELIMITERS = re.compile(r"^\s*(?:\$\$?|\\\[|\\\()\s*(.*?)\s*(?:\$\$?|\\\]|\\\))\s*$", re.S)


def _latex(text: str) -> str:
    """The formula without the $...$ / \\[...\\] delimiters models add despite the prompt."""
    match = _MATH_DELIMITERS.match(text)
    return (match.group(1) if match else text).strip()


def reply_blocks(reply: VlmReply, width_pt: float, height_pt: float, parser: str) -> list[RawBlock]:
    """The reply's usable elements as blocks, in the model's reading order.

    A figure's text is its description followed by one ``key: value`` line per data point (what
    questions about charts ask for); its caption travels in ``caption``. Elements without a box
    inside the page, or without any text, are dropped.
    """
    blocks: list[RawBlock] = []
    for element in reply.elements:
        bbox = box_to_points(element.box, width_pt, height_pt)
        if bbox is None:
            continue
        kind = element.kind
        caption = " ".join(element.caption.split()) or None
        text = element.text.strip()
        if kind == ElementKind.FIGURE:
            values = [
                f"{kv.key.strip()}: {kv.value.strip()}"
                for kv in element.key_values
                if kv.key.strip() or kv.value.strip()
            ]
            text = "\n".join([line for line in [" ".join(text.split())] if line] + values)
            if not (text or caption):
                continue
        elif kind == ElementKind.EQUATION:
            text = _latex(text)
        if kind not in (ElementKind.FIGURE, ElementKind.TABLE):
            caption = None
        if not text and kind != ElementKind.FIGURE:
            continue
        blocks.append(
            RawBlock(kind, text, bbox, parser, caption=caption, font_size=_title_size(kind, bbox))
        )
    return blocks


def _title_size(kind: ElementKind, bbox: BBox) -> float | None:
    """A heading's font size guessed from its box, so the assembler can rank heading levels
    on VLM pages too (it ranks by font size when no outline or section number says more);
    a model's heading box is one line in the common case."""
    return round(bbox.height, 1) if kind == ElementKind.TITLE else None


def png_data_url(image: Image.Image, dpi: float | None = None) -> str:
    """The image as a ``data:image/png;base64,...`` URL (what OpenAI image input accepts)."""
    return "data:image/png;base64," + base64.b64encode(_png(image, dpi)).decode("ascii")


def _png(image: Image.Image, dpi: float | None = None) -> bytes:
    buf = io.BytesIO()
    # compress_level 3: a page PNG in ~1/3 of the default's time, ~10 % larger.
    if dpi:
        image.save(buf, format="PNG", compress_level=3, dpi=(dpi, dpi))
    else:
        image.save(buf, format="PNG", compress_level=3)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# Engines.


class OpenAiVlmEngine:
    """PageSight's JSON schema over ``POST {base_url}/chat/completions`` with an image part.

    Uses :class:`pagesight.models.llm.OpenAiChatClient` (retries on connection errors, 5xx and 429;
    structured outputs), which is thread-safe, so pages can be sent concurrently.
    """

    def __init__(self, options: VlmOptions, *, client: OpenAiChatClient | None = None) -> None:
        self.options = options
        self.name = vlm_parser_name(options.model)
        self._client = client

    @property
    def client(self) -> OpenAiChatClient:
        if self._client is None:
            from pagesight.models.llm import OpenAiChatClient

            self._client = OpenAiChatClient(
                LlmOptions(
                    base_url=self.options.base_url,
                    model=self.options.model,
                    api_key=self.options.api_key,
                    timeout_s=self.options.timeout_s,
                    max_retries=self.options.max_retries,
                    temperature=0.0,
                    max_tokens=self.options.max_tokens,
                )
            )
        return self._client

    def parse_page(self, page: RenderedPage) -> list[RawBlock]:
        from pagesight.models.llm import ChatMessage, LlmError, MalformedOutput

        messages = [
            ChatMessage("system", SYSTEM_PROMPT),
            ChatMessage(
                "user",
                [
                    {"type": "image_url", "image_url": {"url": png_data_url(page.image)}},
                    {"type": "text", "text": USER_PROMPT},
                ],
            ),
        ]
        try:
            result = self.client.complete(
                messages, json_schema=PAGE_ELEMENTS_SCHEMA, schema_name="page_elements"
            )
            data = result.parsed
        except MalformedOutput as exc:
            data = _salvage_json(exc.raw_text)
            if data is None:
                raise VlmFailure(f"the VLM's reply is not schema-valid: {exc.message}") from exc
        except LlmError as exc:
            # No HTTP status (connection refused, timeout) or 5xx/429 after retries: the
            # server is down, not this page's problem; 4xx (e.g. image too large) is the page's.
            down = exc.status is None or exc.status >= 500 or exc.status == 429
            raise VlmFailure(f"VLM call failed: {exc.message}", server_down=down) from exc
        try:
            reply = VlmReply.model_validate(data)
        except ValidationError as exc:
            detail = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]
            )
            raise VlmFailure(f"the VLM's reply is not schema-valid: {detail}") from exc
        return reply_blocks(reply, page.width_pt, page.height_pt, self.name)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


_FENCED_JSON = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def _salvage_json(text: str) -> Any | None:
    """JSON inside a markdown code fence: what a server that ignored ``response_format``
    sends for a prompt asking for JSON. Anything else is not salvaged."""
    match = _FENCED_JSON.match(text)
    if match is None:
        return None
    try:
        return json.loads(match.group(1))
    except ValueError:
        return None


#: granite-docling's and SmolDocling's instruction for a whole page in DocTags.
DOCTAGS_PROMPT = "Convert this page to docling."


class DoclingVlmEngine:
    """Docling's ``VlmPipeline`` + ``ApiVlmOptions`` (DocTags) against the same API.

    The page goes in as a PNG whose dpi metadata makes Docling's image backend see the page's
    own size in points, so Docling's boxes are already in PDF points (they are rescaled by the
    exact size ratio anyway, to absorb dpi rounding in the PNG). ``enable_remote_services`` is
    what Docling requires before it sends a page anywhere. Docling retries a refused connection
    itself (5 times, ~3 s), then reports the page as an inference failure; any error Docling
    records for the page (failed call, output cut at ``max_tokens``) fails the page here,
    because half a page must not replace a whole OCR page.
    """

    def __init__(self, options: VlmOptions) -> None:
        if not options.base_url:
            raise VlmFailure("no VLM is configured (set parse.vlm.base_url)")
        self.options = options
        self.name = vlm_parser_name(options.model)
        self._url = options.base_url.rstrip("/") + "/chat/completions"
        # One pipeline per thread: Docling does not promise that concurrent execute() calls on
        # one pipeline are safe, and building one costs no weights (the model is remote).
        self._local = threading.local()

    def _pipeline(self, dpi: float) -> VlmPipeline:
        pipeline: VlmPipeline | None = getattr(self._local, "pipeline", None)
        if pipeline is not None and getattr(self._local, "dpi", None) == dpi:
            return pipeline
        from docling.datamodel.pipeline_options import VlmPipelineOptions
        from docling.datamodel.pipeline_options_vlm_model import ApiVlmOptions, ResponseFormat
        from docling.pipeline.vlm_pipeline import VlmPipeline

        headers = (
            {"Authorization": f"Bearer {self.options.api_key.get_secret_value()}"}
            if self.options.api_key is not None
            else {}
        )
        vlm_options = ApiVlmOptions.model_validate(
            {
                "url": self._url,
                "headers": headers,
                "params": {"model": self.options.model, "max_tokens": self.options.max_tokens},
                "prompt": DOCTAGS_PROMPT,
                "response_format": ResponseFormat.DOCTAGS,
                "timeout": self.options.timeout_s,
                "temperature": 0.0,
                # The backend's page is in points at 72 dpi: this scale sends the page image
                # at the resolution it was rendered at.
                "scale": dpi / 72.0,
            }
        )
        with warnings.catch_warnings():
            # ApiVlmOptions is "legacy" for Docling's preset system, which has no plain
            # "this URL, this model" preset; the legacy path is the documented remote one.
            warnings.simplefilter("ignore", DeprecationWarning)
            pipeline = VlmPipeline(
                VlmPipelineOptions.model_validate(
                    {"enable_remote_services": True, "vlm_options": vlm_options}
                )
            )
        self._local.pipeline, self._local.dpi = pipeline, dpi
        return pipeline

    def parse_page(self, page: RenderedPage) -> list[RawBlock]:
        from docling.backend.image_backend import ImageDocumentBackend
        from docling.datamodel.base_models import ConversionStatus, InputFormat
        from docling.datamodel.document import InputDocument

        from pagesight.ingestion.parse.docling_formats import docling_to_parsed

        pipeline = self._pipeline(round(page.dpi, 3))
        input_document = InputDocument(
            path_or_stream=io.BytesIO(_png(page.image, page.dpi)),
            filename=f"page-{page.page_number}.png",
            format=InputFormat.IMAGE,
            backend=ImageDocumentBackend,
        )
        try:
            result = pipeline.execute(input_document, raises_on_error=False)
        except Exception as exc:  # Docling raising on a malformed reply: this page fails
            raise VlmFailure(f"Docling's VLM pipeline failed: {type(exc).__name__}: {exc}") from exc
        if result.errors or result.status != ConversionStatus.SUCCESS:
            messages = "; ".join(error.error_message for error in result.errors) or "no details"
            down = any(
                marker in messages for marker in ("ConnectionError", "Timeout", "HTTP 5", "429")
            )
            raise VlmFailure(
                f"Docling's VLM pipeline ended {result.status.value}: {messages}",
                server_down=down,
            )
        docling_page = result.document.pages.get(1)
        if docling_page is None:
            return []
        sx = page.width_pt / docling_page.size.width
        sy = page.height_pt / docling_page.size.height
        parsed = docling_to_parsed(
            result.document, Document(doc_id="vlm", version="0" * 64, source_uri="vlm:page")
        )
        blocks: list[RawBlock] = []
        for element in parsed.elements:
            if element.bbox is None:
                continue
            bbox = BBox(
                x0=element.bbox.x0 * sx,
                y0=element.bbox.y0 * sy,
                x1=element.bbox.x1 * sx,
                y1=element.bbox.y1 * sy,
            ).clip(page.width_pt, page.height_pt)
            if bbox.area <= 0:
                continue
            # docling_to_parsed gives an uncaptioned figure its caption as text; the assembler
            # does the same from RawBlock.caption, so the text stays what is written in it.
            text = element.text
            if element.kind == ElementKind.FIGURE and text == (element.caption or ""):
                text = ""
            blocks.append(
                RawBlock(
                    element.kind,
                    text,
                    bbox,
                    self.name,
                    caption=element.caption,
                    font_size=_title_size(element.kind, bbox),
                    cells=element.cells,
                )
            )
        return blocks

    def close(self) -> None:
        self._local = threading.local()


# --------------------------------------------------------------------------------------------
# Which pages, how they are sent, and how their blocks meet the text-layer/OCR blocks.


def figure_coverage(page: pymupdf.Page) -> float:
    """Share of the page covered by figure-sized graphics: images, and clusters of vector
    drawings (PyMuPDF's ``cluster_drawings``), each at least an inch on both sides.

    Cheap (10-50 ms a page, a few hundred on the busiest chart pages) and it separates what a
    VLM adds most to: a report chart is one drawing cluster covering ~5-20 % of its page,
    while a 10-K table's shaded rows are many thin clusters and count for nothing. Page-sized
    graphics (a background, a frame) are not figures.
    """
    import pymupdf

    rect = page.rect
    page_area = abs(rect) or 1.0
    try:
        regions = [pymupdf.Rect(info["bbox"]) & rect for info in page.get_image_info()]
        regions += [cluster & rect for cluster in page.cluster_drawings()]
    except (RuntimeError, ValueError) as exc:
        # A damaged content stream: the page is not sent rather than the document failing.
        log.warning("figure test failed on page %d: %s", (page.number or 0) + 1, exc)
        return 0.0
    figures = [
        r
        for r in regions
        if min(r.width, r.height) >= _FIGURE_MIN_SIDE_PT and abs(r) < 0.95 * page_area
    ]
    return min(1.0, sum(abs(r) for r in figures) / page_area)


def select_vlm_pages(
    options: VlmOptions,
    page_numbers: Iterable[int],
    image_only: set[int],
    coverage: Callable[[int], float],
) -> tuple[list[int], list[int]]:
    """(pages to send, pages the profile wanted but ``max_pages`` left out), in page order.

    Image-only pages come first under the cap: without the VLM they have only OCR text, while
    a born-digital page keeps an exact text layer whatever happens.
    """
    numbers = list(page_numbers)
    if options.pages == "all":
        wanted = numbers
    elif options.pages == "figure-heavy":
        wanted = [
            n for n in numbers if n in image_only or coverage(n) >= options.figure_min_coverage
        ]
    else:
        wanted = [n for n in numbers if n in image_only]
    ranked = sorted(wanted, key=lambda n: (n not in image_only, n))
    chosen = set(ranked[: options.max_pages])
    return [n for n in wanted if n in chosen], [n for n in wanted if n not in chosen]


def parse_pages(
    engine: VlmPageEngine,
    page_numbers: list[int],
    render: Callable[[int], RenderedPage],
    concurrency: int,
) -> dict[int, list[RawBlock] | VlmFailure]:
    """Each page's blocks or the reason it has none, with ``concurrency`` requests in flight.

    Rendering stays on the calling thread (a PyMuPDF document is not thread-safe) and at most
    ``concurrency`` page images are held at once. Once the server is found down, the pages not
    yet sent fail at once with that reason instead of each waiting out its retries.
    """
    outcomes: dict[int, list[RawBlock] | VlmFailure] = {}
    down: VlmFailure | None = None

    def settle(future: Future[list[RawBlock]], n: int) -> None:
        nonlocal down
        try:
            outcomes[n] = future.result()
        except VlmFailure as exc:
            outcomes[n] = exc
            if exc.server_down and down is None:
                down = exc
        except Exception as exc:  # an engine bug costs this page, never the document
            log.exception("VLM engine crashed on page %d", n)
            outcomes[n] = VlmFailure(f"VLM engine error: {type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="vlm") as pool:
        in_flight: dict[Future[list[RawBlock]], int] = {}
        for n in page_numbers:
            while len(in_flight) >= concurrency:
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in done:
                    settle(future, in_flight.pop(future))
            if down is not None:
                outcomes[n] = VlmFailure(
                    f"not sent, the VLM server is down ({down.message})", server_down=True
                )
                continue
            try:
                rendered = render(n)
            except PageSightError as exc:
                outcomes[n] = VlmFailure(f"page image for the VLM failed: {exc.message}")
                continue
            in_flight[pool.submit(engine.parse_page, rendered)] = n
        for future, n in in_flight.items():
            settle(future, n)
    return outcomes


def merge_blocks(
    base: list[RawBlock],
    vlm: list[RawBlock],
    *,
    replace: bool,
    page_area: float,
) -> list[RawBlock]:
    """The page's blocks once the VLM has read it.

    ``replace`` (image-only pages): the VLM's blocks, all kinds, stand for the page. OCR saw
    the same image line by line; the VLM sees tables, charts and equations whole, so keeping
    both would say everything twice.

    Otherwise (pages with a text layer) the VLM complements: the text layer is exact, so the
    VLM's text, titles, lists and captions are dropped, and only its tables, figures and
    equations are taken, which is what a text layer cannot say. Each one replaces the layout
    model's table/figure/equation over the same region (a chart's scattered tick labels become
    caption + key values) or is inserted in reading position; text blocks lying inside a VLM
    table or figure (its cells or labels, which the VLM element now carries) are dropped,
    unless the VLM box covers most of the page (then it boxed the page, not a figure).
    Headings are always kept: they build section paths.
    """
    if replace:
        return list(vlm)
    out = list(base)
    for block in vlm:
        if block.kind not in ATOMIC_KINDS or block.bbox is None:
            continue
        box = block.bbox
        same_region = [
            i
            for i, other in enumerate(out)
            if other.kind in ATOMIC_KINDS
            and other.bbox is not None
            and not other.parser.startswith(VLM_PARSER_PREFIX)
            and _overlap_of_smaller(box, other.bbox) >= _SAME_REGION_SHARE
        ]
        if same_region:
            out[same_region[0]] = block
            out = [b for i, b in enumerate(out) if i not in same_region[1:]]
        else:
            out.insert(_reading_position(out, box), block)
        if block.kind in (ElementKind.TABLE, ElementKind.FIGURE) and box.area <= (
            _MAX_SWALLOW_SHARE * page_area
        ):
            out = [
                b
                for b in out
                if not (
                    b.kind in (ElementKind.TEXT, ElementKind.LIST)
                    and b.bbox is not None
                    and b.bbox.area > 0
                    and box.intersection_area(b.bbox) >= _INSIDE_SHARE * b.bbox.area
                )
            ]
    return out


def _overlap_of_smaller(a: BBox, b: BBox) -> float:
    smaller = min(a.area, b.area)
    return a.intersection_area(b) / smaller if smaller > 0 else 0.0


def _reading_position(blocks: list[RawBlock], box: BBox) -> int:
    """Before the first block that starts lower on the page (top-to-bottom reading order)."""
    for i, block in enumerate(blocks):
        if block.bbox is not None and block.bbox.y0 > box.y0:
            return i
    return len(blocks)
