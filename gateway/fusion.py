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
    scores: dict[str, float] = {}
    for route, ranked in rankings.items():
        weight = weights.get(route, 1.0)
        if weight <= 0:
            continue
        for rank, item in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
