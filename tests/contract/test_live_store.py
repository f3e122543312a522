"""A store that follows its index's alias (``pagesight.index.live``), on both backends: a promote or
a rollback is picked up without a restart, an old version closes once its last call ends, and a
version the store cannot serve (another schema) never fails a call."""

from __future__ import annotations

import pytest

from pagesight.index.factory import CollectionManager
from pagesight.index.live import LiveStore
from tests.contract.test_collections import NAME, NEW_SCHEMA, fill, manager, texts
from tests.contract.test_vector_store import SCHEMA

__all__ = ["manager"]  # the fixture, shared with test_collections


def _new_version(manager: CollectionManager, text: str, schema: object = SCHEMA) -> str:
    version, store = manager.create_version(NAME, schema)  # type: ignore[arg-type]
    fill(store, text)
    store.close()
    return version


def test_follows_promote_and_rollback(manager: CollectionManager) -> None:
    live = LiveStore(manager, NAME, SCHEMA, check_s=0)
    fill(live, "first")
    first = live.version
    second = _new_version(manager, "second")
    assert texts(live) == {"first"}  # not promoted yet
    manager.promote(NAME, second)
    assert texts(live) == {"second"} and live.version == second
    assert live.collection.endswith(second)
    # the old version was closed when the switch found it idle: it can be dropped
    assert manager.drop_old(NAME, keep=0) == [first]

    third = _new_version(manager, "third")
    manager.promote(NAME, third)
    assert texts(live) == {"third"}
    assert manager.rollback(NAME) == second
    assert texts(live) == {"second"} and live.version == second
    live.close()


def test_interval_and_check_now(manager: CollectionManager) -> None:
    live = LiveStore(manager, NAME, SCHEMA, check_s=3600)
    fill(live, "first")
    manager.promote(NAME, _new_version(manager, "second"))
    assert texts(live) == {"first"}  # within the interval: not re-read
    assert live.check_now() == manager.live_version(NAME)
    assert texts(live) == {"second"}
    live.close()


def test_a_call_in_flight_keeps_its_version_open(manager: CollectionManager) -> None:
    live = LiveStore(manager, NAME, SCHEMA, check_s=0)
    fill(live, "first")
    with live._use() as old:
        manager.promote(NAME, _new_version(manager, "second"))
        live.check_now()
        assert texts(live) == {"second"}
        assert texts(old) == {"first"}  # still open for the call that holds it
    assert old._closed
    live.close()


def test_another_schema_is_not_switched_to(manager: CollectionManager) -> None:
    live = LiveStore(manager, NAME, SCHEMA, check_s=0)
    fill(live, "first")
    served = live.version
    manager.promote(NAME, _new_version(manager, "other model", NEW_SCHEMA))
    assert texts(live) == {"first"} and live.version == served
    live.close()


def test_check_s_must_not_be_negative(manager: CollectionManager) -> None:
    with pytest.raises(ValueError):
        LiveStore(manager, NAME, SCHEMA, check_s=-1)
