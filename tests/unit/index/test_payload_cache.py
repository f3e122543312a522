"""The embedded store's payload cache: a read that raced a write never stores, the least
recently used go first, and callers get copies."""

from __future__ import annotations

import pytest

from pagesight.index.payload_cache import PayloadCache

FIELDS = ("doc_id", "title")


def test_a_read_from_before_a_write_is_not_kept() -> None:
    cache = PayloadCache(10)
    generation = cache.generation
    cache.invalidate()  # a write landed while the read was in flight
    assert not cache.put_many(generation, FIELDS, [("a", {"title": "old"})])
    assert cache.get_many(["a"], FIELDS) == ({}, [0])
    assert cache.put_many(cache.generation, FIELDS, [("a", {"title": "new"})])
    assert cache.get_many(["a"], FIELDS) == ({"a": {"title": "new"}}, [])


def test_a_write_drops_everything() -> None:
    cache = PayloadCache(10)
    cache.put_many(cache.generation, FIELDS, [("a", {"title": "x"}), ("b", {"title": "y"})])
    cache.invalidate()
    assert len(cache) == 0
    assert cache.get_many(["a", "b"], FIELDS) == ({}, [0, 1])


def test_entries_are_per_field_selection_and_least_recently_used_go_first() -> None:
    cache = PayloadCache(2)
    cache.put_many(cache.generation, FIELDS, [("a", {"title": "a"}), ("b", {"title": "b"})])
    cache.get_many(["a"], FIELDS)  # a is now the most recent
    cache.put_many(cache.generation, FIELDS, [("c", {"title": "c"})])
    found, missing = cache.get_many(["a", "b", "c"], FIELDS)
    assert set(found) == {"a", "c"} and missing == [1]
    assert cache.get_many(["a"], ("title",)) == ({}, [0])


def test_callers_get_copies() -> None:
    cache = PayloadCache(4)
    stored = {"title": "t"}
    cache.put_many(cache.generation, FIELDS, [("a", stored)])
    stored["title"] = "changed by the reader"
    found, _ = cache.get_many(["a"], FIELDS)
    found["a"]["title"] = "changed by a caller"
    assert cache.get_many(["a"], FIELDS)[0] == {"a": {"title": "t"}}


def test_size_zero_is_off_and_negative_is_refused() -> None:
    off = PayloadCache(0)
    assert not off.enabled
    assert not off.put_many(off.generation, FIELDS, [("a", {})])
    with pytest.raises(ValueError):
        PayloadCache(-1)
