"""Fleet metrics: one scrape of the gateway counts every replica of every deployment.

``pagesight serve`` runs in a process of its own (its own local Ray, so it never meets the e2e
session's) with ``read_path: query`` and two Query replicas over the embedded index and the
test's PostgreSQL, as the cluster profile reads. Searches go through the gateway; then one
``GET /metrics`` must show Ray Serve's request counts and latency histograms labelled by
deployment and replica for both Query replicas (and every other deployment), and the search
stage histograms that each Query replica keeps in its own process, with the searches of the
two adding up to those sent. The alert rules and the dashboard in k8s/ must read only metrics
that such a scrape holds.

The counts reach the scrape through Ray's metrics agent, which exports on its own interval:
each check polls the scrape until it holds (bounded by ``SCRAPE_WAIT_S``), then asserts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from k8s import validate
from pagesight.core.types import JobState
from pagesight.gateway.auth import new_key
from pagesight.gateway.client import ApiError, PageSightClient
from pagesight.ingestion import samples
from tests.asgi_server import free_ports
from tests.postgres import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PAGESIGHT = Path(sys.executable).with_name("pagesight")
LOCAL_CONFIG = REPO / "pagesight" / "entrypoints" / "serve" / "local.yaml"
START_TIMEOUT_S = 420
SCRAPE_WAIT_S = 180
SEARCHES = 24
QUESTION = "How many parcels did Northwind Logistics move?"

Samples = list[tuple[str, dict[str, str], float]]


@dataclass
class FleetServer:
    url: str
    key: str

    def client(self) -> PageSightClient:
        return PageSightClient(self.url, api_key=self.key, timeout_s=120)

    def scrape(self) -> Samples:
        response = httpx.get(f"{self.url}/metrics", timeout=60)
        response.raise_for_status()
        return [
            (sample.name, sample.labels, sample.value)
            for family in text_string_to_metric_families(response.text)
            for sample in family.samples
        ]

    def scrape_until(self, holds: Callable[[Samples], bool]) -> Samples:
        """The first scrape for which ``holds`` is true, else the last one (the caller's
        assertions then say what is missing)."""
        deadline = time.monotonic() + SCRAPE_WAIT_S
        while True:
            samples = self.scrape()
            if holds(samples) or time.monotonic() > deadline:
                return samples
            time.sleep(3)


def two_query_replicas(config: dict[str, Any]) -> dict[str, Any]:
    """local.yaml with the read path in a Query deployment of two replicas, every CPU share cut
    so that the six fit the two CPUs Ray is given."""
    args = config["applications"][0]["args"]
    args |= {"read_path": "query", "index_placement": "separate"}
    args["gateway"] |= {"num_cpus": 0.2}
    args["index"] |= {"num_cpus": 0.4}
    args["parser"] |= {"num_cpus": 0.3}
    args["text_embedder"] |= {"num_cpus": 0.2}
    args["query"] = {"num_cpus": 0.25, "replicas": 2}
    return config


def _wait_serving(process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"pagesight serve exited:\n{log.read_text()[-4000:]}")
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith('{"event"') and json.loads(line)["event"] == "serving":
                return
        time.sleep(1)
    raise AssertionError(f"not serving in time:\n{log.read_text()[-4000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (serve shuts Serve and its Ray down), then whatever is left of its tree."""
    import psutil

    if process.poll() is not None:
        return
    tree = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
    _, alive = psutil.wait_procs(tree, timeout=30)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


@pytest.fixture(scope="module")
def fleet(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer
) -> Iterator[FleetServer]:
    pytest.importorskip("ray.serve")
    from pagesight.core.settings import Settings
    from pagesight.store.key_store_postgres import PostgresKeyStore

    root = tmp_path_factory.mktemp("fleet")
    data_dir = root / "var"
    database_url = postgres_server.url(postgres_server.new_database())
    key, record = new_key("fleet-key", "tenant-a")
    store = PostgresKeyStore.open(Settings(data_dir=data_dir, database_url=SecretStr(database_url)))
    store.add(record)  # as `pagesight keys new` does with PAGESIGHT_DATABASE_URL set
    store.close()
    config = root / "two-query-replicas.yaml"
    config.write_text(yaml.safe_dump(two_query_replicas(yaml.safe_load(LOCAL_CONFIG.read_text()))))
    port = free_ports(2)  # the gateway replica's, then Serve's proxy's
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGESIGHT_")}
    env |= {
        "PAGESIGHT_DATA_DIR": str(data_dir),
        "PAGESIGHT_DATABASE_URL": database_url,
        "PAGESIGHT_VISUAL__ENABLED": "false",  # no ColQwen2 weights on this machine
        "PAGESIGHT_SERVE__NUM_CPUS": "2",
        "PAGESIGHT_SERVE__START_TIMEOUT_S": str(START_TIMEOUT_S),
        "PAGESIGHT_SERVE__GRACE_S": "3",
    }
    log = root / "serve.log"
    with log.open("ab") as out:
        server = subprocess.Popen(
            [str(PAGESIGHT), "serve", "--config", str(config), "--json", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_serving(server, log)
        running = FleetServer(f"http://127.0.0.1:{port}", key)
        with running.client() as client:
            client.wait_ready(timeout_s=120)
        yield running
    finally:
        _stop(server)


def _by_replica(samples: Samples, name: str, **labels: str) -> dict[tuple[str, str], float]:
    """(deployment, replica) -> the sum of ``name``'s samples with ``labels``."""
    found: dict[tuple[str, str], float] = defaultdict(float)
    for sample, sample_labels, value in samples:
        if sample == name and all(sample_labels.get(k) == v for k, v in labels.items()):
            found[(sample_labels.get("deployment", ""), sample_labels.get("replica", ""))] += value
    return dict(found)


def _query_searches(samples: Samples) -> dict[str, float]:
    """Searches per Query replica, from the search-stage histogram each replica keeps."""
    counts = _by_replica(
        samples, "ray_pagesight_search_stage_seconds_count", stage="total", route="text"
    )
    return {replica: n for (deployment, replica), n in counts.items() if deployment == "Query"}


def _gateway_searches(samples: Samples) -> dict[tuple[str, str], float]:
    """Searches the gateway answered, from its own HTTP series, per deployment and replica."""
    return _by_replica(
        samples, "ray_pagesight_http_requests_total", route="/v1/search", status="200"
    )


def test_one_scrape_counts_both_query_replicas(fleet: FleetServer, tmp_path: Path) -> None:
    with fleet.client() as client:
        accepted = client.upload(samples.text_pdf(tmp_path / "annual.pdf"))
        assert client.wait_for_job(accepted.job_id, timeout_s=300).state == JobState.READY
        with ThreadPoolExecutor(4) as pool:  # concurrent: the router spreads them over both
            found = list(
                pool.map(lambda _: client.search(QUESTION, route="text", top_k=3), range(SEARCHES))
            )
    assert all(r.hits and r.hits[0].doc_id == accepted.doc_id for r in found)

    def counted(samples: Samples) -> bool:
        """Every replica has exported its counts: each exports on its own clock."""
        searches = _query_searches(samples)
        http = _gateway_searches(samples)
        return (
            len(searches) == 2
            and sum(searches.values()) == SEARCHES
            and sum(http.values()) >= SEARCHES
        )

    scrape = fleet.scrape_until(counted)
    searches = _query_searches(scrape)
    assert len(searches) == 2 and all(n > 0 for n in searches.values()), searches
    assert sum(searches.values()) == SEARCHES, searches

    # Ray Serve's own measurements of every replica, in the same scrape
    requests = _by_replica(scrape, "ray_serve_deployment_request_counter_total")
    latency = _by_replica(scrape, "ray_serve_deployment_processing_latency_ms_count")
    query = {r: n for (d, r), n in requests.items() if d == "Query"}
    assert set(query) == set(searches), (query, searches)  # the same two replicas
    assert all(query[r] >= searches[r] for r in query), (query, searches)
    deployments = {d for d, _ in requests}
    assert deployments >= {"Gateway", "IndexService", "Query", "Parser", "TextEmbedder"}
    assert set(latency) == set(requests)  # a latency histogram for every replica counted
    buckets = _by_replica(scrape, "ray_serve_deployment_processing_latency_ms_bucket", le="+Inf")
    assert buckets == latency
    # the gateway's own series carry their replica too, next to what it measured
    http = _gateway_searches(scrape)
    assert [d for d, _ in http] == ["Gateway"] and sum(http.values()) >= SEARCHES
    nodes = {labels["state"]: n for name, labels, n in scrape if name == "pagesight_fleet_nodes"}
    assert nodes == {"scraped": 1, "failed": 0}


def test_every_metric_of_the_alerts_and_dashboard_is_scraped(
    fleet: FleetServer, tmp_path: Path
) -> None:
    exprs = validate.rule_exprs(REPO / "k8s" / validate.RULES)
    exprs |= validate.dashboard_exprs(REPO / "k8s" / validate.DASHBOARD)
    wanted = {name for expr in exprs.values() for name in validate.metric_names(expr)}
    assert len(wanted) >= 10, wanted
    with fleet.client() as client:
        # what makes the rarer series appear: a failed job, an error answer, a replica's
        # exception (a missing document, raised in a Query replica), and searches
        broken = client.upload(tmp_path / "broken.pdf", data=b"%PDF-1.7\nnot a pdf at all")
        assert client.wait_for_job(broken.job_id, timeout_s=300).state == JobState.FAILED
        with pytest.raises(ApiError) as missing:
            client.document("no-such-document")
        assert missing.value.status == 404
        client.search(QUESTION, route="text")

    def complete(samples: Samples) -> bool:
        names = {name for name, _, _ in samples}
        failed = _by_replica(samples, "ray_pagesight_ingest_jobs_total", state="FAILED")
        return wanted <= names and sum(failed.values()) >= 1

    scrape = fleet.scrape_until(complete)
    names = {name for name, _, _ in scrape}
    assert not wanted - names, sorted(wanted - names)
    failed = _by_replica(scrape, "ray_pagesight_ingest_jobs_total", state="FAILED")
    assert [d for d, _ in failed] == ["IndexService"], failed
