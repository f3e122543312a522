"""The schema history (Alembic, ``pagesight/store/migrations``), one for SQLite and PostgreSQL.

:func:`upgrade` runs it on a connection its caller holds inside a transaction and a lock (an
advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on a SQLite file), so processes starting
together migrate once. Each database holds some of the tables (:mod:`pagesight.store.tables`); the
revisions create and change only those (:func:`held_tables`).

A SQLite file written before the history existed has tables but no ``alembic_version``:
:func:`set_aside_unversioned` renames its tables (``v0_`` prefix) and the history then runs
from the start, revision 0002 moving their rows into the new tables. So an existing embedded
installation upgrades in place, the first time this code opens it.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagesight.store.tables import ALL_TABLES

if TYPE_CHECKING:
    import sqlalchemy as sa

MIGRATIONS = Path(__file__).with_name("migrations")

#: Tables the code before the history created in its SQLite files: the catalog's, and the trace
#: store's (per tenant, and from before that).
UNVERSIONED_TABLES = frozenset(
    {
        "jobs",
        "documents",
        "pages",
        "structures",
        "audit",
        "tenant_traces",
        "tenant_trace_docs",
        "traces",
        "trace_docs",
    }
)
#: Where :func:`set_aside_unversioned` puts them (revision 0002 reads them there).
SET_ASIDE_PREFIX = "v0_"

log = logging.getLogger(__name__)


def _quiet_alembic() -> None:
    """Alembic logs a few INFO lines each time a database is opened (its dialect, its plugins),
    which a server that opens several stores repeats on every start: at WARNING unless someone
    set its level. The revisions applied are logged here, once each."""
    alembic_log = logging.getLogger("alembic")
    if alembic_log.level == logging.NOTSET:
        alembic_log.setLevel(logging.WARNING)


_quiet_alembic()  # on import: alembic logs its plugins as they load, before any call here


def alembic_config(connection: Any = None, tables: frozenset[str] = ALL_TABLES) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    config.attributes["tables"] = tables
    return config


def held_tables() -> frozenset[str]:
    """For the revisions: the tables of the database being migrated."""
    from alembic import context

    tables: frozenset[str] = context.config.attributes.get("tables", ALL_TABLES)
    return tables


@functools.cache
def head_revision() -> str:
    """The newest schema revision this code knows (the history does not change while a process
    runs: read once)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(connection: sa.Connection) -> str | None:
    """The revision of the database ``connection`` is on (None: never migrated)."""
    from alembic.runtime.migration import MigrationContext

    revision: str | None = MigrationContext.configure(connection).get_current_revision()
    return revision


def upgrade(
    connection: sa.Connection, tables: frozenset[str], revision: str = "head"
) -> tuple[str | None, str]:
    """Migrate the database ``connection`` is on to ``revision``, creating and changing only
    ``tables``; return (before, after). The caller holds the transaction and the lock."""
    from alembic import command

    before = current_revision(connection)
    command.upgrade(alembic_config(connection, tables), revision)
    after = current_revision(connection)
    assert after is not None
    if after != before:
        log.info(
            "schema upgraded: %s -> %s (%s)", before or "empty", after, ", ".join(sorted(tables))
        )
    return before, after


def set_aside_unversioned(connection: sa.Connection) -> list[str]:
    """If the SQLite database ``connection`` is on has no schema history but tables of the code
    before it, rename them with :data:`SET_ASIDE_PREFIX` (their indexes dropped: index names
    are per database, and 0001 creates its own); return their old names."""
    import sqlalchemy as sa
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    inspector = sa.inspect(connection)
    names = set(inspector.get_table_names())
    if "alembic_version" in names:
        return []
    found = sorted(names & UNVERSIONED_TABLES)
    ops = Operations(MigrationContext.configure(connection))
    for table in found:
        for index in inspector.get_indexes(table):
            if index["name"]:
                ops.drop_index(index["name"], table_name=table)
        ops.rename_table(table, SET_ASIDE_PREFIX + table)
    return found
