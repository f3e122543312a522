"""API keys: who is calling (an :class:`pagesight.api.caller.Caller`), for which tenant, with which
ACL principals and scopes.

Keys are random tokens (``ps_`` + 32 url-safe bytes) handed to client services; the gateway
keeps only their sha256 (:class:`pagesight.core.settings.ApiKeyRecord`). A key maps to one tenant,
its ACL principals and its scopes (``read``: search, answer, list and fetch what the principals may
see; ``write``: also upload, replace and delete). Every query and every document operation runs
with that tenant, so a tenant can never name another tenant's data.

Where keys come from is a :class:`KeyStore`: the ``PAGESIGHT_GATEWAY__API_KEYS`` environment
variable, a JSON file (a mounted secret, or what ``pagesight keys new`` / ``keys revoke`` write
on a single machine) and, in the cluster profile (``PAGESIGHT_DATABASE_URL`` set), PostgreSQL
(:mod:`pagesight.store.key_store_postgres`), which every replica shares, so a key made or revoked
on one machine counts on all of them. :class:`KeyRing` re-reads its stores when they change
(checked at most every ``keys_reload_s``), so a new or revoked key takes effect within seconds,
without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from pagesight.api.caller import Caller
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import ApiKeyRecord, GatewayOptions, KeyScope, Settings
from pagesight.store.key_stores import FileKeyStore, KeyStore, StaticKeyStore

log = logging.getLogger(__name__)

KEY_PREFIX = "ps_"


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


def open_key_store(settings: Settings, keys_file: Path | None = None) -> KeyStore:
    """The store ``pagesight keys`` writes to and lists: ``keys_file`` when given, else
    PostgreSQL when ``database_url`` is set (the store every replica of the gateway reads),
    else the keys file of the settings (default ``<data_dir>/api-keys.json``)."""
    if keys_file is None and settings.database_url is not None:
        from pagesight.store.key_store_postgres import PostgresKeyStore

        return PostgresKeyStore.open(settings)
    return FileKeyStore(keys_file or default_keys_file(settings))


def default_keys_file(settings: Settings) -> Path:
    """The keys file of a single machine: the one set in the settings, else in the data dir."""
    return settings.gateway.api_keys_file or settings.data_dir / "api-keys.json"


class KeyRing:
    """The live keys by digest; ``authenticate`` turns an Authorization header into a Caller.

    The digest map is rebuilt when a store's ``stamp`` changes, looked at no more often than
    every ``reload_s`` seconds. A store that cannot be read at that moment (a file half
    replaced by hand, the database unreachable) keeps the previous keys and logs a warning:
    callers keep working through an outage, and a revocation counts once the store is back.

    The ring owns its stores: :meth:`close` closes them.
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
    def from_options(cls, options: GatewayOptions, stores: Sequence[KeyStore] = ()) -> KeyRing:
        """The environment's keys, the keys file of ``options`` if set (it must exist: a
        mistyped path would otherwise start a gateway nobody can call), and ``stores``."""
        files: list[KeyStore] = []
        if options.api_keys_file is not None:
            if not options.api_keys_file.exists():
                raise ValueError(f"API keys file not found: {options.api_keys_file}")
            files.append(FileKeyStore(options.api_keys_file))
        return cls(options.api_keys, stores=[*stores, *files], reload_s=options.keys_reload_s)

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyRing:
        """The gateway's keys: :meth:`from_options` (the environment's, and the keys file when
        one is set), plus PostgreSQL when ``database_url`` is set."""
        stores: list[KeyStore] = []
        if settings.database_url is not None:
            from pagesight.store.key_store_postgres import PostgresKeyStore

            stores.append(PostgresKeyStore.open(settings))
        try:
            return cls.from_options(settings.gateway, stores)
        except BaseException:
            for store in stores:
                store.close()
            raise

    @staticmethod
    def _build(records: list[ApiKeyRecord]) -> dict[str, ApiKeyRecord]:
        by_digest: dict[str, ApiKeyRecord] = {}
        for record in records:
            if record.sha256 in by_digest:
                raise ValueError(f"API key {record.key_id!r} is listed twice")
            if record.revoked_at is None:
                by_digest[record.sha256] = record
        return by_digest

    def refresh_due(self) -> bool:
        """Whether :meth:`refresh` would look at the stores now (it may read files or the
        database: an event loop runs it on a thread only then)."""
        return time.monotonic() - self._checked >= self._reload_s

    def refresh(self, force: bool = False) -> None:
        """Re-read the stores if any changed since the last look."""
        if not force and not self.refresh_due():
            return
        with self._lock:
            self._checked = time.monotonic()
            try:
                stamps = [s.stamp() for s in self._stores]
                if stamps == self._stamps:
                    return
                self._by_digest = self._build([r for s in self._stores for r in s.records()])
            except (ValueError, OSError, PageSightError) as exc:
                log.warning("API keys not reloaded, keeping the previous ones: %s", exc)
                return
            self._stamps = stamps
            log.info("API keys reloaded", extra={"keys": len(self._by_digest)})

    def close(self) -> None:
        """Close the stores (the database pool's handle, for PostgreSQL)."""
        for store in self._stores:
            store.close()

    def __len__(self) -> int:
        self.refresh()
        return len(self._by_digest)

    def authenticate(
        self, authorization: str | None, api_key_header: str | None, *, refresh: bool = True
    ) -> Caller:
        """``Authorization: Bearer <key>`` or ``X-API-Key: <key>``; anything else is a 401.

        ``refresh=False``: the caller has just refreshed (or chose not to); nothing here then
        blocks on a store."""
        key = api_key_header
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise _unauthorized("the Authorization header must be 'Bearer <api key>'")
            key = value.strip()
        if not key:
            raise _unauthorized("an API key is required (Authorization: Bearer <key>)")
        if refresh:
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


def _unauthorized(message: str) -> PageSightError:
    return PageSightError(ErrorCode.UNAUTHORIZED, Stage.AUTH, message)
