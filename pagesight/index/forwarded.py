"""A read-only vector store whose reads run in the process that owns the index.

The embedded engine (``qdrant-edge``) lets one process open a shard. In the cluster profile
with a Qdrant server, query replicas open the server themselves; on the embedded engine they
hold a :class:`ForwardedVectorStore` instead: the same :class:`pagesight.index.base.VectorStore`
interface (validation, access filters and two-stage logic stay in this process), with each
backend primitive sent to the owner through ``call`` (in the Ray application, a handle call
on the index service, which answers with :func:`read_primitive` on its live store). So the
query side (query embedding, fusion, reranking, the LLM) scales out, and the owner does only
the index reads.

Writes are refused: ingestion runs where the index is owned. Scrolls come back as lists (one
call each): the query path scrolls small selections (a document's points, a few pages).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.index.base import (
    IndexPoint,
    IndexSchema,
    QueryVector,
    ScoredPoint,
    Selection,
    StoredPoint,
    TwoStage,
    VectorStore,
)

#: (primitive name, positional args) -> its result, computed by the index's owner
ReadCall = Callable[[str, tuple[Any, ...]], Any]

#: the primitives a forwarded store may ask for (reads only; ``collection`` is the live
#: version's name, which a trace records)
READ_PRIMITIVES = frozenset(
    {
        "collection",
        "_search",
        "_search_two_stage",
        "_multivectors",
        "_scroll_multivectors",
        "_scroll",
        "_count",
    }
)


def read_primitive(store: VectorStore, primitive: str, args: tuple[Any, ...]) -> Any:
    """What the owner runs for a :class:`ForwardedVectorStore`: one read on ``store``."""
    if primitive not in READ_PRIMITIVES:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST, Stage.QUERY, f"{primitive!r} is not a forwarded index read"
        )
    if primitive == "collection":
        return store.collection
    result = getattr(store, primitive)(*args)
    return list(result) if primitive.startswith("_scroll") else result


class ForwardedVectorStore(VectorStore):
    """Reads of an index owned by another process (module doc). ``schema`` is the owner's
    (the caller checks it against what it was configured for)."""

    def __init__(
        self,
        schema: IndexSchema,
        call: ReadCall,
        *,
        owner: str,
        collection: str,
        check_s: float = 1.0,
    ) -> None:
        super().__init__(schema)
        self._call = call
        self._owner = owner
        self._collection = collection
        self._check_s = check_s
        self._next_check = time.monotonic() + check_s
        self._lock = threading.Lock()

    @property
    def collection(self) -> str:
        """The owner's live version, re-read at most every ``check_s`` (a re-index switches it)."""
        if time.monotonic() >= self._next_check:
            with self._lock:
                if time.monotonic() >= self._next_check:
                    self._collection = str(self._call("collection", ()))
                    self._next_check = time.monotonic() + self._check_s
        return self._collection

    @property
    def location(self) -> str:
        return self._owner

    def _read(self, primitive: str, *args: Any) -> Any:
        return self._call(primitive, args)

    def _refuse(self) -> PageSightError:
        return PageSightError(
            ErrorCode.INTERNAL,
            Stage.INDEX,
            f"index {self._collection} is read-only here: {self._owner} owns it and writes it",
        )

    def _upsert(self, points: Sequence[IndexPoint]) -> None:
        raise self._refuse()

    def _delete(self, selection: Selection) -> None:
        raise self._refuse()

    def _flush(self) -> None:
        raise self._refuse()

    def optimize(self) -> None:
        raise self._refuse()

    def _search(
        self,
        name: str,
        query: QueryVector,
        selection: Selection,
        limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredPoint]:
        fields = None if fields is None else list(fields)
        result: list[ScoredPoint] = self._read("_search", name, query, selection, limit, fields)
        return result

    def _search_two_stage(
        self, stage: TwoStage, rows: list[list[float]], selection: Selection, limit: int
    ) -> list[ScoredPoint]:
        result: list[ScoredPoint] = self._read("_search_two_stage", stage, rows, selection, limit)
        return result

    def _multivectors(self, ids: list[str], name: str) -> dict[str, list[list[float]]]:
        result: dict[str, list[list[float]]] = self._read("_multivectors", ids, name)
        return result

    def _scroll_multivectors(
        self, selection: Selection, name: str
    ) -> Iterator[tuple[str, list[list[float]]]]:
        yield from self._read("_scroll_multivectors", selection, name)

    def _scroll(self, selection: Selection, fields: list[str] | None) -> Iterator[StoredPoint]:
        yield from self._read("_scroll", selection, fields)

    def _count(self, selection: Selection) -> int:
        return int(self._read("_count", selection))

    def _close(self) -> None:
        """Nothing to release here: the owner holds the index."""
