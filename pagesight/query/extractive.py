"""Extractive answers (no LLM configured: the embedded default): quote the context's best
sentences or table rows verbatim, chosen by lexical overlap with the question using the sparse
index's tokenizer; never a word of its own."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pagesight.models.text import tokenize
from pagesight.query.context import ContextBlock

# -- extractive answers ------------------------------------------------------------------------

_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^[\s|:\-+=]*$")
_SPLIT_SENTENCES = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9\u3040-\u30ff\u3400-\u9fff])|(?<=[。！？])(?![\"'」』）)])"
)
#: Question words that carry no content (stems, as :func:`pagesight.models.text.tokenize` emits
#: them).
_QUESTION_TERMS = frozenset(tokenize("many much please tell"))
_QUANTITY_QUESTION = re.compile(
    r"\bhow\s+(many|much|long|old|often|large|big|high|far|fast)\b"
    r"|\bwhat\s+(percentage|percent|share|proportion|fraction|number|amount|rate|year|date)\b"
    r"|\bwhen\b|\bwhich\s+year\b|%|いくつ|いくら|いつ|何人|何年|何件|割合",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, whitespace collapsed, each a verbatim piece of it.

    Markdown table rows (``| ... |``) are sentences of their own; rule rows (``|---|``) and
    heading lines (``# ...``) are dropped; other lines are joined into paragraphs (blank lines
    end one) and split after ``. ! ?`` (and a closing quote) before a capital, a digit or a CJK
    character, and after ``。！？``.
    """
    out: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            joined = " ".join(" ".join(paragraph).split())
            out.extend(s.strip() for s in _SPLIT_SENTENCES.split(joined) if s.strip())
            paragraph.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if _TABLE_ROW.match(line):
            flush()
            if not _TABLE_RULE.match(stripped):
                out.append(" ".join(stripped.split()))
        elif not stripped or stripped.startswith("#"):
            flush()
        else:
            paragraph.append(stripped)
    flush()
    return out


@dataclass(frozen=True)
class _Candidate:
    block: int  # index into the blocks
    position: int  # sentence index within the block
    text: str
    terms: frozenset[str]


def _terms(text: str) -> frozenset[str]:
    return frozenset(tokenize(text)) - _QUESTION_TERMS


def extract_sentences(
    query: str, blocks: Sequence[ContextBlock], max_sentences: int
) -> list[tuple[str, ContextBlock]]:
    """The sentences of ``blocks`` that best answer ``query``, best first, with their block.

    A sentence scores the idf-weighted share of the query's content terms it contains (idf over
    all the context's sentences, so a term every sentence has counts little); when the query asks
    for a quantity or a date, sentences with a number the query does not already contain score
    25 % more. Kept: sentences sharing at least one term and scoring at least half the best, at
    most ``max_sentences``, repeated sentences once; ties go to the better-ranked block and then
    the earlier sentence. Empty when no sentence shares a term with the query.
    """
    query_terms = _terms(query)
    if not query_terms or not blocks:
        return []
    candidates = [
        _Candidate(b, i, text, _terms(text))
        for b, block in enumerate(blocks)
        for i, text in enumerate(split_sentences(block.text))
    ]
    if not candidates:
        return []
    total = len(candidates)
    df = {t: sum(1 for c in candidates if t in c.terms) for t in query_terms}
    weight = {t: math.log(1.0 + (total + 1) / (1.0 + df[t])) for t in query_terms}
    norm = sum(weight.values())
    query_numbers = {t for t in query_terms if _DIGIT.search(t)}
    wants_number = bool(_QUANTITY_QUESTION.search(query))

    scored: list[tuple[float, _Candidate]] = []
    for candidate in candidates:
        overlap = query_terms & candidate.terms
        if not overlap:
            continue
        score = sum(weight[t] for t in overlap) / norm
        if wants_number and any(
            _DIGIT.search(t) and t not in query_numbers for t in candidate.terms
        ):
            score *= 1.25
        scored.append((round(score, 9), candidate))
    if not scored:
        return []
    scored.sort(key=lambda item: (-item[0], item[1].block, item[1].position))
    best = scored[0][0]
    chosen: list[tuple[str, ContextBlock]] = []
    seen: set[str] = set()
    for score, candidate in scored:
        if score < best / 2 or len(chosen) >= max_sentences:
            break
        key = candidate.text.casefold()
        if key in seen:
            continue
        seen.add(key)
        chosen.append((candidate.text, blocks[candidate.block]))
    return chosen


def best_quote(block: ContextBlock, about: str) -> str:
    """The block's sentence most like ``about`` (a cited answer sentence), for the citation;
    the block's opening when none shares a term."""
    picked = extract_sentences(about, [block], 1)
    if picked:
        return picked[0][0]
    sentences = split_sentences(block.text)
    return sentences[0] if sentences else " ".join(block.text.split())[:300]


def plain_text(text: str) -> str:
    """Case, punctuation and spacing folded away, to recognise a sentence however written."""
    return " ".join(re.findall(r"\w+", text.casefold()))
