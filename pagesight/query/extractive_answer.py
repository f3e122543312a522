"""The extractive answer (no LLM configured: the embedded default, and the LLM's fallback when
its reply is not usable twice): a lead unit with supporting quotes chosen by
:func:`pagesight.query.lead.choose_lead`, or, with ``answer.extractive = "quotes"``, the earlier
list of best-overlap sentences (:func:`pagesight.query.extractive.extract_sentences`, the
evaluation's baseline); each quote cited on the page it is printed on. An abstention on weak
evidence names the nearest passages (:func:`related_passages`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pagesight.core.settings import AnswerOptions
from pagesight.core.types import (
    AnswerResponse,
    AnswerSentence,
    AnswerTrace,
    AnswerUnit,
    Citation,
    Passage,
    Policy,
)
from pagesight.query.abstention import abstention
from pagesight.query.answer_units import MAX_LEAD_WORDS
from pagesight.query.citations import block_citation, quoted_citation
from pagesight.query.context import ContextBlock, context_block
from pagesight.query.extractive import extract_sentences
from pagesight.query.lead import (
    MAX_RELATED,
    MAX_SUPPORTING_WORDS,
    LeadChoice,
    Scored,
    choose_lead,
    window,
)
from pagesight.query.references import parse_references


def extractive_answer(
    query: str,
    blocks: list[ContextBlock],
    confidence: float,
    trace_id: str,
    note: str | None,
    options: AnswerOptions,
    policy: Policy = "standard",
    record: AnswerTrace | None = None,
) -> AnswerResponse:
    """The extractive answer: a lead unit, supporting quotes, or an abstention with related
    passages (:mod:`pagesight.query.lead`); ``answer.extractive = "quotes"`` keeps the earlier
    list of best-overlap sentences (the evaluation's baseline)."""
    if options.extractive == "lead":
        return lead_answer(query, blocks, confidence, trace_id, note, options, policy, record)
    return quotes_answer(query, blocks, confidence, trace_id, note, options)


def lead_answer(
    query: str,
    blocks: list[ContextBlock],
    confidence: float,
    trace_id: str,
    note: str | None,
    options: AnswerOptions,
    policy: Policy,
    record: AnswerTrace | None,
) -> AnswerResponse:
    """The lead unit and its supporting quotes (:func:`~pagesight.query.lead.choose_lead`), each
    cited on the page it is printed on; no lead: an abstention naming the related passages."""
    text_blocks = _one_document_for_page_references(query, blocks)
    choice = choose_lead(
        query,
        text_blocks,
        min_coverage=options.min_coverage,
        max_supporting=options.max_supporting,
        strict=policy == "strict",
    )
    if record is not None:
        record.answer_type = choice.answer_type
        record.coverage = choice.coverage
    if choice.lead is None:
        abstained = abstention(
            trace_id, confidence, choice.reason or "nothing to quote", "extractive"
        )
        return abstained.model_copy(update={"related": _related_citations(choice)})
    citations: list[Citation] = []
    units: list[AnswerUnit] = []
    for scored, limit in [
        (choice.lead, MAX_LEAD_WORDS),
        *((s, MAX_SUPPORTING_WORDS) for s in choice.supporting),
    ]:
        unit, citation = _unit_citation(len(citations) + 1, scored, limit)
        citations.append(citation)
        units.append(unit)
    lead, supporting = units[0], units[1:]
    return AnswerResponse(
        answer=lead.text,
        abstained=False,
        reason=note,
        sentences=[AnswerSentence(text=lead.text, citations=list(lead.citations))],
        lead=lead,
        supporting=supporting,
        citations=citations,
        confidence=confidence,
        mode="extractive",
        trace_id=trace_id,
    )


def quotes_answer(
    query: str,
    blocks: list[ContextBlock],
    confidence: float,
    trace_id: str,
    note: str | None,
    options: AnswerOptions,
) -> AnswerResponse:
    """The context's best-overlap sentences (:func:`~pagesight.query.extractive.extract_sentences`),
    quoted per block; none: an abstention."""
    picked = extract_sentences(query, blocks, options.max_sentences)
    if not picked:
        reason = "no sentence of the retrieved passages shares a word with the question"
        return abstention(trace_id, confidence, reason, "extractive")
    sentences = [AnswerSentence(text=text, citations=[block.n]) for text, block in picked]
    quotes: dict[int, list[str]] = {}
    for text, block in picked:
        quotes.setdefault(block.n, []).append(text)
    by_n = {block.n: block for block in blocks}
    citations = [block_citation(by_n[n], " … ".join(quotes[n])) for n in sorted(quotes)]
    return AnswerResponse(
        answer=" ".join(s.text for s in sentences),
        abstained=False,
        reason=note,
        sentences=sentences,
        citations=citations,
        confidence=confidence,
        mode="extractive",
        trace_id=trace_id,
    )


def _unit_citation(n: int, scored: Scored, max_words: int) -> tuple[AnswerUnit, Citation]:
    """The answer unit ``scored`` (cut to ``max_words``) and its citation number ``n``."""
    unit, block = scored.unit, scored.block
    shown, ranges = window(unit, block.text, scored.value, max_words)
    quote = " | ".join(" ".join(block.text[a:b].split()) for a, b in ranges)
    answer_unit = AnswerUnit(
        text=shown,
        kind=unit.kind,
        value=scored.value.text if scored.value is not None else None,
        citations=[n],
    )
    return answer_unit, quoted_citation(n, block, quote, ranges)


def related_passages(query: str, ranked: Sequence[tuple[Passage, float]]) -> list[Citation]:
    """The nearest passages of an abstention on weak evidence, somewhere to look: the best unit
    of each of the best-ranked chunks (:attr:`pagesight.query.lead.LeadChoice.related`)."""
    blocks = [
        context_block(n, passage, passage.text)
        for n, (passage, _) in enumerate(ranked[: 2 * MAX_RELATED], start=1)
    ]
    return _related_citations(choose_lead(query, blocks, min_coverage=0.0, max_supporting=0))


def _related_citations(choice: LeadChoice) -> list[Citation]:
    """``choice.related`` as citations numbered from 1, each on the page its quote is printed."""
    return [
        _unit_citation(n, scored, MAX_SUPPORTING_WORDS)[1]
        for n, scored in enumerate(choice.related, start=1)
    ]


#: Reference kinds that name a place in one document (a page, a slide, a figure).
_PLACE_KINDS = frozenset({"page", "slide", "position", "figure", "table", "cover"})


def _one_document_for_page_references(query: str, blocks: list[ContextBlock]) -> list[ContextBlock]:
    """``blocks`` of the best-ranked document only when the question refers to a page, slide
    or figure without naming a document: "page 3" of six documents is not one answer
    (resolving which document belongs to retrieval). Otherwise ``blocks`` as they are."""
    if len({block.doc_id for block in blocks}) < 2:
        return blocks
    if not any(ref.kind in _PLACE_KINDS for ref in parse_references(query)):
        return blocks
    best = next((block.doc_id for block in blocks if block.image is None), blocks[0].doc_id)
    return [block for block in blocks if block.doc_id == best]
