"""Candidate payloads by point id, kept in memory by the store that makes every write to them.

Reading a payload out of the embedded engine costs ~10 µs a point (its storage read and the
conversion to Python), ten times what the vector search costs: a text search's dense and
keyword candidates (200 + 300 points with their seven candidate fields) spent ~4 ms of its
~20 on payloads, all of it holding the interpreter lock. The same chunks come back query after
query, and a point's payload changes only when the store itself upserts or deletes, so the
store that owns the shard (:class:`pagesight.index.edge.EdgeVectorStore`, the only writer of an
embedded index) keeps what it read and drops all of it on each of its writes.

A server-backed store does not use it: other processes write there.

Staleness is ruled out by a generation: a reader notes it before its query and stores what it
read only if no write happened since (:meth:`PayloadCache.put_many`), so a payload read before a
write lands can never outlive that write. Entries are least-recently-used beyond ``max_points``;
what a caller gets is a copy, so a caller that edits a payload does not edit the cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Key = tuple[tuple[str, ...], str]


class PayloadCache:
    """Payloads of point ids for one field selection at a time, least recently used first out."""

    def __init__(self, max_points: int) -> None:
        if max_points < 0:
            raise ValueError(f"max_points must be >= 0, got {max_points}")
        self.max_points = max_points
        self._entries: OrderedDict[Key, dict[str, Any]] = OrderedDict()
        self._generation = 0
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_points > 0

    @property
    def generation(self) -> int:
        """Read before a query; pass to :meth:`put_many` with what that query read."""
        return self._generation

    def __len__(self) -> int:
        return len(self._entries)

    def get_many(
        self, ids: Sequence[str], fields: tuple[str, ...]
    ) -> tuple[dict[str, dict[str, Any]], list[int]]:
        """The cached payloads of ``ids`` (copies), and the positions in ``ids`` not cached."""
        found: dict[str, dict[str, Any]] = {}
        missing: list[int] = []
        with self._lock:
            entries = self._entries
            for position, point_id in enumerate(ids):
                key = (fields, point_id)
                payload = entries.get(key)
                if payload is None:
                    missing.append(position)
                    continue
                entries.move_to_end(key)
                found[point_id] = dict(payload)
        return found, missing

    def put_many(
        self,
        generation: int,
        fields: tuple[str, ...],
        payloads: Iterable[tuple[str, Mapping[str, Any]]],
    ) -> bool:
        """Keep ``payloads`` read under ``generation``; nothing when a write came since."""
        with self._lock:
            if generation != self._generation or not self.enabled:
                return False
            entries = self._entries
            for point_id, payload in payloads:
                entries[(fields, point_id)] = dict(payload)
                entries.move_to_end((fields, point_id))
            while len(entries) > self.max_points:
                entries.popitem(last=False)
        return True

    def invalidate(self) -> None:
        """After a write: everything goes, and reads that started before it cannot store."""
        with self._lock:
            self._generation += 1
            self._entries.clear()
