"""API keys: who is calling, for which tenant, with which ACL principals and scopes.

Keys are random tokens (``ps_`` + 32 url-safe bytes) handed to client services; the gateway
keeps only their sha256 (:class:`core.settings.ApiKeyRecord`). A key maps to one tenant, its
ACL principals and its scopes (``read``: search, answer, list and fetch what the principals may
see; ``write``: also upload, replace and delete). Every query and every document operation runs
with that tenant, so a tenant can never name another tenant's data.

Where keys come from is a :class:`KeyStore`: today a JSON file (a mounted secret, written by
``pagesight keys new`` / ``keys revoke``) and the ``PAGESIGHT_GATEWAY__API_KEYS`` environment
variable; a database-backed store implements the same four methods. :class:`KeyRing` re-reads
its stores when they change (checked at most every ``keys_reload_s``), so a new or revoked key
takes effect within seconds, without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from pydantic import TypeAdapter, ValidationError

from core.errors import ErrorCode, PageSightError, Stage
from core.settings import ApiKeyRecord, GatewayOptions, KeyScope

log = logging.getLogger(__name__)

KEY_PREFIX = "ps_"
_RECORDS = TypeAdapter(list[ApiKeyRecord])


@dataclass(frozen=True)
class Caller:
    """An authenticated client: the key's id, its tenant, ACL principals and scopes.

    ``principals=None`` reads every document of the tenant: only the local command line acts
    so (the machine's administrator); an API key always has a list, possibly empty."""

    key_id: str
    tenant: str
    principals: list[str] | None = field(default_factory=list)
    max_concurrency: int | None = None
    scopes: frozenset[str] = frozenset({"read", "write"})

    def require(self, scope: KeyScope) -> None:
        """Raise FORBIDDEN unless the key holds ``scope``."""
        if scope not in self.scopes:
            raise PageSightError(
                ErrorCode.FORBIDDEN, Stage.AUTH, f"this API key lacks the {scope!r} scope"
            )


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key(
    key_id: str,
    tenant: str,
    principals: list[str] | None = None,
    scopes: Sequence[KeyScope] = ("read", "write"),
) -> tuple[str, ApiKeyRecord]:
    """A fresh key and the record to store for it (the key itself is shown once, never kept)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    record = ApiKeyRecord(
        key_id=key_id,
        sha256=hash_key(key),
        tenant=tenant,
        principals=list(principals or []),
        scopes=list(scopes),
    )
    return key, record


class KeyStore(Protocol):
    """Where key records live. ``stamp`` is cheap and changes whenever ``records`` would."""

    def records(self) -> list[ApiKeyRecord]: ...

    def stamp(self) -> Hashable: ...

    def add(self, record: ApiKeyRecord) -> None: ...

    def revoke(self, key_id: str) -> bool: ...


class StaticKeyStore:
    """Records given at start-up (the environment variable): read-only."""

    def __init__(self, records: Sequence[ApiKeyRecord]) -> None:
        self._records = list(records)

    def records(self) -> list[ApiKeyRecord]:
        return list(self._records)

    def stamp(self) -> Hashable:
        return len(self._records)

    def add(self, record: ApiKeyRecord) -> None:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST, Stage.AUTH, "keys from the environment are read-only"
        )

    def revoke(self, key_id: str) -> bool:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST, Stage.AUTH, "keys from the environment are read-only"
        )


class FileKeyStore:
    """A JSON list of :class:`ApiKeyRecord` (a mounted secret, or the file the CLI writes).

    Writes go to a temporary file that replaces the old one in one rename, so a gateway
    reading the file never sees half of it. A missing file holds no keys.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def records(self) -> list[ApiKeyRecord]:
        if not self.path.exists():
            return []
        return load_records(self.path)

    def stamp(self) -> Hashable:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def add(self, record: ApiKeyRecord) -> None:
        records = self.records()
        if any(r.key_id == record.key_id for r in records):
            raise PageSightError(
                ErrorCode.INVALID_REQUEST,
                Stage.AUTH,
                f"a key named {record.key_id!r} already exists in {self.path}",
            )
        save_records(self.path, [*records, record])

    def revoke(self, key_id: str) -> bool:
        """Mark the key revoked (kept, so the audit log's key ids stay explained)."""
        records = self.records()
        found = False
        now = datetime.now(UTC)
        updated = []
        for record in records:
            if record.key_id == key_id and record.revoked_at is None:
                record = record.model_copy(update={"revoked_at": now})
                found = True
            updated.append(record)
        if found:
            save_records(self.path, updated)
        return found


class KeyRing:
    """The live keys by digest; ``authenticate`` turns an Authorization header into a Caller.

    The digest map is rebuilt when a store's ``stamp`` changes, looked at no more often than
    every ``reload_s`` seconds. A store that cannot be read at that moment (a file half
    replaced by hand) keeps the previous keys and logs a warning.
    """

    def __init__(
        self,
        records: Sequence[ApiKeyRecord] = (),
        *,
        stores: Sequence[KeyStore] = (),
        reload_s: float = 2.0,
    ) -> None:
        self._stores: list[KeyStore] = [StaticKeyStore(records), *stores]
        self._reload_s = reload_s
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self._stamps = [s.stamp() for s in self._stores]
        self._by_digest = self._build([r for s in self._stores for r in s.records()])

    @classmethod
    def from_options(cls, options: GatewayOptions) -> KeyRing:
        stores: list[KeyStore] = []
        if options.api_keys_file is not None:
            if not options.api_keys_file.exists():
                raise ValueError(f"API keys file not found: {options.api_keys_file}")
            stores.append(FileKeyStore(options.api_keys_file))
        return cls(options.api_keys, stores=stores, reload_s=options.keys_reload_s)

    @staticmethod
    def _build(records: list[ApiKeyRecord]) -> dict[str, ApiKeyRecord]:
        by_digest: dict[str, ApiKeyRecord] = {}
        for record in records:
            if record.sha256 in by_digest:
                raise ValueError(f"API key {record.key_id!r} is listed twice")
            if record.revoked_at is None:
                by_digest[record.sha256] = record
        return by_digest

    def refresh(self, force: bool = False) -> None:
        """Re-read the stores if any changed since the last look."""
        now = time.monotonic()
        if not force and now - self._checked < self._reload_s:
            return
        with self._lock:
            self._checked = now
            stamps = [s.stamp() for s in self._stores]
            if stamps == self._stamps:
                return
            try:
                self._by_digest = self._build([r for s in self._stores for r in s.records()])
            except (ValueError, OSError) as exc:
                log.warning("API keys not reloaded, keeping the previous ones: %s", exc)
                return
            self._stamps = stamps
            log.info("API keys reloaded", extra={"keys": len(self._by_digest)})

    def __len__(self) -> int:
        self.refresh()
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
        self.refresh()
        digest = hash_key(key)
        # Look up by digest, then compare in constant time (the dict lookup alone leaks nothing
        # useful: digests of guesses are unrelated to the stored ones).
        record = self._by_digest.get(digest)
        if record is None or not hmac.compare_digest(record.sha256, digest):
            raise _unauthorized("unknown or revoked API key")
        return Caller(
            key_id=record.key_id,
            tenant=record.tenant,
            principals=list(record.principals),
            max_concurrency=record.max_concurrency,
            scopes=frozenset(record.scopes),
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
    """Write ``records`` atomically (temp file + rename), readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps([r.model_dump(mode="json") for r in records], indent=2) + "\n")
    tmp.chmod(0o600)
    os.replace(tmp, path)


def _unauthorized(message: str) -> PageSightError:
    return PageSightError(ErrorCode.UNAUTHORIZED, Stage.AUTH, message)
