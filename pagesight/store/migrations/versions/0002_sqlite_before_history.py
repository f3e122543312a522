"""SQLite files written before the store had a schema history: their rows, moved into the tables
of revision 0001.

The code before this history created its SQLite tables with hand-written DDL and changed them
by hand (claim columns added to ``jobs``, traces moved to per-tenant tables). When such a file
is opened (tables present, no ``alembic_version``),
:func:`pagesight.store.schema.set_aside_unversioned` renames its tables with a ``v0_`` prefix and
drops their indexes; the history then runs from the start: 0001 creates the tables, and this
revision copies the rows set aside into them, converting what changed, and drops what it copied
from:

- ``jobs``: instants become the store's ISO text in UTC (``lease_until`` was epoch seconds; a
  catalog from before claims has no claim columns at all);
- ``documents``, ``pages``, ``structures`` and ``audit`` as they are (the audit log keeps its
  ``seq`` values, so clients' paging cursors stay valid);
- traces: ``tenant_traces``/``tenant_trace_docs`` (epoch seconds), and ``traces``/``trace_docs``
  from before traces were per tenant; where both name one trace, the per-tenant one wins, as
  the old code merged them.

Nothing to do on PostgreSQL, or on a file the history created.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

V0 = "v0_"
BATCH = 1000

#: Tables copied as they are: (table set aside, target table, columns).
AS_THEY_ARE = (
    ("documents", "documents", ("tenant", "doc_id", "version", "body")),
    ("pages", "pages", ("tenant", "doc_id", "page_number", "image_ref", "body")),
    ("structures", "structures", ("tenant", "doc_id", "version", "body")),
    ("audit", "audit", ("seq", "tenant", "doc_id", "body")),
    ("tenant_trace_docs", "trace_docs", ("tenant", "trace_id", "doc_id")),
    ("trace_docs", "trace_docs", ("tenant", "trace_id", "doc_id")),
)
JOB_COLUMNS = ("job_id", "tenant", "doc_id", "state", "created_at", "body")
CLAIM_COLUMNS = ("claimed_by", "lease_until")
TRACE_COLUMNS = ("tenant", "trace_id", "created_at", "body")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    inspector = sa.inspect(bind)
    left = {n.removeprefix(V0) for n in inspector.get_table_names() if n.startswith(V0)}
    if "jobs" in left:
        have = {c["name"] for c in inspector.get_columns(V0 + "jobs")}
        claims = CLAIM_COLUMNS if set(CLAIM_COLUMNS) <= have else ()
        instants = ("created_at", "lease_until") if claims else ("created_at",)
        _copy_converting(bind, "jobs", "jobs", (*JOB_COLUMNS, *claims), instants)
    # per-tenant traces first: "OR IGNORE" then keeps them over older rows of the same key
    for old in ("tenant_traces", "traces"):
        if old in left:
            _copy_converting(bind, old, "traces", TRACE_COLUMNS, ("created_at",))
    for old, new, columns in AS_THEY_ARE:
        if old in left:
            target = sa.table(new, *(sa.column(c) for c in columns))
            source: Any = sa.select(*(sa.column(c) for c in columns)).select_from(
                sa.table(V0 + old)
            )
            bind.execute(sa.insert(target).prefix_with("OR IGNORE").from_select(columns, source))
    for name in sorted(left):
        op.drop_table(V0 + name)


def downgrade() -> None:
    """Nothing: the rows stay where this revision put them."""


def _copy_converting(
    bind: sa.Connection,
    old: str,
    new: str,
    columns: tuple[str, ...],
    instants: tuple[str, ...],
) -> None:
    """Copy ``columns`` of the table set aside as ``old`` into ``new``, ``instants`` converted
    to the store's ISO text, in batches (a large file never sits in memory whole)."""
    target = sa.table(new, *(sa.column(c) for c in columns))
    insert = sa.insert(target).prefix_with("OR IGNORE")
    for rows in _batches(bind, V0 + old, columns):
        for row in rows:
            for name in instants:
                row[name] = _instant(row[name])
        bind.execute(insert, rows)


def _batches(bind: sa.Connection, table: str, columns: tuple[str, ...]) -> Iterator[list[Any]]:
    """The rows of ``table`` in rowid order, ``BATCH`` at a time, as dicts."""
    rowid: sa.ColumnClause[Any] = sa.column("rowid")
    query = sa.select(rowid, *(sa.column(c) for c in columns)).select_from(sa.table(table))
    last = -(2**63)
    while rows := bind.execute(query.where(rowid > last).order_by(rowid).limit(BATCH)).all():
        last = rows[-1][0]
        yield [dict(zip(columns, row[1:], strict=True)) for row in rows]


def _instant(value: Any) -> str | None:
    """An instant as the old code stored it (ISO text, or epoch seconds) as the store does:
    ISO 8601 in UTC with microseconds."""
    if value is None:
        return None
    if isinstance(value, int | float):
        moment = datetime.fromtimestamp(value, UTC)
    else:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")
