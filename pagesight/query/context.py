"""Numbered context for grounded answers: passages -> blocks within a token budget.

Retrieved text is untrusted: each block travels inside ``<document n=N>`` ... ``</document>``
delimiters that cannot be forged from inside (they are escaped in the text); the budget
reserves the reply first and cuts a passage at a sentence end rather than mid-word.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from pagesight.core.types import (
    BBox,
    ImageContextRef,
    Passage,
    TextSpan,
)

# -- passages and context ----------------------------------------------------------------------


class ContextBlock(BaseModel):
    """One numbered passage of the prompt; answer sentences cite it by ``n``."""

    n: int = Field(ge=1, description="1-based, in rank order")
    chunk_id: str
    doc_id: str
    page_number: int
    section_path: list[str] = Field(default_factory=list)
    text: str
    score: float
    title: str | None = None
    element_ids: list[str] = Field(default_factory=list)
    bboxes: list[BBox] = Field(default_factory=list)
    #: where the characters of ``text`` are printed, on every page of the chunk
    #: (:mod:`pagesight.query.quotes` cites a quote on the page of its own characters)
    spans: list[TextSpan] = Field(default_factory=list)
    source_name: str | None = None
    truncated: bool = False
    #: set on a page-image block (``pagesight.query.vision``): the image's origin and cost; ``text``
    #: is then empty and ``bboxes`` holds the crop (none = the whole page)
    image: ImageContextRef | None = None
    #: the image as a data URL; never serialised (traces keep ``image`` only)
    image_url: str | None = Field(default=None, repr=False, exclude=True)


TokenCounter = Callable[[str], int]

_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def approx_tokens(text: str) -> int:
    """A cheap, deliberately pessimistic token estimate; no tokenizer is loaded.

    CJK characters count one token each; the rest counts the larger of 4/3 tokens per
    whitespace-separated word and one per 4 characters (BPE tokenizers give about 1.3 tokens per
    English word and 4 characters per token, more for numbers and code). Overestimating keeps
    the prompt inside the model's window; inject a real tokenizer's count for exact budgets.
    """
    cjk = len(_CJK_CHAR.findall(text))
    rest = _CJK_CHAR.sub(" ", text) if cjk else text
    words = len(rest.split())
    return cjk + max(math.ceil(words * 4 / 3), math.ceil(len(rest.strip()) / 4))


_DELIMITER = re.compile(r"<(\s*/?\s*document)", re.IGNORECASE)


def _escape(text: str) -> str:
    """Document text with any ``<document`` / ``</document`` defused, so a passage cannot close
    its own block and pose as instructions outside it."""
    return _DELIMITER.sub(r"&lt;\1", text)


def render_block(block: ContextBlock) -> str:
    """The block as the LLM sees it; metadata lines sit inside the delimiters (they come from
    the document too)."""
    source = block.title or block.doc_id
    section = f"; section: {' > '.join(block.section_path)}" if block.section_path else ""
    meta = _escape(" ".join(f"[source: {source}; page {block.page_number}{section}]".split()))
    return f"<document n={block.n}>\n{meta}\n{_escape(block.text)}\n</document>"


def render_image_header(block: ContextBlock) -> str:
    """What precedes a page-image block's image: its opening delimiter and metadata (the image
    follows, then :data:`IMAGE_BLOCK_END`)."""
    source = block.title or block.doc_id
    part = "part of the page" if block.bboxes else "the page"
    meta = _escape(
        " ".join(f"[source: {source}; page {block.page_number}; image of {part}]".split())
    )
    return f"<document n={block.n}>\n{meta}\n"


#: What follows a page-image block's image.
IMAGE_BLOCK_END = "\n</document>"


def context_block(n: int, passage: Passage, text: str, truncated: bool = False) -> ContextBlock:
    """Context block number ``n``: ``passage`` with ``text`` (all of it, or a cut)."""
    return ContextBlock(
        n=n,
        chunk_id=passage.chunk_id,
        doc_id=passage.doc_id,
        page_number=passage.page_number,
        section_path=list(passage.section_path),
        text=text,
        score=passage.score,
        title=passage.title,
        element_ids=list(passage.element_ids),
        bboxes=list(passage.bboxes),
        spans=list(passage.spans),
        source_name=passage.source_name,
        truncated=truncated,
    )


_SENTENCE_END = re.compile(r"[.!?。！？][\"')\]」』]*(?=\s|$)|\n")


def build_context(
    passages: Sequence[Passage],
    budget_tokens: int,
    reserve_output_tokens: int,
    count_tokens: TokenCounter = approx_tokens,
) -> list[ContextBlock]:
    """Numbered blocks of ``passages`` (best first) that fit the budget, in rank order.

    ``reserve_output_tokens`` is taken off ``budget_tokens`` first; each block then costs
    ``count_tokens(render_block(block))``. A block that does not fit is skipped whole (a later,
    shorter one may still fit) rather than cut mid-sentence; only the first passage, the best
    evidence, is truncated to fit, at the last sentence end that fits (at a word boundary when
    not even its first sentence fits). Numbers are consecutive from 1 over the kept blocks.
    """
    available = budget_tokens - reserve_output_tokens
    blocks: list[ContextBlock] = []
    if available <= 0:
        return blocks
    used = 0
    for index, passage in enumerate(passages):
        block = context_block(len(blocks) + 1, passage, passage.text)
        cost = count_tokens(render_block(block))
        if used + cost > available and index == 0:
            truncated = _truncate(passage, available, count_tokens)
            if truncated is None:
                continue
            block, cost = truncated
        if used + cost > available:
            continue
        blocks.append(block)
        used += cost
    return blocks


def _truncate(
    passage: Passage, available: int, count_tokens: TokenCounter
) -> tuple[ContextBlock, int] | None:
    """The longest prefix of ``passage`` ending at a sentence end (else a word end) that fits."""
    text = passage.text
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    ends = [e for e in ends if text[:e].strip()]
    if not ends or not _fits(passage, text[: ends[0]], available, count_tokens):
        ends = [m.end() for m in re.finditer(r"\S+", text)]
    best: tuple[ContextBlock, int] | None = None
    low, high = 0, len(ends) - 1
    while low <= high:  # the cost grows with the prefix, so binary search the cut
        mid = (low + high) // 2
        block = context_block(1, passage, text[: ends[mid]].strip(), truncated=True)
        cost = count_tokens(render_block(block))
        if cost <= available:
            best = (block, cost)
            low = mid + 1
        else:
            high = mid - 1
    return best


def _fits(passage: Passage, text: str, available: int, count_tokens: TokenCounter) -> bool:
    return count_tokens(render_block(context_block(1, passage, text.strip()))) <= available


# -- confidence --------------------------------------------------------------------------------


def confidence_of(score: float, scale: Literal["probability", "logit"]) -> float:
    """A ranker score on ``[0, 1]``: ``probability`` scores (the fused-score pass-through, whose
    scores are the candidate search's own) are clamped as they are; ``logit`` scores (a
    cross-encoder's relevance log-odds) go through the sigmoid, the probability it was trained
    to give. Non-finite scores map to 0."""
    if not math.isfinite(score):
        return 0.0
    if scale == "logit":
        if score >= 0:
            return 1.0 / (1.0 + math.exp(-score))
        z = math.exp(score)
        return z / (1.0 + z)
    return min(1.0, max(0.0, score))
