"""Prometheus metrics of the gateway: HTTP requests, latency, errors by code, and the fleet's.

The gateway keeps its own registry (several apps in one test process do not collide) and
renders the text exposition format. Its ``/metrics`` shows its own series, then the index
service's (:mod:`pagesight.services.metrics`), then, under Ray Serve, the fleet's
(:class:`FleetScrape`): so one scrape of the gateway sees request latency per route, search time
per stage, ingest throughput, the job queue, errors by code, and request counts and latency
histograms of every replica of every deployment, labelled ``deployment`` and ``replica``.

Why the fleet section is Ray's metrics export, federated here, and not prometheus_client's
multiprocess mode: multiprocess mode merges the files that processes of one host write into one
shared directory, and Serve's replicas run on several hosts (Ray pods) with no shared
filesystem fit for mmap; it would also count nothing for the deployments that do not use
prometheus_client (Parser, the embedders). Ray Serve 2.x already measures every replica of
every deployment (``ray_serve_deployment_request_counter``,
``ray_serve_deployment_processing_latency_ms``, errors, ongoing and queued requests, with
``deployment``, ``replica`` and ``application`` labels), and each Ray node's metrics agent
exports what the processes on that node recorded, PageSight's own registries included (the
replicas copy them there: :mod:`pagesight.entrypoints.fleet_metrics`). What Prometheus lacks is
one place to read it all: each node has its own port. So the gateway reads every live node's
port at scrape time and merges the ``ray_serve_*`` and ``ray_pagesight_*`` families into one
exposition, dropping only Ray's per-process bookkeeping labels (worker id, session, version).
Prometheus scrapes the gateway and nothing else (scraping the nodes too would count twice).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Seconds; the same buckets as the index service's
#: (:data:`pagesight.services.metrics.LATENCY_BUCKETS`).
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

#: The families of a node's export that describe the fleet: Serve's own, and PageSight's
#: registries as the replicas copied them into Ray (Ray prefixes every name with ``ray_``).
FLEET_PREFIXES = ("ray_serve_", "ray_pagesight_")
#: Ray's per-process bookkeeping: a new value per worker process or session, no meaning on a
#: dashboard, and a new series after every restart. ``deployment``, ``replica``,
#: ``application`` and ``NodeAddress`` stay.
_DROPPED_LABELS = frozenset(
    {
        "Component",
        "SessionName",
        "Version",
        "WorkerId",
        "otel_scope_name",
        "otel_scope_schema_url",
        "otel_scope_version",
    }
)
#: One node's export is ~200 KB with a few deployments; far more means something is wrong.
MAX_NODE_BYTES = 16 * 1024 * 1024
#: A scrape waits this long for the slowest node (Prometheus' own default timeout is 10 s).
NODE_TIMEOUT_S = 4.0


class GatewayMetrics:
    """HTTP requests by route template, method and status; latency; errors by code.

    ``fleet`` is set by the Ray Serve builder (:mod:`pagesight.entrypoints.serve_app`); without
    Ray (``pagesight serve --no-ray``, tests) there is no fleet and it stays None."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.fleet: FleetScrape | None = None
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


# -- the fleet: every Ray node's metrics export, merged --------------------------------------------


@dataclass
class _Family:
    name: str
    documentation: str
    type: str
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


def fleet_families(text: str, prefixes: tuple[str, ...] = FLEET_PREFIXES) -> list[Metric]:
    """The fleet families of one node's exposition (a ValueError if it does not parse).

    Lines of other families are dropped before parsing: most of a node's export is Ray's own
    (gRPC, object store, workers), and prometheus_client's parser costs ~0.2 ms a line."""
    kept = []
    for line in text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            name = line[7:].partition(" ")[0]
        elif line.startswith("#") or not line.strip():
            continue
        else:
            name = line.partition("{")[0].partition(" ")[0]
        if name.startswith(prefixes):
            kept.append(line)
    parsed = text_string_to_metric_families("\n".join(kept) + "\n")
    return [f for f in parsed if f.name.startswith(prefixes)]


def merge_fleet(nodes: Iterable[list[Metric]]) -> list[Metric]:
    """The fleet families of several nodes (:func:`fleet_families`) as one set of families.

    Ray's bookkeeping labels are dropped, and samples that are then equal in name and labels
    are summed (counts of one replica and route from two worker processes of a node).
    PageSight's own families arrive as Ray gauges holding the cumulative values
    (:mod:`pagesight.entrypoints.fleet_metrics`) and get their types back: ``*_total`` a
    counter, ``*_bucket``/``*_count``/``*_sum`` together a histogram.
    """
    families: dict[str, _Family] = {}
    for node in nodes:
        for parsed in node:
            family = families.setdefault(
                parsed.name, _Family(parsed.name, parsed.documentation, parsed.type)
            )
            for sample in parsed.samples:
                labels = tuple(
                    sorted((k, v) for k, v in sample.labels.items() if k not in _DROPPED_LABELS)
                )
                key = (sample.name, labels)
                family.samples[key] = family.samples.get(key, 0.0) + sample.value
    return [_metric(f) for f in _retyped(families)]


def _retyped(families: dict[str, _Family]) -> Iterator[_Family]:
    """Gauges that carry a copied counter or histogram back under their own type."""
    taken: set[str] = set()
    for name in sorted(families):
        family = families[name]
        if name in taken:
            continue
        if family.type != "gauge" or not name.startswith("ray_pagesight_"):
            yield family
            continue
        base = name.rpartition("_")[0]
        parts = [f"{base}_bucket", f"{base}_count", f"{base}_sum"]
        if name.endswith(("_bucket", "_count", "_sum")) and all(p in families for p in parts):
            merged = _Family(base, families[parts[0]].documentation, "histogram")
            for part in parts:
                merged.samples.update(families[part].samples)
                taken.add(part)
            yield merged
        elif name.endswith("_total"):
            yield _Family(base, family.documentation, "counter", family.samples)
        else:
            yield family


def _metric(family: _Family) -> Metric:
    metric = Metric(family.name, family.documentation, family.type)
    for (name, labels), value in sorted(family.samples.items()):
        metric.add_sample(name, dict(labels), value)
    return metric


class _Families(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self.metrics


class FleetScrape:
    """Reads every Ray node's metrics export at scrape time and renders the fleet's families.

    ``targets`` lists the nodes' metrics URLs (from Ray's node table, so nodes that join or
    leave are followed). A node that does not answer within ``timeout_s``, or answers with an
    error or too much, is left out of that scrape and counted in
    ``pagesight_fleet_nodes{state="failed"}`` (as is one whose exposition does not parse): a
    scrape never fails as a whole.
    """

    def __init__(
        self,
        targets: Callable[[], Awaitable[list[str]]],
        *,
        timeout_s: float = NODE_TIMEOUT_S,
        max_bytes: int = MAX_NODE_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.targets = targets
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.transport = transport  # tests: nodes without sockets

    async def render(self) -> bytes:
        try:
            urls = await asyncio.wait_for(self.targets(), self.timeout_s)
        except Exception:
            log.warning("the Ray node list is unavailable: no fleet metrics", exc_info=True)
            urls = []
        async with httpx.AsyncClient(timeout=self.timeout_s, transport=self.transport) as client:
            results = await asyncio.gather(
                *(self._fetch(client, url) for url in urls), return_exceptions=True
            )
        read = [r for r in results if isinstance(r, list)]
        for url, result in zip(urls, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("metrics of node %s unavailable: %r", url, result)
        metrics = merge_fleet(read)
        nodes = Metric("pagesight_fleet_nodes", "Ray nodes read by this scrape", "gauge")
        nodes.add_sample("pagesight_fleet_nodes", {"state": "scraped"}, len(read))
        nodes.add_sample("pagesight_fleet_nodes", {"state": "failed"}, len(urls) - len(read))
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families([nodes, *metrics]))
        return generate_latest(registry)

    async def _fetch(self, client: httpx.AsyncClient, url: str) -> list[Metric]:
        async with client.stream("GET", url) as response:
            response.raise_for_status()
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self.max_bytes:
                    raise ValueError(f"more than {self.max_bytes} bytes")
        # parsing ~200 KB takes tens of milliseconds: off the event loop that serves requests
        return await asyncio.to_thread(fleet_families, body.decode("utf-8", errors="replace"))
