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
- **faithful**: both sides are the same tables (:mod:`pagesight.store.tables`): rows are read from
  the SQLite files and written to PostgreSQL through them, so bodies are the same JSON (text to
  ``jsonb``), instants the same instants, and audit entries keep their ``seq``, inserted oldest
  first, so the log's order and the ``before=seq`` paging cursors clients hold stay valid. The
  one change: NUL characters (PDF text carries some) are dropped from bodies, as the PostgreSQL
  repositories drop them, because ``jsonb`` cannot hold them; the report notes how many bodies
  had one;
- **verified**: before committing, every (table, tenant)'s rows read from the source are looked
  up in PostgreSQL by key (audit entries and API keys by content too: a *different* entry under
  the same seq, or a different key under the same id, does not count). Any shortfall rolls the
  whole copy back and the report says where.

The SQLite files are opened as the store opens them (:class:`pagesight.store.sqlite.SqliteDb`):
files of an older version are brought to the current schema first, in place, as any command of this
version does. Rows travel, per table, through ``COPY`` into a temporary staging table of the
same columns and from there into the real table with one ``INSERT ... SELECT``: one round trip
per table instead of one per row. Ingest job claims (``claimed_by``/``lease_until``) are not
copied: they belong to the processes of the old installation, which are stopped.

Run it before the cluster's replicas start writing: audit ``seq`` values are copied as they
are, and the identity sequence is moved past them afterwards.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from pydantic import BaseModel, Field

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.keys_file import load_records
from pagesight.core.settings import Settings
from pagesight.store import tables as t
from pagesight.store.postgres import (
    DIALECT,
    PostgresDb,
    conninfo,
    current_revision,
    head_revision,
    one_line,
)
from pagesight.store.sqlite import SqliteDb
from pagesight.store.tables import json_without_nul

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


def connect(settings: Settings, *, wait_s: float = 0.0) -> PostgresDb:
    """A small pool on ``settings.database_url``, without the schema check that
    :func:`pagesight.store.postgres.open_database` makes (``db upgrade`` exists to fix what it
    refuses). ``PostgresDb`` tries one plain connection before its pool (libpq's reason at
    once, on one line); ``wait_s``: keep trying that long for a database that is starting."""
    if settings.database_url is None:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.DATABASE,
            "PAGESIGHT_DATABASE_URL is not set: name the PostgreSQL database "
            "(postgresql://user@host:5432/dbname)",
        )
    options = settings.database.model_copy(update={"pool_min_size": 0, "pool_max_size": 2})
    dsn = conninfo(settings.database_url.get_secret_value(), options)
    return PostgresDb(dsn, options, wait_s=wait_s)


@contextmanager
def database(settings: Settings, *, wait_s: float = 0.0) -> Iterator[PostgresDb]:
    db = connect(settings, wait_s=wait_s)
    try:
        yield db
    finally:
        db.close()


def schema_status(db: PostgresDb) -> SchemaStatus:
    return SchemaStatus(current=current_revision(db), head=head_revision())


def upgrade_schema(db: PostgresDb, revision: str = "head") -> UpgradeResult:
    """``pagesight.store.postgres.upgrade``, with Alembic's complaints (an unknown revision, a
    database at a revision this code does not know) as one-line errors instead of tracebacks."""
    from alembic.util.exc import CommandError

    from pagesight.store.postgres import upgrade

    try:
        before, after = upgrade(db, revision)
    except CommandError as exc:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST, Stage.DATABASE, f"cannot upgrade: {one_line(exc)}"
        ) from None
    return UpgradeResult(before=before, after=after)


# -- migrating -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Copy:
    """How one table travels: which of its columns (``tenant`` among them), in which order
    the staged rows go in, with which extra ``INSERT`` clauses, and what besides the primary
    key a staged row ``s`` must match in the real table ``t`` to count as found."""

    table: sa.Table
    columns: tuple[str, ...]
    order: str = ""
    overriding: bool = False
    also_found: str = ""

    @property
    def name(self) -> str:
        return self.table.name

    @property
    def stage(self) -> str:
        return f"stage_{self.name}"

    def staging(self) -> str:
        """The staging table's columns: the real table's, with their types."""
        return ", ".join(
            f"{c} {self.table.c[c].type.compile(dialect=DIALECT)}" for c in self.columns
        )

    def insert(self) -> str:
        """Staged rows into the real table; rows whose key it holds are left alone."""
        columns = ", ".join(self.columns)
        return (
            f"INSERT INTO {self.name} ({columns})"  # noqa: S608  # our own names only
            + (" OVERRIDING SYSTEM VALUE" if self.overriding else "")
            + f" SELECT {columns} FROM {self.stage}"  # noqa: S608  # our own names only
            + (f" ORDER BY {self.order}" if self.order else "")
            + " ON CONFLICT DO NOTHING"
        )

    def found(self) -> str:
        keys = [f"t.{c.name} = s.{c.name}" for c in self.table.primary_key.columns]
        return " AND ".join([*keys, *([self.also_found] if self.also_found else [])])


_COPIES = {
    c.name: c
    for c in (
        # claims stay behind (see the module docstring)
        _Copy(t.jobs, ("job_id", "tenant", "doc_id", "state", "created_at", "body"), "created_at"),
        _Copy(t.documents, ("tenant", "doc_id", "version", "body", "state")),
        _Copy(t.pages, ("tenant", "doc_id", "page_number", "image_ref", "body")),
        _Copy(t.structures, ("tenant", "doc_id", "version", "body")),
        # seq kept, oldest first; found only if the entry under that seq is this one
        _Copy(
            t.audit,
            ("seq", "tenant", "doc_id", "body"),
            order="seq",
            overriding=True,
            also_found="t.tenant = s.tenant AND t.doc_id = s.doc_id AND t.body = s.body",
        ),
        _Copy(t.traces, ("tenant", "trace_id", "created_at", "body")),
        _Copy(t.trace_docs, ("tenant", "trace_id", "doc_id")),
    )
}


@dataclass(frozen=True)
class _KeysCopy(_Copy):
    """API keys: bodies without revoked_at, which is a column (as the PostgreSQL key store
    writes them), inserted in the file's order (``ord``), which the store lists by. A key is
    found only with the same secret (sha256), and revoked if the file says so: the one update a
    re-run makes. A key whose digest another key id already holds is not inserted (the unique
    digest would abort the copy): it shows as missing."""

    def staging(self) -> str:
        return "ord integer, " + super().staging()

    def insert(self) -> str:
        columns = ", ".join(self.columns)
        return (
            f"INSERT INTO api_keys ({columns}) SELECT {columns} FROM {self.stage} s"  # noqa: S608  # our own names only
            " WHERE NOT EXISTS (SELECT 1 FROM api_keys k"
            "   WHERE k.sha256 = s.sha256 AND k.key_id <> s.key_id)"
            " ORDER BY ord"
            " ON CONFLICT (key_id) DO UPDATE SET revoked_at = EXCLUDED.revoked_at,"
            "   revision = nextval('api_key_revision')"
            " WHERE api_keys.revoked_at IS NULL AND EXCLUDED.revoked_at IS NOT NULL"
            "   AND api_keys.sha256 = EXCLUDED.sha256"
        )


_COPIES["api_keys"] = _KeysCopy(
    t.api_keys,
    ("key_id", "sha256", "tenant", "revoked_at", "body"),
    also_found="t.sha256 = s.sha256 AND (s.revoked_at IS NULL OR t.revoked_at IS NOT NULL)",
)


@dataclass
class _Source:
    """Rows of one table from the source, as tuples in the copy's column order (the keys
    file's with ``ord`` first)."""

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
    with _read(catalog, t.CATALOG_TABLES) as cat, _traces_source(data_dir, report) as tr:
        sources = [*_catalog_sources(cat), *tr]
        if keys.is_file():
            sources.append(_Source("api_keys", _key_rows(keys)))
        else:
            report.notes.append(f"no API keys file {keys}: keys skipped")
        try:
            _copy_all(db, sources, report)
        except (sqlite3.Error, sa.exc.DBAPIError) as exc:  # reading while copying
            raise _error(ErrorCode.CORRUPT, f"cannot read {data_dir}: {_reason(exc)}") from None
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
            # does not apply.
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
            f"PostgreSQL refused a source row, nothing was committed: {one_line(exc)}",
        ) from None
    except psycopg.Error as exc:
        raise _error(
            ErrorCode.INTERNAL, f"the copy failed, nothing was committed: {one_line(exc)}"
        ) from None


def _copy_table(
    conn: psycopg.Connection[Any], source: _Source, report: MigrationReport
) -> list[TableCount]:
    copy = _COPIES[source.table]
    conn.execute(f"CREATE TEMP TABLE {copy.stage} ({copy.staging()}) ON COMMIT DROP")
    staged = ["ord", *copy.columns] if isinstance(copy, _KeysCopy) else list(copy.columns)
    tenant_at = staged.index("tenant")
    body_at = staged.index("body") if "body" in staged else None
    read: Counter[str] = Counter()
    cleaned = 0
    with (
        conn.cursor() as cur,
        cur.copy(f"COPY {copy.stage} ({', '.join(staged)}) FROM STDIN") as stream,
    ):
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
            f"{copy.name}: {cleaned} bod{'y' if cleaned == 1 else 'ies'} held NUL characters, "
            "dropped in the copy (PostgreSQL's jsonb cannot store them)"
        )
    written = dict(
        conn.execute(
            f"WITH ins AS ({copy.insert()} RETURNING tenant)"  # noqa: S608  # our own names only
            " SELECT tenant, count(*) FROM ins GROUP BY tenant"
        ).fetchall()
    )
    found = dict(
        conn.execute(
            f"SELECT s.tenant, count(*) FROM {copy.stage} s"  # noqa: S608  # our own names only
            f" WHERE EXISTS (SELECT 1 FROM {copy.name} t WHERE {copy.found()})"
            " GROUP BY s.tenant"
        ).fetchall()
    )
    return [
        TableCount(
            table=copy.name,
            tenant=tenant,
            source=read[tenant],
            written=written.get(tenant, 0),
            found=found.get(tenant, 0),
        )
        for tenant in sorted(read)
    ]


# -- reading the source ------------------------------------------------------------------------


@contextmanager
def _read(path: Path, tables: frozenset[str]) -> Iterator[sa.Connection]:
    """A SQLite file of the installation, opened as the store opens it (an older version's
    brought to the current schema), inside one read transaction: every table of the file is
    read from the same snapshot even if a forgotten process still writes to it."""
    try:
        sqlite_db = SqliteDb(path, tables)
    except (sqlite3.Error, sa.exc.DBAPIError) as exc:
        raise _error(ErrorCode.CORRUPT, f"cannot read {path}: {_reason(exc)}") from None
    with closing(sqlite_db), sqlite_db.read() as conn:
        yield conn


def _rows(conn: sa.Connection, query: sa.Select[Any]) -> Iterator[tuple[Any, ...]]:
    """Rows streamed in batches: a large catalog never sits in memory whole."""
    for batch in conn.execute(query.execution_options(yield_per=1000)).partitions():
        yield from (tuple(row) for row in batch)


def _catalog_sources(conn: sa.Connection) -> list[_Source]:
    """The catalog's tables, through :mod:`pagesight.store.tables`."""
    sources = []
    for name in ("jobs", "documents", "pages", "structures", "audit"):
        copy = _COPIES[name]
        query = sa.select(*(copy.table.c[c] for c in copy.columns))
        if name == "audit":
            query = query.order_by(t.audit.c.seq)
        sources.append(_Source(name, _rows(conn, query)))
    return sources


@contextmanager
def _traces_source(data_dir: Path, report: MigrationReport) -> Iterator[list[_Source]]:
    """The trace store's tables (a missing file is a note). Document links whose trace is
    gone are not copied (the foreign key would refuse them), with a note."""
    path = data_dir / TRACES_FILE
    if not path.is_file():
        report.notes.append(f"no {TRACES_FILE} in {data_dir}: traces skipped")
        yield []
        return
    with _read(path, t.TRACE_TABLES) as conn:
        traces, docs = t.traces, t.trace_docs
        linked = sa.exists().where(
            traces.c.tenant == docs.c.tenant, traces.c.trace_id == docs.c.trace_id
        )
        links = conn.execute(sa.select(sa.func.count()).select_from(docs)).scalar_one()
        kept = conn.execute(sa.select(sa.func.count()).select_from(docs).where(linked)).scalar_one()
        if links != kept:
            report.notes.append(
                f"{links - kept} trace document link(s) name no stored trace: not copied"
            )
        yield [
            _Source("traces", _rows(conn, sa.select(*traces.c))),
            _Source("trace_docs", _rows(conn, sa.select(*docs.c).where(linked))),
        ]


def _key_rows(path: Path) -> list[tuple[Any, ...]]:
    """The keys file's records as rows. A file naming one key id or one digest twice is
    refused: which record the database should keep would be a guess."""
    try:
        records = load_records(path)
    except (ValueError, OSError) as exc:
        raise _error(ErrorCode.INVALID_REQUEST, one_line(exc)) from None
    for field in ("key_id", "sha256"):
        seen = Counter(getattr(r, field) for r in records)
        twice = sorted(v for v, n in seen.items() if n > 1)
        if twice:
            raise _error(
                ErrorCode.INVALID_REQUEST,
                f"{path} lists {field} {twice[0]!r} more than once: fix the file first",
            )
    return [
        (n, r.key_id, r.sha256, r.tenant, r.revoked_at, r.model_dump_json(exclude={"revoked_at"}))
        for n, r in enumerate(records)
    ]


def _reason(exc: BaseException) -> str:
    """The driver's message of a SQLAlchemy error (its own adds the statement)."""
    orig = getattr(exc, "orig", None)
    return one_line(orig if orig is not None else exc)


def _error(code: ErrorCode, message: str) -> PageSightError:
    return PageSightError(code, Stage.DATABASE, message)
