"""Reranking retrieved passages against the question before an answer is grounded in them.

Retrieval fuses several routes (BM25, dense text, visual pages) whose scores say how a passage
ranked, not how well it answers; a cross-encoder reads the question and each passage together
and scores their relevance directly, which is what decides which passages an answer may cite.

Two rankers implement :class:`Ranker`:

* :class:`CrossEncoderReranker` — a Hugging Face sequence-classification cross-encoder (default
  ``BAAI/bge-reranker-v2-m3``, multilingual, one logit), loaded with ``AutoTokenizer`` and
  ``AutoModelForSequenceClassification``. Construction is free; weights load in
  :meth:`~CrossEncoderReranker.warm_up` or on first use.
* :class:`FusedScoreRanker` — a **pass-through**: it re-orders nothing and runs no model. It is
  what the embedded profile uses when no cross-encoder weights are local (the embedded profile
  never downloads weights): candidates keep the retriever's fused order, cut to ``top_k``, and
  carry the score the caller passes in (the index service's: the dense cosine), so the answer
  pipeline works the same with or without a reranker, only with retrieval's ordering.

Scores (cross-encoder): the raw logit of a one-logit model, ``logit[1] - logit[0]`` of a two-logit
(irrelevant / relevant) model — the log-odds of relevance either way; higher means more relevant,
and ``sigmoid`` of it is the probability the model was trained to give. Pairs are built as
``(query, passage)``; truncation cuts the passage only (``only_second``), and falls back to
``longest_first`` when the query alone is longer than ``max_length``.

Batching: each distinct passage is scored once (duplicates get bit-identical scores, so their
ties stay ties). Pairs are tokenized once, sorted by token count (longest first, so an
out-of-memory batch fails at once) and padded per batch, so a batch pads to similar lengths.
Scores do not depend on ``batch_size`` beyond float rounding (padding is masked).

Weights: ``model`` is a local directory or a hub id; with ``HF_HUB_OFFLINE=1`` a hub id must
already be in the Hugging Face cache. A checkpoint that lacks any of the classifier's weights
(an embedding model, say) is refused: transformers would silently initialise them at random.
On CPU the model runs in float32; on CUDA in bfloat16 (float16 where bfloat16 is unsupported).

Thread safety: loading happens once under a lock; tokenization is serialised because a fast
tokenizer's truncation/padding state is shared (concurrent calls raise "Already borrowed");
forward passes run concurrently.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.protocols import Ranker
from pagesight.core.settings import RerankerOptions
from pagesight.models.hf import (
    hub_offline,
    load_failure,
    model_id_of_dir,
    quiet_transformers,
    resolve_device,
)

T = TypeVar("T")

#: ``model_id`` of :class:`FusedScoreRanker` (no model: retrieval's own order and scores).
FUSED_RANKER_ID = "fused-score-passthrough"


class CrossEncoderReranker:
    """Relevance scores from a sequence-classification cross-encoder; weights load on first use."""

    def __init__(self, options: RerankerOptions | None = None) -> None:
        self.options = options or RerankerOptions()
        self._model: Any = None
        self._tokenizer: Any = None
        self._device: Any = None
        self._max_length = self.options.max_length
        self._load_lock = threading.Lock()
        # A fast tokenizer's truncation/padding settings are shared state (module doc).
        self._tokenize_lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """The explicit ``name``; else the hub id (also when read from a hub-cache snapshot
        path); else the local directory's name."""
        if self.options.name:
            return self.options.name
        local = self._local_dir()
        return model_id_of_dir(local) if local is not None else self.options.model

    def warm_up(self) -> None:
        """Load the tokenizer and weights (once; concurrent callers wait for the first)."""
        if self._model is not None:
            return
        with self._load_lock:
            if self._model is None:
                self._load()

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float32]:
        """Relevance log-odds of each passage for ``query``, float32 ``[len(passages)]``."""
        if len(passages) == 0:
            return np.zeros(0, dtype=np.float32)
        self.warm_up()
        # Each distinct text is scored once: duplicates (page headers, repeated chunks) cost
        # nothing and get bit-identical scores, so ties between them stay ties (a row's position
        # in a batch can change the last bit of its score).
        texts = list(dict.fromkeys(passages))
        encoded = self._tokenize(query, texts)
        lengths = [len(ids) for ids in encoded["input_ids"]]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])  # stable: longest first
        scores = np.empty(len(texts), dtype=np.float32)
        size = self.options.batch_size
        for start in range(0, len(order), size):
            batch = order[start : start + size]
            features = {key: [values[i] for i in batch] for key, values in encoded.items()}
            with self._tokenize_lock:
                inputs = self._tokenizer.pad(features, padding=True, return_tensors="pt")
            scores[batch] = self._forward(inputs)
        if not np.all(np.isfinite(scores)):
            raise PageSightError(
                ErrorCode.EMBED_FAILED, Stage.QUERY, f"{self.model_id} produced non-finite scores"
            )
        if len(texts) == len(passages):
            return scores
        position = {text: i for i, text in enumerate(texts)}
        return scores[[position[text] for text in passages]]

    def rerank(
        self, query: str, candidates: Sequence[T], text_of: Callable[[T], str], top_k: int
    ) -> list[tuple[T, float]]:
        """The ``top_k`` candidates with the highest scores, best first; ties keep input order."""
        if top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {top_k}")
        if top_k == 0 or len(candidates) == 0:
            return []
        scores = self.score(query, [text_of(candidate) for candidate in candidates])
        best = np.argsort(-scores, kind="stable")[:top_k]
        return [(candidates[int(i)], float(scores[i])) for i in best]

    # -- internals ---------------------------------------------------------------------------

    def _tokenize(self, query: str, texts: list[str]) -> dict[str, list[list[int]]]:
        """Token ids of every ``(query, text)`` pair, unpadded."""
        queries = [query] * len(texts)
        with self._tokenize_lock:
            try:
                encoded = self._tokenizer(
                    queries, texts, truncation="only_second", max_length=self._max_length
                )
            except Exception:  # the query alone exceeds max_length ("Truncation error: ...")
                encoded = self._tokenizer(
                    queries, texts, truncation="longest_first", max_length=self._max_length
                )
        return dict(encoded)

    def _forward(self, inputs: Any) -> npt.NDArray[np.float32]:
        """Scores of one padded batch, float32 on the CPU."""
        import torch

        try:
            with torch.inference_mode():
                logits = self._model(**inputs.to(self._device)).logits.float()
                # one logit: the relevance log-odds; two (irrelevant, relevant): their difference
                relevance = logits[:, 0] if logits.shape[-1] == 1 else logits[:, 1] - logits[:, 0]
                array: npt.NDArray[np.float32] = relevance.cpu().numpy().astype(np.float32)
        except RuntimeError as exc:  # torch raises RuntimeError for OOM and device failures
            raise PageSightError(
                ErrorCode.EMBED_FAILED, Stage.QUERY, f"{self.model_id} failed to rerank: {exc}"
            ) from exc
        return array

    def _local_dir(self) -> Path | None:
        candidate = Path(self.options.model).expanduser()
        return candidate if candidate.is_dir() else None

    def _load(self) -> None:
        import torch

        device = resolve_device(self.options.device, "reranker", Stage.QUERY)
        if device == "cuda":
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        else:
            dtype = torch.float32

        local = self._local_dir()
        source = str(local) if local is not None else self.options.model
        local_files_only = hub_offline() or local is not None
        try:
            with quiet_transformers():
                from transformers import AutoModelForSequenceClassification, AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_files_only)
                model, loading_info = AutoModelForSequenceClassification.from_pretrained(
                    source,
                    dtype=dtype,
                    local_files_only=local_files_only,
                    output_loading_info=True,
                )
        except Exception as exc:  # any loader failure (missing files, offline, bad config)
            raise load_failure(
                "reranker model", source, local, "PAGESIGHT_RERANKER__MODEL", exc, Stage.QUERY
            ) from exc
        missing = sorted(loading_info.get("missing_keys") or ())
        mismatched = sorted(str(key) for key in loading_info.get("mismatched_keys") or ())
        if missing or mismatched:
            bad = missing or mismatched
            raise PageSightError(
                ErrorCode.EMBED_FAILED,
                Stage.QUERY,
                f"reranker checkpoint {source!r} lacks or mismatches {len(bad)} weights "
                f"(e.g. {', '.join(bad[:3])}); is it a cross-encoder? Refusing random weights",
            )
        num_labels = int(model.config.num_labels)
        if num_labels not in (1, 2):
            raise PageSightError(
                ErrorCode.EMBED_FAILED,
                Stage.QUERY,
                f"reranker {source!r} has {num_labels} labels; a cross-encoder has 1 (a relevance "
                "logit) or 2 (irrelevant, relevant)",
            )
        if tokenizer.pad_token_id is None:
            raise PageSightError(
                ErrorCode.EMBED_FAILED,
                Stage.QUERY,
                f"reranker tokenizer {source!r} has no pad token",
            )
        model_max = getattr(tokenizer, "model_max_length", None)
        if isinstance(model_max, int) and 0 < model_max < self.options.max_length:
            self._max_length = model_max
        self._tokenizer = tokenizer
        self._device = torch.device(device)
        self._model = model.to(self._device).eval()


class FusedScoreRanker:
    """A **pass-through** ranker: keeps the retriever's order and reports the caller's score.

    The embedded profile's scorer when no cross-encoder weights are local. It runs no model and
    re-orders nothing: :meth:`rerank` returns the first ``top_k`` candidates in the order given
    (the retriever's fused ranking, best first), each with ``score_of(candidate)`` — the
    caller's confidence score, reported as given, never used to sort (the index service passes
    the dense route's cosine of the passage's page, on which the abstain threshold is
    calibrated). Without a
    ``score_of`` (here or in the constructor) the score is the rank score ``1 / (1 + rank)``,
    as is :meth:`score`'s: it says where a passage ranked, not how relevant it is.
    """

    def __init__(self, score_of: Callable[[Any], float] | None = None) -> None:
        self._score_of = score_of

    @property
    def model_id(self) -> str:
        return FUSED_RANKER_ID

    def warm_up(self) -> None:
        """Nothing to load."""

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float32]:
        """``1 / (1 + rank)`` for passages given best first: the input order, as scores."""
        return (1.0 / np.arange(1, len(passages) + 1, dtype=np.float32)).astype(np.float32)

    def rerank(
        self,
        query: str,
        candidates: Sequence[T],
        text_of: Callable[[T], str],
        top_k: int,
        *,
        score_of: Callable[[T], float] | None = None,
    ) -> list[tuple[T, float]]:
        """The first ``top_k`` candidates in input order with the caller's scores (class doc);
        ``score_of`` here overrides the constructor's. ``text_of`` is not called."""
        if top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {top_k}")
        kept = list(candidates[:top_k])
        scorer = score_of or self._score_of
        if scorer is None:
            return [(candidate, 1.0 / (1 + rank)) for rank, candidate in enumerate(kept)]
        return [(candidate, float(scorer(candidate))) for candidate in kept]


def build_ranker(
    options: RerankerOptions | None = None, *, score_of: Callable[[Any], float] | None = None
) -> Ranker:
    """The cross-encoder when ``options.active`` (weights local, or explicitly enabled), else the
    :class:`FusedScoreRanker` pass-through with ``score_of``."""
    options = options or RerankerOptions()
    if options.active:
        return CrossEncoderReranker(options)
    return FusedScoreRanker(score_of)
