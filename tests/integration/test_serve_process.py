"""``pagesight serve --no-ray`` as an operator runs it, in a process of its own: the status
events, a clean stop on SIGTERM, and a log that holds each line once and never a key, wherever
a client puts it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.asgi_server import free_port, free_ports

pytestmark = pytest.mark.slow

PAGESIGHT = Path(sys.executable).with_name("pagesight")


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGESIGHT_")}
    env.update(PAGESIGHT_DATA_DIR=str(data_dir), PAGESIGHT_SERVE__GRACE_S="3")
    return env


def _new_key(env: dict[str, str]) -> str:
    made = subprocess.run(
        [str(PAGESIGHT), "keys", "new", "--tenant", "t1", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    key: str = json.loads(made.stdout)["key"]
    return key


def test_serve_no_ray_events_stop_and_a_log_without_keys(tmp_path: Path) -> None:
    env = _env(tmp_path / "data")
    key = _new_key(env)
    port = free_port()
    server = subprocess.Popen(
        [str(PAGESIGHT), "serve", "--no-ray", "--json", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        events = [json.loads(server.stdout.readline())["event"] for _ in range(2)]
        assert events == ["starting", "serving"], events
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=30) as client:
            # every place a client might put its key: headers, query strings, the path, a body
            assert client.get(
                "/v1/documents", headers={"Authorization": f"Bearer {key}"}
            ).is_success
            assert client.get("/v1/documents", headers={"X-API-Key": key}).is_success
            for parameter in ("api_key", "key", "token", "access_token"):
                client.get(f"/v1/documents?{parameter}={key}&limit=1")
            client.get(f"/v1/documents/{key}")
            client.post("/v1/search", json={"query": key, "api_key": key})
            client.post("/v1/search", content=f'{{"query": "{key}",,}}', headers={"X-API-Key": key})
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=30)
        stopped_in = time.monotonic() - started
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    # uvicorn re-raises the signal it caught once it has shut down: the exit says SIGTERM
    assert server.returncode in (0, -signal.SIGTERM), err[-2000:]
    assert [json.loads(line)["event"] for line in out.splitlines()] == ["stopping"]
    assert stopped_in < 15, stopped_in
    lines = err.splitlines()
    assert lines, "the server logs"
    assert key not in err and key[3:] not in err, [line for line in lines if key[3:] in line]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    access = [r["message"] for r in records if r["logger"] == "uvicorn.access"]
    assert len(access) == 9, access  # each request logged once
    assert sum("[redacted]" in m for m in access) >= 5, access
    assert not [r for r in records if r["logger"].startswith("alembic")], "alembic's INFO noise"


def _gateway_replicas(tree: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in tree if "ServeReplica:pagesight:Gateway" in " ".join(p.cmdline())]


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_serve_on_ray_stops_every_process_it_started_on_sigterm(tmp_path: Path) -> None:
    """``pagesight serve`` (Ray, direct ingress): a gateway replica that dies is replaced on
    the same port; on SIGTERM the ``stopping`` event, then no process of the tree it started
    is left: Ray's raylet, GCS, dashboard, its agents and every replica."""
    env = _env(tmp_path / "data")
    _new_key(env)
    env["PAGESIGHT_SERVE__NUM_CPUS"] = "2"
    port = free_ports(2)  # the gateway replica's, then Serve's proxy's
    server = subprocess.Popen(
        [str(PAGESIGHT), "serve", "--json", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    tree: list[psutil.Process] = []
    try:
        assert server.stdout is not None
        events = [json.loads(server.stdout.readline())["event"] for _ in range(2)]
        assert events == ["starting", "serving"], events
        tree = psutil.Process(server.pid).children(recursive=True)
        names = " ".join(p.name() for p in tree)
        assert "raylet" in names and "gcs_server" in names, names
        # a crashed gateway replica: Serve starts another, which must get the port back
        healthz = f"http://127.0.0.1:{port}/healthz"
        assert _answers(healthz)
        (gateway,) = _gateway_replicas(tree)
        gateway.kill()
        deadline = time.monotonic() + 120
        while not _answers(healthz):
            assert server.poll() is None, "pagesight serve exited after a replica died"
            assert time.monotonic() < deadline, "no gateway answers again on its port"
            time.sleep(1)
        tree = psutil.Process(server.pid).children(recursive=True)
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=60)
        assert [json.loads(line)["event"] for line in out.splitlines()] == ["stopping"]
        _, alive = psutil.wait_procs(tree, timeout=30)
        assert not alive, [(p.pid, p.name()) for p in alive]
    finally:
        if server.poll() is None:
            server.kill()
        for process in tree:
            with contextlib.suppress(psutil.Error):
                process.kill()
