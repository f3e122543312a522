"""Every table of the store, defined once (SQLAlchemy Core) for SQLite and PostgreSQL.

The repositories build their statements from these, ``pagesight db migrate-from-sqlite`` copies
through them, and the migrations (``pagesight/store/migrations``) create what they describe. Bodies
are the pydantic models as JSON (JSONB on PostgreSQL, text on SQLite), so a new optional field needs
no migration; columns exist only for what is filtered, ordered or joined on. Every table but
``api_keys`` is keyed by tenant first.

Two column types make one definition serve both databases, with the same Python values on
both:

- :class:`UtcDateTime`: an aware datetime; ``timestamptz`` on PostgreSQL, ISO 8601 text in UTC
  on SQLite (``2026-12-03T13:26:54.701048+00:00``), which sorts as the instants do;
- :data:`JsonText`: the body's JSON text (what ``model_dump_json`` writes and
  ``model_validate_json`` reads, so no body is parsed twice): ``jsonb`` on PostgreSQL, where a
  NUL character is dropped on the way in (its text type cannot hold one) and reads come back
  as text; plain text on SQLite.

A database holds some of the tables: each SQLite file those of its concern
(:data:`CATALOG_TABLES` in ``catalog.sqlite3``, :data:`TRACE_TABLES` in ``traces.sqlite3``;
an embedded installation keeps its keys in a JSON file), PostgreSQL all of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine, UserDefinedType


class UtcDateTime(TypeDecorator[datetime]):
    """An instant: ``timestamptz`` on PostgreSQL, ISO 8601 text in UTC with microseconds on
    SQLite (the catalog's format since its first version). Naive datetimes are taken as UTC."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.TIMESTAMP(timezone=True))
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None or dialect.name == "postgresql":
            return value
        return utc_text(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None or isinstance(value, datetime):
            return value
        return datetime.fromisoformat(value)


def utc_text(value: datetime) -> str:
    """``value`` as SQLite stores an instant (see :class:`UtcDateTime`)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


class _JsonbText(UserDefinedType[str]):
    """``jsonb`` whose Python value is its JSON text: written with a cast, NUL characters
    dropped; read back as text (``body::text``), never parsed on the way."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "JSONB"

    def bind_processor(self, dialect: Dialect) -> Any:
        def process(value: str | None) -> str | None:
            return None if value is None else json_without_nul(value)

        return process

    def bind_expression(self, bindvalue: Any) -> Any:
        return sa.cast(bindvalue, postgresql.JSONB)

    def column_expression(self, colexpr: Any) -> Any:
        return sa.cast(colexpr, sa.Text)


#: A JSON body as text: ``jsonb`` on PostgreSQL, text on SQLite.
JsonText = sa.Text().with_variant(_JsonbText(), "postgresql")


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


metadata = sa.MetaData()

#: Unfinished jobs, spelled with literals (not parameters) so that PostgreSQL's planner can use
#: the partial index ``jobs_unfinished``, whose predicate this is (``pagesight.store.catalog``
#: checks that it names the terminal states of ``JobState``).
UNFINISHED = sa.text("state NOT IN ('READY', 'FAILED')")

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("job_id", sa.Text, primary_key=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("doc_id", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("claimed_by", sa.Text),
    sa.Column("lease_until", UtcDateTime),
    sa.Column("body", JsonText, nullable=False),
)
sa.Index("jobs_unfinished", jobs.c.created_at, postgresql_where=UNFINISHED, sqlite_where=UNFINISHED)
sa.Index("jobs_tenant", jobs.c.tenant, jobs.c.created_at.desc())
sa.Index("jobs_doc", jobs.c.tenant, jobs.c.doc_id)

#: ``state`` repeats the body's ``Document.state`` (READY, MISSING) as a column so that a jobs
#: listing reads each job's document state in the same statement (a join); revision 0003.
documents = sa.Table(
    "documents",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("doc_id", sa.Text, primary_key=True),
    sa.Column("version", sa.Text, nullable=False),
    sa.Column("body", JsonText, nullable=False),
    sa.Column("state", sa.Text, nullable=False, server_default="READY"),
)

pages = sa.Table(
    "pages",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("doc_id", sa.Text, primary_key=True),
    sa.Column("page_number", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("image_ref", sa.Text),
    sa.Column("body", JsonText, nullable=False),
)
sa.Index("pages_image", pages.c.tenant, pages.c.image_ref)

structures = sa.Table(
    "structures",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("doc_id", sa.Text, primary_key=True),
    sa.Column("version", sa.Text, nullable=False),
    sa.Column("body", JsonText, nullable=False),
)

#: The audit log: ``seq`` is the order entries were written in, and the paging cursor
#: (``before=seq``) clients hold; SQLite's AUTOINCREMENT never reuses one either.
audit = sa.Table(
    "audit",
    metadata,
    sa.Column(
        "seq",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        sa.Identity(always=True),
        primary_key=True,
    ),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("doc_id", sa.Text, nullable=False),
    sa.Column("body", JsonText, nullable=False),
    sqlite_autoincrement=True,
)
sa.Index("audit_tenant", audit.c.tenant, audit.c.seq.desc())

traces = sa.Table(
    "traces",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("trace_id", sa.Text, primary_key=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("body", JsonText, nullable=False),
)
sa.Index("traces_created", traces.c.created_at)

#: The documents a trace names (deleting a document purges the traces that name it).
trace_docs = sa.Table(
    "trace_docs",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("trace_id", sa.Text, primary_key=True),
    sa.Column("doc_id", sa.Text, primary_key=True),
    sa.ForeignKeyConstraint(
        ["tenant", "trace_id"], ["traces.tenant", "traces.trace_id"], ondelete="CASCADE"
    ),
)
sa.Index("trace_docs_doc", trace_docs.c.tenant, trace_docs.c.doc_id)

#: Every insert and revoke of a key takes a new ``revision``: a key store's stamp is then one
#: aggregate (count, max revision).
api_key_revision = sa.Sequence("api_key_revision", metadata=metadata)

#: API keys (PostgreSQL only: an embedded installation keeps them in its keys file). The key
#: id and the digest are unique columns, so the database itself refuses a duplicate.
api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("key_id", sa.Text, primary_key=True),
    sa.Column("sha256", sa.Text, nullable=False, unique=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("revoked_at", UtcDateTime),
    sa.Column(
        "revision", sa.BigInteger, nullable=False, server_default=api_key_revision.next_value()
    ),
    sa.Column("created_at", UtcDateTime, nullable=False, server_default=sa.func.clock_timestamp()),
    sa.Column("body", JsonText, nullable=False),
)
sa.Index("api_keys_tenant", api_keys.c.tenant)

#: The tables of ``catalog.sqlite3`` (and of the catalog on PostgreSQL).
CATALOG_TABLES = frozenset({"jobs", "documents", "pages", "structures", "audit"})
#: The tables of ``traces.sqlite3``.
TRACE_TABLES = frozenset({"traces", "trace_docs"})
#: Every table: what PostgreSQL holds.
ALL_TABLES = frozenset(metadata.tables)


@dataclass(frozen=True)
class TenantTable:
    """Reads and deletes over one tenant's rows of a table: the tenant predicate is added here
    and nowhere else, so a repository method cannot forget it (chain more ``where`` clauses on
    what it returns)."""

    table: sa.Table

    def select(self, tenant: str, *columns: Any) -> sa.Select[Any]:
        return sa.select(*columns).where(self.table.c.tenant == tenant)

    def delete(self, tenant: str) -> sa.Delete:
        return sa.delete(self.table).where(self.table.c.tenant == tenant)
