"""A new Qdrant collection version lies on the cluster as the settings say: shards and replicas
as configured, a page collection's full rows memory-mapped and its pooled first stage in RAM.

qdrant-client's local mode keeps the vectors' parameters but drops the cluster ones, so the
client below records what ``create_collection`` was asked for, then lets the local mode create
it: the vectors' side is read back from the collection itself."""

from __future__ import annotations

from typing import Any

import pytest
import qdrant_client
from qdrant_client import QdrantClient

from pagesight.core.settings import Settings
from pagesight.core.settings_index import IndexOptions
from pagesight.index.base import IndexSchema
from pagesight.index.factory import QdrantCollectionManager, collection_manager
from pagesight.index.qdrant_server import ClusterPlacement
from pagesight.index.schema import pooled_vector_name

PAGES = IndexSchema.for_pages(name="page-colqwen", dim=8, model_id="tiny")


class RecordingClient(QdrantClient):
    """Local mode that remembers each ``create_collection`` call's keyword arguments."""

    def __init__(self) -> None:
        super().__init__(location=":memory:")
        self.created: dict[str, dict[str, Any]] = {}

    def create_collection(self, collection_name: str, **kwargs: Any) -> bool:
        self.created[collection_name] = kwargs
        return bool(super().create_collection(collection_name, **kwargs))


def _created(placement: ClusterPlacement | None) -> tuple[dict[str, Any], dict[str, Any]]:
    client = RecordingClient()
    with QdrantCollectionManager(client, owns_client=True, placement=placement) as manager:
        _, store = manager.create_version("pagesight_pages", PAGES)
        (name,) = client.created
        vectors = client.get_collection(name).config.params.vectors
        store.close()
    assert isinstance(vectors, dict)
    on_disk = {vector: params.on_disk for vector, params in vectors.items()}
    return client.created[name], on_disk


def test_shards_and_replicas_reach_the_new_collection() -> None:
    asked, _ = _created(ClusterPlacement(shards=40, replicas=2))
    assert (asked["shard_number"], asked["replication_factor"]) == (40, 2)


def test_without_settings_the_server_decides() -> None:
    asked, on_disk = _created(None)
    assert (asked["shard_number"], asked["replication_factor"]) == (None, None)
    assert on_disk == {"page-colqwen": True, pooled_vector_name("page-colqwen"): False}


def test_full_rows_can_stay_in_ram() -> None:
    _, on_disk = _created(ClusterPlacement(full_rows_on_disk=False))
    assert not any(on_disk.values())


def test_settings_name_the_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGESIGHT_INDEX__QDRANT_SHARDS", "12")
    monkeypatch.setenv("PAGESIGHT_INDEX__QDRANT_REPLICAS", "3")
    monkeypatch.setenv("PAGESIGHT_INDEX__QDRANT_FULL_ROWS_ON_DISK", "false")
    index = Settings().index
    assert (index.qdrant_shards, index.qdrant_replicas, index.qdrant_full_rows_on_disk) == (
        12,
        3,
        False,
    )
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        IndexOptions(qdrant_shards=0)
    # the server's manager carries them (no server here: its client is the local mode)
    monkeypatch.setattr(qdrant_client, "QdrantClient", lambda **_: QdrantClient(":memory:"))
    with collection_manager(Settings(qdrant_url="http://qdrant:6333")) as manager:
        assert isinstance(manager, QdrantCollectionManager)
        assert manager.placement == ClusterPlacement(shards=12, replicas=3, full_rows_on_disk=False)
