"""Fusion with synthetic routes of known quality (issue: visual retrieval, section 4).

Each simulated question has one relevant page among 2,000. Every route scores all pages and
keeps its top 100; an informative route adds a signal to the relevant page's score, so it tends
to rank near the top, while a pure-noise route scores every page alike. The text side is two
routes (BM25 and dense), as in the retriever. With the default weights, adding a pure-noise
visual route may cost at most 0.05 page_hit@5, and adding an informative one must gain.
"""

from __future__ import annotations

import numpy as np

from pagesight.core.settings import RetrievalOptions
from pagesight.query.fusion import weighted_rrf

N_PAGES = 2000
N_QUESTIONS = 400
DEPTH = 100  # candidates per route, as the retriever asks for


def _route(rng: np.random.Generator, target: int, signal: float) -> list[str]:
    scores = rng.normal(size=N_PAGES)
    scores[target] += signal
    return [str(p) for p in np.argsort(-scores)[:DEPTH]]


def _hit_at_5(
    routes: dict[str, list[list[str]]],
    names: list[str],
    targets: list[int],
    weights: dict[str, float],
) -> float:
    hits = 0
    for i, target in enumerate(targets):
        fused = weighted_rrf({name: routes[name][i] for name in names}, weights, k=60)
        hits += str(target) in [item for item, _ in fused[:5]]
    return hits / len(targets)


def test_noise_route_costs_little_and_informative_route_gains() -> None:
    weights = RetrievalOptions().weights
    rng = np.random.default_rng(42)
    targets = [int(t) for t in rng.integers(0, N_PAGES, size=N_QUESTIONS)]
    routes = {
        "keyword": [_route(rng, t, 3.2) for t in targets],
        "dense": [_route(rng, t, 3.0) for t in targets],
        "visual": [_route(rng, t, 3.2) for t in targets],
        "noise": [_route(rng, t, 0.0) for t in targets],
    }
    noise_weights = {**weights, "noise": weights["visual"]}  # noise in the visual route's place

    text = _hit_at_5(routes, ["keyword", "dense"], targets, weights)
    with_noise = _hit_at_5(routes, ["keyword", "dense", "noise"], targets, noise_weights)
    with_visual = _hit_at_5(routes, ["keyword", "dense", "visual"], targets, weights)
    visual = _hit_at_5(routes, ["visual"], targets, weights)

    assert 0.6 < text < 0.95, "the synthetic text routes should be good, not perfect"
    assert text - with_noise <= 0.05, (text, with_noise)
    assert with_visual > max(text, visual) + 0.03, (with_visual, text, visual)


def test_a_noise_route_at_full_weight_would_cost_more() -> None:
    """The reason the visual weight defaults below 1: one route's random top ranks compete."""
    rng = np.random.default_rng(42)
    targets = [int(t) for t in rng.integers(0, N_PAGES, size=N_QUESTIONS)]
    routes = {
        "keyword": [_route(rng, t, 3.2) for t in targets],
        "dense": [_route(rng, t, 3.0) for t in targets],
        "noise": [_route(rng, t, 0.0) for t in targets],
    }
    text = _hit_at_5(routes, ["keyword", "dense"], targets, {})
    full = _hit_at_5(routes, ["keyword", "dense", "noise"], targets, {"noise": 1.0})
    damped = _hit_at_5(
        routes,
        ["keyword", "dense", "noise"],
        targets,
        {"noise": RetrievalOptions().weights["visual"]},
    )
    assert text - full > text - damped
