"""The cluster profile on one machine: two Ray nodes, the cluster Serve config, PostgreSQL.

A Ray head and a second Ray node are started with ``ray start`` (token authentication on, as a
cluster runs it), and ``pagesight serve`` deploys ``pagesight/entrypoints/serve/gpu-cluster.yaml``
onto them with the changes one machine needs (:func:`one_machine`): CPU shares that fit two cores,
no GPU, the embedded index (so the two Query replicas read it through the index service), the test's
PostgreSQL for catalog, jobs, traces and keys, and a scripted OpenAI server for the answer LLM.
Then a document goes through ingest → search → answer → delete through the gateway.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from pagesight.core.types import AnswerResponse, JobState
from pagesight.gateway.auth import new_key
from pagesight.gateway.client import PageSightClient
from pagesight.ingestion import samples
from tests.asgi_server import free_port
from tests.openai_stub import Script, Step, scripted_server
from tests.postgres import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CLUSTER_CONFIG = REPO / "pagesight" / "entrypoints" / "serve" / "gpu-cluster.yaml"
BIN = Path(sys.executable).parent
FACT = "Northwind Logistics moved 4.2 million parcels in 2024."
START_TIMEOUT_S = 420


def one_machine(config: dict[str, Any], env: dict[str, str | None]) -> dict[str, Any]:
    """The cluster Serve config as one 2-core machine can run it: every deployment's CPU share
    cut to fit, no GPU, fixed replica bounds (two Query replicas), one index writer (the embedded
    index has one), proxies on the head only (both nodes share 127.0.0.1). ``env`` replaces or
    (None) drops each of the application's environment variables: every one must be named, so a
    variable added to the cluster config cannot be missed here."""
    app = config["applications"][0]
    cluster_env = app["runtime_env"]["env_vars"]
    assert set(env) >= set(cluster_env), f"not handled: {set(cluster_env) - set(env)}"
    app["runtime_env"]["env_vars"] = {k: v for k, v in env.items() if v is not None}
    args = app["args"]
    assert args["read_path"] == "query"
    fixed = {"target_ongoing_requests": 2, "upscale_delay_s": 0, "downscale_delay_s": 600}
    args["gateway"] |= {"num_cpus": 0.2, "autoscaling": {"min_replicas": 1, "max_replicas": 1}}
    args["query"] |= {"num_cpus": 0.25, "autoscaling": {"min_replicas": 2, "max_replicas": 2}}
    for name in ("gateway", "query"):
        args[name]["autoscaling"] |= fixed
    args["text_embedder"] |= {"num_cpus": 0.2, "autoscaling": None, "replicas": 1}
    args["page_embedder"] |= {"num_cpus": 0.2, "num_gpus": 0, "autoscaling": None}
    args["index"] |= {"num_cpus": 0.4, "replicas": 1}
    args["parser"] |= {"num_cpus": 0.4, "replicas": 1}
    config["proxy_location"] = "HeadOnly"
    return config


@dataclass
class Cluster:
    url: str
    key: str
    address: str
    env: dict[str, str]
    llm: Script

    def client(self) -> PageSightClient:
        return PageSightClient(self.url, api_key=self.key, timeout_s=120)

    def ray_python(self, code: str) -> str:
        """``code`` run by a driver connected to the cluster; its stdout."""
        done = subprocess.run(
            [sys.executable, "-c", f"import ray; ray.init(address={self.address!r})\n{code}"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout


def _ray_node(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """One Ray node in the foreground (``--block``): stopping the process stops the node."""
    ports = {
        "--node-manager-port": free_port(),
        "--object-manager-port": free_port(),
        "--dashboard-agent-listen-port": free_port(),
        "--dashboard-agent-grpc-port": free_port(),
        "--runtime-env-agent-port": free_port(),
        "--metrics-export-port": free_port(),
    }
    # Two logical CPUs a node: Ray schedules by these shares (the OS shares the real cores), and
    # with one a node the deployments' 1.7 CPUs could not always be packed onto the two nodes.
    command = [str(BIN / "ray"), "start", "--block", "--num-cpus=2", *args]
    command += ["--object-store-memory=80000000", "--disable-usage-stats"]
    command += [f"{flag}={port}" for flag, port in ports.items()]
    with log.open("ab") as out:
        return subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(process: subprocess.Popen[bytes], sig: int, timeout_s: float) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
        process.wait(timeout=timeout_s)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _wait_serving(process: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"pagesight serve exited:\n{log.read_text()[-4000:]}")
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{") and json.loads(line).get("event") == "serving":
                return
        time.sleep(1)
    raise AssertionError(f"not serving after {START_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")


def _grounded_reply(request: dict[str, Any]) -> Step:
    """The answer LLM: one sentence citing the first passage (what a grounded model writes)."""
    reply = {"sentences": [{"text": FACT, "citations": [1]}], "abstain": False}
    return Step(content=json.dumps(reply))


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer
) -> Iterator[Cluster]:
    pytest.importorskip("ray.serve")
    from pagesight.core.settings import Settings
    from pagesight.store.key_store_postgres import PostgresKeyStore

    root = tmp_path_factory.mktemp("cluster")
    data_dir = root / "var"
    database_url = postgres_server.url(postgres_server.new_database())
    key, record = new_key("cluster-key", "tenant-a")
    store = PostgresKeyStore.open(Settings(data_dir=data_dir, database_url=database_url))
    store.add(record)  # as `pagesight keys new` does with PAGESIGHT_DATABASE_URL set
    store.close()

    with scripted_server() as (llm_url, script):
        script.responder = _grounded_reply
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGESIGHT_")}
        # Ray's token authentication, as a cluster runs it: every node and driver has the token.
        env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
        config = one_machine(
            yaml.safe_load(CLUSTER_CONFIG.read_text()),
            {
                "PAGESIGHT_DATA_DIR": str(data_dir),
                "PAGESIGHT_VISUAL__ENABLED": "false",  # no ColQwen2 weights on this machine
                "PAGESIGHT_VISUAL__MODEL": None,
                "PAGESIGHT_DATABASE__PASSWORD_FILE": None,  # the test server trusts local users
                "PAGESIGHT_DATABASE__SSLMODE": "disable",
                "PAGESIGHT_LLM__BASE_URL": f"{llm_url}",
                "PAGESIGHT_LLM__MODEL": "answer",
                "PAGESIGHT_LLM__VISION": "off",  # the scripted model reads no images
                "PAGESIGHT_PARSE__VLM__BASE_URL": None,  # born-digital test pages: no VLM
                "PAGESIGHT_PARSE__VLM__MODEL": None,
                "PAGESIGHT_PARSE__VLM__PAGES": None,
            },
        )
        config_path = root / "one-machine.yaml"
        config_path.write_text(yaml.safe_dump(config))
        # Ray's files in a directory of the test's (short: Ray's socket paths must stay under
        # 108 bytes), so that no /tmp/ray/ray_current_cluster is left for a later ray.init()
        ray_dir = Path(tempfile.mkdtemp(prefix="ps-ray-"))
        gcs_port, http_port = free_port(), free_port()
        address = f"127.0.0.1:{gcs_port}"
        nodes = [
            _ray_node(
                [
                    "--head",
                    f"--port={gcs_port}",
                    f"--temp-dir={ray_dir}",
                    "--node-ip-address=127.0.0.1",
                    "--include-dashboard=false",
                    "--min-worker-port=20000",
                    "--max-worker-port=20999",
                ],
                env,
                root / "head.log",
            )
        ]
        serve_log = root / "serve.log"
        server: subprocess.Popen[bytes] | None = None
        try:
            time.sleep(5)  # the head's GCS up before the second node joins it
            nodes.append(
                _ray_node(
                    [
                        f"--address={address}",
                        "--node-ip-address=127.0.0.1",
                        "--min-worker-port=21000",
                        "--max-worker-port=21999",
                    ],
                    env,
                    root / "worker.log",
                )
            )
            serve_env = env | config["applications"][0]["runtime_env"]["env_vars"]
            serve_env |= {
                "PAGESIGHT_DATABASE_URL": database_url,
                "PAGESIGHT_SERVE__RAY_ADDRESS": address,
                "PAGESIGHT_SERVE__PORT": str(http_port),
                "PAGESIGHT_SERVE__START_TIMEOUT_S": str(START_TIMEOUT_S),
                "PAGESIGHT_ANSWER__ABSTAIN_THRESHOLD": "0",  # the plumbing, not the calibration
            }
            with serve_log.open("ab") as out:
                server = subprocess.Popen(
                    [str(BIN / "pagesight"), "serve", "--config", str(config_path), "--json"],
                    env=serve_env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            _wait_serving(server, serve_log, time.monotonic() + START_TIMEOUT_S + 60)
            running = Cluster(f"http://127.0.0.1:{http_port}", key, address, env, script)
            with running.client() as client:
                client.wait_ready(timeout_s=120)
            yield running
        finally:
            if server is not None:
                _stop(server, signal.SIGINT, 60)  # Ctrl-C: serve.shutdown(), then disconnect
            for node in reversed(nodes):
                _stop(node, signal.SIGTERM, 60)
            shutil.rmtree(ray_dir, ignore_errors=True)


def test_two_nodes_and_two_query_replicas(cluster: Cluster) -> None:
    out = cluster.ray_python(
        "import json\n"
        "from ray import serve\n"
        "def name(state): return str(getattr(state, 'value', state))\n"
        "nodes = [n for n in ray.nodes() if n['Alive']]\n"
        "app = serve.status().applications['pagesight']\n"
        "replicas = {d: {name(k): n for k, n in s.replica_states.items()}\n"
        "            for d, s in app.deployments.items()}\n"
        "print(json.dumps({'nodes': len(nodes), 'status': name(app.status),\n"
        "                  'replicas': replicas}))"
    )
    state = json.loads(out.strip().splitlines()[-1])
    assert state["nodes"] == 2
    assert state["status"] == "RUNNING"
    replicas = state["replicas"]
    assert replicas["Query"] == {"RUNNING": 2}
    assert replicas["IndexService"] == {"RUNNING": 1}
    assert set(replicas) == {"Gateway", "Query", "IndexService", "Parser", "TextEmbedder"}


def test_ingest_search_answer_delete_across_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    question = "How many parcels did Northwind Logistics move in 2024?"
    with cluster.client() as client:
        accepted = client.upload(samples.text_pdf(tmp_path / "annual.pdf"))  # to the writer
        done = client.wait_for_job(accepted.job_id, timeout_s=300)  # read by a Query replica
        assert done.state == JobState.READY, done

        # Searches from several clients at once, spread over both Query replicas, all read the
        # embedded index through its owner and see the new document.
        with ThreadPoolExecutor(4) as pool:
            responses = list(
                pool.map(lambda _: client.search(question, route="text", top_k=3), range(8))
            )
        for response in responses:
            assert response.hits and response.hits[0].doc_id == accepted.doc_id
            assert "4.2 million parcels" in response.hits[0].snippet
        assert client.trace(responses[0].trace_id).query == question  # traces in PostgreSQL

        before = len(cluster.llm.requests)
        answer = client.answer(question, route="text")
        assert isinstance(answer, AnswerResponse) and answer.mode == "llm"
        assert not answer.abstained and answer.answer == FACT
        assert [c.doc_id for c in answer.citations] == [accepted.doc_id]
        assert len(cluster.llm.requests) > before  # a Query replica called the answer LLM

        assert client.delete(accepted.doc_id).deleted  # by the writer; reads follow at once
        after = client.search(question, route="text", top_k=3)
        assert all(hit.doc_id != accepted.doc_id for hit in after.hits)
