"""Alembic environment: migrations run on the connection :func:`core.postgres.upgrade` hands
over (inside its transaction and advisory lock), never on a URL of their own."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
