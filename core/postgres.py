"""PostgreSQL for the cluster profile: one connection pool per process, shared by the catalog,
the trace store and the key store, and a schema kept by Alembic (``core/migrations``).

Why one pool: a platform team sizes PostgreSQL's ``max_connections`` from
``replicas x pool_max_size``, and that arithmetic only holds if a process opens one pool, not
one per repository. :func:`open_database` hands out the same :class:`PostgresDb` to every
repository of a process and closes its pool when the last one closes.

Why a schema check at open: a replica started on code newer than the database would fail on its
first write, mid-request. It refuses to start instead, naming ``pagesight db upgrade``, unless
``database.migrate_on_start`` lets it upgrade (under an advisory lock, so replicas starting
together migrate once).

Tenant scoping is written once, in :class:`TenantTable`: repositories build their per-tenant
statements through it, so no call site spells ``WHERE tenant = ...`` itself.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from core.errors import ErrorCode, PageSightError, Stage
from core.settings import DatabaseOptions, Settings

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

MIGRATIONS = Path(__file__).with_name("migrations")
#: Taken by ``upgrade`` so that replicas starting at once run the migrations once.
_MIGRATION_LOCK = 0x50_41_47_45  # "PAGE"


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

    def __init__(self, dsn: str, options: DatabaseOptions) -> None:
        from psycopg_pool import ConnectionPool

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

    @contextmanager
    def tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction: committed when the block ends, rolled back on any error."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except PoolTimeout as exc:
            raise _unavailable(f"no free database connection: {exc}") from None
        except psycopg.errors.QueryCanceled as exc:  # statement_timeout_ms
            raise PageSightError(
                ErrorCode.TIMEOUT, Stage.DATABASE, f"database statement timed out: {exc}"
            ) from None
        except psycopg.OperationalError as exc:
            raise _unavailable(f"database unreachable: {exc}") from None

    def rows(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        with self.tx() as conn:
            return conn.execute(sql, args).fetchall()

    def close(self) -> None:
        self._pool.close()


@dataclass(frozen=True)
class TenantTable:
    """Reads and deletes over one tenant's rows of a table: the tenant predicate is added here and
    nowhere else, so a repository method cannot forget it. ``where`` and ``tail`` are SQL with
    ``%s`` placeholders for ``args``; the tenant is always the first placeholder."""

    name: str

    def select(
        self,
        columns: str,
        tenant: str,
        where: str = "",
        args: Sequence[object] = (),
        tail: str = "",
    ) -> tuple[str, list[object]]:
        return self._scoped(f"SELECT {columns} FROM {self.name}", tenant, where, args, tail)

    def delete(
        self, tenant: str, where: str = "", args: Sequence[object] = (), tail: str = ""
    ) -> tuple[str, list[object]]:
        return self._scoped(f"DELETE FROM {self.name}", tenant, where, args, tail)

    def _scoped(
        self, head: str, tenant: str, where: str, args: Sequence[object], tail: str
    ) -> tuple[str, list[object]]:
        sql = f"{head} WHERE tenant = %s"
        if where:
            sql += f" AND ({where})"
        if tail:
            sql += f" {tail}"
        return sql, [tenant, *args]


def jsonb(model: BaseModel, **dump: Any) -> str:
    """``model`` as JSON for a JSONB column (``model_dump_json(**dump)``, NUL-free)."""
    return json_without_nul(model.model_dump_json(**dump))


def json_without_nul(text: str) -> str:
    """JSON ``text`` with NUL characters dropped from its strings (keys too).

    PostgreSQL's text cannot hold NUL, so JSONB refuses ``\\u0000``, and a NUL does reach our
    bodies: text pulled out of PDFs (titles, margin lines) and a caller's query can carry one.
    Dropping them is the only change a round trip through PostgreSQL makes; text without one
    (nearly all) is returned as it is, unparsed."""
    if "\\u0000" not in text:
        return text
    parsed = json.loads(text)
    cleaned = _without_nul(parsed)
    # "\\u0000" can also be an escaped backslash followed by "u0000": then nothing changes
    return text if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    return value


# -- one pool per process -----------------------------------------------------------------------

_shared: dict[str, tuple[PostgresDb, int]] = {}
_shared_lock = threading.Lock()


class SharedDb:
    """A repository's handle on the process's pool: ``close()`` releases this handle, and the
    pool closes with the last one."""

    def __init__(self, key: str, db: PostgresDb) -> None:
        self._key = key
        self.db = db
        self._closed = False

    def tx(self) -> Any:
        return self.db.tx()

    def rows(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        return self.db.rows(sql, args)

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


# -- migrations (Alembic) -----------------------------------------------------------------------


def head_revision() -> str:
    """The newest schema revision this code knows."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None
    return head


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
    import sqlalchemy
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    engine = sqlalchemy.create_engine(
        "postgresql+psycopg://",
        creator=lambda: psycopg.connect(db.dsn),
        poolclass=sqlalchemy.pool.NullPool,
    )
    try:
        with engine.begin() as connection:
            connection.execute(
                sqlalchemy.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK}
            )
            before = MigrationContext.configure(connection).get_current_revision()
            config = _alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            after = MigrationContext.configure(connection).get_current_revision()
    except sqlalchemy.exc.OperationalError as exc:
        raise _unavailable(f"database unreachable: {exc.orig}") from None
    finally:
        engine.dispose()
    assert after is not None
    return before, after


def _alembic_config() -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def _config_error(message: str) -> PageSightError:
    return PageSightError(ErrorCode.INVALID_REQUEST, Stage.DATABASE, message)


def _unavailable(message: str) -> PageSightError:
    return PageSightError(ErrorCode.UNAVAILABLE, Stage.DATABASE, message)
