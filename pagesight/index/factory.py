"""Backend selection and zero-downtime re-indexing through versioned collections.

A logical index ``<name>`` is a series of physical versions ``<name>__<UTC yyyymmddHHMMSSffffff>``
and an alias ``<name>`` naming the live one. A re-index (new embedding model, new id scheme)
writes a new version while the old one keeps serving, then :meth:`CollectionManager.promote`
switches the alias in one atomic step; the previous version stays for
:meth:`CollectionManager.rollback` until :meth:`CollectionManager.drop_old` removes it.

- Qdrant server: real collections and ``update_collection_aliases`` (delete + create in one
  request, which the server applies atomically).
- Embedded: a directory per version under ``<data_dir>/index`` and a symlink ``<name>`` swapped
  with ``os.replace`` (atomic rename), because qdrant_edge has no collections or aliases.

Stores are bound to the version they opened (the symlink or alias is resolved once), so a
promotion takes effect for stores opened after it; a long-running process holds an
:class:`pagesight.index.live.LiveStore` instead, which follows the alias without a restart.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import Settings
from pagesight.index.base import IndexSchema, VectorStore
from pagesight.index.edge import (
    DEFAULT_SEGMENT_MB,
    SCHEMA_FILE,
    DirectoryLock,
    EdgeVectorStore,
    read_schema,
)

if TYPE_CHECKING:
    # qdrant-client costs over a second to import; the embedded default never needs it.
    from qdrant_client import QdrantClient

    from pagesight.index.qdrant_server import ClusterPlacement

VERSION_SEPARATOR = "__"
#: how a version id writes its UTC creation time
VERSION_FORMAT = "%Y%m%d%H%M%S%f"
_VERSION_ID = re.compile(r"^\d{20}$")
_INDEX_NAME = re.compile(r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$")


def version_collection(name: str, version_id: str) -> str:
    """The physical collection (or directory) name of one version of index ``name``."""
    return f"{name}{VERSION_SEPARATOR}{version_id}"


def version_of(name: str, collection: str) -> str | None:
    """The version id if ``collection`` is a version of index ``name`` (the inverse of
    :func:`version_collection`), else None."""
    prefix = f"{name}{VERSION_SEPARATOR}"
    version_id = collection[len(prefix) :]
    if collection.startswith(prefix) and _VERSION_ID.match(version_id):
        return version_id
    return None


def new_version_id(existing: Iterable[str], now: datetime | None = None) -> str:
    """A UTC timestamp id, strictly after every existing one (ids sort chronologically)."""
    moment = (now or datetime.now(UTC)).astimezone(UTC).replace(tzinfo=None)
    latest = max(existing, default=None)
    if latest is not None:
        after_latest = datetime.strptime(latest, VERSION_FORMAT) + timedelta(microseconds=1)
        moment = max(moment, after_latest)
    return moment.strftime(VERSION_FORMAT)


class CollectionManager(ABC):
    """Versions and the live alias of named indexes on one backend."""

    def __init__(self, *, upsert_batch: int = 256, page_layout: str | None = None) -> None:
        self.upsert_batch = upsert_batch
        #: the storage layout every page schema opened or created here is given
        #: (``PAGESIGHT_INDEX__PAGE_LAYOUT``); None leaves schemas as the caller built them
        self.page_layout = page_layout

    def laid_out(self, schema: IndexSchema | None) -> IndexSchema | None:
        """``schema`` with its page vectors in this manager's :attr:`page_layout`.

        Applied where schemas enter (opening a version, creating one), so every caller gets
        the configured layout: a re-index (:meth:`create_version`) writes it, and opening a
        live version stored in another layout is refused with a message that asks for a
        re-index (IndexSchema.require_same)."""
        if schema is None or self.page_layout is None:
            return schema
        return schema.with_page_layout(self.page_layout)

    # -- backend primitives --

    @abstractmethod
    def versions(self, name: str) -> list[str]:
        """Version ids of ``name``, oldest first (including unpromoted and incomplete ones)."""

    @abstractmethod
    def live_version(self, name: str) -> str | None:
        """The version the alias ``name`` points to, or None before the first promotion."""

    @abstractmethod
    def open_version(
        self, name: str, version_id: str, schema: IndexSchema | None = None
    ) -> VectorStore:
        """Open one version directly (e.g. to fill it before promotion)."""

    @abstractmethod
    def _create(self, name: str, version_id: str, schema: IndexSchema) -> VectorStore: ...

    @abstractmethod
    def _check_promotable(self, name: str, version_id: str) -> None:
        """Raise when the version does not exist or was never completely created."""

    @abstractmethod
    def _point_alias(self, name: str, version_id: str) -> None:
        """Atomically make alias ``name`` name ``version_id``."""

    @abstractmethod
    def _drop(self, name: str, version_id: str) -> bool:
        """Delete one version; False when it is in use and was left alone."""

    def close(self) -> None:  # noqa: B027  # an optional hook: only some backends own a client
        """Release what the manager owns (a client)."""

    # -- operations --

    def open_store(
        self, name: str, schema: IndexSchema | None = None, *, create: bool = True
    ) -> VectorStore:
        """Open the live version of ``name``; create and promote a first version if none is.

        With ``schema`` the live version's stored schema must equal it (else INDEX_FAILED
        asking for a re-index); without, whatever is stored is used.
        """
        _check_name(name)
        live = self.live_version(name)
        if live is not None:
            return self.open_version(name, live, schema)
        if not create:
            raise PageSightError(ErrorCode.NOT_FOUND, Stage.INDEX, f"no index named {name!r}")
        if schema is None:
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"no index named {name!r} yet, and no schema to create it with",
            )
        version_id, store = self.create_version(name, schema)
        try:
            self.promote(name, version_id)
        except BaseException:
            store.close()
            raise
        return store

    def create_version(self, name: str, schema: IndexSchema) -> tuple[str, VectorStore]:
        """A new, empty, unpromoted version of ``name``: fill it, then :meth:`promote` it."""
        _check_name(name)
        version_id = new_version_id(self.versions(name))
        laid_out = self.laid_out(schema)
        assert laid_out is not None
        return version_id, self._create(name, version_id, laid_out)

    def promote(self, name: str, version_id: str) -> None:
        """Make ``version_id`` the live version of ``name`` (one atomic alias switch)."""
        _check_name(name)
        if version_id not in self.versions(name):
            raise PageSightError(
                ErrorCode.NOT_FOUND, Stage.INDEX, f"index {name!r} has no version {version_id!r}"
            )
        self._check_promotable(name, version_id)
        self._point_alias(name, version_id)

    def rollback(self, name: str) -> str:
        """Point ``name`` back at the newest version older than the live one; returns its id."""
        _check_name(name)
        live = self.live_version(name)
        if live is None:
            raise PageSightError(ErrorCode.NOT_FOUND, Stage.INDEX, f"no index named {name!r}")
        older = [v for v in self.versions(name) if v < live]
        if not older:
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"index {name!r} has no version older than {live} to roll back to",
            )
        self.promote(name, older[-1])
        return older[-1]

    def drop_old(self, name: str, keep: int = 1) -> list[str]:
        """Delete versions older than the live one except the newest ``keep`` (for rollback).

        Versions newer than the live one may be re-indexes in progress and are never touched;
        an embedded version still open in some process is skipped. Returns the dropped ids.
        """
        _check_name(name)
        if keep < 0:
            raise ValueError("keep must be >= 0")
        live = self.live_version(name)
        if live is None:
            return []
        older = [v for v in self.versions(name) if v < live]
        doomed = older[: len(older) - keep] if keep else older
        return [v for v in doomed if self._drop(name, v)]

    def drop_version(self, name: str, version_id: str) -> bool:
        """Delete one version that is not live (e.g. a failed re-index)."""
        _check_name(name)
        if version_id == self.live_version(name):
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"version {version_id} is live for {name!r}: promote another version first",
            )
        if version_id not in self.versions(name):
            return False
        return self._drop(name, version_id)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class EdgeCollectionManager(CollectionManager):
    """Versions as directories under ``root``; the alias is the symlink ``root/<name>``."""

    def __init__(
        self,
        root: Path,
        *,
        upsert_batch: int = 256,
        segment_mb: int = DEFAULT_SEGMENT_MB,
        page_layout: str | None = None,
        payload_cache_points: int = 0,
    ) -> None:
        super().__init__(upsert_batch=upsert_batch, page_layout=page_layout)
        self.root = Path(root)
        self.segment_mb = segment_mb
        self.payload_cache_points = payload_cache_points

    def versions(self, name: str) -> list[str]:
        if not self.root.is_dir():
            return []
        found = []
        for entry in self.root.iterdir():
            version_id = version_of(name, entry.name)
            if version_id is not None and entry.is_dir() and not entry.is_symlink():
                found.append(version_id)
        return sorted(found)

    def live_version(self, name: str) -> str | None:
        alias = self.root / name
        if not alias.is_symlink():
            if alias.exists():
                raise PageSightError(
                    ErrorCode.INDEX_FAILED,
                    Stage.INDEX,
                    f"{alias} is not a version alias (a symlink made by PageSight); move it away",
                )
            return None
        target = Path(os.readlink(alias)).name
        version_id = version_of(name, target)
        if version_id is None:
            raise PageSightError(
                ErrorCode.INDEX_FAILED, Stage.INDEX, f"{alias} points at {target}: not a version"
            )
        return version_id

    def open_version(
        self, name: str, version_id: str, schema: IndexSchema | None = None
    ) -> VectorStore:
        return EdgeVectorStore.open(
            self.root / version_collection(name, version_id),
            self.laid_out(schema),
            upsert_batch=self.upsert_batch,
            segment_mb=self.segment_mb,
            payload_cache_points=self.payload_cache_points,
        )

    def _create(self, name: str, version_id: str, schema: IndexSchema) -> VectorStore:
        return EdgeVectorStore.create(
            self.root / version_collection(name, version_id),
            schema,
            upsert_batch=self.upsert_batch,
            segment_mb=self.segment_mb,
            payload_cache_points=self.payload_cache_points,
        )

    def _check_promotable(self, name: str, version_id: str) -> None:
        directory = self.root / version_collection(name, version_id)
        if not (directory / SCHEMA_FILE).is_file():
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"{directory} is an unfinished index (no {SCHEMA_FILE}); drop it",
            )
        read_schema(directory)

    def _point_alias(self, name: str, version_id: str) -> None:
        # A relative target keeps the index root relocatable (copy/move <data_dir> as a whole).
        staged = self.root / f".{name}.alias-{uuid.uuid4().hex}"
        os.symlink(version_collection(name, version_id), staged)
        try:
            os.replace(staged, self.root / name)
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
        _fsync_directory(self.root)

    def _drop(self, name: str, version_id: str) -> bool:
        directory = self.root / version_collection(name, version_id)
        lock = DirectoryLock(directory)
        if not lock.try_acquire():
            return False  # open in some process: deleting it would pull files from under it
        try:
            shutil.rmtree(directory)
        finally:
            lock.release()
        return True


class QdrantCollectionManager(CollectionManager):
    """Versions as Qdrant collections; the alias is a Qdrant collection alias."""

    def __init__(
        self,
        client: QdrantClient,
        *,
        owns_client: bool = False,
        upsert_batch: int = 256,
        page_layout: str | None = None,
        placement: ClusterPlacement | None = None,
    ) -> None:
        super().__init__(upsert_batch=upsert_batch, page_layout=page_layout)
        self.client = client
        self._owns_client = owns_client
        self.placement = placement

    def versions(self, name: str) -> list[str]:
        found = (version_of(name, c.name) for c in self.client.get_collections().collections)
        return sorted(v for v in found if v is not None)

    def live_version(self, name: str) -> str | None:
        from pagesight.index.qdrant_server import resolve_alias

        target = resolve_alias(self.client, name)
        if target == name:
            if self.client.collection_exists(name):
                raise PageSightError(
                    ErrorCode.INDEX_FAILED,
                    Stage.INDEX,
                    f"{name!r} is a collection, not a version alias; rename it away",
                )
            return None
        version_id = version_of(name, target)
        if version_id is None:
            raise PageSightError(
                ErrorCode.INDEX_FAILED, Stage.INDEX, f"alias {name!r} names {target!r}"
            )
        return version_id

    def open_version(
        self, name: str, version_id: str, schema: IndexSchema | None = None
    ) -> VectorStore:
        from pagesight.index.qdrant_server import QdrantServerStore

        return QdrantServerStore.open(
            self.client,
            version_collection(name, version_id),
            self.laid_out(schema),
            upsert_batch=self.upsert_batch,
        )

    def _create(self, name: str, version_id: str, schema: IndexSchema) -> VectorStore:
        from pagesight.index.qdrant_server import QdrantServerStore

        return QdrantServerStore.create(
            self.client,
            version_collection(name, version_id),
            schema,
            upsert_batch=self.upsert_batch,
            placement=self.placement,
        )

    def _check_promotable(self, name: str, version_id: str) -> None:
        collection = version_collection(name, version_id)
        info = self.client.get_collection(collection)
        IndexSchema.from_metadata(info.config.metadata, f"collection {collection!r}")

    def _point_alias(self, name: str, version_id: str) -> None:
        from qdrant_client import models as qm

        from pagesight.index.qdrant_server import resolve_alias

        operations: list[qm.CreateAliasOperation | qm.DeleteAliasOperation] = []
        if resolve_alias(self.client, name) != name:
            operations.append(qm.DeleteAliasOperation(delete_alias=qm.DeleteAlias(alias_name=name)))
        operations.append(
            qm.CreateAliasOperation(
                create_alias=qm.CreateAlias(
                    collection_name=version_collection(name, version_id), alias_name=name
                )
            )
        )
        self.client.update_collection_aliases(change_aliases_operations=operations)

    def _drop(self, name: str, version_id: str) -> bool:
        return bool(self.client.delete_collection(version_collection(name, version_id)))

    def close(self) -> None:
        if self._owns_client:
            self.client.close()


# -- selection from settings -------------------------------------------------------------------


def index_backend(settings: Settings) -> Literal["edge", "qdrant"]:
    """Which backend the settings select: Qdrant when a URL is set (or forced), else embedded."""
    kind = settings.index.kind
    if kind == "auto":
        return "qdrant" if settings.qdrant_url else "edge"
    if kind == "qdrant" and not settings.qdrant_url:
        raise PageSightError(
            ErrorCode.INDEX_FAILED,
            Stage.INDEX,
            "index kind 'qdrant' needs a server URL: set PAGESIGHT_QDRANT_URL",
        )
    return kind


def edge_root(settings: Settings) -> Path:
    """Directory holding the embedded index versions and aliases."""
    return settings.index.path or settings.data_dir / "index"


def collection_manager(settings: Settings) -> CollectionManager:
    """The manager for the configured backend (it owns any client it creates: close it)."""
    if index_backend(settings) == "qdrant":
        from qdrant_client import QdrantClient

        from pagesight.index.qdrant_server import ClusterPlacement

        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        client = QdrantClient(
            url=settings.qdrant_url,
            api_key=api_key,
            timeout=settings.index.qdrant_timeout_s,
            prefer_grpc=settings.index.qdrant_prefer_grpc,
        )
        return QdrantCollectionManager(
            client,
            owns_client=True,
            upsert_batch=settings.index.upsert_batch,
            page_layout=settings.index.page_layout,
            placement=ClusterPlacement(
                shards=settings.index.qdrant_shards,
                replicas=settings.index.qdrant_replicas,
                full_rows_on_disk=settings.index.qdrant_full_rows_on_disk,
            ),
        )
    return EdgeCollectionManager(
        edge_root(settings),
        upsert_batch=settings.index.upsert_batch,
        segment_mb=settings.index.segment_mb,
        page_layout=settings.index.page_layout,
        payload_cache_points=settings.index.payload_cache_points,
    )


def alias_name(settings: Settings, name: str) -> str:
    """The alias of logical index ``name`` (e.g. "chunks") under the configured prefix."""
    prefix = settings.index.collection_prefix
    return f"{prefix}_{name}" if prefix else name


def open_store(
    settings: Settings,
    name: str,
    schema: IndexSchema | None = None,
    *,
    create: bool = True,
) -> VectorStore:
    """Open the live version of logical index ``name`` (creating the first one if allowed).

    With ``schema`` the stored schema must equal it; without, the stored one is used. The
    returned store owns the manager's client: closing the store closes it.
    """
    manager = collection_manager(settings)
    try:
        store = manager.open_store(alias_name(settings, name), schema, create=create)
    except BaseException:
        manager.close()
        raise
    store.add_close_hook(manager.close)
    return store


def _check_name(name: str) -> None:
    if not _INDEX_NAME.match(name):
        raise ValueError(
            f"bad index name {name!r}: letters and digits, single '-' or '_' between them"
        )


def _fsync_directory(directory: Path) -> None:
    """Persist a rename: without it a power cut can bring back the old symlink."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
