"""What a repository runs its statements on: :class:`Database`, a SQLite file
(:class:`pagesight.store.sqlite.SqliteDb`) or the process's PostgreSQL pool
(:class:`pagesight.store.postgres.SharedDb`).

Repositories write their statements once, with SQLAlchemy Core over :mod:`pagesight.store.tables`;
the few things the two databases do differently are methods here, each said once:

- the clock leases and retention are measured on (:meth:`Database.now`): the database's on
  PostgreSQL, the one every replica shares; this host's on SQLite, whose writers share a host;
- locks: PostgreSQL has many writers at once, so a claim locks the rows it reads
  (:meth:`Database.for_update`) and a tenant's document writes queue on an advisory lock
  (:meth:`Database.serialize`); SQLite has one writer at a time (``BEGIN IMMEDIATE``) and
  needs neither;
- text order (:meth:`Database.text_order`): byte order on both (PostgreSQL's "C" collation,
  whatever locale the database was created with);
- upserts (:meth:`Database.insert`): each dialect's ``INSERT ... ON CONFLICT``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite


class Executor(Protocol):
    """A connection inside one transaction. ``execute`` runs a statement (``rows``: once per
    row, as ``executemany``) and returns a cursor: ``fetchone``, ``fetchall``, ``rowcount``."""

    def execute(
        self, statement: sa.Executable, rows: Sequence[Mapping[str, Any]] | None = None
    ) -> Any: ...


class Database(ABC):
    """A database a repository holds (see the module docstring)."""

    @abstractmethod
    def tx(self) -> AbstractContextManager[Executor]:
        """One write transaction: committed when the block ends, rolled back on any error."""

    @abstractmethod
    def read(self) -> AbstractContextManager[Executor]:
        """Reads that see one state of the database."""

    def rows(self, statement: sa.Executable) -> list[Any]:
        """The rows of one read."""
        with self.read() as db:
            return list(db.execute(statement).fetchall())

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def now(self, after_s: float = 0.0) -> sa.ColumnElement[datetime]:
        """The instant ``after_s`` seconds from now (before, if negative), on the clock leases
        and retention are measured on."""

    @abstractmethod
    def insert(self, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
        """``INSERT`` with this dialect's ``ON CONFLICT`` clauses."""

    def text_order(self, column: sa.ColumnElement[str]) -> sa.ColumnElement[str]:
        """``column`` to order by, in byte order (SQLite's own)."""
        return column

    def for_update(self, query: sa.Select[Any], *, skip_locked: bool) -> sa.Select[Any]:
        """``query`` locking the rows it reads until the transaction ends (``skip_locked``:
        passing over rows another transaction holds). SQLite: one writer, nothing to lock."""
        return query

    def serialize(self, db: Executor, key: int, name: str) -> None:
        """Queue this transaction behind others that serialize on (``key``, ``name``) until it
        ends. SQLite: one writer at a time already."""
        return None
