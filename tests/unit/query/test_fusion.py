"""Weighted RRF and the auto route's text-side choice."""

from __future__ import annotations

import pytest

from pagesight.core.types import RouteName
from pagesight.query.fusion import weighted_rrf
from pagesight.query.routing import choose_route


def test_rrf_rewards_agreement_between_routes() -> None:
    fused = weighted_rrf({"a": ["x", "y", "z"], "b": ["y", "x", "w"]}, {}, k=60)
    assert [item for item, _ in fused] == ["x", "y", "z", "w"]  # x, y tie: first seen first
    assert {item for item, _ in fused} == {"x", "y", "z", "w"}
    scores = dict(fused)
    assert scores["x"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["w"] == pytest.approx(1 / 63)


def test_rrf_weights_scale_and_zero_removes_a_route() -> None:
    rankings = {"dense": ["d1", "d2"], "keyword": ["k1", "k2"]}
    assert weighted_rrf(rankings, {"dense": 2.0})[0][0] == "d1"
    assert weighted_rrf(rankings, {"dense": 0.5})[0][0] == "k1"
    assert {i for i, _ in weighted_rrf(rankings, {"keyword": 0.0})} == {"d1", "d2"}


def test_rrf_ties_are_deterministic() -> None:
    fused = weighted_rrf({"a": ["p"], "b": ["q"]}, {})
    assert [i for i, _ in fused] == ["p", "q"]


@pytest.mark.parametrize(
    ("query", "route"),
    [
        ("What was Ulta Beauty's net sales growth in Q4 2022?", RouteName.TEXT),
        ("ERR_4U9525 code", RouteName.KEYWORD),
        ('"same-day delivery"', RouteName.KEYWORD),
        ("令和6年の景気動向", RouteName.TEXT),
        ("What share of Germans see relations as good in the chart?", RouteName.HYBRID),
        ("図3の売上高の推移", RouteName.HYBRID),
    ],
)
def test_auto_route_by_query(query: str, route: RouteName) -> None:
    assert choose_route(query, visual_available=True) == route
    if route == RouteName.HYBRID:  # without a page model, auto never picks a visual route
        assert choose_route(query, visual_available=False) == RouteName.TEXT
