"""Contract tests every API key store must pass: the keys file of a single machine and
PostgreSQL of the cluster profile run the same tests (``backend`` parameters).

What matters most: a revoked key stops working within the reload interval on every replica,
and a key only ever acts for its own tenant.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import ApiKeyRecord, GatewayOptions, Settings
from pagesight.gateway.auth import KeyRing, hash_key, new_key, open_key_store
from pagesight.store.key_stores import FileKeyStore, KeyStore

BACKENDS = ["file", "postgres"]

#: A factory of store objects on one and the same storage: each call is another "replica".
Replicas = Callable[[], KeyStore]


@pytest.fixture(params=BACKENDS)
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replicas]:
    opened: list[KeyStore] = []
    if request.param == "file":
        path = tmp_path / "keys.json"

        def make() -> KeyStore:
            return FileKeyStore(path)
    else:
        from pagesight.store.key_store_postgres import PostgresKeyStore

        url: str = request.getfixturevalue("postgres_url")

        def make() -> KeyStore:
            # Another application_name is another connection string: a pool of its own, as a
            # second replica would have (the same one would share this process's pool).
            dsn = f"{url}?application_name=replica-{len(opened)}"
            store = PostgresKeyStore.open(Settings(data_dir=tmp_path / "var", database_url=dsn))
            opened.append(store)
            return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture()
def store(replicas: Replicas) -> KeyStore:
    return replicas()


def _record(key_id: str, tenant: str = "acme", **fields: object) -> tuple[str, ApiKeyRecord]:
    key, record = new_key(key_id, tenant)
    return key, record.model_copy(update=fields)


def _refused(call: Callable[[], object], *words: str) -> None:
    with pytest.raises(PageSightError) as caught:
        call()
    assert (caught.value.code, caught.value.stage) == (ErrorCode.INVALID_REQUEST, Stage.AUTH)
    for word in words:
        assert word in caught.value.message


def test_records_round_trip_in_the_order_added(store: KeyStore) -> None:
    assert store.records() == []
    revoked_at = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    added = [
        _record("full", "acme", principals=["group:a", "user:b"], max_concurrency=3)[1],
        _record("reader", "other", scopes=["read"])[1],
        _record("writer", "acme", scopes=["write"], principals=[])[1],
        _record("old", "acme", revoked_at=revoked_at)[1],  # imported already revoked
    ]
    for record in added:
        store.add(record)
    assert store.records() == added
    assert store.location  # names the store in messages


def test_duplicate_key_id_or_digest_is_refused(store: KeyStore) -> None:
    _, first = _record("k1")
    store.add(first)
    _refused(lambda: store.add(_record("k1", "other")[1]), "'k1'", store.location)
    _refused(lambda: store.add(first.model_copy(update={"key_id": "k2"})), "'k1'")
    assert store.revoke("k1")
    # Revoked keys keep their id and digest: neither may come back as a new key.
    _refused(lambda: store.add(_record("k1")[1]), "'k1'")
    _refused(lambda: store.add(first.model_copy(update={"key_id": "k3", "revoked_at": None})))
    assert [r.key_id for r in store.records()] == ["k1"]


def test_revoke_marks_the_record_once(store: KeyStore) -> None:
    _, a = _record("a")
    _, b = _record("b")
    store.add(a)
    store.add(b)
    before = datetime.now(UTC)
    assert store.revoke("a") is True
    after = datetime.now(UTC)
    revoked, kept = store.records()
    assert revoked.model_copy(update={"revoked_at": None}) == a and kept == b
    assert revoked.revoked_at is not None
    # The database's clock may differ from this one by a little.
    assert before - timedelta(seconds=5) <= revoked.revoked_at <= after + timedelta(seconds=5)
    assert store.revoke("a") is False
    assert store.revoke("no-such-key") is False
    assert store.records() == [revoked, kept]


def test_stamp_changes_exactly_when_records_do(store: KeyStore) -> None:
    stamps: list[Hashable] = [store.stamp()]

    def changed() -> None:
        now = store.stamp()
        assert now not in stamps
        assert store.stamp() == now  # stable while nothing changes
        stamps.append(now)

    def unchanged() -> None:
        assert store.stamp() == stamps[-1]

    unchanged()
    _, a = _record("a")
    store.add(a)
    changed()
    store.add(_record("b")[1])
    changed()
    with pytest.raises(PageSightError):
        store.add(a)
    unchanged()  # a refused add changes nothing
    assert store.revoke("a")
    changed()
    assert not store.revoke("a")
    unchanged()


def test_replicas_see_each_others_adds_and_revokes(replicas: Replicas) -> None:
    one, two = replicas(), replicas()
    _, a = _record("a")
    one.add(a)
    assert two.records() == [a]
    stamp = two.stamp()
    _, b = _record("b")
    two.add(b)
    assert [r.key_id for r in one.records()] == ["a", "b"]
    assert one.stamp() != stamp
    assert two.revoke("a")
    assert one.revoke("a") is False  # already revoked, by the other replica
    assert [r.revoked_at is not None for r in one.records()] == [True, False]
    _refused(lambda: one.add(b), "'b'")


def test_a_ring_follows_the_store_of_another_replica(replicas: Replicas) -> None:
    writer = replicas()
    ring = KeyRing(stores=[replicas()], reload_s=0)
    assert len(ring) == 0
    key, record = _record("k", "acme", principals=["group:a"], max_concurrency=2)
    writer.add(record)
    caller = ring.authenticate(f"Bearer {key}", None)
    assert (caller.key_id, caller.tenant, caller.principals) == ("k", "acme", ["group:a"])
    assert (caller.max_concurrency, caller.scopes) == (2, {"read", "write"})
    assert ring.authenticate(None, key).key_id == "k"  # X-API-Key
    assert writer.revoke("k")
    with pytest.raises(PageSightError) as caught:
        ring.authenticate(f"Bearer {key}", None)
    assert caught.value.code == ErrorCode.UNAUTHORIZED
    assert len(ring) == 0


def test_keys_act_only_for_their_own_tenant(replicas: Replicas) -> None:
    """Random keys over several tenants, some revoked: every key that works names its own
    record's tenant, principals and scopes; revoked and unknown keys do not work at all."""
    rng = random.Random(20261202)  # noqa: S311  # seeded test data, not a secret
    writer = replicas()
    ring = KeyRing(stores=[replicas()], reload_s=0)
    tenants = [f"tenant-{i}" for i in range(5)]
    keys: dict[str, ApiKeyRecord] = {}
    for i in range(30):
        key, record = new_key(
            f"key-{i}",
            rng.choice(tenants),
            principals=rng.sample(["group:a", "group:b", "user:c"], rng.randint(0, 2)),
            scopes=rng.choice([("read",), ("write",), ("read", "write")]),
        )
        writer.add(record)
        keys[key] = record
    revoked = set(rng.sample(sorted(keys), 10))
    for key in revoked:
        assert writer.revoke(keys[key].key_id)
    for key, record in rng.sample(sorted(keys.items()), len(keys)):
        if key in revoked:
            with pytest.raises(PageSightError, match="unknown or revoked"):
                ring.authenticate(f"Bearer {key}", None)
            continue
        caller = ring.authenticate(f"Bearer {key}", None)
        assert caller.tenant == record.tenant and caller.key_id == record.key_id
        assert caller.principals == record.principals
        assert caller.scopes == set(record.scopes)
    for _ in range(5):
        with pytest.raises(PageSightError, match="unknown or revoked"):
            ring.authenticate(f"Bearer {new_key('x', rng.choice(tenants))[0]}", None)


# -- choosing the store (not per backend) ---------------------------------------------------------


def test_keys_without_a_database_stay_in_the_file(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "var")
    store = open_key_store(settings)
    assert isinstance(store, FileKeyStore)
    assert store.path == tmp_path / "var" / "api-keys.json"
    given = tmp_path / "given.json"
    assert isinstance(chosen := open_key_store(settings, given), FileKeyStore)
    assert chosen.path == given


def test_with_a_database_the_gateway_reads_postgres_env_and_file(
    postgres_url: str, tmp_path: Path
) -> None:
    from pagesight.store.key_store_postgres import PostgresKeyStore

    env_key, env_record = new_key("env", "t-env")
    file_key, file_record = new_key("file", "t-file")
    keys_file = tmp_path / "keys.json"
    FileKeyStore(keys_file).add(file_record)
    settings = Settings(
        data_dir=tmp_path / "var",
        database_url=postgres_url,
        gateway=GatewayOptions(api_keys=[env_record], keys_reload_s=0),
    )
    store = open_key_store(settings)
    assert isinstance(store, PostgresKeyStore)
    assert store.location.startswith("PostgreSQL 127.0.0.1:") and "@" not in store.location
    assert isinstance(open_key_store(settings, keys_file), FileKeyStore)  # --keys-file wins
    db_key, db_record = new_key("db", "t-db")
    store.add(db_record)

    ring = KeyRing.from_settings(settings)  # no keys file set: PostgreSQL and the environment
    assert {ring.authenticate(None, k).tenant for k in (env_key, db_key)} == {"t-env", "t-db"}
    with pytest.raises(PageSightError):
        ring.authenticate(None, file_key)
    ring.close()

    settings.gateway.api_keys_file = keys_file  # set explicitly: read as well
    ring = KeyRing.from_settings(settings)
    assert ring.authenticate(None, file_key).tenant == "t-file"
    assert store.revoke("db")
    with pytest.raises(PageSightError, match="unknown or revoked"):
        ring.authenticate(None, db_key)
    ring.close()
    store.close()


def test_a_store_that_cannot_be_read_keeps_the_previous_keys() -> None:
    """An unreachable database (or a half-written file) must not lock every caller out: the
    ring keeps the keys it had and looks again at the next interval."""
    key, record = new_key("k", "acme")

    class Flaky:
        location = "flaky"
        down = False

        def records(self) -> list[ApiKeyRecord]:
            return [record]

        def stamp(self) -> Hashable:
            if self.down:
                raise PageSightError(ErrorCode.UNAVAILABLE, Stage.DATABASE, "unreachable")
            return 1

        def add(self, record: ApiKeyRecord) -> None: ...

        def revoke(self, key_id: str) -> bool:
            return False

        def close(self) -> None: ...

    flaky = Flaky()
    ring = KeyRing(stores=[flaky], reload_s=0)
    flaky.down = True
    assert ring.authenticate(None, key).key_id == "k"
    assert hash_key(key) == record.sha256
