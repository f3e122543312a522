"""Prometheus metrics of the index service: search time per stage, ingest throughput, the job
queue and job outcomes by error code.

The service keeps its own registry (several services in one test process do not collide) and
renders the text exposition format; the gateway's ``/metrics`` shows its own series
(:mod:`pagesight.gateway.metrics`) followed by these, so one scrape of the gateway sees both.
Under Ray Serve each replica (writers and Query replicas alike) also copies its registry into
Ray's metrics export (:func:`cumulative_samples`, :mod:`pagesight.entrypoints.fleet_metrics`),
which the gateway's scrape merges: the search-stage histograms of every Query replica, not
only those of the replica that happened to answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

#: Seconds; the gateway's request latency uses the same buckets.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ServiceMetrics:
    """Search stages, ingestion throughput and queue, job outcomes by error code."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.search_stage = Histogram(
            "pagesight_search_stage_seconds",
            "Time per retrieval stage (keyword, dense, visual, fuse, evidence, total)",
            ["route", "stage"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.ingest_pages = Counter(
            "pagesight_ingest_pages", "Pages ingested (rate() = pages/s)", registry=self.registry
        )
        self.ingest_seconds = Counter(
            "pagesight_ingest_busy_seconds",
            "Seconds the ingest worker spent on jobs",
            registry=self.registry,
        )
        self.jobs = Counter(
            "pagesight_ingest_jobs",
            "Finished ingest jobs by state and error code",
            ["state", "code"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "pagesight_ingest_queue_depth",
            "Ingest jobs waiting or running",
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


@dataclass(frozen=True)
class CumulativeSample:
    """One sample of a registry as a plain number: a counter's total, a histogram bucket's
    cumulative count, a gauge's value."""

    name: str
    documentation: str
    labels: dict[str, str]
    value: float


def cumulative_samples(registry: CollectorRegistry) -> Iterator[CumulativeSample]:
    """Every sample of ``registry`` as it stands, less the ``*_created`` timestamps (a
    counter's creation time is no measurement, and would be copied as one)."""
    for family in registry.collect():
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            yield CumulativeSample(sample.name, family.documentation, sample.labels, sample.value)
