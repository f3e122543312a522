"""The cluster profile on one machine: two Ray nodes, the cluster Serve config, PostgreSQL.

A Ray head and a second Ray node are started with ``ray start`` (token authentication on, as a
cluster runs it), and ``pagesight serve`` deploys ``pagesight/entrypoints/serve/gpu-cluster.yaml``
onto them with the changes one machine needs (:func:`one_machine`): CPU shares that fit two cores,
no GPU, the embedded index (so the two Query replicas read it through the index service), the test's
PostgreSQL for catalog, jobs, traces and keys, and a scripted OpenAI server for the answer LLM.
Then a document goes through ingest → search → answer → delete through the gateway.

Then chaos, bounded and on this machine only (README "Operations"): a Query replica killed under
a steady search load (no request fails: the gateway sends a read whose replica died once more,
:mod:`pagesight.gateway.retry`; Serve replaces the replica), the writer killed during an upload
(its restart runs the job again, to one READY document and one set of points), and PostgreSQL
stopped for 10 s (reads answer 503 ``DATABASE_UNAVAILABLE`` with ``Retry-After``, then serve
again without a restart). The figures (requests, failures, recovery seconds) are printed and
written to ``chaos.json`` in the test's temporary directory; the assertions are outcomes, not
times (a generous bound on how long recovery may take, nothing tighter).
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
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from pagesight.core.types import AnswerResponse, JobState
from pagesight.gateway.auth import new_key
from pagesight.gateway.client import ApiError, PageSightClient
from pagesight.ingestion import samples
from tests import postgres_control
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
    postgres: PostgresServer
    #: the ``ray start --block`` processes: every process of this cluster descends from one
    nodes: list[int]
    #: where the chaos figures go (``chaos.json``)
    root: Path
    ray_dir: Path
    figures: dict[str, Any] = field(default_factory=dict)

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

    def record(self, name: str, figures: dict[str, Any]) -> None:
        """Keep one chaos experiment's figures (printed, and in ``chaos.json``)."""
        self.figures[name] = figures
        path = self.root / "chaos.json"
        path.write_text(json.dumps(self.figures, indent=2))
        print(f"chaos {name}: {json.dumps(figures)} ({path})")

    def replica_pids(self, deployment: str) -> set[int]:
        """The processes of ``deployment``'s replicas on this cluster (Ray titles a replica's
        process ``ray::ServeReplica:<app>:<deployment>``)."""
        marker = f"ServeReplica:pagesight:{deployment}"
        found = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, UnicodeDecodeError):
                continue
            # "ray::ServeReplica:pagesight:Query", ".<method>" appended while it runs one
            name = title.split(" ", 1)[0].split(".", 1)[0]
            if name.endswith(marker) and _descends(int(entry.name), self.nodes):
                found.add(int(entry.name))
        return found

    def replica_states(self) -> dict[str, dict[str, int]]:
        """Serve's replica states, by deployment (``{"Query": {"RUNNING": 2}, ...}``)."""
        out = self.ray_python(
            "import json\n"
            "from ray import serve\n"
            "def name(state): return str(getattr(state, 'value', state))\n"
            "app = serve.status().applications['pagesight']\n"
            "print(json.dumps({d: {name(k): n for k, n in s.replica_states.items()}\n"
            "                  for d, s in app.deployments.items()}))"
        )
        states: dict[str, dict[str, int]] = json.loads(out.strip().splitlines()[-1])
        return states

    def diagnosis(self) -> str:
        """Serve's replica states and the cluster's last error lines (for a failure message)."""
        states = ""
        with contextlib.suppress(AssertionError, subprocess.SubprocessError):
            states = json.dumps(self.replica_states())
        errors: list[str] = []
        for path in sorted(self.ray_dir.rglob("*")):
            if path.suffix in (".log", ".err") and "ServeReplica" not in path.name:
                with contextlib.suppress(OSError):
                    lines = path.read_text(errors="replace").splitlines()
                    errors += [
                        f"{path.name}: {line[:400]}"
                        for line in lines
                        if "ERROR" in line or "Error" in line
                    ][-8:]
        return f"replicas: {states}\n" + "\n".join(errors[-60:])

    def log_lines(self, text: str) -> int:
        """Lines of the cluster's logs (Ray's and the replicas') that contain ``text``."""
        count = 0
        for path in self.ray_dir.rglob("*"):
            if path.suffix not in (".log", ".err", ".out"):  # .err: a worker's stderr
                continue
            with contextlib.suppress(OSError):
                count += sum(text in line for line in path.read_text(errors="replace").splitlines())
        return count


def _descends(pid: int, ancestors: list[int]) -> bool:
    """Whether ``pid`` is one of ``ancestors``' descendants (by the parent ids of /proc)."""
    for _ in range(64):
        if pid in ancestors:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after state: the parent id
        if pid <= 1:
            return False
    return False


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
            running = Cluster(
                f"http://127.0.0.1:{http_port}",
                key,
                address,
                env,
                script,
                postgres_server,
                [node.pid for node in nodes],
                root,
                ray_dir,
            )
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


# -- chaos --------------------------------------------------------------------------------------

QUESTION = "How many parcels did Northwind Logistics move in 2024?"
#: how long a replica, the writer or the database may take to come back: generous on purpose
#: (two shared cores; a replica loads its text model again); the figures are recorded, not bounded
RECOVERY_BOUND_S = 420
OUTAGE_S = 10


@dataclass
class Outcomes:
    """What each request of a load got: its start (monotonic) and None, or what failed."""

    seen: list[tuple[float, str | None]] = field(default_factory=list)

    def failures(self, start: float = 0.0, end: float = float("inf")) -> list[str]:
        return [error for t, error in self.seen if error is not None and start <= t < end]

    def sent(self, start: float = 0.0, end: float = float("inf")) -> int:
        return sum(start <= t < end for t, _ in self.seen)


def _outcome(call: Callable[[], object]) -> str | None:
    try:
        call()
    except ApiError as exc:
        return f"{exc.status} {exc.code}"
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return None


@contextlib.contextmanager
def _steady_searches(
    cluster: Cluster, clients: int = 2, pause_s: float = 0.1
) -> Iterator[Outcomes]:
    """``clients`` threads searching one after another (``pause_s`` between) until the block
    ends."""
    outcomes = Outcomes()
    stop = threading.Event()

    def run() -> None:
        with cluster.client() as client:
            while not stop.is_set():
                started = time.monotonic()
                error = _outcome(lambda: client.search(QUESTION, route="text", top_k=3))
                outcomes.seen.append((started, error))
                stop.wait(pause_s)

    threads = [threading.Thread(target=run, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    try:
        yield outcomes
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=180)


def _until(
    check: Callable[[], bool],
    what: str,
    bound_s: float = RECOVERY_BOUND_S,
    explain: Callable[[], str] | None = None,
) -> float:
    """Poll ``check`` until true; the seconds it took (AssertionError past ``bound_s``, with
    the last error ``check`` raised and what ``explain`` says)."""
    started = time.monotonic()
    last: BaseException | None = None
    while time.monotonic() - started < bound_s:
        try:
            if check():
                return time.monotonic() - started
        except (ApiError, httpx.HTTPError, AssertionError) as exc:
            last = exc
        time.sleep(0.5)
    detail = explain() if explain is not None else ""
    raise AssertionError(f"{what}: not after {bound_s} s (last: {last!r})\n{detail}")


def _ingested(cluster: Cluster, path: Path) -> str:
    with cluster.client() as client:
        accepted = client.upload(path)
        done = client.wait_for_job(accepted.job_id, timeout_s=300)
        assert done.state == JobState.READY, done
        return accepted.doc_id


#: what the gateway logs when it sends a read again (pagesight.gateway.retry)
RETRY_LOG = "sending it once more"
#: how long the answer LLM takes while a replica is killed: answers are in flight at the kill
SLOW_LLM_S = 6.0


def _slow_grounded_reply(request: dict[str, Any]) -> Step:
    step = _grounded_reply(request)
    step.delay_s = SLOW_LLM_S
    return step


def _answered(cluster: Cluster) -> str | None:
    with cluster.client() as client:
        return _outcome(lambda: client.answer(QUESTION, route="text"))


def test_a_query_replica_killed_under_load_fails_no_request(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Searches go on from four clients while four answers wait on a slow LLM, two on each
    Query replica; one replica is killed. Every search and every answer succeeds (an answer
    the dead replica was running runs again on the other: the LLM is asked again), and Serve
    starts a replacement."""
    _ingested(cluster, samples.text_pdf(tmp_path / "annual.pdf"))
    before = cluster.replica_pids("Query")
    assert len(before) == 2, before
    with cluster.client() as client:
        asked = len(cluster.llm.requests)
        assert client.answer(QUESTION, route="text").answer == FACT
        per_answer = len(cluster.llm.requests) - asked
    retried = cluster.log_lines(RETRY_LOG)
    cluster.llm.responder = _slow_grounded_reply
    try:
        with (
            _steady_searches(cluster, clients=4, pause_s=0.05) as load,
            ThreadPoolExecutor(4) as pool,
        ):
            time.sleep(5)  # the load going on both replicas
            asked = len(cluster.llm.requests)
            answers = [pool.submit(_answered, cluster) for _ in range(4)]
            _until(
                lambda: len(cluster.llm.requests) - asked >= 4 * per_answer,
                "the answers did not reach the LLM",
                bound_s=120,
            )
            victim = min(before)
            os.kill(victim, signal.SIGKILL)
            killed_at = time.monotonic()
            answered = [answer.result(timeout=300) for answer in answers]

            def replaced() -> bool:
                now = cluster.replica_pids("Query")
                states = cluster.replica_states()["Query"]
                return victim not in now and len(now) == 2 and states == {"RUNNING": 2}

            replaced_s = _until(replaced, "Serve did not replace the killed Query replica")
            time.sleep(5)  # the load on the new replica too
    finally:
        cluster.llm.responder = _grounded_reply
    llm_calls = len(cluster.llm.requests) - asked
    cluster.record(
        "query_replica_killed",
        {
            "searches": load.sent(),
            "searches_after_kill": load.sent(killed_at),
            "searches_failed": len(load.failures()),
            "answers_in_flight": len(answers),
            "answers_failed": sum(error is not None for error in answered),
            "llm_calls_per_answer": per_answer,
            "llm_calls_of_the_answers": llm_calls,
            "reads_sent_again_by_gateway": cluster.log_lines(RETRY_LOG) - retried,
            "replaced_s": round(replaced_s, 1),
        },
    )
    assert load.sent(killed_at) > 0
    assert load.failures() == []
    assert answered == [None] * len(answers)
    # every answer was asked of the model; those the kill hit (if the router had sent any to
    # the killed replica: not up to the test) ran again on the other one, which the record shows
    assert llm_calls >= len(answers) * per_answer


def _long_pdf(path: Path, pages: int = 40) -> Path:
    """A born-digital report long enough that its ingest job is still running a moment after
    it starts (a kill lands mid-job)."""
    import pymupdf

    doc = pymupdf.open()
    for n in range(1, pages + 1):
        page = doc.new_page()
        paragraphs = "".join(
            f"<p>Region {n}.{k}: Northwind Logistics delivered {n * 1000 + k * 37} parcels "
            f"through hub {k} in week {n}; late deliveries fell to {k + 2} percent while fuel "
            f"costs rose by {n % 7 + k} percent against the previous quarter.</p>"
            for k in range(1, 7)
        )
        page.insert_htmlbox(pymupdf.Rect(72, 72, 540, 760), f"<h2>Week {n}</h2>{paragraphs}")
    doc.save(path)
    return path


def test_the_writer_killed_during_an_upload_finishes_the_job_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    writers = cluster.replica_pids("IndexService")
    assert len(writers) == 1, writers
    with cluster.client() as client:
        accepted = client.upload(_long_pdf(tmp_path / "weekly.pdf"))
        running = _until(
            lambda: client.job(accepted.job_id).state not in (JobState.PENDING, JobState.READY),
            "the job did not start",
            bound_s=120,
        )
        state_at_kill = client.job(accepted.job_id).state
        (writer,) = writers
        os.kill(writer, signal.SIGKILL)
        killed_at = time.monotonic()
        # job reads go to the Query replicas, which read PostgreSQL: they answer meanwhile
        finished_s = _until(
            lambda: client.job(accepted.job_id).state.terminal,
            "the job did not finish",
            explain=lambda: f"{client.job(accepted.job_id)!r}\n{cluster.diagnosis()}",
        )
        job = client.job(accepted.job_id)
        restarted = cluster.replica_pids("IndexService")
        assert job.state == JobState.READY, job
        assert writer not in restarted and len(restarted) == 1
        # one READY document, one job for it, READY once
        docs = [d for d in client.documents() if d.doc_id == accepted.doc_id]
        jobs = [j for j in client.jobs(limit=1000) if j.doc_id == accepted.doc_id]
        assert len(docs) == 1 and [j.job_id for j in jobs] == [accepted.job_id]
        # the job ran again after the kill (a run counts an attempt when it starts rendering)
        assert job.attempts >= 2, job
        assert client.search("parcels through hub 3 in week 17", route="text").hits
    points = json.loads(
        cluster.ray_python(
            "import json\n"
            "from ray import serve\n"
            "from pagesight.index.points import Selection\n"
            "index = serve.get_deployment_handle('IndexService', app_name='pagesight')\n"
            f"selection = Selection(tenant='tenant-a', doc_ids=({accepted.doc_id!r},))\n"
            "found = index.read_index.remote('chunks', '_scroll', (selection, ['version']))\n"
            "points = found.result(timeout_s=120)\n"
            "print(json.dumps([[p.id, p.payload.get('version')] for p in points]))"
        )
        .strip()
        .splitlines()[-1]
    )
    ids = [point_id for point_id, _ in points]
    cluster.record(
        "writer_killed",
        {
            "state_at_kill": state_at_kill.value,
            "job_started_s": round(running, 1),
            "finished_after_kill_s": round(finished_s, 1),
            "attempts": job.attempts,
            "chunks": job.chunks,
            "points": len(ids),
        },
    )
    del killed_at
    # one set of points: the job's chunks, each once, all of the document's one version
    assert len(ids) == len(set(ids)) == job.chunks > 0
    assert {version for _, version in points} == {job.version}


def _read(client: PageSightClient, doc_id: str) -> Callable[[], object]:
    """Reads that need PostgreSQL: a search (its trace is stored), a listing, a document."""
    calls: list[Callable[[], object]] = [
        lambda: client.search(QUESTION, route="text", top_k=3),
        client.documents,
        lambda: client.document(doc_id),
    ]
    turn = iter(range(1 << 30))
    return lambda: calls[next(turn) % len(calls)]()


def test_postgres_stopped_reads_answer_503_then_recover(cluster: Cluster, tmp_path: Path) -> None:
    doc_id = _ingested(cluster, samples.text_pdf(tmp_path / "annual.pdf"))
    pids = {d: cluster.replica_pids(d) for d in ("Gateway", "Query", "IndexService")}
    #: each read during the outage: how long it took, its status, its error
    answers: list[tuple[float, int, ApiError | None]] = []
    with cluster.client() as client:
        read = _read(client, doc_id)
        data = postgres_control.stop(cluster.postgres)
        stopped_at = time.monotonic()
        try:
            while time.monotonic() - stopped_at < OUTAGE_S:
                started = time.monotonic()
                try:
                    read()
                    answers.append((time.monotonic() - started, 200, None))
                except ApiError as exc:
                    answers.append((time.monotonic() - started, exc.status, exc))
                time.sleep(0.2)
        finally:
            postgres_control.start(data)
        back_at = time.monotonic()
        streak: list[float] = []

        def serving() -> bool:
            started = time.monotonic()
            read()
            streak.append(started)
            return len(streak) >= 5

        def read_or_reset() -> bool:
            try:
                return serving()
            except (ApiError, httpx.HTTPError):
                streak.clear()
                raise

        _until(read_or_reset, "reads did not recover after PostgreSQL came back")
    errors = [exc for _, _, exc in answers if exc is not None]
    cluster.record(
        "postgres_stopped",
        {
            "outage_s": OUTAGE_S,
            "requests_during_outage": len(answers),
            "answered_503": sum(status == 503 for _, status, _ in answers),
            "answered_200": sum(status == 200 for _, status, _ in answers),
            "slowest_answer_s": round(max(t for t, _, _ in answers), 2),
            "recovered_s": round(streak[0] - back_at, 1),
        },
    )
    assert errors, "no read needed the database during the outage"
    for error in errors:
        assert (error.status, error.code, error.stage) == (503, "DATABASE_UNAVAILABLE", "database")
        assert error.retry_after is not None and error.retry_after >= 1
        assert "Traceback" not in error.message
    # recovered without a restart: the same processes serve
    assert {d: cluster.replica_pids(d) for d in pids} == pids
