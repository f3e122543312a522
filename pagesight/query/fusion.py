"""Weighted reciprocal rank fusion.

RRF uses ranks, not scores, so routes whose scores live on different scales (cosine, BM25,
MaxSim) combine without calibration: score(d) = sum_r w_r / (k + rank_r(d)). A weight of 0
removes a route; a larger k flattens the advantage of the top ranks.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

#: What is ranked: chunk ids, or (doc_id, page) keys.
K = TypeVar("K", bound=Hashable)


def weighted_rrf(
    rankings: Mapping[str, Sequence[K]], weights: Mapping[str, float], k: float = 60.0
) -> list[tuple[K, float]]:
    """Fuse ranked id lists (best first) into one list of (id, fused score), best first.

    Ties keep the order in which ids were first seen across routes (routes in mapping order),
    so fusion is deterministic.
    """
    ranks = {
        route: {item: rank for rank, item in enumerate(ranked, start=1)}
        for route, ranked in rankings.items()
    }
    return weighted_rrf_ranks(ranks, weights, k)


def weighted_rrf_ranks(
    ranks: Mapping[str, Mapping[K, int]], weights: Mapping[str, float], k: float = 60.0
) -> list[tuple[K, float]]:
    """RRF over explicit 1-based ranks (several items may share one rank in a route)."""
    scores: dict[K, float] = {}
    for route, ranked in ranks.items():
        weight = weights.get(route, 1.0)
        if weight <= 0:
            continue
        for item, rank in ranked.items():
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
