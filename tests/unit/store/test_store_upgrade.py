"""An embedded installation written by the code before the store's schema history upgrades in
place: ``tests/fixtures/store/v0`` holds the state files of a data directory that commit wrote
(see its README), with hand-written DDL, epoch-second instants and per-tenant trace tables.

Opened by this code, every job (a claimed one too), document, page, structure, audit entry,
trace and key reads back as the old code wrote it, new writes continue after it, nothing of the
old tables is left, and a second open changes nothing.
"""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pagesight.core.keys_file import load_records
from pagesight.core.types import (
    AuditEntry,
    Document,
    DocumentStructure,
    IngestJob,
    Page,
    RetrievalTrace,
    RouteName,
)
from pagesight.store.catalog import Catalog
from pagesight.store.catalog_base import TERMINAL_STATES
from pagesight.store.key_stores import FileKeyStore
from pagesight.store.schema import head_revision
from pagesight.store.tables import UNFINISHED
from pagesight.store.traces import TraceStore

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "store" / "v0"
FILES = ("catalog.sqlite3", "traces.sqlite3", "api-keys.json")
#: Long enough that the fixture's traces never age out of a test run.
FOREVER_S = 100 * 365 * 86400


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    data_dir = tmp_path / "var"
    data_dir.mkdir()
    for name in FILES:
        shutil.copy(FIXTURE / name, data_dir / name)
    return data_dir


def _rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        rows = db.execute(sql, params).fetchall()
    db.close()
    return rows


def _dump(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        lines = list(db.iterdump())
    db.close()
    return lines


def test_the_fixture_is_what_the_old_code_wrote() -> None:
    """Guards the rest: the files have no schema history and the old tables."""
    catalog, traces = FIXTURE / "catalog.sqlite3", FIXTURE / "traces.sqlite3"
    tables = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    assert [r[0] for r in _rows(catalog, tables)] == [
        *("audit", "documents", "jobs", "pages", "sqlite_sequence", "structures"),
    ]
    assert [r[0] for r in _rows(traces, tables)] == ["tenant_trace_docs", "tenant_traces"]
    (lease,) = _rows(catalog, "SELECT lease_until FROM jobs WHERE lease_until IS NOT NULL")
    assert isinstance(lease[0], float)  # epoch seconds


def test_an_installation_written_before_the_history_upgrades_in_place(data_dir: Path) -> None:
    catalog_file, traces_file = data_dir / "catalog.sqlite3", data_dir / "traces.sqlite3"
    # what the old code wrote, read from its own files
    jobs = {
        job.job_id: job
        for (body,) in _rows(catalog_file, "SELECT body FROM jobs")
        for job in [IngestJob.model_validate_json(body)]
    }
    ((claimed, worker, lease),) = _rows(
        catalog_file, "SELECT job_id, claimed_by, lease_until FROM jobs WHERE claimed_by NOT NULL"
    )
    documents = [
        Document.model_validate_json(b)
        for (b,) in _rows(catalog_file, "SELECT body FROM documents")
    ]
    pages = {
        (tenant, doc_id): [Page.model_validate_json(b) for (b,) in rows]
        for tenant, doc_id in _rows(catalog_file, "SELECT tenant, doc_id FROM documents")
        for rows in [
            _rows(
                catalog_file,
                "SELECT body FROM pages WHERE tenant = ? AND doc_id = ? ORDER BY page_number",
                (tenant, doc_id),
            )
        ]
    }
    structures = {
        (tenant, doc_id): DocumentStructure.model_validate_json(body)
        for tenant, doc_id, body in _rows(
            catalog_file, "SELECT tenant, doc_id, body FROM structures"
        )
    }
    audit = [
        (tenant, AuditEntry.model_validate_json(body).model_copy(update={"seq": seq}))
        for seq, tenant, body in _rows(catalog_file, "SELECT seq, tenant, body FROM audit")
    ]
    traces = _rows(traces_file, "SELECT tenant, trace_id, created_at, body FROM tenant_traces")
    trace_docs = _rows(traces_file, "SELECT tenant, trace_id, doc_id FROM tenant_trace_docs")
    keys = load_records(data_dir / "api-keys.json")
    assert jobs and documents and all(pages.values()) and structures and audit and traces and keys

    catalog = Catalog(catalog_file)
    try:
        assert {j.job_id: j for j in catalog.jobs(limit=100)} == jobs
        assert catalog.job_claims() == [(claimed, worker)]
        assert catalog.tenants() == sorted({d.tenant for d in documents})
        for document in documents:
            assert catalog.document(document.tenant, document.doc_id) == document
            assert (
                catalog.pages(document.tenant, document.doc_id)
                == pages[(document.tenant, document.doc_id)]
            )
            assert catalog.structure(document) == structures[(document.tenant, document.doc_id)]
        for tenant, entry in audit:
            assert entry in catalog.audit_entries(tenant)
    finally:
        catalog.close()
    (stored_lease,) = _rows(
        catalog_file, "SELECT lease_until FROM jobs WHERE job_id = ?", (claimed,)
    )
    assert datetime.fromisoformat(stored_lease[0]) == datetime.fromtimestamp(lease, UTC)

    store = TraceStore(traces_file, retention_s=FOREVER_S)
    try:
        for tenant, trace_id, _, body in traces:
            named = {d for t, i, d in trace_docs if (t, i) == (tenant, trace_id)}
            assert store.get(tenant, trace_id) == (RetrievalTrace.model_validate_json(body), named)
    finally:
        store.close()
    assert [
        datetime.fromisoformat(c) for (c,) in _rows(traces_file, "SELECT created_at FROM traces")
    ] == [datetime.fromtimestamp(epoch, UTC) for _, _, epoch, _ in traces]
    # the keys file is read as it is
    assert FileKeyStore(data_dir / "api-keys.json").records() == keys

    # at the head revision, nothing of the old tables left
    for path, tables in (
        (catalog_file, ["audit", "documents", "jobs", "pages", "structures"]),
        (traces_file, ["trace_docs", "traces"]),
    ):
        assert _rows(path, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
        names = _rows(path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        assert [n for (n,) in names if n not in ("alembic_version", "sqlite_sequence")] == tables

    # a second open changes nothing
    before = {p: (_dump(p), p.read_bytes()) for p in (catalog_file, traces_file)}
    Catalog(catalog_file).close()
    TraceStore(traces_file).close()
    assert {p: (_dump(p), p.read_bytes()) for p in before} == before

    # and new writes continue after the old ones
    catalog = Catalog(catalog_file)
    try:
        tenant, last = audit[-1]
        catalog.audit(last.model_copy(update={"seq": None, "action": "delete"}))
        assert catalog.audit_entries(tenant)[0].seq == (last.seq or 0) + 1
        job = catalog.new_job(tenant="acme", source_uri="upload:x", path="/x", doc_id="x", acl=[])
        assert catalog.jobs("acme", limit=1) == [job]  # newest first, after the old ones
    finally:
        catalog.close()


def test_a_trace_store_from_before_traces_were_per_tenant_upgrades_too(tmp_path: Path) -> None:
    """Its ``traces``/``trace_docs`` tables (epoch seconds) next to the per-tenant ones: both
    copied, the per-tenant trace winning where both hold one id, as the old code merged them."""
    path = tmp_path / "traces.sqlite3"

    def body(query: str) -> str:
        trace = RetrievalTrace(
            trace_id="t", query=query, requested_route=RouteName.TEXT, route=RouteName.TEXT
        )
        return trace.model_dump_json()

    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE traces (tenant TEXT, trace_id TEXT, created_at REAL, body TEXT);"
            "CREATE TABLE trace_docs (tenant TEXT, trace_id TEXT, doc_id TEXT);"
            "CREATE TABLE tenant_traces (tenant TEXT NOT NULL, trace_id TEXT NOT NULL,"
            " created_at REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (tenant, trace_id));"
            "CREATE INDEX tenant_traces_created ON tenant_traces(created_at);"
            "CREATE TABLE tenant_trace_docs (tenant TEXT NOT NULL, trace_id TEXT NOT NULL,"
            " doc_id TEXT NOT NULL, PRIMARY KEY (tenant, trace_id, doc_id));"
        )
        db.executemany(
            "INSERT INTO traces VALUES (?, 't', 1700000000.5, ?)",
            [("a", body("old a")), ("b", body("old b"))],
        )
        db.execute("INSERT INTO trace_docs VALUES ('b', 't', 'd-b')")
        db.execute(
            "INSERT INTO tenant_traces VALUES ('a', 't', 1800000000.25, ?)", (body("new a"),)
        )
        db.execute("INSERT INTO tenant_trace_docs VALUES ('a', 't', 'd-a')")
    db.close()
    store = TraceStore(path, retention_s=FOREVER_S)
    try:
        got_a, got_b = store.get("a", "t"), store.get("b", "t")
        assert got_a is not None and (got_a[0].query, got_a[1]) == ("new a", {"d-a"})
        assert got_b is not None and (got_b[0].query, got_b[1]) == ("old b", {"d-b"})
    finally:
        store.close()
    instants = dict(_rows(path, "SELECT tenant, created_at FROM traces"))
    assert datetime.fromisoformat(instants["a"]) == datetime.fromtimestamp(1800000000.25, UTC)
    assert datetime.fromisoformat(instants["b"]) == datetime.fromtimestamp(1700000000.5, UTC)


def test_the_partial_index_names_the_terminal_states() -> None:
    """``jobs_unfinished``'s predicate is spelled with literals (the planner matches it): they
    must be the terminal states of ``JobState``."""
    listed = ", ".join(f"'{s}'" for s in TERMINAL_STATES)
    assert UNFINISHED.text == f"state NOT IN ({listed})"
