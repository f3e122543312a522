"""A vector store that follows its index's alias, so searches keep working across a re-index.

:mod:`pagesight.index.factory` binds a store to the version it opened (the alias is resolved once).
A long-running searcher (the index service, ``pagesight serve``) would then keep serving the old
version after ``pagesight reindex`` or ``pagesight rollback`` switched the alias, and, on the
embedded engine, keep the old version's directory locked. :class:`LiveStore` is the store such
a process holds instead:

- **Cheap check.** Every call first re-reads the alias, at most once per
  ``index.alias_check_s`` (a ``readlink`` on the embedded engine, one request to a Qdrant
  server): a switch is seen within that interval, with no signal between processes.
- **Open, then swap.** A newly promoted version is opened *before* it replaces the current
  one, under a lock, in one assignment: a call always has an open store, never a half-switched
  one. Calls that started on the old version finish on it.
- **Close when idle.** Each call counts itself in and out of the store it uses; the old store
  is closed when its last call ends (that releases its directory lock, so ``drop_old`` can
  delete it and a rollback can open it again).
- **Never fail a query for a switch.** A version that cannot be opened (a schema this process
  was not configured for, e.g. a new embedding model: restart it with the new settings) is
  logged once and the current version keeps serving. It is not tried again (an open can load
  a whole shard) until the alias moves to another version or :meth:`LiveStore.check_now`.

The schema is fixed for the life of the store: only versions with the schema it was opened with
are switched to, so the validation :class:`VectorStore` does before each call stays right.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from pagesight.core.settings import Settings
    from pagesight.index.factory import CollectionManager

log = logging.getLogger(__name__)


class LiveStore(VectorStore):
    """The live version of one index, switched to a new version when the alias moves (module
    doc). It owns ``manager`` (closing the store closes it)."""

    def __init__(
        self,
        manager: CollectionManager,
        name: str,
        schema: IndexSchema | None = None,
        *,
        check_s: float = 1.0,
        create: bool = True,
    ) -> None:
        if check_s < 0:
            raise ValueError("check_s must be >= 0")
        version = manager.live_version(name)
        if version is None:
            store = manager.open_store(name, schema, create=create)
            version = manager.live_version(name)
        else:
            store = manager.open_version(name, version, schema)
        # The private fields of the same base class: the live store batches as the one it wraps.
        super().__init__(
            store.schema, upsert_batch=store._upsert_batch, scroll_page=store._scroll_page
        )
        self._manager = manager
        self._name = name
        self._check_s = check_s
        self._current = store
        self._version = version
        self._users: dict[int, int] = {id(store): 0}
        self._lock = threading.Lock()  # guards _current, _version and _users
        self._switching = threading.Lock()  # one thread checks and opens at a time
        self._next_check = time.monotonic() + check_s
        self._refused: str | None = None

    # -- identity ----------------------------------------------------------------------------

    @property
    def collection(self) -> str:
        return self._current.collection

    @property
    def location(self) -> str:
        return self._current.location

    @property
    def version(self) -> str | None:
        """The version this store serves now."""
        return self._version

    @property
    def name(self) -> str:
        """The alias this store follows."""
        return self._name

    # -- switching ---------------------------------------------------------------------------

    def check_now(self) -> str | None:
        """Re-read the alias now (not at the next interval) and switch if it moved; returns
        the version served afterwards. Used right after an in-process promote or rollback."""
        self._next_check = 0.0
        self._refused = None
        self._maybe_switch()
        return self._version

    def _maybe_switch(self) -> None:
        if time.monotonic() < self._next_check or self._closed:
            return
        with self._switching:
            if time.monotonic() < self._next_check or self._closed:
                return  # another thread checked while this one waited
            self._next_check = time.monotonic() + self._check_s
            try:
                live = self._manager.live_version(self._name)
            except Exception as exc:  # the alias unreadable for a moment: keep serving
                log.warning("cannot read the alias of index %s: %s", self._name, exc)
                return
            if live is None or live in (self._version, self._refused):
                return
            try:
                fresh = self._manager.open_version(self._name, live, self.schema)
            except Exception as exc:
                if self._refused != live:
                    self._refused = live
                    log.error(
                        "index %s: version %s is live but this process cannot open it (%s); "
                        "still serving %s",
                        self._name,
                        live,
                        exc,
                        self._version,
                    )
                return
            with self._lock:
                old, self._current, self._version = self._current, fresh, live
                self._users[id(fresh)] = 0
                idle = self._users.get(id(old), 0) == 0
                if idle:
                    del self._users[id(old)]
            log.info("index %s switched to version %s", self._name, live)
            if idle:
                _close_quietly(old)

    @contextlib.contextmanager
    def _use(self) -> Iterator[VectorStore]:
        """The current store, counted in use until the block ends (then closed if it was
        replaced meanwhile and this was its last call)."""
        self._maybe_switch()
        with self._lock:
            store = self._current
            self._users[id(store)] = self._users.get(id(store), 0) + 1
        try:
            yield store
        finally:
            with self._lock:
                users = self._users.get(id(store))
                if users is not None:  # None: the live store was closed meanwhile
                    self._users[id(store)] = users - 1
                retire = users == 1 and store is not self._current
                if retire:
                    del self._users[id(store)]
            if retire:
                _close_quietly(store)

    # -- delegated primitives ----------------------------------------------------------------

    def optimize(self) -> None:
        self._check_open()
        with self._use() as store:
            store.optimize()

    def _upsert(self, points: Sequence[IndexPoint]) -> None:
        with self._use() as store:
            store._upsert(points)

    def _delete(self, selection: Selection) -> None:
        with self._use() as store:
            store._delete(selection)

    def _search(
        self,
        name: str,
        query: QueryVector,
        selection: Selection,
        limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredPoint]:
        with self._use() as store:
            return store._search(name, query, selection, limit, fields)

    def _search_two_stage(
        self, stage: TwoStage, rows: list[list[float]], selection: Selection, limit: int
    ) -> list[ScoredPoint]:
        with self._use() as store:
            return store._search_two_stage(stage, rows, selection, limit)

    def _multivectors(self, ids: list[str], name: str) -> dict[str, list[list[float]]]:
        with self._use() as store:
            return store._multivectors(ids, name)

    def _scroll_multivectors(
        self, selection: Selection, name: str
    ) -> Iterator[tuple[str, list[list[float]]]]:
        with self._use() as store:
            yield from store._scroll_multivectors(selection, name)

    def _scroll(self, selection: Selection, fields: list[str] | None) -> Iterator[StoredPoint]:
        with self._use() as store:
            yield from store._scroll(selection, fields)

    def _count(self, selection: Selection) -> int:
        with self._use() as store:
            return store._count(selection)

    def _flush(self) -> None:
        with self._use() as store:
            store._flush()

    def _close(self) -> None:
        with self._lock:
            store = self._current
            self._users.clear()
        try:
            store.close()
        finally:
            self._manager.close()


def _close_quietly(store: VectorStore) -> None:
    try:
        store.close()
    except Exception as exc:  # the old version is out of service either way
        log.warning("closing a replaced index version failed: %s", exc)


def open_live_store(
    settings: Settings, name: str, schema: IndexSchema | None = None, *, create: bool = True
) -> LiveStore:
    """:func:`pagesight.index.factory.open_store`, following the alias (see :class:`LiveStore`)."""
    from pagesight.index.factory import alias_name, collection_manager

    manager = collection_manager(settings)
    try:
        return LiveStore(
            manager,
            alias_name(settings, name),
            schema,
            check_s=settings.index.alias_check_s,
            create=create,
        )
    except BaseException:
        manager.close()
        raise


def require_live(store: VectorStore) -> LiveStore:
    """``store`` as a :class:`LiveStore` (the stack opens every store as one)."""
    if not isinstance(store, LiveStore):
        raise PageSightError(
            ErrorCode.INTERNAL, Stage.INDEX, f"{store.collection} does not follow its alias"
        )
    return store
