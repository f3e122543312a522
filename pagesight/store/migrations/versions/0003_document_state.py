"""Documents get a ``state`` column: READY, or MISSING for a document a re-index left out
(``pagesight reindex --allow-missing``: its source file was gone or had changed).

The state is in the document's body too (``Document.state``); the column repeats it so that a
jobs listing reads each job's document state in the statement that reads the jobs (a join on
the documents' key). Every row there before this revision is READY: until now a document left
out by a re-index was deleted from the catalog, so each one left is in the live version.

SQLite adds the column in place (``ALTER TABLE ... ADD COLUMN`` with a constant default needs
no table copy), as PostgreSQL does.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

from pagesight.store.schema import held_tables

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "documents" not in held_tables():
        return
    op.add_column(
        "documents",
        sa.Column("state", sa.Text(), nullable=False, server_default="READY"),
    )


def downgrade() -> None:
    if "documents" not in held_tables():
        return
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("state")
