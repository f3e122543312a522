"""Settings of serving (``PAGESIGHT_GATEWAY__*``, ``SERVE__*``): the HTTP gateway with its API keys
and limits, and the Ray Serve application. Part of :class:`pagesight.core.settings.Settings`."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: What an API key may do: ``read`` (search, answer, list, fetch) and ``write`` (upload, replace,
#: delete).
KeyScope = Literal["read", "write"]
ALL_SCOPES: tuple[KeyScope, ...] = ("read", "write")


class ApiKeyRecord(BaseModel):
    """One API key as the gateway stores it: never the key, only its sha256 (keys are random
    32-byte tokens, so a plain digest cannot be reversed by guessing)."""

    model_config = ConfigDict(frozen=True)

    key_id: str = Field(min_length=1, description="shown in logs and metrics instead of the key")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    tenant: str = Field(min_length=1)
    principals: list[str] = Field(default_factory=list, description="ACL principals of the key")
    max_concurrency: int | None = Field(
        default=None, ge=1, description="requests in flight; unset = the gateway default"
    )
    scopes: list[KeyScope] = Field(
        default_factory=lambda: list(ALL_SCOPES),
        description="read: search, answer, list and fetch; write: upload, replace, delete",
    )
    revoked_at: datetime | None = Field(
        default=None, description="set by `pagesight keys revoke`: the key no longer works"
    )


class GatewayOptions(BaseModel):
    """The HTTP gateway: auth, limits and what it may fetch."""

    api_keys_file: Path | None = Field(
        default=None, description="JSON list of ApiKeyRecord (e.g. a mounted Kubernetes secret)"
    )
    api_keys: list[ApiKeyRecord] = Field(
        default_factory=list, description="more keys, e.g. PAGESIGHT_GATEWAY__API_KEYS='[...]'"
    )
    max_upload_bytes: int = Field(default=100 * 1024 * 1024, ge=1, description="else 413")
    max_concurrency_per_key: int = Field(default=8, ge=1, description="else 429")
    retry_after_s: int = Field(default=1, ge=1, description="Retry-After of a 429 or a 503")
    request_timeout_s: float = Field(default=30.0, gt=0, description="else 504")
    max_top_k: int = Field(default=100, ge=1)
    max_query_chars: int = Field(default=2000, ge=1)
    uri_allowlist: list[str] = Field(
        default_factory=list,
        description=(
            "scheme://host[/path-prefix] a document may be fetched from, e.g. "
            "'https://docs.example.com/reports/' or 'file:///mnt/inbox/'; empty = uploads only"
        ),
    )
    allow_private_addresses: bool = Field(
        default=False,
        description="let allowlisted http(s) hosts resolve to private/loopback addresses",
    )
    max_redirects: int = Field(default=3, ge=0)
    trace_retention_days: int = Field(default=30, ge=1)
    keys_reload_s: float = Field(
        default=2.0,
        ge=0,
        description="how often the keys file is checked for changes (new and revoked keys)",
    )


class ServeOptions(BaseModel):
    """How ``pagesight serve`` runs the Ray Serve application: on a Ray it starts on this
    machine, or on a running Ray cluster (``ray_address``)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    ray_address: str | None = Field(
        default=None,
        description=(
            "a running Ray cluster to deploy onto (e.g. 10.0.0.5:6379 or auto; `ray start "
            "--head` prints it); unset = start Ray on this machine with num_cpus"
        ),
    )
    proxy_location: Literal["HeadOnly", "EveryNode"] = Field(
        default="HeadOnly",
        description=(
            "where Serve runs HTTP proxies: EveryNode on a cluster of machines; HeadOnly when "
            "its nodes share one address (each proxy binds host:port)"
        ),
    )
    ingress: Literal["auto", "proxy", "direct"] = Field(
        default="auto",
        description=(
            "proxy: Serve's HTTP proxy takes the requests and hands them to the gateway "
            "replicas; direct: each gateway replica serves HTTP itself on port, port + 1, ... "
            "(Ray's direct ingress: no proxy hop, 1.2-1.4x the req/s on two cores; only where "
            "this command starts Ray); auto: direct where it starts Ray, else proxy"
        ),
    )
    num_cpus: int | None = Field(default=None, ge=1, description="Ray's CPUs; unset = all")
    object_store_mb: int = Field(default=256, ge=75)
    start_timeout_s: float = Field(default=180.0, gt=0)
    gateway_replicas: int = Field(default=1, ge=1)
    grace_s: float = Field(
        default=10.0,
        gt=0,
        le=60,
        description="on SIGTERM or SIGINT, how long requests in flight may take to finish "
        "before the server closes their connections (the whole stop stays under 15 s)",
    )

    @property
    def resolved_ingress(self) -> Literal["proxy", "direct"]:
        if self.ingress == "auto":
            return "proxy" if self.ray_address is not None else "direct"
        return self.ingress

    @model_validator(mode="after")
    def _direct_ingress_starts_ray(self) -> ServeOptions:
        if self.ingress == "direct" and self.ray_address is not None:
            raise ValueError(
                "serve.ingress 'direct' needs the Ray `pagesight serve` starts (unset "
                "serve.ray_address): Serve reads it from its processes' environment"
            )
        return self
