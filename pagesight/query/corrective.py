"""Corrective retrieval (CRAG): grade what the search found before answering from it.

A search always returns *something*; the answer step then either abstains on a confidence
threshold or answers from whatever it got. Corrective retrieval looks at the best candidates
first and acts on what it sees, once:

1. **Grade** the top ``grade_top_k`` passages (distinct chunks, best first) for the user's
   question: CORRECT (states the answer), AMBIGUOUS (on topic, unclear), INCORRECT (unrelated).
   With an LLM, :class:`LlmGrader` asks it per passage with a JSON schema, in parallel (a bounded
   thread pool); a call that fails grades AMBIGUOUS with the failure as its reason, so a flaky
   server degrades to a rewrite, never to dropping evidence. Without one, :class:`ScoreBandGrader`
   grades by bands on the confidence the answer pipeline computes (:func:`pipeline_scorer`),
   bands from :class:`~pagesight.core.settings.CorrectiveOptions`, so a recalibrated scorer needs
   new band values, not new code. LLM grades are cached per (question, chunk id, index version):
   a chunk id names one version of a document's text and the index version pins the collection,
   so a cached grade is never stale; score grades are not cached (the score depends on the route
   and on the other candidates, and costs nothing).
2. **Decide** (:func:`decide`): a grade is "mostly" when its share of the graded passages is
   above ``majority`` (default 0.5, "more than half"; at least 0.5, so only one grade can be).
   Mostly INCORRECT -> incorrect; mostly AMBIGUOUS -> ambiguous; otherwise correct when any
   passage graded CORRECT (the evidence is there; the rest is noise to drop), else ambiguous
   (half unclear, half wrong: a sharper query is the cheap fix). Nothing to grade is incorrect.
3. **Act**, at most one corrective round:

   * correct -> the candidates pass through unchanged, less the passages graded INCORRECT;
   * ambiguous -> the question is rewritten once into a search query (:class:`LlmRewriter`, or
     :class:`KeywordRewriter`'s deterministic keyword query without an LLM or when the LLM
     fails) and searched again with the same route and size; the new candidates are graded
     (against the *original* question: that is what will be answered) and used unless they came
     back mostly INCORRECT or with fewer passages graded CORRECT (the usable evidence; INCORRECT
     ones are dropped anyway), in which case the original ones are kept; a tie goes to the
     rewrite, which was made because the original was unclear. A rewrite equal to the question
     runs no second search;
   * incorrect -> the search is widened once: route ``hybrid`` when a page model is configured
     (the visual route sees charts and scans the text routes miss), else ``text`` for ``keyword``
     and ``auto`` (dense + BM25 is a superset of BM25), else the same route; ``widen_factor`` times
     the candidates. Still mostly INCORRECT -> abstain, and the response says why.
     ``on_incorrect="abstain"`` abstains without widening.

   The corrective round grades its top ``grade_top_k`` passages *not already graded INCORRECT*
   (a wider search returns those first again); grades already made in this request, or cached,
   are reused. Passages graded INCORRECT in any round never reach the answer step. Every grade,
   decision, rewrite and widening is in the :class:`~pagesight.core.types.CorrectiveTrace`; the
   retrieval trace stored with the answer is the search whose candidates were used (for a rewrite,
   its ``query`` is the rewritten one; ``CorrectiveTrace.query`` keeps the question), with every
   round's documents in ``doc_ids``.

:class:`CorrectiveRetrieval` wraps a :data:`~pagesight.query.answer.CandidateSearch` and has the
same inputs; :class:`~pagesight.query.answer.AnswerPipeline` takes it as ``corrective=``. The
graders and the grade cache are in :mod:`pagesight.query.grading` (re-exported here).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from pagesight.core.protocols import CandidateSearch, ChatModel
from pagesight.core.settings import CorrectiveOptions
from pagesight.core.types import (
    AccessFilter,
    Candidates,
    ChatMessage,
    CorrectiveTrace,
    Grade,
    GradeRecord,
    Passage,
    RetrievalTrace,
    RouteName,
)
from pagesight.models.llm import LlmError
from pagesight.models.text import ENGLISH_STOPWORDS
from pagesight.query.grading import (
    GRADE_MAX_TOKENS,
    GRADE_PROMPT,
    GRADE_SCHEMA,
    GRADE_SCHEMA_NAME,
    MAX_GRADED_CHARS,
    GradeCache,
    Grader,
    GradeResult,
    LlmGrader,
    PassageScorer,
    ScoreBandGrader,
    Usage,
    grade_messages,
    pipeline_scorer,
)

__all__ = [
    "GRADE_MAX_TOKENS",
    "GRADE_PROMPT",
    "GRADE_SCHEMA",
    "GRADE_SCHEMA_NAME",
    "MAX_GRADED_CHARS",
    "CorrectiveRetrieval",
    "Grade",
    "GradeCache",
    "GradeResult",
    "Grader",
    "KeywordRewriter",
    "LlmGrader",
    "LlmRewriter",
    "PassageScorer",
    "QueryRewriter",
    "Rewrite",
    "ScoreBandGrader",
    "Usage",
    "build_corrective",
    "decide",
    "grade_messages",
    "keyword_query",
    "pipeline_scorer",
]

#: The JSON a rewrite call must return.
REWRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    "additionalProperties": False,
}
REWRITE_SCHEMA_NAME = "search_query"
REWRITE_MAX_TOKENS = 128
#: A rewritten query longer than this is cut (at a word end): it is a search query, not prose.
MAX_REWRITE_CHARS = 300
REWRITE_PROMPT = """\
You rewrite a user's question into one search query for a document search engine that matches \
both keywords and meaning, over reports, tables, charts and scanned pages.

Rules:
- Keep every name, number, year, date, code, unit and quoted phrase exactly as written.
- Drop filler and question words; add at most three words that documents would likely use for \
the same thing (synonyms, the formal term of a line item).
- Do not answer the question and do not add facts.
- Reply with JSON only: {"query": "..."}
"""


# -- the decision ------------------------------------------------------------------------------


def decide(grades: Sequence[Grade], majority: float = 0.5) -> Grade:
    """The module's decision rule over one round's grades (module doc, step 2)."""
    if not grades:
        return Grade.INCORRECT
    total = len(grades)
    for grade in (Grade.INCORRECT, Grade.AMBIGUOUS, Grade.CORRECT):
        if sum(1 for g in grades if g == grade) / total > majority:
            return grade
    return Grade.CORRECT if Grade.CORRECT in grades else Grade.AMBIGUOUS


def _tally(grades: Sequence[Grade]) -> str:
    counts = {g: sum(1 for x in grades if x == g) for g in Grade}
    return ", ".join(f"{counts[g]} {g.value}" for g in Grade) + f" of {len(grades)}"


# -- rewriting ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rewrite:
    """A rewritten search query, who wrote it, and what went wrong on the way (if anything)."""

    query: str
    source: Literal["llm", "keywords"]
    note: str | None = None
    usage: Usage | None = None


class QueryRewriter(Protocol):
    def rewrite(self, query: str) -> Rewrite: ...


#: Words that ask rather than say: English stop words plus request verbs and quantity words
#: that no document uses for its content.
_QUESTION_WORDS = ENGLISH_STOPWORDS | {
    "please",
    "tell",
    "give",
    "show",
    "list",
    "describe",
    "explain",
    "find",
    "according",
    "many",
    "much",
    "whose",
}
_QUOTED_PHRASE = re.compile(r"\"[^\"]+\"|“[^”]+”|「[^」]+」")
_QUERY_TOKEN = re.compile(r"[\w][\w.,/%&'’+-]*[\w%]|[\w]", re.UNICODE)
_HAS_DIGIT = re.compile(r"\d")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def keyword_query(query: str) -> str:
    """A deterministic keyword query for ``query``: no LLM, same question -> same query.

    Quoted phrases are kept verbatim with their quotes (the ``auto`` route sends quoted text to
    the exact-term route); other words are kept in order, once each, unless they are question
    or stop words (:data:`pagesight.models.text.ENGLISH_STOPWORDS`, less its negations and
    comparatives, plus "please", "tell", "list", ...); words with a digit (years, amounts, codes
    such as "10-K" or "ISO-9001") and CJK runs are always kept. Trailing punctuation goes. A
    question made only of stop words comes back whitespace-normalised, unchanged.
    """
    kept: list[str] = []
    seen: set[str] = set()

    def keep(word: str) -> None:
        folded = word.casefold()
        if folded not in seen:
            seen.add(folded)
            kept.append(word)

    position = 0
    for match in _QUOTED_PHRASE.finditer(query):
        _keep_words(query[position : match.start()], keep)
        keep(" ".join(match.group().split()))
        position = match.end()
    _keep_words(query[position:], keep)
    return " ".join(kept) if kept else " ".join(query.split())


def _keep_words(text: str, keep: Callable[[str], None]) -> None:
    for match in _QUERY_TOKEN.finditer(text):
        word = match.group()
        always = bool(_HAS_DIGIT.search(word) or _CJK.search(word))
        content = word.casefold() not in _QUESTION_WORDS and (len(word) > 1 or word.isupper())
        if always or content:
            keep(word)


class KeywordRewriter:
    """:func:`keyword_query` as a rewriter: the embedded profile's, and the LLM's fallback."""

    def rewrite(self, query: str) -> Rewrite:
        return Rewrite(keyword_query(query), "keywords")


class LlmRewriter:
    """One structured-output call turns the question into a search query.

    A failed call, an empty reply or a reply that only repeats the question falls back to
    ``fallback`` (the keyword query), with the reason noted: a rewrite is only worth a second
    search when it differs from the first.
    """

    def __init__(self, llm: ChatModel, fallback: QueryRewriter | None = None) -> None:
        self.llm = llm
        self.fallback = fallback or KeywordRewriter()

    def rewrite(self, query: str) -> Rewrite:
        try:
            result = self.llm.complete(
                [
                    ChatMessage("system", REWRITE_PROMPT),
                    ChatMessage("user", f"Question: {' '.join(query.split())}"),
                ],
                json_schema=REWRITE_SCHEMA,
                schema_name=REWRITE_SCHEMA_NAME,
                max_tokens=REWRITE_MAX_TOKENS,
            )
        except LlmError as exc:
            note = f"LLM rewrite failed ({exc.code.value}): {exc.message}"
            return self._fall_back(query, note, Usage.of(None))
        usage = Usage.of(result)
        value = result.parsed.get("query") if isinstance(result.parsed, dict) else None
        rewritten = _clip_query(str(value)) if isinstance(value, str) else ""
        if not rewritten:
            return self._fall_back(query, "the LLM's rewrite was empty", usage)
        if _same_query(rewritten, query):
            return self._fall_back(query, "the LLM's rewrite repeated the question", usage)
        return Rewrite(rewritten, "llm", usage=usage)

    def _fall_back(self, query: str, note: str, usage: Usage) -> Rewrite:
        fallback = self.fallback.rewrite(query)
        note = note if fallback.note is None else f"{note}; {fallback.note}"
        return replace(fallback, note=f"{note}; used the keyword query", usage=usage)


def _clip_query(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_REWRITE_CHARS:
        return text
    cut = text[:MAX_REWRITE_CHARS]
    return cut.rsplit(" ", 1)[0] if " " in cut else cut


def _same_query(a: str, b: str) -> bool:
    return " ".join(a.casefold().split()) == " ".join(b.casefold().split())


# -- the component -----------------------------------------------------------------------------


@dataclass
class _Round:
    """One search and its grades: ``grades`` by chunk id, for the graded chunks only."""

    number: int
    found: Candidates
    graded: list[Grade] = field(default_factory=list)
    grades: dict[str, Grade] = field(default_factory=dict)
    decision: Grade = Grade.INCORRECT

    @property
    def index_version(self) -> str | None:
        return self.found.trace.index_version if self.found.trace is not None else None


class CorrectiveRetrieval:
    """A :data:`~pagesight.query.answer.CandidateSearch` with corrective retrieval around it (module
    doc): ``run(query, access, route, n)`` -> ``(candidates, trace)``.

    ``visual_available`` says whether the ``hybrid`` route can run (a page model is configured),
    which is what widening prefers. Thread-safe: the cache is, and a run keeps its state local.
    """

    def __init__(
        self,
        search: CandidateSearch,
        grader: Grader,
        rewriter: QueryRewriter | None = None,
        options: CorrectiveOptions | None = None,
        *,
        visual_available: bool = False,
        cache: GradeCache | None = None,
    ) -> None:
        self.search = search
        self.grader = grader
        self.rewriter = rewriter or KeywordRewriter()
        self.options = options or CorrectiveOptions()
        self.visual_available = visual_available
        self.cache = cache if cache is not None else GradeCache(self.options.cache_size)

    def __call__(
        self, query: str, access: AccessFilter, route: RouteName, n: int
    ) -> tuple[Candidates, CorrectiveTrace]:
        return self.run(query, access, route, n)

    def run(
        self, query: str, access: AccessFilter, route: RouteName, n: int
    ) -> tuple[Candidates, CorrectiveTrace]:
        options = self.options
        trace = CorrectiveTrace(
            query=query, grader=self.grader.name, grade_top_k=options.grade_top_k
        )
        memo: dict[tuple[str, str | None], GradeResult] = {}
        first = self._round(0, query, self.search(query, access, route, n), set(), memo, trace)
        trace.decision = first.decision
        known_bad = {c for c, g in first.grades.items() if g == Grade.INCORRECT}

        if first.decision == Grade.CORRECT:
            trace.action = "pass"
            trace.steps.append("mostly correct: the candidates pass, less those graded incorrect")
            return self._finish(first, [first], known_bad, trace)

        if first.decision == Grade.AMBIGUOUS:
            trace.action = "rewrite"
            since = time.perf_counter()
            rewrite = self.rewriter.rewrite(query)
            trace.stages_ms["rewrite"] = _ms_since(since)
            self._add_usage(trace, rewrite.usage)
            trace.rewritten_query = rewrite.query
            trace.rewrite_source = rewrite.source
            if rewrite.note:
                trace.steps.append(rewrite.note)
            if _same_query(rewrite.query, query):
                trace.steps.append(
                    f"mostly ambiguous; the {rewrite.source} rewrite is the question itself, "
                    "so no second search: the candidates pass, less those graded incorrect"
                )
                return self._finish(first, [first], known_bad, trace)
            trace.steps.append(
                f"mostly ambiguous: searching again with the {rewrite.source} rewrite "
                f"{rewrite.query!r}"
            )
            found = self.search(rewrite.query, access, route, n)
            second = self._round(1, query, found, known_bad, memo, trace)
            trace.rounds = 1
            trace.corrected_decision = second.decision
            known_bad |= {c for c, g in second.grades.items() if g == Grade.INCORRECT}
            if second.decision == Grade.INCORRECT:
                trace.steps.append("the rewrite's candidates are mostly incorrect: kept the first")
                return self._finish(first, [first, second], known_bad, trace)
            if second.graded.count(Grade.CORRECT) < first.graded.count(Grade.CORRECT):
                trace.steps.append("the rewrite's candidates have fewer correct: kept the first")
                return self._finish(first, [first, second], known_bad, trace)
            trace.steps.append("using the rewrite's candidates")
            return self._finish(second, [first, second], known_bad, trace)

        if options.on_incorrect == "abstain":
            trace.action = "abstain"
            reason = (
                "corrective retrieval: the best passages were mostly graded incorrect for the "
                f"question ({_tally(first.graded)})"
            )
            return self._abstain(first, [first], reason, trace)

        trace.action = "widen"
        wide_route = self._widen(route)
        wide_n = n * options.widen_factor
        trace.widened_route = wide_route
        trace.widened_top_k = wide_n
        trace.steps.append(
            f"mostly incorrect: searching wider once (route {wide_route.value}, {wide_n} "
            "candidates), skipping passages already graded incorrect"
        )
        found = self.search(query, access, wide_route, wide_n)
        second = self._round(1, query, found, known_bad, memo, trace)
        trace.rounds = 1
        trace.corrected_decision = second.decision
        known_bad |= {c for c, g in second.grades.items() if g == Grade.INCORRECT}
        if second.decision == Grade.INCORRECT:
            what = _tally(second.graded) if second.graded else "nothing new was found"
            reason = (
                f"corrective retrieval: even after widening the search (route "
                f"{wide_route.value}, {wide_n} candidates), the best passages were mostly "
                f"graded incorrect for the question ({what})"
            )
            return self._abstain(second, [first, second], reason, trace)
        trace.steps.append("using the widened candidates")
        return self._finish(second, [first, second], known_bad, trace)

    # -- steps ---------------------------------------------------------------------------------

    def _widen(self, route: RouteName) -> RouteName:
        if self.visual_available:
            return RouteName.HYBRID
        if route in (RouteName.KEYWORD, RouteName.AUTO):
            return RouteName.TEXT
        return route

    def _round(
        self,
        number: int,
        query: str,
        found: Candidates,
        skip: set[str],
        memo: dict[tuple[str, str | None], GradeResult],
        trace: CorrectiveTrace,
    ) -> _Round:
        """Grade the first ``grade_top_k`` distinct chunks of ``found`` not in ``skip``."""
        current = _Round(number, found)
        picked: list[Passage] = []
        for passage in found.passages:
            if passage.chunk_id in skip or any(p.chunk_id == passage.chunk_id for p in picked):
                continue
            picked.append(passage)
            if len(picked) >= self.options.grade_top_k:
                break
        since = time.perf_counter()
        results = self._grade(query, picked, current.index_version, memo, trace)
        trace.stages_ms[f"grade_{number}"] = _ms_since(since)
        for passage, (result, cached) in zip(picked, results, strict=True):
            current.graded.append(result.grade)
            current.grades[passage.chunk_id] = result.grade
            trace.grades.append(
                GradeRecord(
                    round=number,
                    chunk_id=passage.chunk_id,
                    doc_id=passage.doc_id,
                    page_number=passage.page_number,
                    grade=result.grade,
                    source=self.grader.source,
                    reason=result.reason,
                    cached=cached,
                )
            )
        current.decision = decide(current.graded, self.options.majority)
        label = "first search" if number == 0 else "corrective search"
        trace.steps.append(
            f"{label}: {_tally(current.graded)} graded -> {current.decision.value}"
            + (f" (skipped {len(skip)} known incorrect)" if skip else "")
        )
        return current

    def _grade(
        self,
        query: str,
        passages: list[Passage],
        version: str | None,
        memo: dict[tuple[str, str | None], GradeResult],
        trace: CorrectiveTrace,
    ) -> list[tuple[GradeResult, bool]]:
        """Grades of ``passages`` in order, each with whether it was reused: from this request
        (``memo``) or the shared cache when the grader's grades are cacheable."""
        grader = self.grader
        if not grader.cacheable:
            fresh = grader.grade(query, passages)
            for result in fresh:
                self._add_usage(trace, result.usage)
            return [(result, False) for result in fresh]
        out: list[tuple[GradeResult, bool] | None] = []
        todo: list[tuple[int, Passage]] = []
        for i, passage in enumerate(passages):
            key = GradeCache.key(query, passage.chunk_id, version)
            hit = memo.get((passage.chunk_id, version)) or self.cache.get(key)
            if hit is not None:
                trace.cache_hits += 1
                out.append((hit, True))
            else:
                trace.cache_misses += 1
                out.append(None)
                todo.append((i, passage))
        if todo:
            results = grader.grade(query, [p for _, p in todo])
            for (i, passage), result in zip(todo, results, strict=True):
                out[i] = (result, False)
                self._add_usage(trace, result.usage)
                if not result.failed:
                    kept = replace(result, usage=None)  # a reuse costs nothing
                    memo[(passage.chunk_id, version)] = kept
                    self.cache.put(GradeCache.key(query, passage.chunk_id, version), kept)
        return [item for item in out if item is not None]

    def _finish(
        self,
        chosen: _Round,
        rounds: list[_Round],
        known_bad: set[str],
        trace: CorrectiveTrace,
    ) -> tuple[Candidates, CorrectiveTrace]:
        kept = [p for p in chosen.found.passages if p.chunk_id not in known_bad]
        dropped = [p.chunk_id for p in chosen.found.passages if p.chunk_id in known_bad]
        trace.dropped = list(dict.fromkeys(dropped))
        trace.used = "corrected" if chosen.number == 1 else "original"
        if trace.dropped:
            trace.steps.append(f"dropped {len(trace.dropped)} passage(s) graded incorrect")
        return Candidates(kept, _merged_trace(chosen, rounds)), trace

    def _abstain(
        self, last: _Round, rounds: list[_Round], reason: str, trace: CorrectiveTrace
    ) -> tuple[Candidates, CorrectiveTrace]:
        trace.abstained = True
        trace.reason = reason
        trace.used = "none"
        trace.steps.append("abstain: " + reason)
        return Candidates([], _merged_trace(last, rounds)), trace

    def _add_usage(self, trace: CorrectiveTrace, usage: Usage | None) -> None:
        if usage is None:
            return
        trace.llm_calls += usage.calls
        if usage.prompt_tokens is not None:
            trace.prompt_tokens = (trace.prompt_tokens or 0) + usage.prompt_tokens
        if usage.completion_tokens is not None:
            trace.completion_tokens = (trace.completion_tokens or 0) + usage.completion_tokens


def _merged_trace(chosen: _Round, rounds: list[_Round]) -> RetrievalTrace | None:
    """The chosen round's retrieval trace, with every round's documents in ``doc_ids``: the
    stored trace names chunks of all of them, and deleting any one must purge it."""
    trace = chosen.found.trace
    if trace is None:
        return None
    doc_ids: set[str] = set(trace.doc_ids)
    for other in rounds:
        if other.found.trace is not None:
            doc_ids.update(other.found.trace.doc_ids)
        doc_ids.update(p.doc_id for p in other.found.passages)
    return trace.model_copy(update={"doc_ids": sorted(doc_ids)})


def _ms_since(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


def build_corrective(
    search: CandidateSearch,
    options: CorrectiveOptions,
    *,
    llm: ChatModel | None = None,
    visual_available: bool = False,
    scorer: PassageScorer | None = None,
) -> CorrectiveRetrieval:
    """The configured :class:`CorrectiveRetrieval`: the LLM grades and rewrites when there is
    one (``grader="auto"``), score bands on ``scorer`` and keyword rewrites otherwise."""
    use_llm = options.grader == "llm" or (options.grader == "auto" and llm is not None)
    grader: Grader
    if use_llm:
        if llm is None:
            raise ValueError("answer.corrective.grader='llm' needs an LLM (set llm.base_url)")
        grader = LlmGrader(llm, options.grader_concurrency)
    else:
        grader = ScoreBandGrader(options.correct_at, options.incorrect_below, scorer)
    rewriter: QueryRewriter = LlmRewriter(llm) if llm is not None else KeywordRewriter()
    return CorrectiveRetrieval(search, grader, rewriter, options, visual_available=visual_available)
