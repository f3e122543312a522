"""API keys in PostgreSQL: the :class:`~pagesight.store.key_stores.KeyStore` of the cluster profile.

Why a database and not the keys file: every gateway replica reads the same table, so a key made
or revoked with ``pagesight keys`` on any machine counts on all of them within
``keys_reload_s``, without a secret to re-mount and roll out.

The table (:data:`pagesight.store.tables.api_keys`) holds the key id and the digest in unique
columns, so the database itself refuses a duplicate, even from two operators adding at once on two
machines. Every insert and every revoke takes a new ``revision`` from a sequence: ``stamp`` is
then one aggregate (count, max revision) instead of reading every record each reload interval.
``revoked_at`` is a column, not part of the JSON body, so a revoke is one small UPDATE; a revoked
key stays on record (the audit log's key ids keep an owner).

psycopg is imported only here and in :mod:`pagesight.store.postgres`, and this module only when a
``database_url`` is set: a single-machine install never loads it.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from pagesight.core.settings import ApiKeyRecord, Settings
from pagesight.store.key_stores import digest_taken, key_id_taken
from pagesight.store.postgres import SharedDb, open_database
from pagesight.store.tables import api_key_revision, api_keys


class PostgresKeyStore:
    """Key records in the ``api_keys`` table of the process's database pool."""

    def __init__(self, db: SharedDb) -> None:
        self._db = db
        self.location = describe(db.db.dsn)

    @classmethod
    def open(cls, settings: Settings) -> PostgresKeyStore:
        """A store on ``settings.database_url`` (the process's shared pool, schema checked)."""
        return cls(open_database(settings))

    def records(self) -> list[ApiKeyRecord]:
        rows = self._db.rows(
            sa.select(api_keys.c.body, api_keys.c.revoked_at).order_by(
                api_keys.c.created_at, api_keys.c.key_id
            )
        )
        return [_record(body, revoked_at) for body, revoked_at in rows]

    def stamp(self) -> Hashable:
        # The count catches a row deleted by hand; the max revision every insert and revoke.
        ((count, revision),) = self._db.rows(
            sa.select(sa.func.count(), sa.func.max(api_keys.c.revision))
        )
        return (count, revision)

    def add(self, record: ApiKeyRecord) -> None:
        body = record.model_dump_json(exclude={"revoked_at"})
        with self._db.tx() as db:
            # DO NOTHING, then look: the refusal names the holder as the file store's does,
            # whichever unique column (key id or digest) the new record collides on.
            added = db.execute(
                postgresql.insert(api_keys)
                .values(
                    key_id=record.key_id,
                    sha256=record.sha256,
                    tenant=record.tenant,
                    revoked_at=record.revoked_at,
                    body=body,
                )
                .on_conflict_do_nothing()
                .returning(api_keys.c.key_id)
            ).fetchone()
            if added is not None:
                return
            rows = db.execute(
                sa.select(api_keys.c.body, api_keys.c.revoked_at).where(
                    sa.or_(api_keys.c.key_id == record.key_id, api_keys.c.sha256 == record.sha256)
                )
            ).fetchall()
        holders = [_record(body, revoked_at) for body, revoked_at in rows]
        if any(h.key_id == record.key_id for h in holders):
            raise key_id_taken(record, self.location)
        raise digest_taken(holders[0] if holders else None, self.location)

    def revoke(self, key_id: str) -> bool:
        """Mark the key revoked at the database's clock (one clock for every replica)."""
        with self._db.tx() as db:
            row = db.execute(
                sa.update(api_keys)
                .where(api_keys.c.key_id == key_id, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=sa.func.now(), revision=api_key_revision.next_value())
                .returning(api_keys.c.key_id)
            ).fetchone()
        return row is not None

    def close(self) -> None:
        """Release this store's handle on the pool (the pool closes with its last user)."""
        self._db.close()


def describe(dsn: str) -> str:
    """``PostgreSQL host:port/dbname`` of a connection string: where keys went, for messages
    and the CLI's output, without the user or password."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(dsn)
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or "5432"
    return f"PostgreSQL {host}:{port}/{params.get('dbname') or params.get('user') or ''}"


def _record(body: str, revoked_at: datetime | None) -> ApiKeyRecord:
    if revoked_at is not None:
        revoked_at = revoked_at.astimezone(UTC)
    return ApiKeyRecord.model_validate({**json.loads(body), "revoked_at": revoked_at})
