"""The cluster profile's operational state: catalog (jobs, documents, pages, structure, audit
log), query traces and API keys.

Every table but ``api_keys`` is keyed by tenant first. Bodies are the pydantic models as JSONB
(what the SQLite backend stores as text), so a new optional field needs no migration; columns
exist only for what is filtered, ordered or joined on.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_TABLES = """
CREATE TABLE jobs (
    job_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    claimed_by TEXT,
    lease_until TIMESTAMPTZ,
    body JSONB NOT NULL
);
CREATE INDEX jobs_unfinished ON jobs (created_at) WHERE state NOT IN ('READY', 'FAILED');
CREATE INDEX jobs_tenant ON jobs (tenant, created_at DESC);
CREATE INDEX jobs_doc ON jobs (tenant, doc_id);

CREATE TABLE documents (
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    version TEXT NOT NULL,
    body JSONB NOT NULL,
    PRIMARY KEY (tenant, doc_id)
);

CREATE TABLE pages (
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    page_number INTEGER NOT NULL,
    image_ref TEXT,
    body JSONB NOT NULL,
    PRIMARY KEY (tenant, doc_id, page_number)
);
CREATE INDEX pages_image ON pages (tenant, image_ref);

CREATE TABLE structures (
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    version TEXT NOT NULL,
    body JSONB NOT NULL,
    PRIMARY KEY (tenant, doc_id)
);

CREATE TABLE audit (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    body JSONB NOT NULL
);
CREATE INDEX audit_tenant ON audit (tenant, seq DESC);

CREATE TABLE traces (
    tenant TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    body JSONB NOT NULL,
    PRIMARY KEY (tenant, trace_id)
);
CREATE INDEX traces_created ON traces (created_at);

CREATE TABLE trace_docs (
    tenant TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    PRIMARY KEY (tenant, trace_id, doc_id),
    FOREIGN KEY (tenant, trace_id) REFERENCES traces (tenant, trace_id) ON DELETE CASCADE
);
CREATE INDEX trace_docs_doc ON trace_docs (tenant, doc_id);

CREATE SEQUENCE api_key_revision;
CREATE TABLE api_keys (
    key_id TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    revoked_at TIMESTAMPTZ,
    revision BIGINT NOT NULL DEFAULT nextval('api_key_revision'),
    created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    body JSONB NOT NULL
);
CREATE INDEX api_keys_tenant ON api_keys (tenant);
"""


def upgrade() -> None:
    for statement in _TABLES.split(";\n"):
        if statement.strip():
            op.execute(statement)


def downgrade() -> None:
    for table in ("api_keys", "trace_docs", "traces", "audit", "structures", "pages"):
        op.execute(f"DROP TABLE {table}")
    op.execute("DROP TABLE documents")
    op.execute("DROP TABLE jobs")
    op.execute("DROP SEQUENCE api_key_revision")
