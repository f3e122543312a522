"""The store's tables: catalog (jobs, documents, pages, structures, audit log), query traces and
API keys (PostgreSQL only: an embedded installation keeps them in its keys file).

Every table but ``api_keys`` is keyed by tenant first. Bodies are the pydantic models as JSONB
(text on SQLite), so a new optional field needs no migration; columns exist only for what is
filtered, ordered or joined on. Instants are ``timestamptz`` (ISO 8601 text in UTC on SQLite).

A database gets the tables it holds (``pagesight.store.schema.held_tables``): PostgreSQL all of
them, each SQLite file those of its concern.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from pagesight.store.schema import held_tables

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TEXT = sa.Text()
JSON_BODY = sa.Text().with_variant(postgresql.JSONB(), "postgresql")
INSTANT = sa.Text().with_variant(postgresql.TIMESTAMP(timezone=True), "postgresql")
UNFINISHED = sa.text("state NOT IN ('READY', 'FAILED')")


def _body() -> sa.Column[str]:
    return sa.Column("body", JSON_BODY, nullable=False)


def upgrade() -> None:
    held = held_tables()
    if "jobs" in held:
        op.create_table(
            "jobs",
            sa.Column("job_id", TEXT, primary_key=True),
            sa.Column("tenant", TEXT, nullable=False),
            sa.Column("doc_id", TEXT, nullable=False),
            sa.Column("state", TEXT, nullable=False),
            sa.Column("created_at", INSTANT, nullable=False),
            sa.Column("claimed_by", TEXT),
            sa.Column("lease_until", INSTANT),
            _body(),
        )
        op.create_index(
            "jobs_unfinished",
            "jobs",
            ["created_at"],
            postgresql_where=UNFINISHED,
            sqlite_where=UNFINISHED,
        )
        op.create_index("jobs_tenant", "jobs", ["tenant", sa.text("created_at DESC")])
        op.create_index("jobs_doc", "jobs", ["tenant", "doc_id"])
    if "documents" in held:
        op.create_table(
            "documents",
            sa.Column("tenant", TEXT, nullable=False),
            sa.Column("doc_id", TEXT, nullable=False),
            sa.Column("version", TEXT, nullable=False),
            _body(),
            sa.PrimaryKeyConstraint("tenant", "doc_id"),
        )
    if "pages" in held:
        op.create_table(
            "pages",
            sa.Column("tenant", TEXT, nullable=False),
            sa.Column("doc_id", TEXT, nullable=False),
            sa.Column("page_number", sa.Integer(), nullable=False),
            sa.Column("image_ref", TEXT),
            _body(),
            sa.PrimaryKeyConstraint("tenant", "doc_id", "page_number"),
        )
        op.create_index("pages_image", "pages", ["tenant", "image_ref"])
    if "structures" in held:
        op.create_table(
            "structures",
            sa.Column("tenant", TEXT, nullable=False),
            sa.Column("doc_id", TEXT, nullable=False),
            sa.Column("version", TEXT, nullable=False),
            _body(),
            sa.PrimaryKeyConstraint("tenant", "doc_id"),
        )
    if "audit" in held:
        op.create_table(
            "audit",
            sa.Column(
                "seq",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                sa.Identity(always=True),
                primary_key=True,
            ),
            sa.Column("tenant", TEXT, nullable=False),
            sa.Column("doc_id", TEXT, nullable=False),
            _body(),
            sqlite_autoincrement=True,
        )
        op.create_index("audit_tenant", "audit", ["tenant", sa.text("seq DESC")])
    if "traces" in held:
        op.create_table(
            "traces",
            sa.Column("tenant", TEXT, nullable=False),
            sa.Column("trace_id", TEXT, nullable=False),
            sa.Column("created_at", INSTANT, nullable=False),
            _body(),
            sa.PrimaryKeyConstraint("tenant", "trace_id"),
        )
        op.create_index("traces_created", "traces", ["created_at"])
    if "trace_docs" in held:
        op.create_table(
            "trace_docs",
            sa.Column("tenant", TEXT, nullable=False),
            sa.Column("trace_id", TEXT, nullable=False),
            sa.Column("doc_id", TEXT, nullable=False),
            sa.PrimaryKeyConstraint("tenant", "trace_id", "doc_id"),
            sa.ForeignKeyConstraint(
                ["tenant", "trace_id"],
                ["traces.tenant", "traces.trace_id"],
                ondelete="CASCADE",
            ),
        )
        op.create_index("trace_docs_doc", "trace_docs", ["tenant", "doc_id"])
    if "api_keys" in held:
        if op.get_bind().dialect.name != "postgresql":
            raise NotImplementedError("api_keys is a PostgreSQL table (a keys file otherwise)")
        op.execute(sa.schema.CreateSequence(sa.Sequence("api_key_revision")))
        op.create_table(
            "api_keys",
            sa.Column("key_id", TEXT, primary_key=True),
            sa.Column("sha256", TEXT, nullable=False, unique=True),
            sa.Column("tenant", TEXT, nullable=False),
            sa.Column("revoked_at", INSTANT),
            sa.Column(
                "revision",
                sa.BigInteger(),
                nullable=False,
                server_default=sa.text("nextval('api_key_revision')"),
            ),
            sa.Column(
                "created_at", INSTANT, nullable=False, server_default=sa.text("clock_timestamp()")
            ),
            _body(),
        )
        op.create_index("api_keys_tenant", "api_keys", ["tenant"])


def downgrade() -> None:
    held = held_tables()
    for table in (
        *("api_keys", "trace_docs", "traces", "audit"),
        *("structures", "pages", "documents", "jobs"),
    ):
        if table in held:
            op.drop_table(table)
    if "api_keys" in held:
        op.execute(sa.schema.DropSequence(sa.Sequence("api_key_revision")))
