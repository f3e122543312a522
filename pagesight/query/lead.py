"""The extractive answer's lead: one unit that answers, supporting quotes, or an abstention.

Without a reader model the embedded default cannot compute or read a chart; what it can do is
put the one sentence, list item or table cell that answers first, show where it is printed,
and say plainly when the documents do not say. :func:`choose_lead` does that over the numbered
context blocks, with only what is already at hand:

* **Coverage** — the idf-weighted share of the question's content terms a unit covers, with
  its heading context (the block's title, file name and section path; a cell's column header
  and row label). idf is over every unit of the context, so a term no unit holds ("dividend"
  in a release that pays none) weighs the most. Words that only say what kind of answer is
  wanted ("percentage", "how many") and the periods named are judged apart, below.
* **Answer type** — a unit that prints a value of the asked type (amount, percent, count, year,
  date, name; :mod:`pagesight.query.answer_units`) scores more, and the value nearest the question's
  terms becomes the lead's ``value``.
* **Period agreement** — a question that names a year or quarter agrees with a unit, or its
  column header, that names the same period in any spelling (fiscal equivalences a document
  states are honoured); a unit naming no period inherits its block's, at half credit.
* **Rank prior** — the retrieval rank and the passage's dense similarity break near-ties.

**Abstention**: when the best unit's coverage is below ``min_coverage`` (the question's measure
or subject is absent), or the question names a period no unit agrees with, the answer abstains
and hands back the nearest passages as ``related``. ``strict`` also needs a value of the asked
type and full period agreement. The rules are the same for every document; ``min_coverage`` is
fitted on half a of the shared evaluation documents only (README, "Extractive answers").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache

from pagesight.models.text import tokenize
from pagesight.query.answer_units import (
    MAX_LEAD_WORDS,
    AnswerType,
    Periods,
    Unit,
    Value,
    answer_type,
    fiscal_equivalents,
    period_agreement,
    periods_in,
    split_units,
    values_in,
)
from pagesight.query.context import ContextBlock

#: Related passages an abstention offers, at most.
MAX_RELATED = 3
#: Supporting quotes are shorter than the lead.
MAX_SUPPORTING_WORDS = 30

#: Words that only say what kind of answer is wanted, per answer type (judged by the value).
_TYPE_WORDS: dict[str, str] = {
    "percent": "percent percentage percentages share proportion rate per cent 割合 率",
    "count": "many number numbers count total 数 何人 何件 何社 人数 件数 いくつ",
    "year": "year years when 年",
    "date": "date day month when",
    "amount": "much amount value total",
    "name": "name named who which",
}
_QUESTION_WORDS = (
    "what which who whom whose how many much please tell did does do is are was were "
    "say said says saying think thought mention mentioned according report reported"
)
_PERIOD_WORDS = (
    "fiscal fy year quarter quarterly q1 q2 q3 q4 first second third fourth 1st 2nd 3rd 4th "
    "年度 四半期 令和 平成"
)


@cache
def _stems(words: str) -> frozenset[str]:
    return frozenset(tokenize(words))


@dataclass
class Scored:
    """A unit of one block, scored against the question."""

    block: ContextBlock
    unit: Unit
    rank: int
    coverage: float
    score: float
    value: Value | None
    agreement: float
    missing: list[str] = field(default_factory=list)
    #: the value stands by the question's measure (or is a table cell), not merely in the unit
    strong: bool = False


@dataclass
class LeadChoice:
    """What :func:`choose_lead` decided: a lead and its supporting units, or why not (then
    ``related`` holds the nearest units, somewhere to look)."""

    answer_type: AnswerType | None
    lead: Scored | None = None
    supporting: list[Scored] = field(default_factory=list)
    related: list[Scored] = field(default_factory=list)
    coverage: float | None = None
    reason: str | None = None


def choose_lead(
    query: str,
    blocks: list[ContextBlock],
    *,
    min_coverage: float,
    max_supporting: int,
    strict: bool = False,
) -> LeadChoice:
    """The lead unit of ``blocks`` for ``query`` (module doc), or an abstention."""
    kind = answer_type(query)
    choice = LeadChoice(answer_type=kind)
    units = _units(blocks)
    if not units:
        choice.reason = "the retrieved passages hold no text to quote"
        return choice
    asked_periods = periods_in(query)
    terms = _content_terms(query, kind)
    if not terms:
        choice.reason = "the question names nothing to look for in the documents"
        return choice
    scored = _scored_units(query, kind, blocks, units, terms, asked_periods)
    best = scored[0]
    choice.coverage = round(best.coverage, 4)
    choice.related = _distinct(scored, MAX_RELATED)
    choice.reason = _no_lead_reason(
        query, kind, scored, asked_periods, min_coverage=min_coverage, strict=strict
    )
    if choice.reason is not None:
        return choice
    choice.lead = best
    choice.supporting = _supporting(scored, min_coverage, max_supporting)
    return choice


def _scored_units(
    query: str,
    kind: AnswerType | None,
    blocks: list[ContextBlock],
    units: list[tuple[ContextBlock, Unit, int]],
    terms: list[str],
    asked_periods: Periods,
) -> list[Scored]:
    """Every unit scored for the question (module doc), best first."""
    unit_terms = [_terms_of(unit.text) for _, unit, _ in units]
    total = len(units)
    df = {t: sum(1 for ts in unit_terms if t in ts) for t in terms}
    weight = {t: math.log(1.0 + (total + 1) / (1.0 + df[t])) for t in terms}
    norm = sum(weight.values())
    equivalents: dict[int, int] = {}
    for block in blocks:
        equivalents.update(fiscal_equivalents(block.text))
    block_periods = {id(block): periods_in(block.text) for block in blocks}

    entity_terms = _entity_terms(query)
    # What qualifies every unit of a block: its title, file name and section path; and, for a
    # Japanese question (character bigrams: one sentence rarely holds most of them), the whole
    # block's text, so whether a passage speaks to the question is judged over all of it.
    cjk = bool(_CJK.search(query))
    headings = {
        id(b): _heading_terms(b) | (_terms_of(b.text) if cjk else frozenset()) for b in blocks
    }
    scored: list[Scored] = []
    for (block, unit, rank), own in zip(units, unit_terms, strict=True):
        header = _terms_of(unit.context)  # a cell's column header
        context = own | header | headings[id(block)]
        coverage = sum(weight[t] for t in terms if t in context) / norm
        supplied = (context - own) | entity_terms
        measure = {t: weight[t] for t in terms if t not in supplied} or dict(weight)
        value, strong = _value(unit, kind, query, measure)
        measured = sum(w for t, w in measure.items() if t in own or t in header)
        local = measured / sum(measure.values())
        agreement = _agreement(unit, asked_periods, block_periods[id(block)], equivalents)
        score = 1.0 * local + 0.5 * coverage + 0.3 * agreement
        if kind is not None and strong:
            score += 0.3
        if math.isfinite(block.score):
            score += 0.1 * max(0.0, min(1.0, block.score))
        score += 0.1 / (1 + rank)
        if len(unit.text.split()) > MAX_LEAD_WORDS:
            score -= 0.05
        missing = sorted((t for t in terms if t not in context), key=lambda t: -weight[t])
        scored.append(Scored(block, unit, rank, coverage, score, value, agreement, missing, strong))
    scored.sort(key=lambda s: (-round(s.score, 9), s.rank, s.unit.position))
    return scored


def _no_lead_reason(
    query: str,
    kind: AnswerType | None,
    scored: list[Scored],
    asked_periods: Periods,
    *,
    min_coverage: float,
    strict: bool,
) -> str | None:
    """Why the best of ``scored`` is no lead (too little of the question covered, no passage
    about the period asked for, or the strict policy unmet); None when it is one."""
    best = scored[0]
    if best.coverage < min_coverage:
        absent = ", ".join(f'"{_surface(query, t)}"' for t in best.missing[:3])
        return (
            f"no passage covers the question (best coverage {best.coverage:.2f} < "
            f"{min_coverage:.2f}; not found: {absent})"
        )
    if asked_periods and best.agreement == 0 and not any(s.agreement > 0 for s in scored[:20]):
        return f"no passage is about the period the question names ({_shown(asked_periods)})"
    if strict and ((kind is not None and not best.strong) or best.agreement < 1):
        return (
            "strict policy: the best passage does not state a value of the kind asked for "
            "in the period named"
        )
    return None


def _supporting(scored: list[Scored], min_coverage: float, max_supporting: int) -> list[Scored]:
    """Up to ``max_supporting`` units after the lead (``scored[0]``) that score at least 0.6 of
    it and cover the question, each text once."""
    best = scored[0]
    supporting: list[Scored] = []
    floor = 0.6 * best.score
    seen = {best.unit.text.casefold()}
    for candidate in scored[1:]:
        if len(supporting) >= max_supporting or candidate.score < floor:
            break
        key = candidate.unit.text.casefold()
        if key in seen or candidate.coverage < min_coverage:
            continue
        seen.add(key)
        supporting.append(candidate)
    return supporting


def _units(blocks: list[ContextBlock]) -> list[tuple[ContextBlock, Unit, int]]:
    """Every unit of every text block, with the block's rank; a chunk seen on two pages (one
    block per page) is split once."""
    out: list[tuple[ContextBlock, Unit, int]] = []
    seen: set[str] = set()
    for rank, block in enumerate(blocks):
        if block.image is not None or not block.text.strip() or block.chunk_id in seen:
            continue
        seen.add(block.chunk_id)
        out.extend((block, unit, rank) for unit in split_units(block.text))
    return out


def _terms_of(text: str) -> frozenset[str]:
    """``text``'s terms, with British spellings also in their American form (the question
    may say "defence" of a report that prints "defense")."""
    terms = tokenize(text)
    return frozenset(terms) | {_american(t) for t in terms}


_SPELLINGS = (
    (re.compile(r"enc(e?)$"), r"ens\1"),
    (re.compile(r"our$"), "or"),
    (re.compile(r"([a-z]{3})is(e|ed|ing|ation)?$"), r"\1iz\2"),
    (re.compile(r"tre$"), "ter"),
)


def _american(term: str) -> str:
    for pattern, replacement in _SPELLINGS:
        term = pattern.sub(replacement, term)
    return term


def _content_terms(query: str, kind: AnswerType | None) -> list[str]:
    """The question's terms that a unit must cover: question words, answer-type words and
    period words (judged apart) removed; numbers other than years kept."""
    drop = _stems(_QUESTION_WORDS) | _stems(_PERIOD_WORDS)
    if kind is not None:
        drop |= _stems(_TYPE_WORDS[kind])
    years = {str(y) for y in periods_in(query).years}
    out = []
    for term in dict.fromkeys(tokenize(query)):
        if term in drop or term in years or re.fullmatch(r"(?:fy|q)?\d{2,4}", term):
            continue
        out.append(_american(term))
    return list(dict.fromkeys(out))


_NAME_WORD = re.compile(r"(?<![.?!]\s)(?<!^)\b[A-Z][\w&'’-]*")


def _entity_terms(query: str) -> frozenset[str]:
    """Terms of the names a question mentions (capitalised words past its first word: "MGM
    Resorts", "Ulta Beauty"): they say which document, not what to quote, so they count for
    coverage but not for the unit's measure."""
    return _terms_of(" ".join(m.group(0) for m in _NAME_WORD.finditer(query.strip())))


def _heading_terms(block: ContextBlock) -> frozenset[str]:
    """Terms that qualify every unit of ``block`` without being quoted: its title, file name
    and section path."""
    stem = (block.source_name or "").rsplit(".", 1)[0]
    return _terms_of(" ".join([block.title or "", stem, " ".join(block.section_path)]))


def _value(
    unit: Unit, kind: AnswerType | None, query: str, measure: dict[str, float]
) -> tuple[Value | None, bool]:
    """The value of type ``kind`` the unit states for the question: a table cell's own cell
    when it is of that type (or a plain number, for amounts, counts and percents); in prose,
    the value nearest after one of the question's ``measure`` terms (its terms that the
    block's title or headings do not already supply), within a few words — "Net income of
    $340.8 million" is no answer to a question about net sales. Returns the value and whether it
    is *strong* (a cell, or a value that stands by the measure); a unit whose values stand
    apart from the measure still states its best one, weakly."""
    if kind is None:
        return None, False
    if unit.kind == "table_cell":
        return _cell_value(unit, kind, query)
    return _prose_value(unit, kind, query, measure)


def _cell_value(unit: Unit, kind: AnswerType, query: str) -> tuple[Value | None, bool]:
    """:func:`_value` of a table cell: its own cell, when of type ``kind`` (or a plain number,
    for amounts, counts and percents); always strong."""
    cell = unit.cells[1]
    found = values_in(cell, kind, query)
    if found:
        return found[0], True
    if kind in ("amount", "count", "percent") and re.fullmatch(r"[-$€£¥(]*[\d,.]+\)?%?", cell):
        return Value(cell, 0, len(cell)), True
    return None, False


def _prose_value(
    unit: Unit, kind: AnswerType, query: str, measure: dict[str, float]
) -> tuple[Value | None, bool]:
    """:func:`_value` in prose: the value nearest after a ``measure`` term, strong when enough
    of the measure stands by it."""
    found = values_in(unit.text, kind, query)
    if not found:
        return None, False
    words = [(m.start(), _terms_of(m.group(0))) for m in re.finditer(r"[^\W_]+", unit.text)]
    total = sum(measure.values())
    best: tuple[float, int, Value] | None = None
    for value in found:
        at = sum(1 for start, _ in words if start < value.start)  # words before the value
        near: frozenset[str] | set[str]
        if _CJK.search(unit.text):  # no spaces: a window of characters instead of words
            near = _terms_of(unit.text[max(0, value.start - 3 * _VALUE_AFTER) : value.end + 10])
        else:
            near = set().union(
                *(terms for _, terms in words[max(0, at - _VALUE_AFTER) : at]),
                *(terms for _, terms in words[at : at + _VALUE_BEFORE]),
            )
        share = sum(w for t, w in measure.items() if t in near) / total if total else 0.0
        key = (share, -at)
        if best is None or key > (best[0], best[1]):
            best = (share, -at, value)
    if best is None:
        return None, False
    if best[0] >= _VALUE_MEASURE_SHARE:
        return best[2], True
    # No value stands by the measure: the unit still states one, weakly (the lead's value,
    # without the score of a unit that answers in so many words).
    if best[0] > 0 or len(found) == 1:
        return best[2], False
    return None, False


#: A value belongs to a measure term this many words before it (or half as many after it:
#: "35% of Americans say ...").
_VALUE_AFTER = 12
_VALUE_BEFORE = 6
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
#: ... and at least this share of the measure's weight stands that near it.
_VALUE_MEASURE_SHARE = 0.6


def _agreement(unit: Unit, asked: Periods, block: Periods, equivalents: dict[int, int]) -> float:
    if not asked:
        return 1.0
    own = periods_in(f"{unit.text} {unit.header}")
    if own:
        return period_agreement(asked, own, equivalents)
    return 0.5 * period_agreement(asked, block, equivalents)


def _distinct(scored: list[Scored], limit: int) -> list[Scored]:
    """The best ``limit`` units of different blocks (related passages on an abstention)."""
    out: list[Scored] = []
    chunks: set[str] = set()
    for candidate in scored:
        if candidate.block.chunk_id in chunks:
            continue
        chunks.add(candidate.block.chunk_id)
        out.append(candidate)
        if len(out) >= limit:
            break
    return out


def _surface(query: str, term: str) -> str:
    """The question's own word for the (stemmed) ``term``, to name it in a reason."""
    words: list[str] = re.findall(r"[^\W_]+", query)
    for word in words:
        if term in _terms_of(word):
            return word
    return term


def _shown(periods: Periods) -> str:
    parts = [str(y) for y in sorted(periods.years)]
    parts += [f"Q{q}" for q in sorted(periods.quarters)]
    return ", ".join(parts)


def window(
    unit: Unit, text: str, value: Value | None, max_words: int
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """What to show of ``unit`` and which characters of ``text`` to cite: the whole unit when
    it has at most ``max_words`` words, else a window of that many words around its value
    (around its start without one), marked with "…" where cut. A table cell is never cut."""
    if unit.kind == "table_cell" or len(unit.text.split()) <= max_words:
        return unit.text, unit.quote_ranges
    start, end = unit.quote_ranges[0]
    words = [m.span() for m in re.finditer(r"\S+", text[start:end])]
    # unit.text is text[start:end] with whitespace collapsed: its words are the same words
    center = len(unit.text[: value.start].split()) if value is not None else 0
    first = max(0, min(center - max_words // 2, len(words) - max_words))
    last = min(len(words), first + max_words)
    a, b = start + words[first][0], start + words[last - 1][1]
    shown = " ".join(text[a:b].split())
    if first > 0:
        shown = "… " + shown
    if last < len(words):
        shown += " …"
    return shown, ((a, b),)
