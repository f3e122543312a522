"""Page layouts and the schema version: the stamp's format (version 2, a version-1 stamp read
as such), IndexSchema.with_page_layout / page_layout, the setting reaching the collection
manager, and a re-index that carries a page index written by the previous release (float16,
version-1 stamp) over to a compact layout through versions and the alias."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pagesight.core.errors import PageSightError
from pagesight.core.settings import IndexOptions, Settings
from pagesight.core.types import AccessFilter
from pagesight.index.base import (
    PAGE_LAYOUTS,
    SCHEMA_VERSION,
    IndexPoint,
    IndexSchema,
    pooled_vector_name,
)
from pagesight.index.edge import SCHEMA_FILE, read_schema
from pagesight.index.factory import (
    EdgeCollectionManager,
    collection_manager,
    version_collection,
)
from pagesight.models.pooling import pool_blocks

DIM = 64
GRID = (4, 5)
POOLED = pooled_vector_name("page")
NAME = "pages"
ACCESS = AccessFilter(tenant="acme")


def schema(layout: str = "float16") -> IndexSchema:
    return IndexSchema.for_pages(
        name="page", dim=DIM, model_id="m", pooling="mean-blocks-2x2", layout=layout
    )


def test_layouts_set_both_datatypes_and_are_recognised() -> None:
    for layout, (full, pooled) in PAGE_LAYOUTS.items():
        laid_out = schema(layout)
        assert (laid_out.multivector["page"].datatype, laid_out.multivector[POOLED].datatype) == (
            full,
            pooled,
        )
        assert laid_out.page_layout() == layout
        assert schema().with_page_layout(layout) == laid_out
    # int8 codes of the pooled rows stay in the float layout, go in the turbo ones
    int8 = IndexSchema.for_pages(name="page", dim=DIM, model_id="m", pooled_quantization="int8")
    assert int8.with_page_layout("float16").multivector[POOLED].quantization == "int8"
    assert int8.with_page_layout("turbo8").multivector[POOLED].quantization == "none"
    chunks = IndexSchema.for_text(
        dense_name="d", dense_dim=8, dense_model="m", sparse_name="s", sparse_model="b"
    )
    assert chunks.with_page_layout("turbo4") is chunks
    assert chunks.page_layout() is None
    with pytest.raises(ValueError, match="unknown page layout"):
        chunks.with_page_layout("float8")
    with pytest.raises(ValueError, match="already coded"):
        IndexSchema.for_pages(name="page", dim=DIM, model_id="m").multivector[
            POOLED
        ].model_validate(
            {
                **schema().multivector[POOLED].model_dump(),
                "datatype": "turbo8",
                "quantization": "int8",
            }
        )


def test_the_stamp_carries_its_version() -> None:
    stamp = schema("turbo4").to_metadata()
    assert stamp["pagesight_schema"]["version"] == SCHEMA_VERSION == 2
    old = schema().to_metadata()
    del old["pagesight_schema"]["version"]  # as the previous release wrote it
    read = IndexSchema.from_metadata(old, "old")
    assert read.version == 1
    # same vectors: same index, whatever the stamp's format
    read.require_same(schema(), "old")
    assert read.fingerprint() == schema().fingerprint()
    future = schema().to_metadata()
    future["pagesight_schema"]["version"] = SCHEMA_VERSION + 1
    with pytest.raises(PageSightError, match="unreadable schema"):
        IndexSchema.from_metadata(future, "future")


def test_a_layout_change_asks_for_a_reindex_and_names_the_setting() -> None:
    with pytest.raises(PageSightError) as err:
        schema("float16").require_same(schema("turbo8"), "pages__1")
    message = err.value.message
    assert "stores its page vectors in the 'float16' layout" in message
    assert "'turbo8' layout is configured" in message
    assert "`pagesight reindex`" in message and "PAGESIGHT_INDEX__PAGE_LAYOUT=float16" in message
    # other differences keep the generic message, which lists them
    other_model = IndexSchema.for_pages(
        name="page", dim=DIM, model_id="other", pooling="mean-blocks-2x2", layout="turbo8"
    )
    with pytest.raises(PageSightError, match="model_id stored 'm', requested 'other'"):
        schema("float16").require_same(other_model, "pages__1")


def test_the_setting_reaches_the_collection_manager(tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path).index.page_layout == "float16"
    settings = Settings(data_dir=tmp_path, index=IndexOptions(page_layout="turbo4"))
    manager = collection_manager(settings)
    try:
        assert manager.page_layout == "turbo4"
        assert manager.laid_out(schema()) == schema("turbo4")
        assert manager.laid_out(None) is None
    finally:
        manager.close()


def _pages(rng: np.random.Generator, count: int) -> list[IndexPoint]:
    points = []
    for i in range(count):
        rows = rng.normal(size=(GRID[0] * GRID[1], DIM))
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        pooled = pool_blocks(rows, np.ones(len(rows), dtype=bool), GRID, (2, 2))
        points.append(
            IndexPoint(
                id=f"00000000-0000-0000-0000-{i:012d}",
                multivector={"page": rows.tolist(), POOLED: pooled.tolist()},
                payload={"tenant": "acme", "acl": ["*"], "doc_id": f"d{i}", "version": "v1"},
            )
        )
    return points


def _query(rng: np.random.Generator, page: IndexPoint) -> list[list[float]]:
    rows = np.asarray(page.multivector["page"])[rng.choice(GRID[0] * GRID[1], 5, replace=False)]
    rows = rows + 0.3 * rng.normal(size=rows.shape) / np.sqrt(DIM)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).tolist()


def test_reindex_carries_an_old_float16_index_over_to_a_compact_layout(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    pages = _pages(rng, 30)
    # The previous release: float16 layout, a stamp without a version.
    old_release = EdgeCollectionManager(tmp_path)
    store = old_release.open_store(NAME, schema())
    store.upsert(pages)
    store.close()
    old_version = old_release.live_version(NAME)
    assert old_version is not None
    old_dir = tmp_path / version_collection(NAME, old_version)
    stamp = json.loads((old_dir / SCHEMA_FILE).read_text())
    del stamp["pagesight_schema"]["version"]
    (old_dir / SCHEMA_FILE).write_text(json.dumps(stamp))
    assert read_schema(old_dir).version == 1

    # This release, float16 configured: the old index is read as it is.
    same = EdgeCollectionManager(tmp_path, page_layout="float16")
    query = _query(rng, pages[7])
    with same.open_store(NAME, schema()) as store:
        assert [h.id for h in store.query_two_stage("page", POOLED, query, ACCESS, 1, 5)] == [
            pages[7].id
        ]
        old_rows = store.vectors_of([p.id for p in pages], "page", ACCESS)
        old_payloads = store.retrieve([p.id for p in pages])

    # turbo4 configured: the old version is refused until a re-index writes the new layout.
    compact = EdgeCollectionManager(tmp_path, page_layout="turbo4")
    with pytest.raises(PageSightError, match=r"pagesight reindex"):
        compact.open_store(NAME, schema())
    new_version, new_store = compact.create_version(NAME, schema())
    try:
        assert new_store.schema.page_layout() == "turbo4"
        mask = np.ones(GRID[0] * GRID[1], dtype=bool)
        new_store.upsert(
            [
                IndexPoint(
                    id=pid,
                    multivector={
                        "page": rows.tolist(),
                        POOLED: pool_blocks(rows, mask, GRID, (2, 2)).tolist(),
                    },
                    payload=old_payloads[pid],
                )
                for pid, rows in old_rows.items()
            ]
        )
    finally:
        new_store.close()
    compact.promote(NAME, new_version)
    stored = read_schema(tmp_path / version_collection(NAME, new_version))
    assert (stored.version, stored.page_layout()) == (SCHEMA_VERSION, "turbo4")
    with compact.open_store(NAME, schema()) as store:
        assert store.count() == len(pages)
        assert [h.id for h in store.query_two_stage("page", POOLED, query, ACCESS, 1, 5)] == [
            pages[7].id
        ]
    # A rollback brings the float16 version back: the turbo4 setting refuses it again.
    assert compact.rollback(NAME) == old_version
    with pytest.raises(PageSightError, match="PAGESIGHT_INDEX__PAGE_LAYOUT=float16"):
        compact.open_store(NAME, schema())
