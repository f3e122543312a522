"""Where API key records live: the :class:`KeyStore` protocol, the environment's read-only
store and the JSON keys file (a mounted secret, or what ``pagesight keys new`` writes on one
machine). The PostgreSQL store of the cluster profile is :mod:`pagesight.store.key_store_postgres`;
:func:`pagesight.gateway.auth.open_key_store` picks one. Only digests are stored, never a key.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.keys_file import load_records, save_records
from pagesight.core.settings import ApiKeyRecord


class KeyStore(Protocol):
    """Where key records live. ``stamp`` is cheap and changes whenever ``records`` would.

    ``records`` lists revoked keys too, in the order they were added: a revoked key stays on
    record so that the key ids in the audit log and the metrics keep an owner. ``add`` refuses
    a key id or a digest the store already holds (INVALID_REQUEST); ``revoke`` returns False
    for a key that is unknown or already revoked. ``location`` names the store in messages
    (never a secret); ``close`` releases what the store holds open."""

    location: str

    def records(self) -> list[ApiKeyRecord]: ...

    def stamp(self) -> Hashable: ...

    def add(self, record: ApiKeyRecord) -> None: ...

    def revoke(self, key_id: str) -> bool: ...

    def close(self) -> None: ...


class StaticKeyStore:
    """Records given at start-up (the environment variable): read-only."""

    location = "PAGESIGHT_GATEWAY__API_KEYS"

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

    def close(self) -> None:
        pass


class FileKeyStore:
    """A JSON list of :class:`ApiKeyRecord` (a mounted secret, or the file the CLI writes; the
    format is :mod:`pagesight.core.keys_file`).

    Writes go to a temporary file that replaces the old one in one rename, so a gateway
    reading the file never sees half of it. A missing file holds no keys.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)

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
        for other in records:
            if other.key_id == record.key_id:
                raise key_id_taken(record, self.location)
            if other.sha256 == record.sha256:
                raise digest_taken(other, self.location)
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

    def close(self) -> None:
        pass


def key_id_taken(record: ApiKeyRecord, location: str) -> PageSightError:
    """What every store's ``add`` raises for a key id it already holds."""
    return PageSightError(
        ErrorCode.INVALID_REQUEST,
        Stage.AUTH,
        f"a key named {record.key_id!r} already exists in {location}",
    )


def digest_taken(holder: ApiKeyRecord | None, location: str) -> PageSightError:
    """What every store's ``add`` raises for a digest it already holds (the same key twice:
    the ring could not tell which record a caller is). ``holder``: the record holding it, when
    the store can name it."""
    named = f" (key {holder.key_id!r})" if holder is not None else ""
    return PageSightError(
        ErrorCode.INVALID_REQUEST,
        Stage.AUTH,
        f"this key is already stored{named} in {location}",
    )
