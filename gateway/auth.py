"""API keys: who is calling, for which tenant, with which ACL principals.

Keys are random tokens (``ps_`` + 32 url-safe bytes) handed to client services; the gateway
keeps only their sha256 (:class:`core.settings.ApiKeyRecord`), read from a JSON file (a
mounted secret) and/or the ``PAGESIGHT_GATEWAY__API_KEYS`` environment variable. A key maps to
one tenant and its principals; every query and every document operation runs with that
tenant, so a tenant can never name another tenant's data. ``pagesight keys new`` makes one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from core.errors import ErrorCode, PageSightError, Stage
from core.settings import ApiKeyRecord, GatewayOptions

KEY_PREFIX = "ps_"
_RECORDS = TypeAdapter(list[ApiKeyRecord])


@dataclass(frozen=True)
class Caller:
    """An authenticated client: the key's id, its tenant and its ACL principals."""

    key_id: str
    tenant: str
    principals: list[str] = field(default_factory=list)
    max_concurrency: int | None = None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key(
    key_id: str, tenant: str, principals: list[str] | None = None
) -> tuple[str, ApiKeyRecord]:
    """A fresh key and the record to store for it (the key itself is shown once, never kept)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    record = ApiKeyRecord(
        key_id=key_id, sha256=hash_key(key), tenant=tenant, principals=list(principals or [])
    )
    return key, record


class KeyRing:
    """The known keys by digest; ``authenticate`` turns an Authorization header into a Caller."""

    def __init__(self, records: list[ApiKeyRecord]) -> None:
        self._by_digest: dict[str, ApiKeyRecord] = {}
        for record in records:
            if record.sha256 in self._by_digest:
                raise ValueError(f"API key {record.key_id!r} is listed twice")
            self._by_digest[record.sha256] = record

    @classmethod
    def from_options(cls, options: GatewayOptions) -> KeyRing:
        records = list(options.api_keys)
        if options.api_keys_file is not None:
            records += load_records(options.api_keys_file)
        return cls(records)

    def __len__(self) -> int:
        return len(self._by_digest)

    def authenticate(self, authorization: str | None, api_key_header: str | None) -> Caller:
        """``Authorization: Bearer <key>`` or ``X-API-Key: <key>``; anything else is a 401."""
        key = api_key_header
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise _unauthorized("the Authorization header must be 'Bearer <api key>'")
            key = value.strip()
        if not key:
            raise _unauthorized("an API key is required (Authorization: Bearer <key>)")
        digest = hash_key(key)
        # Look up by digest, then compare in constant time (the dict lookup alone leaks nothing
        # useful: digests of guesses are unrelated to the stored ones).
        record = self._by_digest.get(digest)
        if record is None or not hmac.compare_digest(record.sha256, digest):
            raise _unauthorized("unknown API key")
        return Caller(
            key_id=record.key_id,
            tenant=record.tenant,
            principals=list(record.principals),
            max_concurrency=record.max_concurrency,
        )


def load_records(path: Path) -> list[ApiKeyRecord]:
    """The records of a keys file: a JSON list of :class:`ApiKeyRecord` objects."""
    try:
        return _RECORDS.validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise ValueError(f"API keys file not found: {path}") from exc
    except ValidationError as exc:
        raise ValueError(f"API keys file {path} is not a list of key records: {exc}") from exc


def save_records(path: Path, records: list[ApiKeyRecord]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([r.model_dump() for r in records], indent=2) + "\n")
    path.chmod(0o600)


def _unauthorized(message: str) -> PageSightError:
    return PageSightError(ErrorCode.UNAUTHORIZED, Stage.AUTH, message)
