"""One SQLite file shared by threads: WAL mode, one connection, every statement under a lock;
the file's schema brought to the head revision when it is opened.

The catalog (``catalog.sqlite3``) and the trace store (``traces.sqlite3``) each have one. SQLite
is enough for both: writes are small and rare next to reads, and WAL lets other processes read
while one writes. Writes are ``BEGIN IMMEDIATE`` transactions, so a read-then-write (a claim)
is atomic against other processes too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from pagesight.store import schema
from pagesight.store.database import Database
from pagesight.store.tables import UtcDateTime


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    # The driver's own transaction handling off: BEGIN is ours (tx, read), so a read never
    # holds the write lock and a write takes it before it reads.
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA journal_mode=WAL")
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")


class SqliteDb(Database):
    """A SQLite file holding ``tables`` (:mod:`pagesight.store.tables`), migrated when opened: a
    file of this code's history to the head revision, a file written before the history first set
    aside (:func:`pagesight.store.schema.set_aside_unversioned`). Checked without a lock first (an
    up-to-date file, every open but the first, takes no write lock), then again inside the
    write transaction, so processes opening an old file together migrate it once."""

    def __init__(self, path: Path, tables: frozenset[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.tables = tables
        self._engine = sa.create_engine(
            sa.URL.create("sqlite", database=str(path)),
            poolclass=sa.pool.StaticPool,
            connect_args={"timeout": 30, "check_same_thread": False},
        )
        sa.event.listen(self._engine, "connect", _on_connect)
        self._lock = threading.RLock()
        try:
            self._conn = self._engine.connect()
            self._migrate()
        except BaseException:
            self._engine.dispose()
            raise

    def _migrate(self) -> None:
        head = schema.head_revision()
        with self.read() as db:
            if schema.current_revision(db) == head:
                return
        with self.tx() as db:
            schema.set_aside_unversioned(db)
            schema.upgrade(db, self.tables)

    @contextmanager
    def tx(self) -> Iterator[sa.Connection]:
        with self._lock, self._conn.begin():
            self._conn.exec_driver_sql("BEGIN IMMEDIATE")
            yield self._conn

    @contextmanager
    def read(self) -> Iterator[sa.Connection]:
        with self._lock, self._conn.begin():
            self._conn.exec_driver_sql("BEGIN")
            yield self._conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self._engine.dispose()

    def now(self, after_s: float = 0.0) -> sa.ColumnElement[datetime]:
        return sa.literal(datetime.now(UTC) + timedelta(seconds=after_s), UtcDateTime())

    def insert(self, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
        return sqlite.insert(table)
