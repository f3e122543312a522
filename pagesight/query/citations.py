"""Citations of an answer: built from the context blocks it quotes, and checked where a model
wrote them.

* **Built** (:func:`block_citation`, :func:`quoted_citation`): a citation names the page(s) its
  quote's characters are printed on, with their boxes (:mod:`pagesight.query.quotes`); an image
  block's has its page, crop box and image URL, and no quote.
* **Checked** (:func:`checked_answer`, :func:`checked_prose`): the sentences of an LLM's answer,
  from its JSON reply or its streamed prose, keep only the citations of blocks that were in the
  context; a sentence left with none is withheld (module :mod:`pagesight.query.answer`, "Every
  citation is checked").
"""

from __future__ import annotations

from collections.abc import Sequence

from pagesight.core.links import page_image_url
from pagesight.core.types import (
    AnswerResponse,
    AnswerSentence,
    AnswerTrace,
    AnswerUnit,
    BBox,
    Citation,
    Policy,
    QuotePart,
    WithheldSentence,
)
from pagesight.query.abstention import abstention
from pagesight.query.context import ContextBlock
from pagesight.query.extractive import best_quote, plain_text
from pagesight.query.generation import ABSTAIN_TEXT, parse_cited_prose
from pagesight.query.quotes import find_quote, quote_parts

# -- building ----------------------------------------------------------------------------------


def block_citation(block: ContextBlock, quote: str) -> Citation:
    """The citation of ``block`` quoting ``quote`` (a piece of its text): on the page(s) the
    quote's characters are printed on, with their boxes (:mod:`pagesight.query.quotes`). An image
    block's has its page, crop box and image URL, and no quote (the model read the image, not a
    text)."""
    if block.image is not None:
        return _cited(block.n, block, block.page_number, block.bboxes, quote="", parts=[])
    found = find_quote(block.text, quote)
    ranges = (found,) if found is not None else ()
    return quoted_citation(block.n, block, quote, ranges)


def quoted_citation(
    n: int, block: ContextBlock, quote: str, ranges: Sequence[tuple[int, int]]
) -> Citation:
    """Citation ``n`` of the characters ``ranges`` of ``block``'s text, shown as ``quote``."""
    parts = quote_parts(block.text, ranges, block.spans, block.page_number, block.bboxes)
    if not ranges:  # not found verbatim: the block's own page, as before spans
        parts = [parts[0].model_copy(update={"text": quote})]
    return _cited(n, block, parts[0].page_number, parts[0].bboxes, quote=quote, parts=parts)


def _cited(
    n: int,
    block: ContextBlock,
    page: int,
    boxes: Sequence[BBox],
    *,
    quote: str,
    parts: list[QuotePart],
) -> Citation:
    """Citation ``n`` of ``block`` on ``page`` with ``boxes`` (an image block's: its crop)."""
    return Citation(
        n=n,
        doc_id=block.doc_id,
        page_number=page,
        chunk_id=block.chunk_id,
        kind="image" if block.image is not None else "text",
        element_ids=list(block.element_ids),
        bboxes=list(boxes),
        page_image_url=page_image_url(block.doc_id, page, list(boxes)),
        quote=quote,
        parts=parts,
        title=block.title,
        source_name=block.source_name,
    )


# -- checking ----------------------------------------------------------------------------------


def checked_prose(
    text: str,
    blocks: list[ContextBlock],
    confidence: float,
    policy: Policy,
    trace_id: str,
    record: AnswerTrace,
    max_sentences: int,
) -> AnswerResponse:
    """The checked answer of a streamed reply ``text``, every token of which is already out.

    The rules of :func:`checked_answer`, applied once: a sentence whose citations are all
    unknown numbers (under ``strict``: that cites nothing valid) is withheld, unknown numbers
    are dropped from the others, at most ``max_sentences`` are kept, the abstention sentence
    abstains. There is no regeneration: a second reply would contradict the text the client
    already shows. Whatever was sent but is not in the answer is listed in ``withheld``, so
    the client can take it off the screen.
    """
    numbers = {block.n for block in blocks}
    parsed = parse_cited_prose(text)
    unknown = sorted({n for _, cited in parsed for n in cited if n not in numbers})
    problem = f"cited documents that do not exist: {unknown}" if unknown else "ok"
    record.attempts.append(f"streamed: {problem}")
    abstain = plain_text(ABSTAIN_TEXT)
    if any(plain_text(sentence) == abstain for sentence, _ in parsed):
        others = [
            WithheldSentence(index=i, text=s, citations=c, reason="the model abstained")
            for i, (s, c) in enumerate(parsed)
            if plain_text(s) != abstain
        ]
        found_none = abstention(
            trace_id, confidence, "the model found no answer in the documents", "llm"
        )
        return found_none.model_copy(update={"withheld": others})

    return checked_answer(
        parsed, blocks, unknown, confidence, policy, trace_id, max_sentences, shown=True
    )


def checked_answer(
    sentences: Sequence[tuple[str, list[int]]],
    blocks: list[ContextBlock],
    unknown: list[int],
    confidence: float,
    policy: Policy,
    trace_id: str,
    max_sentences: int,
    *,
    shown: bool,
) -> AnswerResponse:
    """The answer made of the model's ``sentences`` (text, cited numbers) that pass the
    citation check, for both the JSON reply and streamed prose.

    A sentence whose citations are all unknown numbers (under ``strict``: that cites
    nothing valid) is withheld, unknown numbers are dropped from the others, at most
    ``max_sentences`` are kept. Withheld sentences are listed (with their reasons) only when
    ``shown``, i.e. already streamed to the client; otherwise unsupported text never leaves
    the server and only their count is in the reason. Nothing kept: an abstention.
    ``unknown`` (numbers cited but not in the context) goes into the reason.
    """
    numbers = {block.n for block in blocks}
    kept: list[AnswerSentence] = []
    withheld: list[WithheldSentence] = []
    limit = max_sentences
    for index, (raw, cited) in enumerate(sentences):
        sentence = " ".join(raw.split())
        if not sentence:
            continue
        valid = list(dict.fromkeys(n for n in cited if n in numbers))
        if cited and not valid:
            why = f"cites only documents that do not exist: {cited}"
        elif policy == "strict" and not valid:
            why = "cites no document (strict policy)"
        elif len(kept) >= limit:
            why = f"beyond the limit of {limit} sentences"
        else:
            kept.append(AnswerSentence(text=sentence, citations=valid))
            continue
        withheld.append(WithheldSentence(index=index, text=sentence, citations=cited, reason=why))
    if not kept:
        reason = (
            f"all {len(withheld)} sentences of the model's answer lacked a valid citation"
            if withheld
            else "the model's answer was empty"
        )
        empty = abstention(trace_id, confidence, reason, "llm")
        return empty.model_copy(update={"withheld": withheld if shown else []})

    by_n = {block.n: block for block in blocks}
    # Citations are numbered by their first appearance in the answer, not by block.
    order = list(dict.fromkeys(n for sentence in kept for n in sentence.citations))
    number = {n: i for i, n in enumerate(order, start=1)}
    kept = [AnswerSentence(text=s.text, citations=[number[n] for n in s.citations]) for s in kept]
    citations = []
    for n in order:
        about = " ".join(s.text for s in kept if number[n] in s.citations)
        block = by_n[n]
        citations.append(
            block_citation(block, best_quote(block, about)).model_copy(update={"n": number[n]})
        )
    notes = []
    if withheld:
        notes.append(f"withheld {len(withheld)} sentence(s) without a valid citation")
    if unknown:
        notes.append(f"dropped citations of unknown documents {unknown}")
    first = kept[0]
    return AnswerResponse(
        answer=" ".join(sentence.text for sentence in kept),
        abstained=False,
        reason="; ".join(notes) or None,
        sentences=kept,
        lead=AnswerUnit(text=first.text, citations=list(first.citations)),
        citations=citations,
        confidence=confidence,
        mode="llm",
        trace_id=trace_id,
        withheld=withheld if shown else [],
    )
