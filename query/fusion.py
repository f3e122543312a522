"""Weighted reciprocal rank fusion.

RRF uses ranks, not scores, so routes whose scores live on different scales (cosine, BM25,
MaxSim) combine without calibration: score(d) = sum_r w_r / (k + rank_r(d)). A weight of 0
removes a route; a larger k flattens the advantage of the top ranks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def weighted_rrf(
    rankings: Mapping[str, Sequence[str]], weights: Mapping[str, float], k: float = 60.0
) -> list[tuple[str, float]]:
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
    ranks: Mapping[str, Mapping[str, int]], weights: Mapping[str, float], k: float = 60.0
) -> list[tuple[str, float]]:
    """RRF over explicit 1-based ranks, so several items may share one rank in a route.

    That is how a page-level route fuses with chunk-level routes: every chunk of a visual hit
    page takes that page's rank.
    """
    scores: dict[str, float] = {}
    for route, ranked in ranks.items():
        weight = weights.get(route, 1.0)
        if weight <= 0:
            continue
        for item, rank in ranked.items():
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
