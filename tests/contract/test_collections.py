"""Versioned collections behind an alias (zero-downtime re-index), on both backends.

The same tests run against the embedded manager (version directories + a symlink) and the
Qdrant manager (collections + a Qdrant alias, on qdrant-client's local mode).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.settings import IndexOptions, Settings
from pagesight.core.types import AccessFilter
from pagesight.index.base import DenseVectorSpec, IndexSchema, VectorStore
from pagesight.index.edge import EdgeVectorStore
from pagesight.index.factory import (
    CollectionManager,
    EdgeCollectionManager,
    QdrantCollectionManager,
    alias_name,
    edge_root,
    index_backend,
    new_version_id,
    open_store,
)
from tests.contract.test_vector_store import DIM, SCHEMA, make_point

NAME = "pagesight_chunks"
NEW_SCHEMA = SCHEMA.model_copy(
    update={"dense": {"text": DenseVectorSpec(dim=DIM, model_id="better-model")}}
)


@pytest.fixture(params=["edge", "qdrant"])
def manager(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CollectionManager]:
    if request.param == "edge":
        mgr: CollectionManager = EdgeCollectionManager(tmp_path / "index")
    else:
        mgr = QdrantCollectionManager(QdrantClient(location=":memory:"), owns_client=True)
    yield mgr
    mgr.close()


def fill(store: VectorStore, text: str, n: int = 3) -> None:
    store.upsert(
        [make_point(f"c{i}", dense=[1.0] * DIM, text=text, version=text) for i in range(n)]
    )


def texts(store: VectorStore) -> set[str]:
    hits = store.query_dense("text", [1.0] * DIM, AccessFilter(tenant="acme"), 10)
    return {h.payload["text"] for h in hits}


def test_first_open_creates_and_promotes_a_version(manager: CollectionManager) -> None:
    assert manager.live_version(NAME) is None
    with pytest.raises(PageSightError) as missing:
        manager.open_store(NAME, SCHEMA, create=False)
    assert missing.value.code == ErrorCode.NOT_FOUND

    store = manager.open_store(NAME, SCHEMA)
    fill(store, "first")
    live = manager.live_version(NAME)
    assert live is not None and manager.versions(NAME) == [live]
    assert store.collection == f"{NAME}__{live}"
    store.close()

    again = manager.open_store(NAME, SCHEMA, create=False)
    assert again.collection == f"{NAME}__{live}" and texts(again) == {"first"}
    again.close()


def test_reindex_promote_rollback_and_drop(manager: CollectionManager) -> None:
    first = manager.open_store(NAME, SCHEMA)
    fill(first, "first")
    first_version = manager.live_version(NAME)

    # Re-index with a new model into a new version while the first keeps serving.
    second_version, second = manager.create_version(NAME, NEW_SCHEMA)
    fill(second, "second")
    assert manager.live_version(NAME) == first_version
    with pytest.raises(PageSightError, match="different schema"):
        manager.open_store(NAME, NEW_SCHEMA)  # the live one still has the old model
    manager.promote(NAME, second_version)
    assert manager.live_version(NAME) == second_version
    assert texts(first) == {"first"}  # an open store stays on the version it opened
    second.close()

    with pytest.raises(PageSightError, match="different schema") as mismatch:
        manager.open_store(NAME, SCHEMA)
    assert mismatch.value.code == ErrorCode.INDEX_FAILED
    live = manager.open_store(NAME, NEW_SCHEMA)
    assert texts(live) == {"second"}
    live.close()
    first.close()

    assert manager.rollback(NAME) == first_version
    rolled = manager.open_store(NAME, SCHEMA)
    assert texts(rolled) == {"first"}
    rolled.close()
    with pytest.raises(PageSightError, match="no version older"):
        manager.rollback(NAME)

    # Forward again, add a third version, then drop all but one older version.
    manager.promote(NAME, second_version)
    third_version, third = manager.create_version(NAME, NEW_SCHEMA)
    third.close()
    manager.promote(NAME, third_version)
    assert manager.versions(NAME) == [first_version, second_version, third_version]
    assert manager.drop_old(NAME, keep=1) == [first_version]
    assert manager.versions(NAME) == [second_version, third_version]
    with pytest.raises(PageSightError, match="is live"):
        manager.drop_version(NAME, third_version)
    assert manager.drop_old(NAME, keep=0) == [second_version]
    assert manager.versions(NAME) == [third_version]


def test_unknown_versions_cannot_be_promoted(manager: CollectionManager) -> None:
    manager.open_store(NAME, SCHEMA).close()
    with pytest.raises(PageSightError) as err:
        manager.promote(NAME, "20000101000000000000")
    assert err.value.code == ErrorCode.NOT_FOUND
    with pytest.raises(ValueError, match="bad index name"):
        manager.open_store("bad__name", SCHEMA)


def test_newer_unpromoted_versions_survive_drop_old(manager: CollectionManager) -> None:
    manager.open_store(NAME, SCHEMA).close()
    building, store = manager.create_version(NAME, NEW_SCHEMA)
    store.close()
    assert manager.drop_old(NAME, keep=0) == []
    assert building in manager.versions(NAME)


def test_edge_alias_is_an_atomic_relative_symlink(tmp_path: Path) -> None:
    manager = EdgeCollectionManager(tmp_path / "index")
    manager.open_store(NAME, SCHEMA).close()
    alias = tmp_path / "index" / NAME
    assert alias.is_symlink() and not os.path.isabs(os.readlink(alias))
    version, store = manager.create_version(NAME, SCHEMA)
    store.close()
    manager.promote(NAME, version)
    assert os.readlink(alias) == f"{NAME}__{version}"
    assert sorted(p.name for p in alias.parent.iterdir() if p.name.startswith(".")) == []


def test_edge_drop_old_skips_a_version_open_elsewhere(tmp_path: Path) -> None:
    manager = EdgeCollectionManager(tmp_path / "index")
    old = manager.open_store(NAME, SCHEMA)  # keeps the old version open (and locked)
    version, store = manager.create_version(NAME, SCHEMA)
    store.close()
    manager.promote(NAME, version)
    assert manager.drop_old(NAME, keep=0) == []
    old.close()
    assert len(manager.drop_old(NAME, keep=0)) == 1


def test_version_ids_increase_even_within_one_microsecond() -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    first = new_version_id([], now=moment)
    assert first == "20300102030405000006"
    second = new_version_id([first], now=moment)
    assert second == "20300102030405000007"
    assert new_version_id(["20991231235959999999"], now=moment) == "21000101000000000000"


def test_settings_select_the_backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PAGESIGHT_QDRANT_URL", raising=False)
    settings = Settings(data_dir=tmp_path / "var")
    assert index_backend(settings) == "edge"
    assert edge_root(settings) == tmp_path / "var" / "index"
    assert alias_name(settings, "chunks") == "pagesight_chunks"

    monkeypatch.setenv("PAGESIGHT_QDRANT_URL", "http://qdrant:6333")
    monkeypatch.setenv("PAGESIGHT_QDRANT_API_KEY", "s3cret")
    monkeypatch.setenv("PAGESIGHT_INDEX__COLLECTION_PREFIX", "tenant-a")
    remote = Settings()
    assert index_backend(remote) == "qdrant"
    assert remote.qdrant_api_key is not None
    assert remote.qdrant_api_key.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(remote)
    assert alias_name(remote, "chunks") == "tenant-a_chunks"
    assert index_backend(Settings(index=IndexOptions(kind="edge"))) == "edge"  # forced

    forced = Settings(qdrant_url=None, index=IndexOptions(kind="qdrant"))
    with pytest.raises(PageSightError, match="PAGESIGHT_QDRANT_URL"):
        index_backend(forced)


def test_open_store_from_settings(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "var", qdrant_url=None)
    store = open_store(settings, "chunks", SCHEMA)
    assert isinstance(store, EdgeVectorStore)
    fill(store, "x")
    store.close()
    alias = tmp_path / "var" / "index" / "pagesight_chunks"
    assert alias.is_symlink()
    with open_store(settings, "chunks") as reopened:  # schema from the index itself
        assert reopened.schema == SCHEMA and reopened.count() == 3
    with pytest.raises(PageSightError, match="different schema"):
        open_store(
            settings, "chunks", IndexSchema(dense={"text": DenseVectorSpec(dim=3, model_id="m")})
        )
    # the failed open left nothing locked
    open_store(settings, "chunks", SCHEMA).close()
