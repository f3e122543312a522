"""The caller dependency (:func:`pagesight.gateway.dependencies.authenticated`) stays on the event
loop, and only a due reload of the key stores goes to a worker thread: a store may read a file
or the database, and a thread hop on every request was measurable in the served gateway."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable
from types import SimpleNamespace
from typing import Any, cast

import pytest
from starlette.requests import Request

from pagesight.core.errors import PageSightError
from pagesight.gateway.auth import KeyRing, new_key
from pagesight.gateway.dependencies import authenticated


class WatchedStore:
    """A key store that records the thread each look at it ran on."""

    location = "watched"

    def __init__(self) -> None:
        self.key, self.record = new_key("watched", "t")
        self.looks: list[int] = []
        self.revoked = False

    def stamp(self) -> Hashable:
        self.looks.append(threading.get_ident())
        return self.revoked

    def records(self) -> list[Any]:
        return [] if self.revoked else [self.record]

    def close(self) -> None:
        pass


def _request(ring: KeyRing, key: str) -> Request:
    app = SimpleNamespace(state=SimpleNamespace(keyring=ring))
    headers = [(b"authorization", f"Bearer {key}".encode())]
    return Request({"type": "http", "headers": headers, "app": app})


def _call(ring: KeyRing, key: str) -> tuple[Any, int]:
    """The dependency's result (or error) and the event loop's thread."""

    async def run() -> tuple[Any, int]:
        try:
            result: Any = await authenticated(_request(ring, key))
        except PageSightError as exc:
            result = exc
        return result, threading.get_ident()

    return asyncio.run(run())


def test_no_store_is_read_between_reloads() -> None:
    store = WatchedStore()
    ring = KeyRing(stores=[cast(Any, store)], reload_s=3600)
    looks = len(store.looks)  # the ring's first read, at construction
    for _ in range(3):
        caller, _loop = _call(ring, store.key)
        assert caller.key_id == "watched"
    assert len(store.looks) == looks


@pytest.mark.parametrize("revoke", [False, True])
def test_a_due_reload_runs_on_a_worker_thread(revoke: bool) -> None:
    store = WatchedStore()
    ring = KeyRing(stores=[cast(Any, store)], reload_s=0)
    store.looks.clear()
    store.revoked = revoke
    result, loop_thread = _call(ring, store.key)
    assert store.looks and all(t != loop_thread for t in store.looks)
    if revoke:  # the reload counted for this very request
        assert isinstance(result, PageSightError) and "revoked" in result.message
    else:
        assert result.key_id == "watched"
