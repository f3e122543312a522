"""Settings of the shared database (``PAGESIGHT_DATABASE__*``; the URL itself is
``PAGESIGHT_DATABASE_URL``). Part of :class:`pagesight.core.settings.Settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class DatabaseOptions(BaseModel):
    """PostgreSQL for the cluster profile (``database_url`` set): catalog, jobs, structure,
    traces, the audit log and API keys in one database that every replica shares. Unset, each
    of them stays in SQLite (or the keys file) under ``data_dir``, the embedded default."""

    model_config = ConfigDict(extra="forbid")

    password_file: Path | None = Field(
        default=None,
        description=(
            "file holding the password (a mounted Kubernetes secret); used when the URL has "
            "none, so the URL itself can live in a ConfigMap"
        ),
    )
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] | None = (
        Field(default=None, description="libpq sslmode; unset = the URL's, else libpq's default")
    )
    sslrootcert: Path | None = Field(default=None, description="CA bundle for verify-ca/-full")
    pool_min_size: int = Field(default=1, ge=0, description="connections a process keeps open")
    pool_max_size: int = Field(
        default=8, ge=1, description="connections one process may open (all its repositories)"
    )
    pool_timeout_s: float = Field(
        default=30.0, gt=0, description="wait for a free connection before failing the request"
    )
    connect_timeout_s: int = Field(default=10, ge=1, description="per connection attempt")
    connect_wait_s: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="how long `pagesight serve` and `pagesight db upgrade` (the migrate Job) "
        "wait for a database that is still starting, trying every 2 s and logging why each "
        "attempt failed; every other command tries once and fails within 5 s with the cause",
    )
    statement_timeout_ms: int = Field(
        default=30_000, ge=0, description="server-side limit per statement; 0 = none"
    )
    migrate_on_start: bool = Field(
        default=False,
        description=(
            "run `pagesight db upgrade` when a process opens the database; off: a schema "
            "behind the code's refuses to start with a message naming the command"
        ),
    )
    job_lease_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "how long a worker's claim on an ingest job holds without renewal (it is renewed "
            "every third of this while the job runs): a worker that dies frees its job after "
            "at most this long"
        ),
    )
    job_poll_s: float = Field(
        default=2.0,
        gt=0,
        description="how often an idle ingest worker looks for jobs other replicas queued",
    )
