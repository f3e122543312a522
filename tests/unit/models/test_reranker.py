"""The reranker, on a tiny random XLM-R cross-encoder built offline.

The tiny checkpoint (pagesight/models/testing/tiny_reranker.py) loads through the real
``AutoTokenizer`` / ``AutoModelForSequenceClassification.from_pretrained``, like
``BAAI/bge-reranker-v2-m3``, so these tests cover loading, pairing, truncation, batching and padding
as with real weights; only the scores are meaningless.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import RerankerOptions
from pagesight.models.reranker import (
    FUSED_RANKER_ID,
    CrossEncoderReranker,
    FusedScoreRanker,
    Ranker,
    build_ranker,
)
from pagesight.models.testing.tiny_reranker import build_tiny_cross_encoder

os.environ["HF_HUB_OFFLINE"] = "1"

QUERY = "What was the total revenue in 2023?"
#: Different lengths, so one batch needs padding; one is empty.
PASSAGES = [
    "Total revenue rose to 4.2 billion dollars in 2023, up 12 percent from 2022.",
    "The invoice lists the customer name and the billing address.",
    "wiring diagram",
    "",
    "Patients in the treatment group reported fewer side effects than the control group, and "
    "the difference was statistically significant at the five percent level.",
    "The board proposes a dividend of 1.10 euros per share.",
    "Appendix B contains the list of spare parts with their part numbers.",
]


@dataclass(frozen=True)
class Hit:
    id: str
    text: str
    fused: float


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-reranker") / "tiny-reranker")


@pytest.fixture(scope="module")
def reranker(tiny_dir: Path) -> CrossEncoderReranker:
    ranker = CrossEncoderReranker(RerankerOptions(model=str(tiny_dir), device="cpu"))
    ranker.warm_up()
    return ranker


def test_loads_and_scores_one_finite_float32_per_passage(
    tiny_dir: Path, reranker: CrossEncoderReranker
) -> None:
    assert isinstance(reranker, Ranker)
    assert reranker.model_id == tiny_dir.name
    scores = reranker.score(QUERY, PASSAGES)
    assert scores.dtype == np.float32
    assert scores.shape == (len(PASSAGES),)
    assert np.all(np.isfinite(scores))
    assert len(set(scores.tolist())) == len(PASSAGES)  # a random model, but not a constant one


def test_construction_is_cheap_and_name_overrides_model_id(tiny_dir: Path) -> None:
    ranker = CrossEncoderReranker(RerankerOptions(model=str(tiny_dir), name="tiny-xlmr@1"))
    assert ranker.model_id == "tiny-xlmr@1"
    assert ranker._model is None  # nothing loaded until warm_up or first use


def test_scores_are_deterministic_across_calls_and_instances(
    tiny_dir: Path, reranker: CrossEncoderReranker
) -> None:
    first = reranker.score(QUERY, PASSAGES)
    np.testing.assert_array_equal(first, reranker.score(QUERY, PASSAGES))
    other = CrossEncoderReranker(RerankerOptions(model=str(tiny_dir), device="cpu"))
    np.testing.assert_allclose(other.score(QUERY, PASSAGES), first, atol=1e-6)


def test_batch_size_and_order_do_not_change_scores(
    tiny_dir: Path, reranker: CrossEncoderReranker
) -> None:
    reference = reranker.score(QUERY, PASSAGES)  # batch 16: all in one padded batch
    one = CrossEncoderReranker(RerankerOptions(model=str(tiny_dir), device="cpu", batch_size=1))
    np.testing.assert_allclose(one.score(QUERY, PASSAGES), reference, atol=1e-5)
    three = CrossEncoderReranker(RerankerOptions(model=str(tiny_dir), device="cpu", batch_size=3))
    np.testing.assert_allclose(three.score(QUERY, PASSAGES), reference, atol=1e-5)
    reversed_scores = reranker.score(QUERY, PASSAGES[::-1])
    np.testing.assert_allclose(reversed_scores[::-1], reference, atol=1e-5)


def test_single_passage_matches_its_score_in_a_batch(reranker: CrossEncoderReranker) -> None:
    batch = reranker.score(QUERY, PASSAGES)
    for i in (0, 3, 4):
        single = reranker.score(QUERY, [PASSAGES[i]])
        assert single.shape == (1,)
        assert single[0] == pytest.approx(batch[i], abs=1e-5)


def test_rerank_returns_top_k_best_first_with_the_objects(
    reranker: CrossEncoderReranker,
) -> None:
    hits = [Hit(f"h{i}", text, 0.0) for i, text in enumerate(PASSAGES)]
    scores = reranker.score(QUERY, PASSAGES)
    ranked = reranker.rerank(QUERY, hits, lambda hit: hit.text, top_k=3)
    assert len(ranked) == 3
    expected = np.argsort(-scores, kind="stable")[:3]
    assert [hit for hit, _ in ranked] == [hits[i] for i in expected]
    assert [s for _, s in ranked] == pytest.approx([float(scores[i]) for i in expected], abs=1e-5)
    assert all(isinstance(s, float) for _, s in ranked)
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    # top_k above the count returns everything; 0 or no candidates return nothing
    assert len(reranker.rerank(QUERY, hits, lambda hit: hit.text, top_k=100)) == len(hits)
    assert reranker.rerank(QUERY, hits, lambda hit: hit.text, top_k=0) == []
    assert reranker.rerank(QUERY, [], lambda hit: hit.text, top_k=5) == []
    with pytest.raises(ValueError):
        reranker.rerank(QUERY, hits, lambda hit: hit.text, top_k=-1)


def test_rerank_ties_keep_input_order(reranker: CrossEncoderReranker) -> None:
    hits = [Hit(f"dup{i}", "the same passage about revenue", 0.0) for i in range(5)]
    ranked = reranker.rerank(QUERY, hits, lambda hit: hit.text, top_k=5)
    assert [hit.id for hit, _ in ranked] == [hit.id for hit in hits]
    # duplicates among other passages: scored once, mapped back to every position
    mixed = [PASSAGES[0], PASSAGES[4], PASSAGES[0], PASSAGES[2], PASSAGES[4], PASSAGES[0]]
    scores = reranker.score(QUERY, mixed)
    assert scores.shape == (6,)
    assert scores[0] == scores[2] == scores[5] and scores[1] == scores[4]
    distinct = reranker.score(QUERY, [PASSAGES[0], PASSAGES[4], PASSAGES[2]])
    np.testing.assert_allclose(scores[[0, 1, 3]], distinct, atol=1e-5)
    order = [i for i, _ in reranker.rerank(QUERY, list(range(6)), lambda i: mixed[i], top_k=6)]
    for dupes in ([0, 2, 5], [1, 4]):
        assert [i for i in order if i in dupes] == dupes


def test_empty_passages_give_an_empty_array(reranker: CrossEncoderReranker) -> None:
    scores = reranker.score(QUERY, [])
    assert scores.shape == (0,)
    assert scores.dtype == np.float32


def test_long_passages_are_truncated_and_long_queries_fall_back(tiny_dir: Path) -> None:
    ranker = CrossEncoderReranker(RerankerOptions(model=str(tiny_dir), max_length=24))
    passage = " ".join(["revenue rose in every region and segment"] * 20)
    # only_second: the query is kept whole and the passage cut, so text past the cut is unseen
    cut = ranker.score(QUERY, [passage, passage + " invoice wiring diagram"])
    assert cut[0] == pytest.approx(cut[1], abs=1e-5)
    # a query longer than max_length on its own falls back to longest_first
    long_query = " ".join(["what was the total revenue"] * 20)
    scores = ranker.score(long_query, [passage, "wiring diagram"])
    assert scores.shape == (2,)
    assert np.all(np.isfinite(scores))


def test_concurrent_warm_up_loads_once(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ranker = CrossEncoderReranker(RerankerOptions(model=str(tiny_dir), device="cpu"))
    loads = 0
    original = ranker._load

    def counting_load() -> None:
        nonlocal loads
        loads += 1
        original()

    monkeypatch.setattr(ranker, "_load", counting_load)
    threads = [threading.Thread(target=ranker.warm_up) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == 1
    results: list[np.ndarray] = []
    workers = [
        threading.Thread(target=lambda: results.append(ranker.score(QUERY, PASSAGES)))
        for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(results) == 3
    for result in results[1:]:
        np.testing.assert_allclose(result, results[0], atol=1e-6)


def test_missing_model_dir_is_an_embed_failed_error(tmp_path: Path) -> None:
    ranker = CrossEncoderReranker(RerankerOptions(model=str(tmp_path / "no-such-model")))
    with pytest.raises(PageSightError) as info:
        ranker.score(QUERY, ["anything"])
    assert info.value.code is ErrorCode.EMBED_FAILED
    assert info.value.stage is Stage.QUERY
    assert "no-such-model" in info.value.message


def test_a_directory_without_a_classifier_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    # An encoder without the classification head: transformers would initialise it at random.
    from transformers import AutoModel

    base = tmp_path / "encoder-only"
    AutoModel.from_pretrained(tiny_dir).save_pretrained(base)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (base / name).write_bytes((tiny_dir / name).read_bytes())
    with pytest.raises(PageSightError) as info:
        CrossEncoderReranker(RerankerOptions(model=str(base))).warm_up()
    assert info.value.code is ErrorCode.EMBED_FAILED
    assert "random" in info.value.message


def test_options_activity_and_validation(tiny_dir: Path) -> None:
    assert not Path("BAAI/bge-reranker-v2-m3").is_dir()
    assert RerankerOptions().active is False  # a hub id, not a local directory
    assert RerankerOptions(model=str(tiny_dir)).active is True
    assert RerankerOptions(model=str(tiny_dir), enabled=False).active is False
    assert RerankerOptions(enabled=True).active is True
    with pytest.raises(ValueError):
        RerankerOptions(batch_size=16, unknown=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        RerankerOptions(batch_size=0)


def test_build_ranker_picks_the_cross_encoder_only_when_active(tiny_dir: Path) -> None:
    assert isinstance(build_ranker(RerankerOptions(model=str(tiny_dir))), CrossEncoderReranker)
    fallback = build_ranker(RerankerOptions())
    assert isinstance(fallback, FusedScoreRanker)
    assert fallback.model_id == FUSED_RANKER_ID


def test_fused_score_ranker_is_a_pass_through() -> None:
    hits = [Hit("a", "x", 0.9), Hit("b", "y", 0.95), Hit("c", "z", 0.2), Hit("d", "w", 0.1)]
    ranker = FusedScoreRanker(score_of=lambda hit: hit.fused)
    assert isinstance(ranker, Ranker)
    ranker.warm_up()

    def never_called(hit: Hit) -> str:
        raise AssertionError("the pass-through must not read passage text")

    ranked = ranker.rerank(QUERY, hits, never_called, top_k=3)
    # the caller's order, cut to top_k, with the caller's scores (not used to re-sort)
    assert [(hit.id, score) for hit, score in ranked] == [("a", 0.9), ("b", 0.95), ("c", 0.2)]
    overridden = ranker.rerank(QUERY, hits, never_called, top_k=2, score_of=lambda hit: 1.0)
    assert [(hit.id, score) for hit, score in overridden] == [("a", 1.0), ("b", 1.0)]
    assert ranker.rerank(QUERY, hits, never_called, top_k=0) == []
    assert len(ranker.rerank(QUERY, hits, never_called, top_k=10)) == 4
    with pytest.raises(ValueError):
        ranker.rerank(QUERY, hits, never_called, top_k=-1)

    plain = FusedScoreRanker()
    assert [s for _, s in plain.rerank(QUERY, hits, never_called, top_k=3)] == pytest.approx(
        [1.0, 0.5, 1 / 3]
    )
    scores = plain.score(QUERY, ["x", "y", "z"])
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, [1.0, 0.5, 1 / 3], rtol=1e-6)
    assert plain.score(QUERY, []).shape == (0,)


@pytest.mark.gpu
def test_scores_on_cuda_follow_the_cpu_scores(
    tiny_dir: Path, reranker: CrossEncoderReranker
) -> None:
    """On a GPU the reranker runs in bfloat16 (float16 where bf16 is missing): its scores
    stay float32 on the CPU side and within bf16 rounding of the float32 CPU scores."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    on_gpu = CrossEncoderReranker(RerankerOptions(model=str(tiny_dir), device="cuda"))
    cpu_scores = reranker.score(QUERY, PASSAGES)
    gpu_scores = on_gpu.score(QUERY, PASSAGES)
    assert gpu_scores.dtype == np.float32 and gpu_scores.shape == cpu_scores.shape
    np.testing.assert_allclose(gpu_scores, cpu_scores, atol=0.05 * float(np.abs(cpu_scores).max()))
