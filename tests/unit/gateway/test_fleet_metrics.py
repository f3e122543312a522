"""The gateway's fleet section: Ray nodes' exports merged into one exposition, with failures
counted, never raised; and the copy of a registry that a replica hands to Ray's export."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pagesight.gateway.metrics import FleetScrape, GatewayMetrics, fleet_families, merge_fleet
from pagesight.services.metrics import ServiceMetrics, cumulative_samples

# What Ray's metrics agent exports (trimmed): OpenTelemetry's bookkeeping labels on every
# sample, Serve's families with deployment and replica, and other families of Ray's own.
_RAY_LABELS = (
    'Component="core_worker",NodeAddress="10.0.0.{node}",SessionName="session_1",'
    'Version="2.60.0",WorkerId="{worker}",otel_scope_name="ray",otel_scope_schema_url="",'
    'otel_scope_version=""'
)


def node_text(node: int, replicas: dict[str, int], worker: str = "w1") -> str:
    labels = _RAY_LABELS.format(node=node, worker=worker)
    lines = [
        "# HELP ray_serve_deployment_request_counter_total requests",
        "# TYPE ray_serve_deployment_request_counter_total counter",
    ]
    for replica, count in replicas.items():
        lines.append(
            f"ray_serve_deployment_request_counter_total{{{labels},application="
            f'"pagesight",deployment="Query",replica="{replica}",route="/"}} {count}.0'
        )
    lines += [
        "# HELP ray_grpc_server_req_new_total noise",
        "# TYPE ray_grpc_server_req_new_total counter",
        f'ray_grpc_server_req_new_total{{{labels},Method="x"}} 5.0',
        "# HELP ray_pagesight_search_stage_seconds_bucket Time per retrieval stage",
        "# TYPE ray_pagesight_search_stage_seconds_bucket gauge",
    ]
    for replica, count in replicas.items():
        tags = f'{labels},deployment="Query",replica="{replica}",route="text",stage="total"'
        lines.append(f'ray_pagesight_search_stage_seconds_bucket{{{tags},le="0.1"}} {count}.0')
        lines.append(f'ray_pagesight_search_stage_seconds_bucket{{{tags},le="+Inf"}} {count}.0')
    for suffix, value in (("count", None), ("sum", 0.5)):
        lines.append(f"# HELP ray_pagesight_search_stage_seconds_{suffix} Time per stage")
        lines.append(f"# TYPE ray_pagesight_search_stage_seconds_{suffix} gauge")
        for replica, count in replicas.items():
            tags = f'{labels},deployment="Query",replica="{replica}",route="text",stage="total"'
            n = count if value is None else value
            lines.append(f"ray_pagesight_search_stage_seconds_{suffix}{{{tags}}} {n}")
    lines += [
        "# HELP ray_pagesight_http_requests_total HTTP requests answered",
        "# TYPE ray_pagesight_http_requests_total gauge",
        f'ray_pagesight_http_requests_total{{{labels},deployment="Gateway",replica="g1",'
        f'method="POST",route="/v1/search",status="200"}} 7.0',
    ]
    return "\n".join(lines) + "\n"


def _parsed(text: bytes | str) -> dict[str, Any]:
    raw = text.decode() if isinstance(text, bytes) else text
    return {family.name: family for family in text_string_to_metric_families(raw)}


def test_merge_keeps_the_fleet_families_labelled_by_deployment_and_replica() -> None:
    nodes = [fleet_families(node_text(1, {"q1": 3})), fleet_families(node_text(2, {"q2": 5}))]
    families = {m.name: m for m in merge_fleet(nodes)}
    assert "ray_grpc_server_req_new" not in families  # Ray's own plumbing stays out
    requests = families["ray_serve_deployment_request_counter"]
    assert requests.type == "counter"
    by_replica = {s.labels["replica"]: s.value for s in requests.samples}
    assert by_replica == {"q1": 3.0, "q2": 5.0}
    labels = requests.samples[0].labels
    assert {"deployment", "replica", "application", "NodeAddress"} <= set(labels)
    assert not {"WorkerId", "SessionName", "Version", "Component"} & set(labels)
    assert not [k for k in labels if k.startswith("otel_")]


def test_copied_registries_get_their_types_back() -> None:
    families = {m.name: m for m in merge_fleet([fleet_families(node_text(1, {"q1": 3}))])}
    histogram = families["ray_pagesight_search_stage_seconds"]
    assert histogram.type == "histogram"
    names = {s.name for s in histogram.samples}
    assert names == {f"ray_pagesight_search_stage_seconds_{p}" for p in ("bucket", "count", "sum")}
    assert families["ray_pagesight_http_requests"].type == "counter"
    assert not {n for n in families if n.endswith(("_bucket", "_count", "_sum"))}


def test_samples_equal_once_bookkeeping_is_dropped_are_summed() -> None:
    # one replica's counts reported by two worker processes of the same node
    nodes = [
        fleet_families(node_text(1, {"q1": 3}, worker="w1")),
        fleet_families(node_text(1, {"q1": 4}, worker="w2")),
    ]
    families = {m.name: m for m in merge_fleet(nodes)}
    (sample,) = families["ray_serve_deployment_request_counter"].samples
    assert sample.value == 7.0


def _transport(answers: dict[str, httpx.Response]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        return answers[str(request.url)]

    return httpx.MockTransport(handle)


def test_a_scrape_reads_every_node_and_counts_those_it_could_not() -> None:
    answers = {
        "http://n1:8080/metrics": httpx.Response(200, text=node_text(1, {"q1": 3})),
        "http://n2:8080/metrics": httpx.Response(200, text=node_text(2, {"q2": 5})),
        "http://n3:8080/metrics": httpx.Response(503, text="starting"),
        "http://n4:8080/metrics": httpx.Response(200, text="ray_serve_x{ not exposition"),
        "http://n5:8080/metrics": httpx.Response(200, text="#" * 5000),
    }

    async def targets() -> list[str]:
        return list(answers)

    fleet = FleetScrape(targets, max_bytes=4000, transport=_transport(answers))
    families = _parsed(asyncio.run(fleet.render()))
    nodes = {s.labels["state"]: s.value for s in families["pagesight_fleet_nodes"].samples}
    assert nodes == {"scraped": 2.0, "failed": 3.0}
    requests = families["ray_serve_deployment_request_counter"].samples
    assert {s.labels["replica"]: s.value for s in requests} == {"q1": 3.0, "q2": 5.0}


def test_no_node_list_is_an_empty_fleet_not_a_failed_scrape() -> None:
    async def targets() -> list[str]:
        raise RuntimeError("GCS unreachable")

    families = _parsed(asyncio.run(FleetScrape(targets).render()))
    nodes = {s.labels["state"]: s.value for s in families["pagesight_fleet_nodes"].samples}
    assert nodes == {"scraped": 0.0, "failed": 0.0}


def test_without_ray_the_gateway_has_no_fleet() -> None:
    metrics = GatewayMetrics()
    assert metrics.fleet is None
    assert b"pagesight_http_in_flight" in metrics.render()


def test_cumulative_samples_are_what_a_scrape_of_the_registry_shows() -> None:
    registry = CollectorRegistry()
    counter = Counter("demo_requests", "requests", ["route"], registry=registry)
    histogram = Histogram("demo_seconds", "latency", buckets=(0.1, 1.0), registry=registry)
    counter.labels("/v1/search").inc(3)
    histogram.observe(0.05)
    histogram.observe(0.5)
    copied = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for s in cumulative_samples(registry)
    }
    assert not [name for name, _ in copied if name.endswith("_created")]
    assert copied[("demo_requests_total", (("route", "/v1/search"),))] == 3.0
    assert copied[("demo_seconds_bucket", (("le", "0.1"),))] == 1.0
    assert copied[("demo_seconds_bucket", (("le", "+Inf"),))] == 2.0
    assert copied[("demo_seconds_count", ())] == 2.0
    scraped = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
        if not s.name.endswith("_created")
    }
    assert copied == scraped


def test_service_metrics_copy_every_family() -> None:
    metrics = ServiceMetrics()
    metrics.search_stage.labels("text", "total").observe(0.2)
    metrics.jobs.labels("FAILED", "CORRUPT").inc()
    names = {s.name for s in cumulative_samples(metrics.registry)}
    assert {
        "pagesight_search_stage_seconds_bucket",
        "pagesight_ingest_jobs_total",
        "pagesight_ingest_queue_depth",
        "pagesight_ingest_pages_total",
    } <= names


@pytest.mark.parametrize("name", ["pagesight_http_requests_total", "pagesight_errors_total"])
def test_gateway_series_are_copied_under_their_sample_names(name: str) -> None:
    metrics = GatewayMetrics()
    metrics.requests.labels("/v1/search", "POST", "200").inc()
    metrics.errors.labels("NOT_FOUND").inc()
    assert name in {s.name for s in cumulative_samples(metrics.registry)}


def test_dropping_other_families_before_parsing_changes_nothing() -> None:
    text = node_text(1, {"q1": 3, "q2": 4}) + node_text(2, {"q3": 1}).replace("ray_serve_", "x_")
    whole = [
        (f.name, f.type, f.samples)
        for f in text_string_to_metric_families(text)
        if f.name.startswith(("ray_serve_", "ray_pagesight_"))
    ]
    assert [(f.name, f.type, f.samples) for f in fleet_families(text)] == whole
