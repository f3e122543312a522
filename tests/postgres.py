"""A real PostgreSQL server for tests: Debian's binaries (``make setup`` installs them), a
cluster in a temp directory on a free port, started once per test session and stopped after
(:func:`running_postgres`; the gateway benchmark starts one the same way).

Each test gets a database of its own, cloned from a template the migrations ran on once
(``CREATE DATABASE ... TEMPLATE``: ~0.1 s), so tests never see each other's rows.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.asgi_server import free_port

TEMPLATE = "pagesight_template"


def _bin_dir() -> Path:
    """The newest installed server's binaries (Debian keeps them out of PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise RuntimeError(
        "PostgreSQL server binaries not found (initdb): run `make setup`, which installs "
        "Debian's postgresql package"
    )


def _version(path: str) -> int:
    try:
        return int(Path(path).parents[1].name)
    except ValueError:
        return 0


@dataclass
class PostgresServer:
    """A running cluster: ``url(db)`` names one of its databases."""

    port: int
    user: str = "pagesight"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def new_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        return name

    def drop_database(self, name: str) -> None:
        self.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _as_server_user(cmd: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as Debian's ``postgres`` user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """A throwaway server (also what ``bench/`` runs against), stopped and deleted after."""
    from pagesight.core.settings import DatabaseOptions
    from pagesight.store.postgres import PostgresDb, upgrade

    bin_dir = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="pagesight-pg-"))
    root.chmod(0o755)
    data, sock = root / "data", root / "sock"
    for d in (data, sock):
        d.mkdir()
        if os.geteuid() == 0:
            shutil.chown(d, "postgres", "postgres")
    server = PostgresServer(port=free_port())
    log = root / "server.log"
    if os.geteuid() == 0:
        log.touch()
        shutil.chown(log, "postgres", "postgres")
    run = {"check": True, "capture_output": True, "timeout": 120}
    subprocess.run(
        _as_server_user(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                server.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            ]
        ),
        **run,  # type: ignore[arg-type]
    )
    options = (
        f"-p {server.port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off "
        "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
    )
    subprocess.run(
        _as_server_user(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start"]
        ),
        **run,  # type: ignore[arg-type]
    )
    try:
        server.execute(f"CREATE DATABASE {TEMPLATE}")
        db = PostgresDb(server.url(TEMPLATE), DatabaseOptions(pool_min_size=0))
        try:
            upgrade(db)
        finally:
            db.close()
        yield server
    finally:
        subprocess.run(
            _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, migrated database of its own for one test."""
    name = postgres_server.new_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)
