"""PostgreSQL going away under a running process and coming back (:class:`Outage` in
:mod:`pagesight.store.postgres`): calls fail at once with DATABASE_UNAVAILABLE instead of
waiting on the pool, one probe at a time tries the server, and the process serves again once
it answers, without being restarted. A server of this module's own is stopped and started
(the session's is shared with other tests)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import DatabaseOptions, Settings
from pagesight.store.postgres import Outage, SharedDb, connection_lost, open_database
from tests import postgres_control
from tests.postgres import PostgresServer, running_postgres

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _down(db: SharedDb) -> PageSightError:
    with pytest.raises(PageSightError) as err:
        db.rows("SELECT 1")
    assert (err.value.code, err.value.stage) == (ErrorCode.DATABASE_UNAVAILABLE, Stage.DATABASE)
    assert "Traceback" not in err.value.message
    return err.value


def _requests(db: SharedDb) -> int:
    """Connections asked of the pool so far (psycopg_pool's counter)."""
    return int(db.db._pool.get_stats().get("requests_num", 0))


def test_an_outage_fails_fast_and_ends_without_a_restart(
    tmp_path: Path, own_server: PostgresServer
) -> None:
    url = own_server.url(own_server.new_database())
    # a pool that would make a caller wait 10 minutes for a connection it cannot make
    options = DatabaseOptions(pool_min_size=2, pool_timeout_s=600)
    db = open_database(Settings(data_dir=tmp_path, database_url=url, database=options))
    clock = Clock()
    db.db.outage = Outage(db.db.dsn, options, probe_every_s=1.0, clock=clock)
    try:
        assert db.rows("SELECT 1") == [(1,)]
        data = postgres_control.stop(own_server)
        try:
            # the pool's connection is dead: this call finds the server gone and says so
            first = _down(db)
            assert "unreachable" in first.message and db.db.outage.cause is not None
            # the next calls fail without asking the pool (no 10-minute wait for a connection)
            asked = _requests(db)
            for _ in range(3):
                _down(db)
            assert _requests(db) == asked
            clock.now += 1.5  # a probe is due: it finds the server still down
            assert "unreachable" in _down(db).message
        finally:
            postgres_control.start(data)
        # back, but no probe is due yet: still failing fast, the pool untouched
        _down(db)
        assert _requests(db) == asked
        clock.now += 1.5
        assert db.rows("SELECT 1") == [(1,)]  # the probe finds it back; stale connections gone
        assert db.db.outage.cause is None
        assert [db.rows("SELECT 2") for _ in range(3)] == [[(2,)]] * 3
    finally:
        db.close()


def test_a_restart_nobody_saw_costs_one_call_then_the_pool_is_fresh(
    tmp_path: Path, own_server: PostgresServer
) -> None:
    url = own_server.url(own_server.new_database())
    options = DatabaseOptions(pool_min_size=3, pool_timeout_s=600)
    db = open_database(Settings(data_dir=tmp_path, database_url=url, database=options))
    try:
        db.db._pool.wait(timeout=30)  # all three connections open
        assert db.rows("SELECT 1") == [(1,)]
        postgres_control.start(postgres_control.stop(own_server))
        # the server answers, but the pool's connections are the dead ones of before
        lost = _down(db)
        assert "connection lost" in lost.message and db.db.outage.cause is None
        # the other stale connections were replaced with it: every following call works
        assert [db.rows("SELECT 1") for _ in range(5)] == [[(1,)]] * 5
    finally:
        db.close()


def test_only_connection_failures_count_as_an_outage() -> None:
    import psycopg

    assert connection_lost(psycopg.OperationalError("server closed the connection"))
    assert connection_lost(psycopg.errors.AdminShutdown("terminating connection"))
    assert connection_lost(psycopg.errors.ConnectionFailure("gone"))
    assert not connection_lost(psycopg.errors.DeadlockDetected("deadlock detected"))
    assert not connection_lost(psycopg.errors.SerializationFailure("could not serialize"))
