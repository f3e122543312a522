"""A replica's registries as Ray gauges: every sample, with the replica's tags, the same gauge
reused from one copy to the next; nothing started outside a Serve replica."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

pytest.importorskip("ray")

from pagesight.entrypoints import fleet_metrics


class RecordingGauge:
    made: ClassVar[list[RecordingGauge]] = []

    def __init__(self, name: str, description: str = "", tag_keys: tuple[str, ...] = ()) -> None:
        self.name, self.description, self.tag_keys = name, description, tag_keys
        self.values: dict[tuple[tuple[str, str], ...], float] = {}
        RecordingGauge.made.append(self)

    def set(self, value: float, tags: dict[str, str] | None = None) -> None:
        tags = tags or {}
        assert set(tags) == set(self.tag_keys), (tags, self.tag_keys)
        self.values[tuple(sorted(tags.items()))] = value


@pytest.fixture
def gauges(monkeypatch: pytest.MonkeyPatch) -> list[RecordingGauge]:
    import ray.util.metrics

    RecordingGauge.made = []
    monkeypatch.setattr(ray.util.metrics, "Gauge", RecordingGauge)
    return RecordingGauge.made


TAGS = {"deployment": "Query", "replica": "abc123", "application": "pagesight"}


def test_every_sample_becomes_a_tagged_gauge(gauges: list[RecordingGauge]) -> None:
    registry = CollectorRegistry()
    searches = Histogram(
        "pagesight_search_stage_seconds", "stage", ["route"], buckets=(0.1,), registry=registry
    )
    searches.labels("text").observe(0.05)
    export = fleet_metrics.RegistryExport([registry], TAGS)
    copied = export.export_once()
    by_name = {g.name: g for g in gauges}
    assert set(by_name) == {
        "pagesight_search_stage_seconds_bucket",
        "pagesight_search_stage_seconds_count",
        "pagesight_search_stage_seconds_sum",
    }
    assert copied == 4  # two buckets, count, sum
    bucket = by_name["pagesight_search_stage_seconds_bucket"]
    assert set(bucket.tag_keys) == {"route", "le", *TAGS}
    key = tuple(sorted({"route": "text", "le": "+Inf", **TAGS}.items()))
    assert bucket.values[key] == 1.0

    searches.labels("text").observe(0.5)
    export.export_once()
    assert len(gauges) == 3  # the same gauges, new values
    assert bucket.values[key] == 2.0


def test_counters_are_copied_as_their_totals(gauges: list[RecordingGauge]) -> None:
    registry = CollectorRegistry()
    jobs = Counter("pagesight_ingest_jobs", "jobs", ["state", "code"], registry=registry)
    jobs.labels("FAILED", "CORRUPT").inc(2)
    fleet_metrics.RegistryExport([registry], TAGS).export_once()
    (gauge,) = gauges
    assert gauge.name == "pagesight_ingest_jobs_total"
    assert list(gauge.values.values()) == [2.0]


def test_outside_a_replica_nothing_is_started(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray import serve
    from ray.serve.exceptions import RayServeException

    def no_replica() -> Any:
        raise RayServeException("not in a replica")

    monkeypatch.setattr(serve, "get_replica_context", no_replica)
    assert fleet_metrics.replica_tags() is None
    assert fleet_metrics.export_replica_metrics(CollectorRegistry()) is None


def test_a_failing_copy_never_stops_the_thread(
    gauges: list[RecordingGauge], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    third = threading.Event()

    def failing(self: fleet_metrics.RegistryExport) -> int:
        calls.append(1)
        if len(calls) >= 3:
            third.set()
        raise RuntimeError("agent gone")

    monkeypatch.setattr(fleet_metrics.RegistryExport, "export_once", failing)
    export = fleet_metrics.RegistryExport([CollectorRegistry()], TAGS, period_s=0.01).start()
    third.wait(timeout=60)
    export.close()
    assert len(calls) >= 3
    assert not export._thread.is_alive()
