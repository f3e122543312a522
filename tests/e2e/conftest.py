"""The Ray Serve application, started once per test session on a free port.

Start-up costs ~30 s (Ray, five deployments, the text model), so every e2e test shares it.
It runs as the cluster profile keeps its state: catalog, jobs, traces, audit log and one of
the keys in PostgreSQL (the test session's server), read and written by the gateway and index
replicas from their own Ray worker processes.
It runs with a small object store, a start deadline (an app whose replicas do not fit the CPUs
would otherwise wait forever), and is torn down with ``serve.shutdown()`` then
``ray.shutdown()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pagesight.gateway.auth import new_key
from pagesight.gateway.client import PageSightClient
from tests.asgi_server import free_port
from tests.postgres import PostgresServer

MAX_UPLOAD = 1_000_000


@dataclass(frozen=True)
class RunningApp:
    url: str
    key_a: str
    key_b: str
    key_limited: str
    data_dir: Path
    database_url: str

    def client(self, key: str | None = None) -> PageSightClient:
        return PageSightClient(self.url, api_key=key or self.key_a, timeout_s=120)


@pytest.fixture(scope="session")
def serve_app(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer
) -> Iterator[RunningApp]:
    pytest.importorskip("ray.serve")
    from pagesight.core.settings import Settings
    from pagesight.entrypoints.serve_app import AppArgs, run_local, shutdown_local
    from pagesight.store.key_store_postgres import PostgresKeyStore

    data_dir = tmp_path_factory.mktemp("serve") / "var"
    database_url = postgres_server.url(postgres_server.new_database())
    key_a, record_a = new_key("key-a", "tenant-a")
    key_b, record_b = new_key("key-b", "tenant-b")
    key_limited, record_limited = new_key("key-limited", "tenant-a")
    store = PostgresKeyStore.open(Settings(data_dir=data_dir, database_url=database_url))
    store.add(record_b)  # as `pagesight keys new` stores it with PAGESIGHT_DATABASE_URL set
    store.close()
    records = [record_a, record_limited.model_copy(update={"max_concurrency": 1})]
    args = AppArgs(
        settings={
            "data_dir": str(data_dir),
            "database_url": database_url,
            "gateway": {
                "api_keys": [r.model_dump() for r in records],
                "max_upload_bytes": MAX_UPLOAD,
            },
        }
    )
    port = free_port()
    try:
        run_local(args, host="127.0.0.1", port=port, num_cpus=2, object_store_mb=100, timeout_s=240)
        app = RunningApp(
            f"http://127.0.0.1:{port}", key_a, key_b, key_limited, data_dir, database_url
        )
        with app.client() as client:
            client.wait_ready(timeout_s=120)
        yield app
    finally:
        shutdown_local()
