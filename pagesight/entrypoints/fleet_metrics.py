"""Fleet metrics under Ray Serve: each replica's registries into Ray's export, and the nodes' list.

Ray Serve measures every replica of every deployment itself (requests, latency histograms,
errors, ongoing and queued requests, labelled ``deployment`` and ``replica``); Ray's metrics
agent on each node exports what the processes there recorded. PageSight's own metrics (the
gateway's HTTP series, the search-stage histograms of Query replicas, the writers' ingest
series) live in prometheus_client registries inside each replica's process. A
:class:`RegistryExport` copies them into Ray's export every few seconds, as Ray gauges holding
the cumulative values, tagged with the replica's ``deployment``, ``replica`` and ``application``
(Ray names them ``ray_pagesight_*``; the gateway's scrape gives them back their counter and
histogram types: :func:`pagesight.gateway.metrics.merge_fleet`). Gauges and not Ray's counters
or histograms, because those take increments and observations, while a registry holds totals
and bucket counts: a gauge carries those exactly, with the registry's own buckets.
:func:`node_metrics_urls` is what the gateway's :class:`~pagesight.gateway.metrics.FleetScrape`
reads at each scrape.

Why not prometheus_client's multiprocess mode: see :mod:`pagesight.gateway.metrics`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from prometheus_client import CollectorRegistry

from pagesight.services.metrics import cumulative_samples

log = logging.getLogger(__name__)

#: Seconds between two copies; Ray's agent exports what it received on its own interval
#: (~10 s), so a scrape sees a replica's counts some 5-15 s after they happened.
EXPORT_PERIOD_S = 5.0


def replica_tags() -> dict[str, str] | None:
    """``deployment``, ``replica`` and ``application`` of the Serve replica this code runs in
    (None outside one: ``pagesight serve --no-ray``, tests)."""
    from ray import serve
    from ray.serve.exceptions import RayServeException

    try:
        context = serve.get_replica_context()
    except RayServeException:
        return None
    return {
        "deployment": context.deployment,
        "replica": context.replica_id.unique_id,
        "application": context.app_name,
    }


class RegistryExport:
    """Copies prometheus_client registries into Ray's metrics export on a daemon thread.

    One Ray gauge per sample name, created on first sight, with the sample's labels and the
    replica's tags as tag keys. The thread dies with the replica's process; :meth:`close` stops
    it earlier (tests).
    """

    def __init__(
        self,
        registries: list[CollectorRegistry],
        tags: dict[str, str],
        period_s: float = EXPORT_PERIOD_S,
    ) -> None:
        self.registries = registries
        self.tags = tags
        self.period_s = period_s
        self._gauges: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="pagesight-metrics-export", daemon=True
        )

    def start(self) -> RegistryExport:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.period_s + 5)

    def export_once(self) -> int:
        """Copy every sample now; the number copied."""
        from ray.util.metrics import Gauge

        copied = 0
        for registry in self.registries:
            for sample in cumulative_samples(registry):
                tags = sample.labels | self.tags
                key = (sample.name, tuple(sorted(tags)))
                gauge = self._gauges.get(key)
                if gauge is None:
                    gauge = Gauge(sample.name, sample.documentation or sample.name, key[1])
                    self._gauges[key] = gauge
                gauge.set(sample.value, tags=tags)
                copied += 1
        return copied

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.export_once()
            except Exception:  # metrics must never take the replica down; say why, go on
                log.warning("copying metrics into Ray's export failed", exc_info=True)


def export_replica_metrics(*registries: CollectorRegistry) -> RegistryExport | None:
    """Start copying ``registries`` into Ray's export, tagged with this replica (None, and
    nothing started, outside a Serve replica)."""
    tags = replica_tags()
    if tags is None:
        return None
    return RegistryExport(list(registries), tags).start()


def _node_metrics_urls() -> list[str]:
    import ray

    return [
        f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        for node in ray.nodes()
        if node.get("Alive") and node.get("MetricsExportPort")
    ]


async def node_metrics_urls() -> list[str]:
    """The metrics export of every live Ray node (Ray's node table: a blocking GCS call)."""
    return await asyncio.to_thread(_node_metrics_urls)
