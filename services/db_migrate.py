"""``pagesight db``: the cluster profile's PostgreSQL schema, and moving an embedded
installation into it.

An embedded installation keeps its operational state in files under ``data_dir``: the catalog
(``catalog.sqlite3``: jobs, documents, pages, structures, audit log), the query traces
(``traces.sqlite3``) and the API keys (a JSON file). Growing into the cluster profile means
copying that state into the PostgreSQL database every replica shares, without losing a row and
without a second try doing harm. :func:`migrate_from_sqlite` does that under four rules:

- **one transaction**: the copy commits whole or not at all, so a failure half-way (a full
  disk, a dropped connection) leaves the database as it was and the run can simply be repeated;
- **idempotent**: rows whose key the database already holds are left alone (``ON CONFLICT DO
  NOTHING``), so re-running after a success changes nothing. One exception, for safety: a key
  the file marks revoked is revoked in the database too, even if an earlier run copied it while
  it was still active (otherwise re-running after ``keys revoke`` would leave it working);
- **faithful**: bodies are the same JSON (text to ``jsonb``), timestamps become
  ``timestamptz`` (the catalog's ISO text, the trace store's epoch seconds via
  ``to_timestamp``), and audit entries keep their ``seq``, inserted oldest first, so the log's
  order and the ``before=seq`` paging cursors clients hold stay valid. The one change: NUL
  characters (PDF text carries some) are dropped from bodies, as the PostgreSQL repositories
  drop them, because ``jsonb`` cannot hold them; the report notes how many bodies had one;
- **verified**: before committing, every (table, tenant)'s rows read from the source are looked
  up in PostgreSQL by key (audit entries and API keys by content too: a *different* entry under
  the same seq, or a different key under the same id, does not count). Any shortfall rolls the
  whole copy back and the report says where.

Rows travel through ``COPY`` into temporary staging tables and from there into the real tables
with one ``INSERT ... SELECT`` each: one round trip per table instead of one per row, and the
conversions are written once, in SQL. Ingest job claims (``claimed_by``/``lease_until``) are not
copied: they belong to the processes of the old installation, which are stopped.

Run it before the cluster's replicas start writing: audit ``seq`` values are copied as they
are, and the identity sequence is moved past them afterwards.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from core.errors import ErrorCode, PageSightError, Stage
from core.keys_file import load_records
from core.postgres import PostgresDb, conninfo, current_revision, head_revision, json_without_nul
from core.settings import Settings

if TYPE_CHECKING:
    import psycopg

CATALOG_FILE = "catalog.sqlite3"
TRACES_FILE = "traces.sqlite3"
KEYS_FILE = "api-keys.json"

#: The tables in the order they are copied (and reported): traces before trace_docs, whose
#: foreign key needs them.
TABLES = (
    "jobs",
    "documents",
    "pages",
    "structures",
    "audit",
    "traces",
    "trace_docs",
    "api_keys",
)


# -- reports ---------------------------------------------------------------------------------


class SchemaStatus(BaseModel):
    """Where the database's schema stands against this code's."""

    current: str | None = Field(description="the database's revision; None: never migrated")
    head: str = Field(description="the newest revision this code knows")

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head


class UpgradeResult(BaseModel):
    before: str | None
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


class TableCount(BaseModel):
    """One table's rows of one tenant: read from the source, written by this run, and found
    in PostgreSQL after it (``found == source`` is what verification requires)."""

    table: str
    tenant: str
    source: int = Field(description="rows read from the SQLite files / keys file")
    written: int = Field(description="rows this run inserted (or, for keys, revoked)")
    found: int = Field(description="source rows present in PostgreSQL")

    @property
    def ok(self) -> bool:
        return self.found == self.source


class MigrationReport(BaseModel):
    """What ``migrate_from_sqlite`` copied and verified; ``committed`` is False when
    verification failed and the copy was rolled back."""

    data_dir: str
    counts: list[TableCount] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="what was skipped, and why")
    committed: bool = False

    @property
    def mismatches(self) -> list[TableCount]:
        return [c for c in self.counts if not c.ok]

    @property
    def ok(self) -> bool:
        return self.committed and not self.mismatches


# -- connecting ------------------------------------------------------------------------------


def connect(settings: Settings) -> PostgresDb:
    """A small pool on ``settings.database_url``, without the schema check that
    :func:`core.postgres.open_database` makes (``db upgrade`` exists to fix what it refuses).

    One plain connection is tried first: a pool retries a server it cannot reach until its
    timeout, and the person at the terminal wants libpq's reason at once, on one line."""
    import psycopg

    if settings.database_url is None:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.DATABASE,
            "PAGESIGHT_DATABASE_URL is not set: name the PostgreSQL database "
            "(postgresql://user@host:5432/dbname)",
        )
    options = settings.database.model_copy(update={"pool_min_size": 0, "pool_max_size": 2})
    dsn = conninfo(settings.database_url.get_secret_value(), options)
    try:
        psycopg.connect(dsn).close()
    except psycopg.Error as exc:
        raise PageSightError(
            ErrorCode.UNAVAILABLE,
            Stage.DATABASE,
            f"cannot connect to PostgreSQL: {_one_line(exc)}",
        ) from None
    return PostgresDb(dsn, options)


@contextmanager
def database(settings: Settings) -> Iterator[PostgresDb]:
    db = connect(settings)
    try:
        yield db
    finally:
        db.close()


def schema_status(db: PostgresDb) -> SchemaStatus:
    return SchemaStatus(current=current_revision(db), head=head_revision())


def upgrade_schema(db: PostgresDb, revision: str = "head") -> UpgradeResult:
    """``core.postgres.upgrade``, with Alembic's complaints (an unknown revision, a database at
    a revision this code does not know) as one-line errors instead of tracebacks."""
    from alembic.util.exc import CommandError

    from core.postgres import upgrade

    try:
        before, after = upgrade(db, revision)
    except CommandError as exc:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST, Stage.DATABASE, f"cannot upgrade: {_one_line(exc)}"
        ) from None
    return UpgradeResult(before=before, after=after)


# -- migrating -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Copy:
    """How one table travels: the staging table's columns (in the order the source yields
    them; ``tenant`` among them), the statement that moves staged rows into the real table
    (``RETURNING tenant``), and the condition under which a staged row ``s`` counts as found
    in the real table ``t``."""

    table: str
    staging: str
    insert: str
    found: str

    @property
    def stage(self) -> str:
        return f"stage_{self.table}"

    @property
    def columns(self) -> list[str]:
        return [c.split()[0] for c in self.staging.split(",")]


_COPIES = {
    c.table: c
    for c in (
        _Copy(
            "jobs",
            "job_id text, tenant text, doc_id text, state text, created_at text, body text",
            "INSERT INTO jobs (job_id, tenant, doc_id, state, created_at, body)"
            " SELECT job_id, tenant, doc_id, state, created_at::timestamptz, body::jsonb"
            " FROM stage_jobs ORDER BY created_at ON CONFLICT DO NOTHING",
            "t.job_id = s.job_id",
        ),
        _Copy(
            "documents",
            "tenant text, doc_id text, version text, body text",
            "INSERT INTO documents (tenant, doc_id, version, body)"
            " SELECT tenant, doc_id, version, body::jsonb FROM stage_documents"
            " ON CONFLICT DO NOTHING",
            "t.tenant = s.tenant AND t.doc_id = s.doc_id",
        ),
        _Copy(
            "pages",
            "tenant text, doc_id text, page_number integer, image_ref text, body text",
            "INSERT INTO pages (tenant, doc_id, page_number, image_ref, body)"
            " SELECT tenant, doc_id, page_number, image_ref, body::jsonb FROM stage_pages"
            " ON CONFLICT DO NOTHING",
            "t.tenant = s.tenant AND t.doc_id = s.doc_id AND t.page_number = s.page_number",
        ),
        _Copy(
            "structures",
            "tenant text, doc_id text, version text, body text",
            "INSERT INTO structures (tenant, doc_id, version, body)"
            " SELECT tenant, doc_id, version, body::jsonb FROM stage_structures"
            " ON CONFLICT DO NOTHING",
            "t.tenant = s.tenant AND t.doc_id = s.doc_id",
        ),
        _Copy(
            # seq kept (OVERRIDING SYSTEM VALUE), oldest first; found only if the entry under
            # that seq is this one.
            "audit",
            "seq bigint, tenant text, doc_id text, body text",
            "INSERT INTO audit (seq, tenant, doc_id, body) OVERRIDING SYSTEM VALUE"
            " SELECT seq, tenant, doc_id, body::jsonb FROM stage_audit ORDER BY seq"
            " ON CONFLICT DO NOTHING",
            "t.seq = s.seq AND t.tenant = s.tenant AND t.doc_id = s.doc_id"
            " AND t.body = s.body::jsonb",
        ),
        _Copy(
            "traces",
            "tenant text, trace_id text, created_at double precision, body text",
            "INSERT INTO traces (tenant, trace_id, created_at, body)"
            " SELECT tenant, trace_id, to_timestamp(created_at), body::jsonb FROM stage_traces"
            " ON CONFLICT DO NOTHING",
            "t.tenant = s.tenant AND t.trace_id = s.trace_id",
        ),
        _Copy(
            "trace_docs",
            "tenant text, trace_id text, doc_id text",
            "INSERT INTO trace_docs (tenant, trace_id, doc_id)"
            " SELECT tenant, trace_id, doc_id FROM stage_trace_docs ON CONFLICT DO NOTHING",
            "t.tenant = s.tenant AND t.trace_id = s.trace_id AND t.doc_id = s.doc_id",
        ),
        _Copy(
            # Bodies without revoked_at, which is a column (as gateway.key_store_postgres
            # writes them); inserted in the file's order, which the store lists by. A key is
            # found only with the same secret (sha256), and revoked if the file says so: the
            # one update a re-run makes. A key whose digest another key id already holds is
            # not inserted (the unique digest would abort the copy): it shows as missing.
            "api_keys",
            "ord integer, key_id text, sha256 text, tenant text, revoked_at timestamptz, body text",
            "INSERT INTO api_keys (key_id, sha256, tenant, revoked_at, body)"
            " SELECT key_id, sha256, tenant, revoked_at, body::jsonb FROM stage_api_keys s"
            " WHERE NOT EXISTS (SELECT 1 FROM api_keys k"
            "   WHERE k.sha256 = s.sha256 AND k.key_id <> s.key_id)"
            " ORDER BY ord"
            " ON CONFLICT (key_id) DO UPDATE SET revoked_at = EXCLUDED.revoked_at,"
            "   revision = nextval('api_key_revision')"
            " WHERE api_keys.revoked_at IS NULL AND EXCLUDED.revoked_at IS NOT NULL"
            "   AND api_keys.sha256 = EXCLUDED.sha256",
            "t.key_id = s.key_id AND t.sha256 = s.sha256"
            " AND (s.revoked_at IS NULL OR t.revoked_at IS NOT NULL)",
        ),
    )
}


@dataclass
class _Source:
    """Rows of one table from the source, as tuples in the staging table's column order."""

    table: str
    rows: Iterable[tuple[Any, ...]]


def migrate_from_sqlite(
    data_dir: Path, db: PostgresDb, keys_file: Path | None = None
) -> MigrationReport:
    """Copy the embedded installation under ``data_dir`` into ``db`` (schema at head) and
    verify it; see the module docstring for the rules.

    ``keys_file``: the API keys file to copy, which must exist; None:
    ``<data_dir>/api-keys.json`` when it exists. A missing traces file or default keys file is
    a note, not an error; a missing data directory or catalog, an explicit keys file that does
    not exist, or a database not at head is an error (PageSightError, one line)."""
    if not data_dir.is_dir():
        raise _error(ErrorCode.NOT_FOUND, f"no data directory {data_dir}")
    catalog = data_dir / CATALOG_FILE
    if not catalog.is_file():
        raise _error(
            ErrorCode.NOT_FOUND,
            f"no {CATALOG_FILE} in {data_dir}: not a PageSight data directory "
            "(or nothing was ever ingested there)",
        )
    if keys_file is not None and not keys_file.is_file():
        raise _error(ErrorCode.NOT_FOUND, f"no API keys file {keys_file}")
    status = schema_status(db)
    if not status.up_to_date:
        raise _error(
            ErrorCode.UNAVAILABLE,
            f"the database schema is at {status.current or 'nothing'}, not {status.head}: "
            "run `pagesight db upgrade` first",
        )

    report = MigrationReport(data_dir=str(data_dir))
    keys = keys_file or data_dir / KEYS_FILE
    traces = data_dir / TRACES_FILE
    with closing(_open_sqlite(catalog)) as cat, _traces_source(traces, report) as tr:
        sources = [*_catalog_sources(cat, report), *tr]
        if keys.is_file():
            sources.append(_Source("api_keys", _key_rows(keys)))
        else:
            report.notes.append(f"no API keys file {keys}: keys skipped")
        try:
            _copy_all(db, sources, report)
        except sqlite3.Error as exc:  # read while copying: a corrupt or locked file
            raise _error(ErrorCode.CORRUPT, f"cannot read {data_dir}: {exc}") from None
    return report


class _Rollback(Exception):
    """Raised inside the transaction to undo a copy that failed verification."""


def _copy_all(db: PostgresDb, sources: list[_Source], report: MigrationReport) -> None:
    """Stage, insert and verify every table in one transaction; commit only if every row read
    from the source is found."""
    import psycopg

    try:
        with db.tx() as conn:
            # The copy is one long transaction: the per-statement limit meant for requests
            # does not apply; naive timestamps (none are written today) are read as UTC.
            conn.execute("SET LOCAL statement_timeout = 0")
            conn.execute("SET LOCAL timezone = 'UTC'")
            for source in sources:
                report.counts.extend(_copy_table(conn, source, report))
            if report.mismatches:
                raise _Rollback
            if any(c.table == "audit" and c.source for c in report.counts):
                # New entries continue after the copied seqs. Last, once verified: a sequence
                # moved is not moved back by a rollback.
                conn.execute(
                    "SELECT setval(pg_get_serial_sequence('audit', 'seq'), max(seq)) FROM audit"
                )
            report.committed = True
    except _Rollback:
        report.committed = False
    except (psycopg.DataError, psycopg.IntegrityError) as exc:
        raise _error(
            ErrorCode.CORRUPT,
            f"PostgreSQL refused a source row, nothing was committed: {_one_line(exc)}",
        ) from None
    except psycopg.Error as exc:
        raise _error(
            ErrorCode.INTERNAL, f"the copy failed, nothing was committed: {_one_line(exc)}"
        ) from None


def _copy_table(
    conn: psycopg.Connection[Any], source: _Source, report: MigrationReport
) -> list[TableCount]:
    copy = _COPIES[source.table]
    conn.execute(f"CREATE TEMP TABLE {copy.stage} ({copy.staging}) ON COMMIT DROP")
    tenant_at = copy.columns.index("tenant")
    body_at = copy.columns.index("body") if "body" in copy.columns else None
    read: Counter[str] = Counter()
    cleaned = 0
    with conn.cursor() as cur, cur.copy(f"COPY {copy.stage} FROM STDIN") as stream:
        for row in source.rows:
            read[row[tenant_at]] += 1
            if body_at is not None:
                body = json_without_nul(row[body_at])
                if body != row[body_at]:
                    cleaned += 1
                    row = (*row[:body_at], body, *row[body_at + 1 :])
            stream.write_row(row)
    if cleaned:
        report.notes.append(
            f"{copy.table}: {cleaned} bod{'y' if cleaned == 1 else 'ies'} held NUL characters, "
            "dropped in the copy (PostgreSQL's jsonb cannot store them)"
        )
    written = dict(
        conn.execute(
            f"WITH ins AS ({copy.insert} RETURNING tenant)"
            " SELECT tenant, count(*) FROM ins GROUP BY tenant"
        ).fetchall()
    )
    found = dict(
        conn.execute(
            f"SELECT s.tenant, count(*) FROM {copy.stage} s"
            f" WHERE EXISTS (SELECT 1 FROM {copy.table} t WHERE {copy.found})"
            " GROUP BY s.tenant"
        ).fetchall()
    )
    return [
        TableCount(
            table=copy.table,
            tenant=tenant,
            source=read[tenant],
            written=written.get(tenant, 0),
            found=found.get(tenant, 0),
        )
        for tenant in sorted(read)
    ]


# -- reading the source ------------------------------------------------------------------------


def _open_sqlite(path: Path) -> sqlite3.Connection:
    """Read-only, inside one read transaction: every table of the file is read from the same
    snapshot even if a forgotten process still writes to it."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        conn.isolation_level = None
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise _error(ErrorCode.CORRUPT, f"cannot read {path}: {exc}") from None
    return conn


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _catalog_sources(conn: sqlite3.Connection, report: MigrationReport) -> list[_Source]:
    """The catalog's tables. Only the columns every catalog version has are read (jobs'
    claim columns, where present, are not copied). A table an old catalog lacks (written
    before it existed) reads as empty, with a note."""
    present = _tables(conn)
    queries = {
        "jobs": "SELECT job_id, tenant, doc_id, state, created_at, body FROM jobs",
        "documents": "SELECT tenant, doc_id, version, body FROM documents",
        "pages": "SELECT tenant, doc_id, page_number, image_ref, body FROM pages",
        "structures": "SELECT tenant, doc_id, version, body FROM structures",
        "audit": "SELECT seq, tenant, doc_id, body FROM audit ORDER BY seq",
    }
    sources = []
    for table, sql in queries.items():
        if table in present:
            sources.append(_Source(table, _rows(conn, sql)))
        else:
            report.notes.append(f"{CATALOG_FILE} has no {table} table: nothing to copy")
    return sources


@contextmanager
def _traces_source(path: Path, report: MigrationReport) -> Iterator[list[_Source]]:
    """The trace store's tables, under their current names or a pre-tenant store's
    (``traces``/``trace_docs``, which the store renames when it next opens). Document links
    whose trace is gone are not copied (the foreign key would refuse them), with a note."""
    if not path.is_file():
        report.notes.append(f"no {TRACES_FILE} in {path.parent}: traces skipped")
        yield []
        return
    with closing(_open_sqlite(path)) as conn:
        present = _tables(conn)
        traces, docs = (
            ("tenant_traces", "tenant_trace_docs")
            if "tenant_traces" in present
            else ("traces", "trace_docs")
        )
        if traces not in present:
            report.notes.append(f"{TRACES_FILE} holds no traces table: traces skipped")
            yield []
            return
        linked = (
            f"FROM {docs} d WHERE EXISTS (SELECT 1 FROM {traces} t"
            " WHERE t.tenant = d.tenant AND t.trace_id = d.trace_id)"
        )
        sources = [
            _Source(
                "traces", _rows(conn, f"SELECT tenant, trace_id, created_at, body FROM {traces}")
            )
        ]
        if docs in present:
            (links,) = conn.execute(f"SELECT count(*) FROM {docs}").fetchone()
            (kept,) = conn.execute(f"SELECT count(*) {linked}").fetchone()
            if links != kept:
                report.notes.append(
                    f"{links - kept} trace document link(s) name no stored trace: not copied"
                )
            sources.append(
                _Source(
                    "trace_docs", _rows(conn, f"SELECT d.tenant, d.trace_id, d.doc_id {linked}")
                )
            )
        yield sources


def _rows(conn: sqlite3.Connection, sql: str) -> Iterator[tuple[Any, ...]]:
    """Rows streamed in batches: a large catalog never sits in memory whole."""
    cursor = conn.execute(sql)
    while batch := cursor.fetchmany(1000):
        yield from batch


def _key_rows(path: Path) -> list[tuple[Any, ...]]:
    """The keys file's records as rows. A file naming one key id or one digest twice is
    refused: which record the database should keep would be a guess."""
    try:
        records = load_records(path)
    except (ValueError, OSError) as exc:
        raise _error(ErrorCode.INVALID_REQUEST, _one_line(exc)) from None
    for field in ("key_id", "sha256"):
        seen = Counter(getattr(r, field) for r in records)
        twice = sorted(v for v, n in seen.items() if n > 1)
        if twice:
            raise _error(
                ErrorCode.INVALID_REQUEST,
                f"{path} lists {field} {twice[0]!r} more than once: fix the file first",
            )
    return [
        (
            n,
            r.key_id,
            r.sha256,
            r.tenant,
            r.revoked_at,
            json.dumps(r.model_dump(mode="json", exclude={"revoked_at"})),
        )
        for n, r in enumerate(records)
    ]


def _error(code: ErrorCode, message: str) -> PageSightError:
    return PageSightError(code, Stage.DATABASE, message)


def _one_line(exc: BaseException) -> str:
    """libpq and pydantic messages span lines (a hint, a DETAIL); the CLI prints one."""
    return " ".join(str(exc).split())
