"""Prometheus metrics of the gateway: HTTP requests, latency, errors by code.

The gateway keeps its own registry (several apps in one test process do not collide) and
renders the text exposition format. Its ``/metrics`` shows its own series followed by the index
service's (:mod:`pagesight.services.metrics`), so one scrape of the gateway sees request latency per
route, search time per stage, ingest throughput, the job queue and errors by code.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Seconds; the same buckets as the index service's
#: (:data:`pagesight.services.metrics.LATENCY_BUCKETS`).
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class GatewayMetrics:
    """HTTP requests by route template, method and status; latency; errors by code."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "pagesight_http_requests",
            "HTTP requests answered",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "pagesight_http_request_seconds",
            "HTTP request latency",
            ["route", "method"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "pagesight_errors",
            "Error answers by stage error code",
            ["code"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "pagesight_http_in_flight", "Requests being served", registry=self.registry
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
