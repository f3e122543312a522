"""Page images in the answer context, for an answer model that can see (``PAGESIGHT_LLM__VISION``).

Charts, scanned forms and slide pages hold what their text layer does not: a VLM shown the
page answers from the bars, cells and stamps themselves. Each image is a numbered context block
like a text passage, so the model cites it by number and the citation check covers it.

Why it is built this way:

* **When.** ``off`` never sends images; ``always`` sends the pages of the best passages;
  ``auto`` sends them when the visual route found pages (the page model saw something the text
  routes may not), or the question is about something seen rather than read: a chart, figure,
  picture, scan, layout (:data:`VISUAL_WORDS`, English and Japanese). Everything else is
  answered from text, which is cheaper and which text-only questions lose nothing by.
* **Which pages.** The pages of the reranked passages, best first, each once, at most
  ``max_images``: the evidence the text blocks come from, now seen whole.
* **How large.** A page is scaled to whole model tiles within ``max_pixels`` (Qwen2-VL sees 28
  pixel tiles, one token each), so the server's own resize leaves it alone and the token count
  here is the model's. A page that would have to shrink is cropped to its passages' boxes
  (tables, figures, paragraphs), padded, when they cover at most ``crop_ratio`` of it: the
  evidence keeps its resolution and the rest of the page costs nothing.
* **What it may cost.** The reply is reserved first (as for text); images then take at most
  ``budget_tokens`` and never more than half of what is left, so text blocks always have room.
  An image the remaining budget would shrink below ``min_pixels`` is not sent.
* **What is kept.** The trace records document, page, box, pixels and tokens of each image
  (:class:`pagesight.core.types.ImageContextRef`), never the image: it is stored once already, and
  shown to a client only through the page-image route, which checks access.
"""

from __future__ import annotations

import base64
import io
import math
import re
from collections.abc import Sequence

from PIL import Image

from pagesight.core.protocols import PageImageSource
from pagesight.core.settings import ImageContextOptions
from pagesight.core.types import AccessFilter, BBox, ImageContextRef, Passage, RetrievalTrace
from pagesight.query.context import IMAGE_BLOCK_END, ContextBlock, TokenCounter, render_image_header

#: Words of a question about something seen on the page rather than read in its text.
VISUAL_WORDS = re.compile(
    r"\b(?:charts?|graphs?|plots?|figures?|fig\.|diagrams?|pictures?|photos?|photographs?|"
    r"images?|illustrations?|infographics?|scan(?:s|ned)?|layouts?|maps?|logos?|icons?|"
    r"colou?rs?|screenshots?|drawings?|bars?\s+(?:chart|graph)|pie)\b"
    r"|(?<!意)図|グラフ|チャート|写真|画像|イラスト|スキャン|レイアウト|ロゴ|何色",
    re.IGNORECASE,
)

#: Markers around each image in Qwen2-VL's prompt (vision start and end): two tokens.
IMAGE_MARKER_TOKENS = 2


def vision_wanted(setting: str, query: str, trace: RetrievalTrace | None) -> tuple[bool, str]:
    """Whether this answer's request should carry page images under ``setting``, and why."""
    if setting == "off":
        return False, "vision is off"
    if setting == "always":
        return True, "vision is always on"
    if trace is not None:
        for route in trace.routes:
            if route.route == "visual" and route.candidates and route.skipped is None:
                return True, "the visual route found pages"
    word = VISUAL_WORDS.search(query)
    if word:
        return True, f"the question is about what a page shows ({word.group(0)!r})"
    return False, "no visual route hits, and the question is not about a chart, figure or scan"


def image_tokens(width: int, height: int, patch_px: int) -> int:
    """Tokens a ``width`` x ``height`` image costs a Qwen2-VL-family model: one per
    ``patch_px`` tile, plus its start and end markers."""
    return math.ceil(width / patch_px) * math.ceil(height / patch_px) + IMAGE_MARKER_TOKENS


def fit_size(width: int, height: int, max_pixels: int, patch_px: int) -> tuple[int, int]:
    """``width`` x ``height`` scaled (never up) to whole ``patch_px`` tiles within
    ``max_pixels``, keeping the aspect ratio as nearly as whole tiles allow."""
    scale = min(1.0, math.sqrt(max_pixels / max(1, width * height)))
    tiles_w = max(1, math.floor(width * scale / patch_px))
    tiles_h = max(1, math.floor(height * scale / patch_px))
    while tiles_w * tiles_h * patch_px * patch_px > max_pixels and max(tiles_w, tiles_h) > 1:
        if tiles_w >= tiles_h:
            tiles_w -= 1
        else:
            tiles_h -= 1
    return tiles_w * patch_px, tiles_h * patch_px


def crop_box(page_size_pt: tuple[float, float], boxes: Sequence[BBox], ratio: float) -> BBox | None:
    """The union of ``boxes`` padded by 4 % of the page (at least 12 pt) and clipped to it;
    None (send the whole page) when there are no boxes or the crop would cover more than
    ``ratio`` of the page."""
    width, height = page_size_pt
    if not boxes or width <= 0 or height <= 0:
        return None
    pad_x, pad_y = max(12.0, width * 0.04), max(12.0, height * 0.04)
    box = BBox(
        x0=max(0.0, min(b.x0 for b in boxes) - pad_x),
        y0=max(0.0, min(b.y0 for b in boxes) - pad_y),
        x1=min(width, max(b.x1 for b in boxes) + pad_x),
        y1=min(height, max(b.y1 for b in boxes) + pad_y),
    )
    if box.width <= 0 or box.height <= 0 or box.width * box.height > ratio * width * height:
        return None
    return box


def image_block_id(doc_id: str, page_number: int) -> str:
    """The id an image block is cited by (its ``chunk_id``): one per page of a document."""
    return f"{doc_id}/page/{page_number}/image"


def page_image_blocks(
    passages: Sequence[Passage],
    source: PageImageSource,
    access: AccessFilter,
    options: ImageContextOptions,
    budget_tokens: int,
    count_tokens: TokenCounter,
) -> list[ContextBlock]:
    """Image blocks of the pages of ``passages`` (best first), within ``budget_tokens``.

    Blocks are numbered from 1 in page order; the caller renumbers them after the text blocks.
    A page ``source`` has no image of (or that ``access`` may not read) is skipped.
    """
    boxes: dict[tuple[str, int], list[BBox]] = {}
    first: dict[tuple[str, int], Passage] = {}
    for passage in passages:
        key = (passage.doc_id, passage.page_number)
        first.setdefault(key, passage)
        boxes.setdefault(key, []).extend(passage.bboxes)
    blocks: list[ContextBlock] = []
    remaining = budget_tokens
    for key, passage in first.items():
        if len(blocks) >= options.max_images:
            break
        found = source.page_image(access, *key)
        if found is None:
            continue
        image, page_size = found
        box = None
        if image.width * image.height > options.max_pixels:
            box = crop_box(page_size, boxes[key], options.crop_ratio)
        if box is not None:
            image = _cropped(image, page_size, box)
        block = ContextBlock(
            n=len(blocks) + 1,
            chunk_id=image_block_id(*key),
            doc_id=passage.doc_id,
            page_number=passage.page_number,
            text="",
            score=passage.score,
            title=passage.title,
            bboxes=[box] if box is not None else [],
        )
        header = count_tokens(render_image_header(block)) + count_tokens(IMAGE_BLOCK_END)
        tiles = remaining - header - IMAGE_MARKER_TOKENS
        pixels = min(options.max_pixels, tiles * options.patch_px**2)
        width, height = fit_size(image.width, image.height, max(pixels, 0), options.patch_px)
        whole = fit_size(image.width, image.height, options.max_pixels, options.patch_px)
        if (width, height) != whole and width * height < options.min_pixels:
            break  # shrunk below min_pixels by the budget; every later page would be too
        tokens = image_tokens(width, height, options.patch_px)
        remaining -= tokens + header
        ref = ImageContextRef(
            n=block.n,
            doc_id=block.doc_id,
            page_number=block.page_number,
            box=box,
            width=width,
            height=height,
            tokens=tokens,
        )
        url = data_url(
            image.resize((width, height), Image.Resampling.LANCZOS), options.jpeg_quality
        )
        blocks.append(block.model_copy(update={"image": ref, "image_url": url}))
    return blocks


def numbered_after(blocks: Sequence[ContextBlock], first: int) -> list[ContextBlock]:
    """``blocks`` renumbered from ``first`` (image blocks follow the text blocks)."""
    out = []
    for offset, block in enumerate(blocks):
        n = first + offset
        image = block.image.model_copy(update={"n": n}) if block.image is not None else None
        out.append(block.model_copy(update={"n": n, "image": image}))
    return out


def data_url(image: Image.Image, quality: int) -> str:
    """``image`` as a ``data:image/jpeg;base64,...`` URL (JPEG: a page is a fifth of its PNG)."""
    out = io.BytesIO()
    image.convert("RGB").save(out, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def _cropped(image: Image.Image, page_size: tuple[float, float], box: BBox) -> Image.Image:
    sx, sy = image.width / page_size[0], image.height / page_size[1]
    left, top = math.floor(box.x0 * sx), math.floor(box.y0 * sy)
    right = min(image.width, max(left + 1, math.ceil(box.x1 * sx)))
    bottom = min(image.height, max(top + 1, math.ceil(box.y1 * sy)))
    return image.crop((left, top, right, bottom))
