"""``pagesight db``: the schema commands against a real PostgreSQL, and moving an embedded
installation into it (``migrate-from-sqlite``).

The installation migrated here is a real one: the eval smoke corpus ingested into two tenants
through the embedded stack, a document deleted (audit log), traces stored by the trace store
and keys written by the keys file store. What arrives in PostgreSQL is read back with plain
SQL, not through the PostgreSQL repositories, so this test holds the copy to the SQLite files
themselves: same rows, same JSON bodies, same instants, the audit log in the same order.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import sqlite3
import traceback
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner, Result

from pagesight.core.keys_file import load_records
from pagesight.core.settings import Settings, VisualEmbedderOptions
from pagesight.core.types import AccessFilter, AuditEntry, JobState, RetrievalTrace, RouteName
from pagesight.entrypoints.cli import app
from pagesight.gateway.auth import new_key
from pagesight.ingestion.ingest import IngestRequest
from pagesight.services.db_migrate import TABLES, MigrationReport
from pagesight.store.catalog import Catalog
from pagesight.store.key_stores import FileKeyStore
from pagesight.store.postgres import head_revision
from pagesight.store.traces import TraceStore
from tests.postgres import PostgresServer

pytestmark = pytest.mark.integration

RUNNER = CliRunner()

#: Whatever the developer's shell holds, the CLI sees only what a test gives it.
CLEAN_ENV: dict[str, str | None] = {
    "PAGESIGHT_DATA_DIR": None,
    "PAGESIGHT_DEBUG": None,
    "PAGESIGHT_DATABASE_URL": None,
    "PAGESIGHT_DATABASE__MIGRATE_ON_START": None,
    "PAGESIGHT_GATEWAY__API_KEYS_FILE": None,
}

ERROR_LINE = re.compile(r"^(?P<stage>[a-z]+)/(?P<code>[A-Z_]+): \S")


def cli(args: Sequence[object], env: Mapping[str, str | None] | None = None) -> Result:
    """Run ``pagesight ARGS``: no exception escapes, no traceback is printed."""
    result = RUNNER.invoke(app, [str(a) for a in args], env={**CLEAN_ENV, **(env or {})})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert result.exc_info is not None
        pytest.fail("".join(traceback.format_exception(*result.exc_info)))
    for text in (result.stdout, result.stderr):
        assert "Traceback" not in text, text
    return result


def one_error(result: Result, code: str, *, stdout: bool = False) -> str:
    """A failed command: exit 1 and one ``database/CODE: message`` line on stderr (nothing on
    stdout, unless the command printed its result before failing)."""
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    if not stdout:
        assert result.stdout == "", result.stdout
    lines = [line for line in result.stderr.splitlines() if not line.startswith("note: ")]
    assert len(lines) == 1, result.stderr
    match = ERROR_LINE.match(lines[0])
    assert match, lines[0]
    assert (match["stage"], match["code"]) == ("database", code), lines[0]
    return lines[0]


def test_commands_that_need_the_database_fail_fast_with_the_cause(
    postgres_server: PostgresServer,
) -> None:
    """No pool retrying for 30 s with a warning a try, then "pool initialization incomplete":
    one line with libpq's reason (the time it takes is bench/bench_ops.py's to measure)."""
    refused = {"PAGESIGHT_DATABASE_URL": f"postgresql://nobody@127.0.0.1:{closed_port()}/none"}
    no_role = {
        "PAGESIGHT_DATABASE_URL": postgres_server.url().replace(
            f"//{postgres_server.user}@", "//no_such_role@", 1
        )
    }
    for env, cause in ((refused, "refused"), (no_role, 'role "no_such_role" does not exist')):
        for args in (["keys", "list"], ["keys", "new", "--tenant", "t"], ["db", "current"]):
            line = one_error(cli(args, env), "UNAVAILABLE")
            assert "cannot connect to PostgreSQL" in line and cause in line, (args, line)


def test_db_upgrade_waits_for_a_database_that_is_starting_then_says_why(tmp_path: Path) -> None:
    """The migrate Job may start first: it retries for PAGESIGHT_DATABASE__CONNECT_WAIT_S,
    logging each attempt's cause, then fails with it."""
    env = {
        "PAGESIGHT_DATABASE_URL": f"postgresql://nobody@127.0.0.1:{closed_port()}/none",
        "PAGESIGHT_DATABASE__CONNECT_WAIT_S": "3",
    }
    result = cli(["db", "upgrade"], env)
    assert result.exit_code == 1, result.output
    waits = [line for line in result.stderr.splitlines() if "not reachable yet" in line]
    assert waits and all("refused" in line for line in waits), result.stderr
    assert "database/UNAVAILABLE: cannot connect to PostgreSQL" in result.stderr.splitlines()[-1]


def test_db_upgrade_creates_the_collections_on_a_qdrant_server_once(
    empty_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The migrate Job makes the first version of each index, so replicas starting together
    find it instead of each creating one; a second run changes nothing. (No Qdrant server
    here: qdrant-client's in-memory mode stands in, through the same manager.)"""
    from qdrant_client import QdrantClient

    from pagesight.index import factory
    from pagesight.services import reindex_job

    client = QdrantClient(location=":memory:")
    monkeypatch.setattr(
        reindex_job,
        "collection_manager",
        lambda _settings: factory.QdrantCollectionManager(client, owns_client=False),
    )
    env = {"PAGESIGHT_DATABASE_URL": empty_database, "PAGESIGHT_QDRANT_URL": "http://qdrant:6333"}
    first = cli(["db", "upgrade", "--json"], env)
    assert first.exit_code == 0, first.stderr
    collections = json.loads(first.stdout)["collections"]
    assert set(collections) == {"text"}, collections
    again = json.loads(cli(["db", "upgrade", "--json"], env).stdout)["collections"]
    assert again == collections
    names = [c.name for c in client.get_collections().collections]
    assert len(names) == 1 and names[0].endswith(collections["text"]), names


@pytest.fixture()
def empty_database(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a database no migration ever ran on."""
    name = f"empty_{uuid.uuid4().hex[:12]}"
    postgres_server.execute(f"CREATE DATABASE {name}")
    yield postgres_server.url(name)
    postgres_server.drop_database(name)


def pg_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


# -- db upgrade / db current ------------------------------------------------------------------


def test_upgrade_an_empty_database_once_then_current_is_head(empty_database: str) -> None:
    env = {"PAGESIGHT_DATABASE_URL": empty_database}
    head = head_revision()

    behind = cli(["db", "current"], env)
    assert behind.exit_code == 1
    assert behind.stdout.strip() == f"empty, head is {head}: run `pagesight db upgrade`"
    assert json.loads(cli(["db", "current", "--json"], env).stdout) == {
        "current": None,
        "head": head,
        "up_to_date": False,
    }

    first = cli(["db", "upgrade"], env)
    assert first.exit_code == 0, first.stderr
    assert first.stdout.strip() == f"schema empty -> {head}"
    tables = {r[0] for r in pg_rows(empty_database, "SELECT tablename FROM pg_tables")}
    assert set(TABLES) <= tables

    again = cli(["db", "upgrade", "--json"], env)
    assert again.exit_code == 0, again.stderr
    # the embedded index is left to the process that serves it
    assert json.loads(again.stdout) == {"before": head, "after": head, "collections": {}}
    assert cli(["db", "upgrade"], env).stdout.strip() == f"schema already at {head}: nothing to do"

    current = cli(["db", "current"], env)
    assert current.exit_code == 0, current.stderr
    assert current.stdout.strip() == f"{head} (head)"

    line = one_error(cli(["db", "upgrade", "--revision", "9999"], env), "INVALID_REQUEST")
    assert "9999" in line


def test_commands_without_a_database_url_say_which_setting(tmp_path: Path) -> None:
    for args in (["db", "upgrade"], ["db", "current"], ["db", "migrate-from-sqlite", tmp_path]):
        line = one_error(cli(args), "INVALID_REQUEST")
        assert "PAGESIGHT_DATABASE_URL is not set" in line


def test_an_unreachable_database_is_one_line(tmp_path: Path) -> None:
    env = {"PAGESIGHT_DATABASE_URL": f"postgresql://nobody@127.0.0.1:{closed_port()}/none"}
    for args in (["db", "current"], ["db", "migrate-from-sqlite", tmp_path]):
        assert "cannot connect to PostgreSQL" in one_error(cli(args, env), "UNAVAILABLE")


@pytest.fixture()
def catalog_only(tmp_path: Path) -> Path:
    """A data directory holding an empty catalog and nothing else."""
    data_dir = tmp_path / "var"
    Catalog(data_dir / "catalog.sqlite3").close()
    return data_dir


def test_migrate_errors(
    tmp_path: Path, postgres_url: str, empty_database: str, catalog_only: Path
) -> None:
    env = {"PAGESIGHT_DATABASE_URL": postgres_url}
    missing = tmp_path / "nowhere"
    line = one_error(cli(["db", "migrate-from-sqlite", missing], env), "NOT_FOUND")
    assert f"no data directory {missing}" in line

    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    line = one_error(cli(["db", "migrate-from-sqlite", empty_dir], env), "NOT_FOUND")
    assert "no catalog.sqlite3" in line

    args = ["db", "migrate-from-sqlite", catalog_only, "--keys-file", tmp_path / "keys.json"]
    assert "no API keys file" in one_error(cli(args, env), "NOT_FOUND")

    (tmp_path / "bad.json").write_text('[{"key_id": "k"}]')
    args = ["db", "migrate-from-sqlite", catalog_only, "--keys-file", tmp_path / "bad.json"]
    assert "is not a list of key records" in one_error(cli(args, env), "INVALID_REQUEST")

    not_sqlite = tmp_path / "junk"
    not_sqlite.mkdir()
    (not_sqlite / "catalog.sqlite3").write_bytes(b"not a database" * 100)
    assert "cannot read" in one_error(
        cli(["db", "migrate-from-sqlite", not_sqlite], env), "CORRUPT"
    )

    behind = {"PAGESIGHT_DATABASE_URL": empty_database}
    line = one_error(cli(["db", "migrate-from-sqlite", catalog_only], behind), "UNAVAILABLE")
    assert "run `pagesight db upgrade` first" in line


def test_migrate_skips_what_is_absent_and_reads_an_old_trace_store(
    postgres_url: str, catalog_only: Path
) -> None:
    """No keys file: a note. A trace store from before traces were per tenant (``traces`` /
    ``trace_docs``) is read as it is; a document link whose trace is gone is left behind; a
    NUL in a body (jsonb refuses them) is dropped, with a note."""
    with sqlite3.connect(catalog_only / "traces.sqlite3") as old:
        old.executescript(
            "CREATE TABLE traces (tenant TEXT, trace_id TEXT, created_at REAL, body TEXT);"
            "CREATE TABLE trace_docs (tenant TEXT, trace_id TEXT, doc_id TEXT);"
        )
        body = RetrievalTrace(
            trace_id="t-old", query="q\x00 1", requested_route=RouteName.AUTO, route=RouteName.TEXT
        ).model_dump_json()
        assert "\\u0000" in body
        old.execute("INSERT INTO traces VALUES ('a', 't-old', 1700000000.25, ?)", (body,))
        old.execute("INSERT INTO trace_docs VALUES ('a', 't-old', 'd1'), ('a', 'gone', 'd2')")
    old.close()

    result = cli(
        ["db", "migrate-from-sqlite", catalog_only], {"PAGESIGHT_DATABASE_URL": postgres_url}
    )
    assert result.exit_code == 0, result.stderr
    assert "note: no API keys file" in result.stderr
    assert "1 trace document link(s) name no stored trace" in result.stderr
    assert "traces: 1 body held NUL characters" in result.stderr
    assert "verified: every source row is in PostgreSQL" in result.stderr
    lines = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()[1:]}
    assert lines["traces"] == ["a", "1", "1", "1"]
    assert lines["trace_docs"] == ["a", "1", "1", "1"]
    assert lines["documents"] == ["-", "0", "0", "0"]
    ((created, trace),) = pg_rows(postgres_url, "SELECT created_at, body FROM traces")
    assert created == datetime.fromtimestamp(1700000000.25, UTC)
    assert trace == {**json.loads(body), "query": "q 1"}


# -- migrate-from-sqlite: a real installation ------------------------------------------------

TENANT_DOCS = {"a": 4, "b": 2}  # the first four smoke PDFs to tenant a, the last two to b


@dataclass
class Installation:
    data_dir: Path
    keys_file: Path
    deleted: str  # doc id of tenant a's deleted document


@pytest.fixture(scope="module")
def installation(eval_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Installation:
    """An embedded installation with every kind of state: the smoke corpus ingested into two
    tenants, one document deleted, audit entries of both tenants interleaved, traces of real
    searches (one trace id used by both tenants), and keys, one revoked."""
    from pagesight.services.stack import LocalStack

    names = json.loads((eval_dir / "subsets.json").read_text())["smoke"]
    paths = [eval_dir / "pdfs" / name for name in names]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        pytest.skip(f"smoke PDFs missing from the evaluation corpus: {missing}")
    data_dir = tmp_path_factory.mktemp("embedded") / "var"
    settings = Settings(
        data_dir=data_dir, database_url=None, visual=VisualEmbedderOptions(enabled=False)
    )
    tenants = [t for t, n in TENANT_DOCS.items() for _ in range(n)]
    with LocalStack(settings) as stack:
        requests = [
            IngestRequest(path=p, tenant=t, actor="test")
            for p, t in zip(paths, tenants, strict=True)
        ]
        jobs = stack.ingestor.ingest(requests)
        assert [j.state for j in jobs] == [JobState.READY] * len(jobs), [
            j.error_message for j in jobs
        ]
        deleted = jobs[0].doc_id
        assert stack.ingestor.delete("a", deleted, actor="test", via="cli")
        stack.catalog.audit(
            AuditEntry(
                at=datetime.now(UTC),
                tenant="b",
                actor="key-b",
                action="replace",
                doc_id=jobs[-1].doc_id,
                version="v0",
                new_version=jobs[-1].version,
            )
        )
        stack.catalog.audit(
            AuditEntry(at=datetime.now(UTC), tenant="a", actor="test", action="delete", doc_id="x")
        )
        traces = TraceStore(data_dir / "traces.sqlite3")
        try:
            for tenant, query in (("a", "revenue growth"), ("b", "Germany survey")):
                result = stack.search(query, AccessFilter(tenant=tenant), trace_id="shared-id")
                traces.put(tenant, result.trace, set(result.trace.doc_ids))
                assert result.trace.doc_ids
            other = stack.search("net income", AccessFilter(tenant="a")).trace
            traces.put("a", other, set(other.doc_ids))
        finally:
            traces.close()
    keys_file = data_dir / "api-keys.json"
    store = FileKeyStore(keys_file)
    for key_id, tenant in (("key-a", "a"), ("key-b", "b"), ("key-old", "a")):
        store.add(new_key(key_id, tenant, principals=[f"{tenant}-staff"])[1])
    assert store.revoke("key-old")
    return Installation(data_dir=data_dir, keys_file=keys_file, deleted=deleted)


def sqlite_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(sql).fetchall()
    conn.close()
    return rows


def source_counts(inst: Installation) -> dict[tuple[str, str], int]:
    """(table, tenant) -> rows, read from the SQLite files and the keys file themselves."""
    catalog, traces = inst.data_dir / "catalog.sqlite3", inst.data_dir / "traces.sqlite3"
    counts: dict[tuple[str, str], int] = {}
    queries = [(catalog, t, t) for t in ("jobs", "documents", "pages", "structures", "audit")]
    queries += [(traces, "traces", "traces"), (traces, "trace_docs", "trace_docs")]
    for path, table, source in queries:
        sql = f"SELECT tenant, count(*) FROM {source} GROUP BY 1"  # noqa: S608  # our table names
        for tenant, n in sqlite_rows(path, sql):
            counts[(table, tenant)] = n
    for record in load_records(inst.keys_file):
        counts[("api_keys", record.tenant)] = counts.get(("api_keys", record.tenant), 0) + 1
    return counts


def snapshot(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every migrated row of PostgreSQL, in a stable order."""
    order = {
        "jobs": "job_id, tenant, doc_id, state, created_at, claimed_by, lease_until, body",
        "documents": "tenant, doc_id, version, body",
        "pages": "tenant, doc_id, page_number, image_ref, body",
        "structures": "tenant, doc_id, version, body",
        "audit": "seq, tenant, doc_id, body",
        "traces": "tenant, trace_id, created_at, body",
        "trace_docs": "tenant, trace_id, doc_id",
        "api_keys": "key_id, sha256, tenant, revoked_at, revision, body",
    }
    return {
        t: pg_rows(url, f"SELECT {cols} FROM {t} ORDER BY 1, 2, 3")  # noqa: S608  # our own names
        for t, cols in order.items()
    }


@pytest.mark.slow
def test_migrate_round_trips_an_installation(installation: Installation, postgres_url: str) -> None:
    env = {"PAGESIGHT_DATABASE_URL": postgres_url}
    expected = source_counts(installation)
    assert {t for t, _ in expected} == set(TABLES)
    assert {tenant for _, tenant in expected} == {"a", "b"}

    first = cli(["db", "migrate-from-sqlite", installation.data_dir], env)
    assert first.exit_code == 0, first.stderr
    assert first.stderr.strip() == "verified: every source row is in PostgreSQL"
    table = [line.split() for line in first.stdout.splitlines()]
    assert table[0] == ["table", "tenant", "source", "written", "found"]
    assert {(r[0], r[1]): [int(n) for n in r[2:]] for r in table[1:]} == {
        k: [n, n, n] for k, n in expected.items()
    }

    copied = snapshot(postgres_url)
    catalog = installation.data_dir / "catalog.sqlite3"
    traces = installation.data_dir / "traces.sqlite3"
    for name in ("documents", "structures"):
        columns = "tenant, doc_id, version, body"
        sql = f"SELECT {columns} FROM {name} ORDER BY 1, 2, 3"  # noqa: S608  # our table names
        assert copied[name] == [
            (tenant, doc_id, version, json.loads(body))
            for tenant, doc_id, version, body in sqlite_rows(catalog, sql)
        ]
    assert {(t, d) for t, d, *_ in copied["documents"]} == {
        (t, d) for t, d, *_ in copied["structures"]
    }
    assert installation.deleted not in {d for _, d, *_ in copied["documents"]}
    assert copied["pages"] == [
        (tenant, doc_id, page, image, json.loads(body))
        for tenant, doc_id, page, image, body in sqlite_rows(
            catalog,
            "SELECT tenant, doc_id, page_number, image_ref, body FROM pages ORDER BY 1, 2, 3",
        )
    ]
    assert copied["jobs"] == [
        (job_id, tenant, doc_id, state, datetime.fromisoformat(created), None, None, json.loads(b))
        for job_id, tenant, doc_id, state, created, b in sqlite_rows(
            catalog,
            "SELECT job_id, tenant, doc_id, state, created_at, body FROM jobs ORDER BY 1, 2, 3",
        )
    ]
    # the audit log: same seqs, same order, same entries
    audit = sqlite_rows(catalog, "SELECT seq, tenant, doc_id, body FROM audit ORDER BY seq")
    assert [t for _, t, _, _ in audit] == ["a", "b", "a"]
    assert copied["audit"] == [(s, t, d, json.loads(b)) for s, t, d, b in audit]
    source_traces = sqlite_rows(
        traces, "SELECT tenant, trace_id, created_at, body FROM traces ORDER BY 1, 2, 3"
    )
    assert [(t, i, b) for t, i, _, b in copied["traces"]] == [
        (t, i, json.loads(b)) for t, i, _, b in source_traces
    ]
    for (*_, at, _), (*_, stored, _) in zip(copied["traces"], source_traces, strict=True):
        assert at == datetime.fromisoformat(stored)  # the same instant, to the microsecond
    assert {("a", "shared-id"), ("b", "shared-id")} <= {(t, i) for t, i, *_ in copied["traces"]}
    assert copied["trace_docs"] == sqlite_rows(
        traces, "SELECT tenant, trace_id, doc_id FROM trace_docs ORDER BY 1, 2, 3"
    )
    records = {r.key_id: r for r in load_records(installation.keys_file)}
    assert {key_id for key_id, *_ in copied["api_keys"]} == set(records)
    for key_id, sha256, tenant, revoked_at, _, body in copied["api_keys"]:
        record = records[key_id]
        assert (sha256, tenant, revoked_at) == (record.sha256, record.tenant, record.revoked_at)
        assert body == record.model_dump(mode="json", exclude={"revoked_at"})
    assert records["key-old"].revoked_at is not None

    # The audit log continues after the copied entries.
    with psycopg.connect(postgres_url) as conn:
        (seq,) = conn.execute(
            "INSERT INTO audit (tenant, doc_id, body) VALUES ('a', 'n', '{}') RETURNING seq"
        ).fetchone()  # type: ignore[misc]
        assert seq == audit[-1][0] + 1
        conn.rollback()

    # Again: nothing written, everything found, nothing changed.
    again = cli(["db", "migrate-from-sqlite", installation.data_dir, "--json"], env)
    assert again.exit_code == 0, again.stderr
    report = MigrationReport.model_validate_json(again.stdout)
    assert report.committed and not report.notes
    assert {(c.table, c.tenant): (c.source, c.written, c.found) for c in report.counts} == {
        k: (n, 0, n) for k, n in expected.items()
    }
    assert snapshot(postgres_url) == copied


@pytest.mark.slow
def test_migrate_again_after_a_revoke_revokes_the_key(
    installation: Installation, postgres_url: str, tmp_path: Path
) -> None:
    """Re-running changes nothing, except that a key revoked in the file since is revoked in
    the database too: a revocation must never be lost."""
    env = {"PAGESIGHT_DATABASE_URL": postgres_url}
    keys = tmp_path / "keys.json"
    shutil.copy(installation.keys_file, keys)
    args = ["db", "migrate-from-sqlite", installation.data_dir, "--keys-file", keys, "--json"]
    assert cli(args, env).exit_code == 0
    assert FileKeyStore(keys).revoke("key-a")

    result = cli(args, env)
    assert result.exit_code == 0, result.stderr
    report = MigrationReport.model_validate_json(result.stdout)
    written = {(c.table, c.tenant): c.written for c in report.counts if c.written}
    assert written == {("api_keys", "a"): 1}
    revoked = dict(pg_rows(postgres_url, "SELECT key_id, revoked_at FROM api_keys"))
    assert revoked["key-a"] == next(r.revoked_at for r in load_records(keys) if r.key_id == "key-a")
    assert revoked["key-b"] is None


@pytest.mark.slow
def test_migrate_refuses_a_database_whose_rows_differ(
    installation: Installation, postgres_url: str
) -> None:
    """An audit entry already under a seq the source uses (the cluster wrote first): the copy
    is rolled back whole, and the report says which table and tenant."""
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "INSERT INTO audit (seq, tenant, doc_id, body) OVERRIDING SYSTEM VALUE"
            " VALUES (1, 'a', 'someone-else', '{}')"
        )
    env = {"PAGESIGHT_DATABASE_URL": postgres_url}
    result = cli(["db", "migrate-from-sqlite", installation.data_dir], env)
    line = one_error(result, "CONFLICT", stdout=True)
    assert "nothing was committed" in line and "audit/a 1 of 2" in line
    assert "MISSING" in result.stdout
    assert pg_rows(postgres_url, "SELECT count(*) FROM documents") == [(0,)]
    assert pg_rows(postgres_url, "SELECT count(*) FROM audit") == [(1,)]


# -- helpers ------------------------------------------------------------------------------------


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
