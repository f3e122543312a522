"""Alembic environment: migrations run on the connection :func:`pagesight.store.schema.upgrade`
hands over (inside its transaction and lock: an advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on
a SQLite file), never on a URL of their own.

``config.attributes["tables"]`` names the tables this database holds (each SQLite file those
of its concern, PostgreSQL all: :mod:`pagesight.store.tables`); every revision touches only those.
On SQLite, operations that alter a table run in batch mode (copy and move), SQLite's way to alter
a table.
"""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    transactional_ddl=True,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
