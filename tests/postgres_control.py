"""Stopping and starting a running test server (:class:`tests.postgres.PostgresServer`) in
place, as an operator's restart or a failover does: the same data, port and options after.

The server is found by asking it (``SHOW data_directory``), and started again by
``pg_ctl restart``, which reuses the command line the server was started with
(``postmaster.opts``) when none is running, so nothing here repeats
:func:`tests.postgres.running_postgres`'s options.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.postgres import PostgresServer, _as_server_user, _bin_dir


def data_directory(server: PostgresServer) -> Path:
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
    assert row is not None
    return Path(row[0])


def stop(server: PostgresServer) -> Path:
    """Stop the server (``-m fast``: its clients' connections are closed, as in a restart);
    return its data directory, for :func:`start`."""
    data = data_directory(server)
    _pg_ctl(["-D", str(data), "-m", "fast", "-w", "stop"])
    return data


def start(data: Path) -> None:
    """Start the server of ``data`` again with its former options; return once it accepts
    connections."""
    _pg_ctl(["-D", str(data), "-l", str(data.parent / "server.log"), "-w", "restart"])


def _pg_ctl(args: list[str]) -> None:
    done = subprocess.run(
        _as_server_user([str(_bin_dir() / "pg_ctl"), *args]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
