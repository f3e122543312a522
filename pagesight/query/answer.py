"""Grounded answers: retrieved passages in, a cited answer (or an honest abstention) out.

This is the answer half of the query flow (DESIGN.md section 1): candidates -> rerank ->
threshold (abstain) -> grounded generation with numbered context -> citation check -> answer
with citations {doc, page, element ids, boxes} and the trace id. It is a plain class that knows
nothing of HTTP or Ray, so a ``/v1/answer`` route, a Serve deployment and the tests all drive the
same code; the candidate search, the ranker and the LLM are injected. Beside it: the citations
and their check (:mod:`pagesight.query.citations`), the extractive answers
(:mod:`pagesight.query.extractive_answer`) and the abstention (:mod:`pagesight.query.abstention`).

Why it is built this way:

* **Abstain before generating.** When nothing was found, or the best evidence scores below
  :attr:`AnswerOptions.abstain_threshold`, the LLM is never called: a model asked to answer from
  irrelevant text will usually answer anyway. The threshold is on :func:`confidence_of`'s
  ``[0, 1]`` scale and is calibrated per ranker (``bench/calibrate_abstain.py``, on questions
  outside the smoke subset). A query no score exists for (all scores NaN) is not abstained on.
* **Documents are data.** Retrieved text is untrusted (anyone who can get a PDF indexed can
  write "ignore previous instructions" into it). The system prompt carries only our
  instructions; each passage travels in the user message inside a ``<document n=N>`` ...
  ``</document>`` block whose delimiters cannot be forged from inside (they are escaped in the
  text), and the system prompt says that block contents are never instructions.
* **Every citation is checked.** The model returns JSON (:data:`ANSWER_SCHEMA`, enforced by
  vLLM's guided decoding where available); a sentence citing a block number that was not in the
  context, or a reply that is not the promised JSON, gets exactly one regeneration with a user
  message naming the problem (at temperature 0 the same prompt would give the same reply).
  What is still unsupported after that is withheld, never shown: sentences with no valid
  citation are dropped, and the ``strict`` policy also drops uncited sentences and abstains when
  nothing is left or the evidence is weak. A reply that is still not JSON falls back to the
  extractive answer over the same context.
* **Answerability is judged by the model that reads.** The same structured reply lists the
  blocks that contain the answer by themselves (``sufficient``, in the trace): ``strict``
  abstains when the model marks none, even if it wrote sentences (a model asked to answer
  tends to answer from on-topic text that does not hold the answer; the offline scores could
  not tell such questions apart, ROC AUC about 0.5). Streamed prose carries no such list.
* **Extractive mode** (no LLM configured: the embedded default) quotes sentences of the context
  verbatim (whitespace collapsed) with their block's citation, chosen by lexical overlap with
  the question using the sparse index's tokenizer (:func:`pagesight.models.text.tokenize`: stemming,
  stop words, numbers, CJK bigrams). It never writes a word of its own, and abstains when no
  sentence shares a content word with the question.
* **Streaming** (:meth:`AnswerPipeline.stream`) runs the same steps; only generation differs.
  JSON cannot be shown while it is written, so a streamed LLM answer is prose whose sentences
  end with ``[n]`` markers (:data:`STREAM_SYSTEM_PROMPT`), forwarded token by token and checked
  by the same rules once complete. Tokens cannot be unsent, so there is no regeneration: the
  final answer drops what failed and lists it in ``withheld``, and that final answer, not the
  tokens, is the authority. Extractive answers are checked first and then sent as tokens.
* **Deterministic.** No randomness, no clock: the same passages, scores and LLM replies give the
  same response, which makes answers auditable and tests exact.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import ValidationError

from pagesight.core.protocols import (
    CandidateSearch,
    ChatModel,
    CorrectiveSearch,
    PageImageSource,
    PageRanker,
    Ranker,
    StreamingChatModel,
)
from pagesight.core.settings import AnswerOptions
from pagesight.core.types import (
    AccessFilter,
    AnswerResponse,
    AnswerToken,
    AnswerTrace,
    Candidates,
    ChatMessage,
    Passage,
    Policy,
    Question,
    RetrievalTrace,
    VisionTrace,
)
from pagesight.models.llm import LlmError, MalformedOutput
from pagesight.models.reranker import FusedScoreRanker
from pagesight.query.abstention import abstention
from pagesight.query.citations import checked_answer, checked_prose
from pagesight.query.context import (
    ContextBlock,
    TokenCounter,
    approx_tokens,
    build_context,
    confidence_of,
)
from pagesight.query.counting import StructureCounter, structure_answer
from pagesight.query.extractive_answer import extractive_answer, related_passages
from pagesight.query.generation import (
    SCHEMA_NAME,
    Attempt,
    Reply,
    answer_schema,
    build_messages,
    build_stream_messages,
    correction_message,
    with_markers,
)
from pagesight.query.vision import numbered_after, page_image_blocks, vision_wanted
from pagesight.query.visual_rerank import fuse_visual_ranking

# -- the pipeline ------------------------------------------------------------------------------


@dataclass
class AnsweredQuery:
    """An answer and its trace: the retrieval trace with :class:`AnswerTrace` filled in."""

    response: AnswerResponse
    trace: RetrievalTrace


class AnswerPipeline:
    """Question -> candidates -> rerank -> abstain or answer with checked citations.

    ``candidates(query, access, route, n)`` returns up to ``n`` passages that ``access`` may
    read, best first (permission filters apply there, never here); ``ranker`` reorders and
    scores them; ``llm`` generates (None: extractive answers). Construction does no work.
    """

    def __init__(  # noqa: PLR0913  # the pipeline's injected collaborators and options
        self,
        candidates: CandidateSearch,
        ranker: Ranker,
        llm: ChatModel | None,
        options: AnswerOptions | None = None,
        *,
        count_tokens: TokenCounter = approx_tokens,
        corrective: CorrectiveSearch | None = None,
        visual: PageRanker | None = None,
        vision: Literal["off", "auto", "always"] = "off",
        images: PageImageSource | None = None,
        counter: StructureCounter | None = None,
    ) -> None:
        self.candidates = candidates
        self.ranker = ranker
        #: fuses the exact MaxSim order of the candidates' pages into the ranker's order
        self.visual = visual
        self.llm = llm
        self.options = options or AnswerOptions()
        self.count_tokens = count_tokens
        #: grades the candidates and corrects the search once (pagesight.query.corrective); it wraps
        #: its own candidate search, which replaces ``candidates`` when set
        self.corrective = corrective
        #: whether the LLM is shown page images (``PAGESIGHT_LLM__VISION``, pagesight.query.vision),
        #: and where they are read from (no source: never)
        self.vision = vision
        self.images = images
        #: counts counting questions in the structure ("how many figures ...";
        #: pagesight.query.counting), the retriever's count route's (None: never)
        self.counter = counter

    @property
    def mode(self) -> Literal["llm", "extractive"]:
        return "llm" if self.llm is not None else "extractive"

    def answer(self, request: Question, access: AccessFilter, trace_id: str) -> AnswerResponse:
        """The grounded answer to ``request`` from what ``access`` may read (module doc)."""
        return self.run(request, access, trace_id).response

    def run(self, request: Question, access: AccessFilter, trace_id: str) -> AnsweredQuery:
        """:meth:`answer` with its trace: the candidate search's retrieval trace (under
        ``trace_id``) plus what reranking, context building and generation did."""
        return _finished(self._run(request, access, trace_id, streaming=False))

    def stream(
        self, request: Question, access: AccessFilter, trace_id: str
    ) -> Generator[AnswerToken | AnsweredQuery, None, None]:
        """:meth:`run`, streamed: :class:`AnswerToken` s as the answer is written, then one
        :class:`AnsweredQuery` whose response is the checked answer (the authority).

        Every step before generation is :meth:`run`'s own code (search, correction, rerank,
        threshold, context), so an abstention there yields no token, only the final item. What
        the tokens are is :meth:`_stream_generation`'s. Nothing runs before the first
        ``next()``; closing the generator early closes the LLM's stream, which stops vLLM
        generating. An :class:`~pagesight.models.llm.LlmError` propagates as in :meth:`run`, before
        or after the first token; nothing is retried once a token is out.
        """
        answered = yield from self._run(request, access, trace_id, streaming=True)
        yield answered

    def _run(
        self, request: Question, access: AccessFilter, trace_id: str, streaming: bool
    ) -> Generator[AnswerToken, None, AnsweredQuery]:
        """The body of :meth:`run` and :meth:`stream`: a generator that yields tokens only when
        ``streaming`` and returns the answer with its trace."""
        record = AnswerTrace(mode=self.mode, ranker=self.ranker.model_id)
        access = _narrow(access, request.filters.doc_ids)
        pool = max(self.options.candidate_pool, request.top_k_context)
        if self.corrective is not None:
            found, record.corrective = self.corrective.run(
                request.query, access, request.route, pool
            )
        else:
            found = self.candidates(request.query, access, request.route, pool)
        if record.corrective is not None and record.corrective.abstained:
            reason = record.corrective.reason or "corrective retrieval found nothing relevant"
            response = self._abstain(trace_id, 0.0, reason)
        else:
            counted, note = (
                structure_answer(
                    self.counter, request.query, access, found.passages, trace_id, self.mode
                )
                if self.counter is not None
                else (None, None)
            )
            if counted is not None:  # a structure count: no passage states it
                record.answer_type = "structure_count"
                response = counted
                if streaming:
                    cited = counted.sentences[0].citations
                    yield AnswerToken(text=with_markers(counted.answer, cited))
            else:
                response = yield from self._answer(
                    request, access, found, trace_id, record, streaming
                )
                if note is not None:  # the structure could not count: the answer says so
                    said = f"{note} {response.reason}" if response.reason else note
                    response = response.model_copy(update={"reason": said})
        record.confidence = response.confidence
        record.abstained = response.abstained
        record.reason = response.reason
        record.answer = response.answer
        record.cited = [c.chunk_id for c in response.citations]
        if found.trace is not None:
            trace = found.trace.model_copy(update={"trace_id": trace_id, "answer": record})
        else:
            trace = RetrievalTrace(
                trace_id=trace_id,
                query=request.query,
                requested_route=request.route,
                route=request.route,
                doc_ids=sorted({p.doc_id for p in found.passages}),
                answer=record,
            )
        return AnsweredQuery(response=response, trace=trace)

    def _answer(
        self,
        request: Question,
        access: AccessFilter,
        candidates: Candidates,
        trace_id: str,
        record: AnswerTrace,
        streaming: bool = False,
    ) -> Generator[AnswerToken, None, AnswerResponse]:
        """Rerank, abstain or build the context, then generate; a generator only so that a
        stream's tokens pass through (with ``streaming`` False it yields nothing)."""
        options = self.options
        found = candidates.passages
        policy: Policy = "strict" if "strict" in (request.policy, options.policy) else "standard"
        if access.doc_ids is not None:  # belt and braces: the search should have done it
            allowed = set(access.doc_ids)
            found = [p for p in found if p.doc_id in allowed]
        found = _unique(found)
        record.candidates = len(found)
        if not found:
            return self._abstain(trace_id, 0.0, "no passage that you may read matches the question")

        since = time.perf_counter()
        ranked = self._rerank(request.query, found, request.top_k_context, access, record)
        record.stages_ms["rerank"] = _ms_since(since)
        record.reranked = [
            (passage.chunk_id, round(score, 6) if math.isfinite(score) else None)
            for passage, score in ranked
        ]
        if not ranked:
            return self._abstain(trace_id, 0.0, "no passage that you may read matches the question")
        scored = [score for _, score in ranked if math.isfinite(score)]
        confidence = max((self._confidence(score) for score in scored), default=0.0)
        # No finite score: the scorer could not judge this query (the embedded profile's dense
        # cosine when the dense route skipped the query's language), so no abstention on score.
        threshold = options.abstain_threshold if scored else 0.0
        if confidence < threshold:
            weak = self._abstain(
                trace_id,
                confidence,
                f"the best evidence ({confidence:.3f}) is below the abstain threshold "
                f"({threshold:.3f})",
            )
            return weak.model_copy(update={"related": related_passages(request.query, ranked)})
        if policy == "strict" and confidence < 2 * threshold:
            weak = self._abstain(
                trace_id,
                confidence,
                f"strict policy: the best evidence ({confidence:.3f}) is below twice the "
                f"abstain threshold ({2 * threshold:.3f})",
            )
            return weak.model_copy(update={"related": related_passages(request.query, ranked)})

        passages = [replace(passage, score=score) for passage, score in ranked]
        images = self._image_blocks(request.query, passages, access, candidates.trace, record)
        image_tokens = sum(block.image.tokens for block in images if block.image is not None)
        blocks = build_context(
            passages,
            options.context_budget_tokens - image_tokens,
            options.reserve_output_tokens,
            self.count_tokens,
        )
        if images and not blocks:  # the images took the room the text needed: text alone
            images = self._without_images(record, "no text passage fits beside the images")
            blocks = build_context(
                passages,
                options.context_budget_tokens,
                options.reserve_output_tokens,
                self.count_tokens,
            )
        record.context_tokens = sum(self.count_tokens(block.text) for block in blocks)
        if not blocks:
            record.context = []
            return self._abstain(trace_id, confidence, "no passage fits the context budget")
        blocks += numbered_after(images, len(blocks) + 1)
        if record.vision is not None:
            record.vision.images = [block.image for block in blocks if block.image is not None]
        record.context = [block.chunk_id for block in blocks]
        record.context_tokens += image_tokens
        since = time.perf_counter()
        if streaming:
            response = yield from self._stream_generation(
                request.query, blocks, confidence, policy, trace_id, record
            )
        elif self.llm is None:
            response = self._extractive(
                request.query, blocks, confidence, trace_id, None, policy, record
            )
        else:
            response = self._generate(
                self.llm, request.query, blocks, confidence, policy, trace_id, record
            )
        record.stages_ms["generate" if self.llm is not None else "extract"] = _ms_since(since)
        return response

    # -- steps ---------------------------------------------------------------------------------

    def _image_blocks(
        self,
        query: str,
        passages: list[Passage],
        access: AccessFilter,
        retrieval: RetrievalTrace | None,
        record: AnswerTrace,
    ) -> list[ContextBlock]:
        """The page-image blocks of this answer (module :mod:`pagesight.query.vision`), numbered
        from 1; none without an LLM, with vision off or not wanted, or without an image source. The
        decision and its reason go into ``record.vision``."""
        if self.llm is None:
            return []
        wanted, reason = vision_wanted(self.vision, query, retrieval)
        record.vision = VisionTrace(setting=self.vision, sent=wanted, reason=reason)
        if not wanted:
            return []
        if self.images is None:
            return self._without_images(record, "no page images are available to the pipeline")
        options = self.options
        available = options.context_budget_tokens - options.reserve_output_tokens
        budget = min(options.images.budget_tokens, available // 2)
        blocks = page_image_blocks(
            passages, self.images, access, options.images, budget, self.count_tokens
        )
        if not blocks:
            return self._without_images(
                record, f"no page image fits the image budget ({budget} tokens) or is stored"
            )
        return blocks

    @staticmethod
    def _without_images(record: AnswerTrace, reason: str) -> list[ContextBlock]:
        """No images after all: ``record.vision`` says why; returns the (empty) image blocks."""
        if record.vision is not None:
            record.vision.sent = False
            record.vision.reason = f"{record.vision.reason}; not sent: {reason}"
            record.vision.images = []
        return []

    def _rerank(
        self,
        query: str,
        found: list[Passage],
        top_k: int,
        access: AccessFilter,
        record: AnswerTrace,
    ) -> list[tuple[Passage, float]]:
        """The ranker's order and scores; with a visual reranker, the whole pool's text order
        fused with the exact MaxSim order of its pages, cut to ``top_k`` after fusion. Scores
        stay the ranker's: an RRF score says where a passage ranked, not how well it answers,
        so confidence and abstention never read it."""
        visual = self.visual
        weight = self.options.visual_rerank_weight
        keep = len(found) if visual is not None and weight > 0 else top_k
        ranked = self._ranker_order(query, found, keep)
        if visual is None or weight <= 0 or not ranked:
            return ranked
        record.visual_ranker = visual.model_id
        pages = [(passage.doc_id, passage.page_number) for passage, _ in ranked]
        score_of = {id(passage): score for passage, score in ranked}
        fused = fuse_visual_ranking(
            [passage for passage, _ in ranked],
            lambda passage: (passage.doc_id, passage.page_number),
            visual.rerank(query, pages, access),
            visual_weight=weight,
            k=self.options.visual_rerank_k,
        )
        return [(passage, score_of[id(passage)]) for passage, _ in fused[:top_k]]

    def _ranker_order(
        self, query: str, found: Sequence[Passage], keep: int
    ) -> list[tuple[Passage, float]]:
        ranker = self.ranker
        if isinstance(ranker, FusedScoreRanker):  # pass-through: the search's own scores
            return ranker.rerank(
                query, found, _text_of, keep, score_of=lambda passage: passage.score
            )
        return ranker.rerank(query, found, _text_of, keep)

    def confidences(self, query: str, passages: Sequence[Passage]) -> list[float]:
        """Each passage's confidence on ``[0, 1]``, in input order: the ranker's score on the
        scale the abstain threshold is calibrated on (corrective retrieval's score bands use
        it too). The visual rerank is not run: it reorders, and never feeds confidence."""
        ranked = self._ranker_order(query, passages, len(passages))
        by_identity = {id(passage): self._confidence(score) for passage, score in ranked}
        return [by_identity.get(id(passage), 0.0) for passage in passages]

    def _confidence(self, score: float) -> float:
        scale = self.options.score_scale
        if scale == "auto":
            scale = "probability" if isinstance(self.ranker, FusedScoreRanker) else "logit"
        return confidence_of(score, scale)

    def _extractive(
        self,
        query: str,
        blocks: list[ContextBlock],
        confidence: float,
        trace_id: str,
        note: str | None,
        policy: Policy = "standard",
        record: AnswerTrace | None = None,
    ) -> AnswerResponse:
        """The extractive answer over ``blocks`` (:mod:`pagesight.query.extractive_answer`)."""
        return extractive_answer(
            query, blocks, confidence, trace_id, note, self.options, policy, record
        )

    def _generate(
        self,
        llm: ChatModel,
        query: str,
        blocks: list[ContextBlock],
        confidence: float,
        policy: Policy,
        trace_id: str,
        record: AnswerTrace,
    ) -> AnswerResponse:
        messages = build_messages(query, blocks, self.options.max_sentences)
        numbers = {block.n for block in blocks}
        try:
            first = self._ask(llm, messages, numbers, record)
        except LlmError as exc:
            text_only = self._vision_failed(blocks, exc, record)
            return self._generate(llm, query, text_only, confidence, policy, trace_id, record)
        final = first
        if first.problem is not None:
            correction = [ChatMessage("assistant", first.raw)] if first.raw.strip() else []
            correction.append(ChatMessage("user", correction_message(first, sorted(numbers))))
            second = self._ask(llm, [*messages, *correction], numbers, record)
            # The latest reply that parsed; a reply that never parsed falls back below.
            final = second if second.reply is not None or first.reply is None else first
        if final.reply is None:
            note = f"the model's reply was not usable twice ({final.problem}); quoted instead"
            return self._extractive(query, blocks, confidence, trace_id, note, policy, record)

        reply = final.reply
        if reply.abstain:
            return self._abstain(trace_id, confidence, "the model found no answer in the documents")
        if reply.sufficient is not None:
            record.sufficient = sorted({n for n in reply.sufficient if n in numbers})
            if policy == "strict" and not record.sufficient:
                return self._abstain(
                    trace_id,
                    confidence,
                    "strict policy: the model marked no document as containing the answer",
                )
        sentences = [(sentence.text, sentence.citations) for sentence in reply.sentences]
        return checked_answer(
            sentences,
            blocks,
            final.unknown,
            confidence,
            policy,
            trace_id,
            self.options.max_sentences,
            shown=False,
        )

    @staticmethod
    def _vision_failed(
        blocks: list[ContextBlock], error: LlmError, record: AnswerTrace
    ) -> list[ContextBlock]:
        """The text blocks of ``blocks``, to ask again without images after the model failed on
        a request that had some (the trace says why); ``error`` itself when it had none: then
        images were not the problem."""
        text_only = [block for block in blocks if block.image is None]
        if len(text_only) == len(blocks) or isinstance(error, MalformedOutput):
            raise error
        if record.vision is not None:
            record.vision.sent = False
            record.vision.fallback = f"{error.code}: {error.message}"[:500]
        record.attempts.append(f"failed with images: {error.code}")
        record.context = [block.chunk_id for block in text_only]
        record.context_tokens -= sum(b.image.tokens for b in blocks if b.image is not None)
        return text_only

    def _ask(
        self,
        llm: ChatModel,
        messages: list[ChatMessage],
        numbers: set[int],
        record: AnswerTrace,
    ) -> Attempt:
        """One structured completion, checked: JSON per schema, every citation in ``numbers``;
        its outcome and token counts go into ``record``.

        :class:`~pagesight.models.llm.MalformedOutput` is a problem to correct; any other
        :class:`~pagesight.models.llm.LlmError` (server down, request rejected) propagates to the
        caller.
        """
        attempt = self._attempt(llm, messages, numbers, record)
        record.attempts.append(attempt.problem or "ok")
        return attempt

    def _attempt(
        self,
        llm: ChatModel,
        messages: list[ChatMessage],
        numbers: set[int],
        record: AnswerTrace,
    ) -> Attempt:
        try:
            result = llm.complete(
                messages,
                json_schema=answer_schema(max(numbers, default=1), self.options.max_sentences),
                schema_name=SCHEMA_NAME,
                max_tokens=self.options.reserve_output_tokens,
            )
        except MalformedOutput as exc:
            return Attempt(raw=exc.raw_text, problem=f"not valid JSON: {exc.message}")
        for name in ("prompt_tokens", "completion_tokens"):
            count = getattr(result, name)
            if count is not None:
                setattr(record, name, (getattr(record, name) or 0) + count)
        try:
            reply = Reply.model_validate(result.parsed)
        except ValidationError as exc:
            detail = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]
            )
            return Attempt(raw=result.text, problem=f"JSON not matching the schema: {detail}")
        unknown = sorted({n for s in reply.sentences for n in s.citations if n not in numbers})
        problem = f"cited documents that do not exist: {unknown}" if unknown else None
        return Attempt(raw=result.text, reply=reply, problem=problem, unknown=unknown)

    def _abstain(
        self,
        trace_id: str,
        confidence: float,
        reason: str,
        mode: Literal["llm", "extractive"] | None = None,
    ) -> AnswerResponse:
        return abstention(trace_id, confidence, reason, mode or self.mode)

    # -- streaming -----------------------------------------------------------------------------

    def _stream_generation(
        self,
        query: str,
        blocks: list[ContextBlock],
        confidence: float,
        policy: Policy,
        trace_id: str,
        record: AnswerTrace,
    ) -> Generator[AnswerToken, None, AnswerResponse]:
        """The generation step of :meth:`stream`: tokens, then the checked answer.

        With a streaming LLM client the model writes prose citing ``[n]``
        (:data:`STREAM_SYSTEM_PROMPT`, same numbered blocks as :func:`build_messages`); each
        delta is forwarded as it comes and the whole is checked once complete
        (:func:`~pagesight.query.citations.checked_prose`). The extractive answer (no LLM), and
        the JSON answer of a client that cannot stream, are complete and checked before their
        first token: their sentences are then sent as tokens, markers included, and never need
        withholding.
        """
        llm = self.llm
        if llm is None:
            response = self._extractive(query, blocks, confidence, trace_id, None, policy, record)
        elif not isinstance(llm, StreamingChatModel):
            response = self._generate(llm, query, blocks, confidence, policy, trace_id, record)
        else:
            messages = build_stream_messages(query, blocks, self.options.max_sentences)
            parts: list[str] = []
            deltas = llm.stream(messages, max_tokens=self.options.reserve_output_tokens)
            try:
                first = next(deltas, None)
            except LlmError as exc:  # nothing is out yet: the same stream without images
                blocks = self._vision_failed(blocks, exc, record)
                messages = build_stream_messages(query, blocks, self.options.max_sentences)
                deltas = llm.stream(messages, max_tokens=self.options.reserve_output_tokens)
                first = next(deltas, None)
            for delta in itertools.chain([first] if first is not None else [], deltas):
                parts.append(delta)
                yield AnswerToken(text=delta)
            return checked_prose(
                "".join(parts),
                blocks,
                confidence,
                policy,
                trace_id,
                record,
                self.options.max_sentences,
            )
        if not response.abstained:
            for i, sentence in enumerate(response.sentences):
                text = with_markers(sentence.text, sentence.citations)
                yield AnswerToken(text=text if i == 0 else f" {text}")
        return response


def _finished(steps: Generator[AnswerToken, None, AnsweredQuery]) -> AnsweredQuery:
    """The result of a non-streaming :meth:`AnswerPipeline._run`, which yields nothing."""
    try:
        token = next(steps)
    except StopIteration as done:
        answered: AnsweredQuery = done.value
        return answered
    steps.close()
    raise RuntimeError(f"a non-streaming answer produced a token: {token.text!r}")


def _unique(passages: list[Passage]) -> list[Passage]:
    """``passages`` without repeats of a (chunk, page), keeping the first (best) of each."""
    seen: set[tuple[str, int]] = set()
    out = []
    for passage in passages:
        key = (passage.chunk_id, passage.page_number)
        if key not in seen:
            seen.add(key)
            out.append(passage)
    return out


def _ms_since(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


def _text_of(passage: Passage) -> str:
    return passage.text


def _narrow(access: AccessFilter, doc_ids: list[str] | None) -> AccessFilter:
    """``access`` limited to ``doc_ids`` too (the intersection, when it already has a list)."""
    if doc_ids is None:
        return access
    wanted = list(dict.fromkeys(doc_ids))
    if access.doc_ids is not None:
        allowed = set(access.doc_ids)
        wanted = [d for d in wanted if d in allowed]
    return access.model_copy(update={"doc_ids": wanted})
