"""pagesight.store.postgres against a real server: connection settings, the schema check and
migrate-on-start, the shared pool and its limits; every failure a PageSightError, never a raw
driver exception."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import DatabaseOptions, Settings
from pagesight.store import tables
from pagesight.store.postgres import conninfo, current_revision, head_revision, open_database
from pagesight.store.tables import TenantTable
from tests.postgres import PostgresServer

pytestmark = pytest.mark.integration


def _settings(tmp_path: Path, url: str, **options: object) -> Settings:
    return Settings(data_dir=tmp_path, database_url=url, database=DatabaseOptions(**options))


def _empty_database(server: PostgresServer) -> str:
    name = f"empty_{threading.get_ident()}"
    server.execute(f"DROP DATABASE IF EXISTS {name}")
    server.execute(f"CREATE DATABASE {name}")
    return server.url(name)


def test_conninfo_takes_password_file_tls_and_timeouts(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    options = DatabaseOptions(
        password_file=secret, sslmode="verify-full", sslrootcert=tmp_path / "ca.crt"
    )
    dsn = conninfo("postgresql://app@db:5432/pagesight?sslmode=disable", options)
    assert "password=s3cret" in dsn and "sslmode=verify-full" in dsn  # the setting wins
    assert f"sslrootcert={tmp_path / 'ca.crt'}" in dsn and "connect_timeout=10" in dsn
    assert "statement_timeout=30000" in dsn
    # a password in the URL wins over the file
    assert "password=inline" in conninfo("postgresql://app:inline@db/x", options)
    with pytest.raises(PageSightError) as err:
        conninfo("postgresql://app@db/x?nonsense=1", DatabaseOptions())
    assert err.value.stage == Stage.DATABASE
    with pytest.raises(PageSightError) as err:
        conninfo("postgresql://app@db/x", DatabaseOptions(password_file=tmp_path / "missing"))
    assert "password file" in err.value.message


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGESIGHT_DATABASE_URL", "postgresql://app@db/x")
    monkeypatch.setenv("PAGESIGHT_DATABASE__SSLMODE", "require")
    monkeypatch.setenv("PAGESIGHT_DATABASE__POOL_MAX_SIZE", "3")
    settings = Settings()
    assert settings.database_url is not None
    assert settings.database_url.get_secret_value() == "postgresql://app@db/x"
    assert (settings.database.sslmode, settings.database.pool_max_size) == ("require", 3)
    assert "postgresql://app@db/x" not in repr(settings)  # a URL may carry a password


def test_a_schema_behind_the_code_refuses_to_open_unless_migrating_on_start(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    url = _empty_database(postgres_server)
    with pytest.raises(PageSightError) as err:
        open_database(_settings(tmp_path, url, pool_min_size=0))
    assert (err.value.code, err.value.stage) == (ErrorCode.UNAVAILABLE, Stage.DATABASE)
    assert "pagesight db upgrade" in err.value.message

    # replicas starting together: the advisory lock lets one migrate, the others find it done
    errors: list[BaseException] = []

    def start() -> None:
        try:
            open_database(_settings(tmp_path, url, migrate_on_start=True)).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    db = open_database(_settings(tmp_path, url))
    assert current_revision(db.db) == head_revision()
    db.close()


def test_one_pool_per_process_closed_with_its_last_user(tmp_path: Path, postgres_url: str) -> None:
    settings = _settings(tmp_path, postgres_url)
    first, second = open_database(settings), open_database(settings)
    assert first.db is second.db
    first.close()
    first.close()  # idempotent: releases its own handle once
    assert second.rows("SELECT 1") == [(1,)]
    second.close()
    with pytest.raises(PageSightError, match="closed"):
        second.db.rows("SELECT 1")
    third = open_database(settings)
    assert third.db is not second.db and third.rows("SELECT 1") == [(1,)]
    third.close()


def test_a_request_waiting_too_long_for_a_connection_is_unavailable(
    tmp_path: Path, postgres_url: str
) -> None:
    db = open_database(_settings(tmp_path, postgres_url, pool_max_size=1, pool_timeout_s=0.3))
    try:
        with db.tx(), pytest.raises(PageSightError) as err:
            db.rows("SELECT 1")
        assert err.value.code == ErrorCode.UNAVAILABLE and "connection" in err.value.message
        assert db.rows("SELECT 1") == [(1,)]  # free again
    finally:
        db.close()


def test_statement_timeout_and_unreachable_server_are_clear_errors(
    tmp_path: Path, postgres_url: str
) -> None:
    db = open_database(_settings(tmp_path, postgres_url, statement_timeout_ms=200))
    try:
        with pytest.raises(PageSightError) as err:
            db.rows("SELECT pg_sleep(2)")
        assert (err.value.code, err.value.stage) == (ErrorCode.TIMEOUT, Stage.DATABASE)
        assert db.rows("SELECT 1") == [(1,)]  # the connection went back to the pool usable
    finally:
        db.close()
    with pytest.raises(PageSightError) as err:
        open_database(
            _settings(
                tmp_path, "postgresql://x@127.0.0.1:1/x", pool_timeout_s=2, connect_timeout_s=1
            )
        )
    assert err.value.code == ErrorCode.UNAVAILABLE and "connect" in err.value.message


def test_tls_setting_is_applied(tmp_path: Path, postgres_server: PostgresServer) -> None:
    """The test server has no TLS: with sslmode=require the client must refuse to talk."""
    settings = _settings(tmp_path, postgres_server.url(), sslmode="require", pool_timeout_s=2)
    with pytest.raises(PageSightError) as err:
        open_database(settings)
    assert err.value.code == ErrorCode.UNAVAILABLE


def test_tenant_table_adds_the_tenant_first() -> None:
    pages = TenantTable(tables.pages)
    query = pages.select("t1", tables.pages.c.body).where(tables.pages.c.doc_id == "d")
    compiled = query.compile()
    assert (
        str(compiled).split("WHERE ")[1] == "pages.tenant = :tenant_1 AND pages.doc_id = :doc_id_1"
    )
    assert compiled.params == {"tenant_1": "t1", "doc_id_1": "d"}
    delete = pages.delete("t1").compile()
    assert (str(delete), delete.params) == (
        "DELETE FROM pages WHERE pages.tenant = :tenant_1",
        {"tenant_1": "t1"},
    )
