"""PostgreSQL for the cluster profile: one connection pool per process, shared by the catalog,
the trace store and the key store, and a schema kept by Alembic (:mod:`pagesight.store.schema`).

Why one pool: a platform team sizes PostgreSQL's ``max_connections`` from
``replicas x pool_max_size``, and that arithmetic only holds if a process opens one pool, not
one per repository. :func:`open_database` hands out the same :class:`PostgresDb` to every
repository of a process and closes its pool when the last one closes.

Why a schema check at open: a replica started on code newer than the database would fail on its
first write, mid-request. It refuses to start instead, naming ``pagesight db upgrade``, unless
``database.migrate_on_start`` lets it upgrade (under an advisory lock, so replicas starting
together migrate once).

Why a circuit breaker (:class:`Outage`): when PostgreSQL goes away under a running service,
requests fail at once with DATABASE_UNAVAILABLE (503 + ``Retry-After`` at the gateway) instead of
each waiting ``pool_timeout_s`` for a connection; one probe a second finds the server back, and
the pool's dead connections are replaced then, so the service recovers without a restart.

Repositories run SQLAlchemy Core statements (:mod:`pagesight.store.tables`) here: :class:`SharedDb`
is their :class:`~pagesight.store.database.Database`, compiling each statement for psycopg and
running it on a connection of the pool. psycopg is imported only here (and in the modules that use
this one), and this module only when a ``database_url`` is set: a single-machine install never loads
it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import DatabaseOptions, Settings
from pagesight.store import schema
from pagesight.store.database import Database
from pagesight.store.tables import ALL_TABLES

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

log = logging.getLogger(__name__)
#: Taken by ``upgrade`` so that replicas starting at once run the migrations once.
_MIGRATION_LOCK = 0x50_41_47_45  # "PAGE"
#: What statements are compiled for (psycopg 3, ``%(name)s`` parameters).
DIALECT = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy's, untyped


def conninfo(url: str, options: DatabaseOptions) -> str:
    """libpq connection string: ``url`` plus the password file, TLS and timeouts of
    ``options``. The URL's own values win, except ``sslmode``: the setting overrides it."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError: the URL itself is malformed
        raise _config_error(f"database_url is not a PostgreSQL URL: {exc}") from None
    extra: dict[str, Any] = {"application_name": "pagesight"}
    if options.password_file is not None and not params.get("password"):
        try:
            extra["password"] = options.password_file.read_text().strip()
        except OSError as exc:
            raise _config_error(f"database password file unreadable: {exc}") from None
    if options.sslmode is not None:
        extra["sslmode"] = options.sslmode
    if options.sslrootcert is not None:
        extra["sslrootcert"] = str(options.sslrootcert)
    extra.setdefault("connect_timeout", options.connect_timeout_s)
    if options.statement_timeout_ms:
        extra["options"] = f"-c statement_timeout={options.statement_timeout_ms}"
    # The URL's own values win; the sslmode setting overrides the URL's (TLS set by the operator).
    keep = {k: v for k, v in extra.items() if k not in params or k == "sslmode"}
    return make_conninfo(url, **keep)


class PostgresDb:
    """A connection pool; ``tx()`` for a transaction, ``rows()`` for one read.

    Repositories hold one of these (from :func:`open_database`) instead of a connection, so a
    request thread waits for a free connection at most ``pool_timeout_s`` and then fails with
    UNAVAILABLE, never a 500."""

    def __init__(self, dsn: str, options: DatabaseOptions, *, wait_s: float = 0.0) -> None:
        from psycopg_pool import ConnectionPool

        # A pool retries a server it cannot reach until its timeout, logging each try; one
        # plain connection first gives the cause (refused, no such role, wrong password, TLS
        # required) at once.
        reach(dsn, options, wait_s=wait_s)
        self.dsn = dsn
        self._pool: ConnectionPool = ConnectionPool(
            dsn,
            min_size=options.pool_min_size,
            max_size=options.pool_max_size,
            timeout=options.pool_timeout_s,
            open=False,
            name="pagesight",
        )
        try:
            self._pool.open(wait=options.pool_min_size > 0, timeout=options.pool_timeout_s)
        except Exception as exc:
            self._pool.close()
            raise _unavailable(f"cannot connect to PostgreSQL: {exc}") from None
        self.outage = Outage(dsn, options)

    @contextmanager
    def tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction: committed when the block ends, rolled back on any error.

        While PostgreSQL is known to be down (:class:`Outage`) this fails at once with
        DATABASE_UNAVAILABLE instead of waiting ``pool_timeout_s`` for a connection the pool
        cannot make; the first call that finds it back flushes the connections the outage broke
        (no restart of the process)."""
        import psycopg
        from psycopg_pool import PoolClosed, PoolTimeout

        if self.outage.check():
            self._pool.check()  # the idle connections of before the outage are dead: replace them
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except PoolClosed as exc:
            raise _unavailable(f"database pool closed: {exc}") from None
        except PoolTimeout as exc:
            cause = self.outage.probe()
            if cause is not None:  # no free connection because none can be made
                raise _database_down(self.outage.found(cause)) from None
            raise _unavailable(f"no free database connection: {exc}") from None
        except psycopg.errors.QueryCanceled as exc:  # statement_timeout_ms
            raise PageSightError(
                ErrorCode.TIMEOUT, Stage.DATABASE, f"database statement timed out: {exc}"
            ) from None
        except psycopg.OperationalError as exc:
            if not connection_lost(exc):  # e.g. a deadlock or a serialization failure
                raise _unavailable(f"database error: {one_line(exc)}") from None
            raise self._lost(exc) from None

    def _lost(self, exc: psycopg.OperationalError) -> PageSightError:
        """The error for a connection that broke under a statement: the server is down (the
        outage starts here), or it dropped this connection (a restart nobody saw: the pool's
        other idle connections are as stale, so they are checked now)."""
        cause = self.outage.probe()
        if cause is not None:
            return _database_down(self.outage.found(cause))
        self._pool.check()
        return _database_down(f"database connection lost: {one_line(exc)}")

    def rows(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        with self.tx() as conn:
            return conn.execute(sql, args).fetchall()

    def close(self) -> None:
        self._pool.close()


class PgExecutor:
    """A pooled psycopg connection inside one transaction, running SQLAlchemy statements:
    compiled for psycopg, parameters converted by their column types (a body's NUL characters
    dropped, see :data:`pagesight.store.tables.JsonText`)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.connection = conn

    def execute(
        self, statement: sa.Executable, rows: Sequence[Mapping[str, Any]] | None = None, /
    ) -> Any:
        clause = cast(sa.ClauseElement, statement)
        if rows is None:
            compiled = clause.compile(dialect=DIALECT, compile_kwargs={"render_postcompile": True})
            return self.connection.execute(compiled.string, _converted(compiled, compiled.params))
        if not rows:
            return self.connection.cursor()
        compiled = clause.compile(dialect=DIALECT, column_keys=list(rows[0]))
        cursor = self.connection.cursor()
        cursor.executemany(
            compiled.string,
            [_converted(compiled, compiled.construct_params(r) or {}) for r in rows],
        )
        return cursor


def _converted(compiled: sa.Compiled, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` through the bind processors of their types (most have none)."""
    binds = getattr(compiled, "binds", {})
    converted = dict(params)
    for name, value in params.items():
        bind = binds.get(name)
        if bind is None:
            continue
        process = bind.type.dialect_impl(DIALECT).bind_processor(DIALECT)
        if process is not None:
            converted[name] = process(value)
    return converted


# -- one pool per process -----------------------------------------------------------------------

#: One attempt's limit when failing fast, whatever ``connect_timeout_s`` allows a pool.
FAST_CONNECT_S = 5
#: Between attempts while waiting for a database that is starting.
RETRY_EVERY_S = 2.0


def reach(dsn: str, options: DatabaseOptions, *, wait_s: float = 0.0) -> None:
    """Connect once to ``dsn`` and close: return when PostgreSQL answers, else raise
    UNAVAILABLE with libpq's reason on one line. ``wait_s`` > 0 (a server starting, the
    migrate Job): retry every :data:`RETRY_EVERY_S` until then, logging each attempt's cause."""
    import psycopg

    deadline = time.monotonic() + wait_s
    timeout = min(options.connect_timeout_s, FAST_CONNECT_S)
    while True:
        try:
            psycopg.connect(dsn, connect_timeout=timeout).close()
            return
        except psycopg.Error as exc:
            cause = one_line(exc)
            left = deadline - time.monotonic()
            if left < RETRY_EVERY_S:
                raise _unavailable(f"cannot connect to PostgreSQL: {cause}") from None
            log.warning(
                "PostgreSQL is not reachable yet (%s); trying again for %.0f s", cause, left
            )
            time.sleep(RETRY_EVERY_S)


#: While PostgreSQL is down, how often one request of a process tries a fresh connection (the
#: others fail at once); also the longest a process serves 503s after the server is back.
PROBE_EVERY_S = 1.0
#: SQLSTATEs that mean the connection, not the statement, failed: class 08 (connection
#: exception) and the server shutting down or starting (57P01-57P03); libpq's own errors (the
#: server closed the connection, refused it) carry none.
_LOST_STATES = ("08", "57P01", "57P02", "57P03")


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (a psycopg error) means the server or the connection to it is gone."""
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith(_LOST_STATES)


class Outage:
    """Whether this process found PostgreSQL unreachable, and since when: a circuit breaker
    in front of the pool.

    Why: with its server gone, a pool makes every request wait ``pool_timeout_s`` for a
    connection it cannot make (30 s by default), so the service hangs instead of answering. Once
    one request has found the server unreachable, the following ones fail at once with
    DATABASE_UNAVAILABLE (the gateway's 503 with ``Retry-After``), and one of them at most every
    :data:`PROBE_EVERY_S` tries a fresh connection; the first that connects ends the outage."""

    def __init__(
        self,
        dsn: str,
        options: DatabaseOptions,
        *,
        probe_every_s: float = PROBE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._dsn = dsn
        self._connect_timeout = min(options.connect_timeout_s, FAST_CONNECT_S)
        self._probe_every_s = probe_every_s
        self._clock = clock
        self._lock = threading.Lock()
        #: why the server was unreachable at the last try (None: not known to be down)
        self.cause: str | None = None
        self._since = 0.0
        self._next_probe = 0.0

    def check(self) -> bool:
        """Raise DATABASE_UNAVAILABLE while the server is known to be down (trying it again
        when a probe is due); True when this call found it back."""
        if self.cause is None:  # the common case: no lock taken
            return False
        with self._lock:
            cause = self.cause
            if cause is None:
                return False
            if self._clock() < self._next_probe:
                raise _database_down(cause)
            self._next_probe = self._clock() + self._probe_every_s  # this call probes
        still = self.probe()
        with self._lock:
            if still is not None:
                self.cause = still
                raise _database_down(still)
            if self.cause is None:
                return False
            down_s = self._clock() - self._since
            self.cause = None
        log.warning("PostgreSQL answers again after %.1f s unreachable", down_s)
        return True

    def found(self, cause: str) -> str:
        """Record that the server is unreachable (``cause``: libpq's reason); return it."""
        with self._lock:
            if self.cause is None:
                self._since = self._clock()
                log.warning(
                    "PostgreSQL is unreachable (%s): requests fail with DATABASE_UNAVAILABLE "
                    "until it answers again (tried every %g s)",
                    cause,
                    self._probe_every_s,
                )
            self.cause = cause
            self._next_probe = self._clock() + self._probe_every_s
        return cause

    def probe(self) -> str | None:
        """Connect once, outside the pool: None when the server answers, else why not."""
        import psycopg

        try:
            psycopg.connect(self._dsn, connect_timeout=self._connect_timeout).close()
        except psycopg.Error as exc:
            return f"database unreachable: {one_line(exc)}"
        return None


_shared: dict[str, tuple[PostgresDb, int]] = {}
_shared_lock = threading.Lock()


class SharedDb(Database):
    """A repository's handle on the process's pool: its :class:`~pagesight.store.database.Database`.
    ``close()`` releases this handle, and the pool closes with the last one."""

    def __init__(self, key: str, db: PostgresDb) -> None:
        self._key = key
        self.db = db
        self._closed = False

    @contextmanager
    def tx(self) -> Iterator[PgExecutor]:
        with self.db.tx() as conn:
            yield PgExecutor(conn)

    read = tx

    def rows(self, statement: sa.Executable | str, args: Sequence[object] = ()) -> list[Any]:
        """The rows of one statement (SQL text with ``%s`` placeholders for ``args``, too)."""
        if isinstance(statement, str):
            return self.db.rows(statement, args)
        return super().rows(statement)

    def now(self, after_s: float = 0.0) -> sa.ColumnElement[datetime]:
        if not after_s:
            return sa.func.now()
        return sa.func.now() + sa.literal(timedelta(seconds=after_s), sa.Interval())

    def insert(self, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
        return postgresql.insert(table)

    def text_order(self, column: sa.ColumnElement[str]) -> sa.ColumnElement[str]:
        return column.collate("C")

    def for_update(self, query: sa.Select[Any], *, skip_locked: bool) -> sa.Select[Any]:
        return query.with_for_update(skip_locked=skip_locked)

    def serialize(self, db: Any, key: int, name: str) -> None:
        """``pg_advisory_xact_lock(key, hashtext(name))`` (the two-key form never meets the
        migrations' one-key lock)."""
        db.execute(sa.select(sa.func.pg_advisory_xact_lock(key, sa.func.hashtext(name))))

    def close(self) -> None:
        with _shared_lock:
            if self._closed:
                return
            self._closed = True
            db, users = _shared[self._key]
            if users > 1:
                _shared[self._key] = (db, users - 1)
                return
            del _shared[self._key]
        db.close()


def open_database(settings: Settings) -> SharedDb:
    """The process's pool on ``settings.database_url``, schema checked (or upgraded, with
    ``database.migrate_on_start``)."""
    if settings.database_url is None:
        raise _config_error("database_url is not set")
    dsn = conninfo(settings.database_url.get_secret_value(), settings.database)
    with _shared_lock:
        if dsn in _shared:
            db, users = _shared[dsn]
            _shared[dsn] = (db, users + 1)
            return SharedDb(dsn, db)
    db = PostgresDb(dsn, settings.database)
    try:
        if settings.database.migrate_on_start:
            upgrade(db)
        check_schema(db)
    except BaseException:
        db.close()
        raise
    with _shared_lock:
        if dsn in _shared:  # another thread opened it meanwhile: use theirs
            other, users = _shared[dsn]
            _shared[dsn] = (other, users + 1)
            db.close()
            return SharedDb(dsn, other)
        _shared[dsn] = (db, 1)
    return SharedDb(dsn, db)


# -- migrations (Alembic: pagesight.store.schema) --------------------------------------------------

head_revision = schema.head_revision


def current_revision(db: PostgresDb) -> str | None:
    """The database's schema revision (None: never migrated)."""
    with db.tx() as conn:
        found = conn.execute("SELECT to_regclass('alembic_version') IS NOT NULL").fetchone()
        if not found or not found[0]:
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def check_schema(db: PostgresDb) -> None:
    """Raise UNAVAILABLE unless the database's schema is the code's."""
    have, want = current_revision(db), head_revision()
    if have != want:
        raise PageSightError(
            ErrorCode.UNAVAILABLE,
            Stage.DATABASE,
            f"the database schema is at {have or 'nothing'}, this code needs {want}: run "
            "`pagesight db upgrade` (or set PAGESIGHT_DATABASE__MIGRATE_ON_START=true)",
        )


def upgrade(db: PostgresDb, revision: str = "head") -> tuple[str | None, str]:
    """Migrate the schema to ``revision``; return (before, after). One transaction holding an
    advisory lock: concurrent callers queue, the later ones find nothing to do, and a failed
    migration leaves the schema as it was (PostgreSQL's DDL is transactional)."""
    import psycopg

    engine = sa.create_engine(
        "postgresql+psycopg://",
        creator=lambda: psycopg.connect(db.dsn),
        poolclass=sa.pool.NullPool,
    )
    try:
        with engine.begin() as connection:
            connection.execute(
                sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK}
            )
            return schema.upgrade(connection, ALL_TABLES, revision)
    except sa.exc.OperationalError as exc:
        raise _unavailable(f"database unreachable: {exc.orig}") from None
    finally:
        engine.dispose()


def one_line(exc: BaseException) -> str:
    """libpq's messages span lines (a hint, a DETAIL); a command prints one."""
    return " ".join(str(exc).split())


def _config_error(message: str) -> PageSightError:
    return PageSightError(ErrorCode.INVALID_REQUEST, Stage.DATABASE, message)


def _unavailable(message: str) -> PageSightError:
    return PageSightError(ErrorCode.UNAVAILABLE, Stage.DATABASE, message)


def _database_down(message: str) -> PageSightError:
    return PageSightError(ErrorCode.DATABASE_UNAVAILABLE, Stage.DATABASE, message)
