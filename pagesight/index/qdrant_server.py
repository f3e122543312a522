"""The server backend: a Qdrant collection through qdrant-client.

Production passes ``QdrantClient(url=...)`` (``PAGESIGHT_QDRANT_URL``); tests pass the client's
local mode (``path=`` or ``":memory:"``), which speaks the same API in pure Python.

The schema lives in the collection's own metadata (``create_collection(metadata=...)``, Qdrant
server >= 1.16, and qdrant-client's local mode), so it travels with the collection through
snapshots and cannot drift from it. A server that silently drops metadata is detected right
after creation rather than on the next open.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from qdrant_client import QdrantClient
from qdrant_client import models as qm

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.types import SparseVector
from pagesight.index.base import (
    FLOAT_INDEX_FIELDS,
    KEYWORD_INDEX_FIELDS,
    TENANT_FIELD,
    IndexPoint,
    IndexSchema,
    QueryVector,
    ScoredPoint,
    Selection,
    StoredPoint,
    TwoStage,
    VectorStore,
)

_DISTANCES = {
    "cosine": qm.Distance.COSINE,
    "dot": qm.Distance.DOT,
    "euclid": qm.Distance.EUCLID,
}
#: turbo8/turbo4 (the compact page layouts, IndexSchema.with_page_layout) need a server that
#: knows TurboQuant storage; an older one refuses the collection when it is created.
_DATATYPES = {
    "float32": qm.Datatype.FLOAT32,
    "float16": qm.Datatype.FLOAT16,
    "turbo8": qm.Datatype.TURBO8,
    "turbo4": qm.Datatype.TURBO4,
}
#: Scalar int8 codes kept in RAM; the 0.99 quantile clips outliers so they don't waste range.
_INT8 = qm.ScalarQuantization(
    scalar=qm.ScalarQuantizationConfig(type=qm.ScalarType.INT8, quantile=0.99, always_ram=True)
)

# qdrant-client's local mode keeps no payload indexes and says so on every create; the server
# builds them. The filters are the same either way.
_LOCAL_INDEX_WARNING = "Payload indexes have no effect in the local Qdrant"


@dataclass(frozen=True)
class ClusterPlacement:
    """How a new collection lies on a Qdrant cluster (``PAGESIGHT_INDEX__QDRANT_*``).

    ``shards`` and ``replicas`` are fixed when a version is created (the server's defaults, 1
    and 1, where None); a re-index writes a new version, so changing them takes one. Nested
    prefetches run on each shard, so the page cascade keeps its 1,000 and 200 pages per shard
    and its recall follows the pages a shard holds, not the collection's (README, "Sizing a
    cluster"). ``full_rows_on_disk`` memory-maps the full multi-vectors, which only the exact
    rerank reads, a few hundred pages a query, while the pooled first stage, which every query
    scans, stays in RAM; the embedded engine lays its segments out the same way.
    """

    shards: int | None = None
    replicas: int | None = None
    full_rows_on_disk: bool = True


def collection_config(
    schema: IndexSchema, placement: ClusterPlacement | None = None
) -> tuple[dict[str, qm.VectorParams], dict[str, qm.SparseVectorParams]]:
    """Named dense (and multi-vector) params and sparse params for ``create_collection``."""
    on_disk = (placement or ClusterPlacement()).full_rows_on_disk
    vectors = {
        name: qm.VectorParams(size=spec.dim, distance=_DISTANCES[spec.distance])
        for name, spec in schema.dense.items()
    }
    for name, mspec in schema.multivector.items():
        vectors[name] = qm.VectorParams(
            size=mspec.dim,
            distance=_DISTANCES[mspec.distance],
            multivector_config=qm.MultiVectorConfig(comparator=qm.MultiVectorComparator.MAX_SIM),
            datatype=_DATATYPES[mspec.datatype],
            hnsw_config=None if mspec.hnsw else qm.HnswConfigDiff(m=0),
            quantization_config=_INT8 if mspec.quantization == "int8" else None,
            on_disk=on_disk and mspec.pooled_from is None,
        )
    sparse = {
        name: qm.SparseVectorParams(
            modifier=qm.Modifier.IDF if spec.modifier == "idf" else qm.Modifier.NONE
        )
        for name, spec in schema.sparse.items()
    }
    return vectors, sparse


def qdrant_filter(selection: Selection) -> qm.Filter | None:
    """The one translation of a :class:`Selection` into a Qdrant server filter."""
    must: list[Any] = []
    if selection.tenant is not None:
        must.append(qm.FieldCondition(key="tenant", match=qm.MatchValue(value=selection.tenant)))
    if selection.acl_any is not None:
        must.append(qm.FieldCondition(key="acl", match=qm.MatchAny(any=list(selection.acl_any))))
    if selection.valid_at is not None:
        # is_empty matches an absent field, null and []: "valid forever".
        must.append(
            qm.Filter(
                should=[
                    qm.IsEmptyCondition(is_empty=qm.PayloadField(key="valid_until")),
                    qm.FieldCondition(key="valid_until", range=qm.Range(gte=selection.valid_at)),
                ]
            )
        )
    if selection.doc_ids is not None:
        must.append(qm.FieldCondition(key="doc_id", match=qm.MatchAny(any=list(selection.doc_ids))))
    if selection.ids is not None:
        must.append(qm.HasIdCondition(has_id=list(selection.ids)))
    must_not: list[Any] = []
    if selection.not_version is not None:
        must_not.append(
            qm.FieldCondition(key="version", match=qm.MatchValue(value=selection.not_version))
        )
    if not must and not must_not:
        return None
    return qm.Filter(must=must or None, must_not=must_not or None)


class QdrantServerStore(VectorStore):
    """A :class:`VectorStore` on one Qdrant collection. Use :meth:`create` / :meth:`open`.

    The store is bound to a physical collection: opening through an alias resolves it once, so
    an alias switch during a long-lived store never mixes two versions' schemas.
    """

    def __init__(
        self,
        client: QdrantClient,
        collection: str,
        schema: IndexSchema,
        *,
        upsert_batch: int = 256,
        scroll_page: int = 1024,
    ) -> None:
        super().__init__(schema, upsert_batch=upsert_batch, scroll_page=scroll_page)
        self._client = client
        self._collection = collection

    @classmethod
    def create(
        cls,
        client: QdrantClient,
        collection: str,
        schema: IndexSchema,
        *,
        upsert_batch: int = 256,
        scroll_page: int = 1024,
        placement: ClusterPlacement | None = None,
    ) -> QdrantServerStore:
        """Create collection ``collection`` with the schema's vectors, payload indexes and stamp,
        laid out on the cluster as ``placement`` says."""
        if client.collection_exists(collection):
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"cannot create collection {collection!r}: it already exists",
            )
        placement = placement or ClusterPlacement()
        vectors, sparse = collection_config(schema, placement)
        try:
            client.create_collection(
                collection,
                vectors_config=vectors,
                sparse_vectors_config=sparse or None,
                shard_number=placement.shards,
                replication_factor=placement.replicas,
                metadata=schema.to_metadata(),
            )
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=_LOCAL_INDEX_WARNING)
                for field in KEYWORD_INDEX_FIELDS:
                    client.create_payload_index(
                        collection,
                        field,
                        qm.KeywordIndexParams(
                            type=qm.KeywordIndexType.KEYWORD, is_tenant=field == TENANT_FIELD
                        ),
                        wait=True,
                    )
                for field in FLOAT_INDEX_FIELDS:
                    client.create_payload_index(
                        collection, field, qm.PayloadSchemaType.FLOAT, wait=True
                    )
            stored = client.get_collection(collection).config.metadata
        except Exception as exc:
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"cannot create collection {collection!r}: {type(exc).__name__}: {exc}",
            ) from exc
        if IndexSchema.from_metadata(stored, f"new collection {collection!r}") != schema:
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"the Qdrant server did not keep the schema of {collection!r} in its metadata "
                "(collection metadata needs Qdrant >= 1.16)",
            )
        return cls(client, collection, schema, upsert_batch=upsert_batch, scroll_page=scroll_page)

    @classmethod
    def open(
        cls,
        client: QdrantClient,
        collection: str,
        schema: IndexSchema | None = None,
        *,
        upsert_batch: int = 256,
        scroll_page: int = 1024,
    ) -> QdrantServerStore:
        """Open a collection or alias; with ``schema``, the stored schema must equal it."""
        try:
            physical = resolve_alias(client, collection)
            exists = client.collection_exists(physical)
            metadata = client.get_collection(physical).config.metadata if exists else None
        except Exception as exc:
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"cannot read collection {collection!r}: {type(exc).__name__}: {exc}",
            ) from exc
        if not exists:
            raise PageSightError(
                ErrorCode.NOT_FOUND, Stage.INDEX, f"no Qdrant collection {collection!r}"
            )
        where = f"collection {physical!r}"
        stored = IndexSchema.from_metadata(metadata, where)
        if schema is not None:
            stored.require_same(schema, where)
        return cls(client, physical, stored, upsert_batch=upsert_batch, scroll_page=scroll_page)

    @property
    def collection(self) -> str:
        return self._collection

    @property
    def location(self) -> str:
        return f"qdrant collection {self._collection!r}"

    # -- primitives --

    def _upsert(self, points: Sequence[IndexPoint]) -> None:
        structs = []
        for point in points:
            vectors: dict[str, Any] = dict(point.dense)
            vectors.update(point.multivector)
            for name, sparse in point.sparse.items():
                vectors[name] = qm.SparseVector(
                    indices=list(sparse.indices), values=list(sparse.values)
                )
            structs.append(qm.PointStruct(id=point.id, vector=vectors, payload=point.payload))
        self._client.upsert(self._collection, points=structs, wait=True)

    def _delete(self, selection: Selection) -> None:
        flt = qdrant_filter(selection)
        if flt is None:  # never "delete everything" by accident
            raise ValueError("refusing to delete with an empty selection")
        self._client.delete(
            self._collection, points_selector=qm.FilterSelector(filter=flt), wait=True
        )

    def _search(
        self,
        name: str,
        query: QueryVector,
        selection: Selection,
        limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredPoint]:
        vector: Any = (
            qm.SparseVector(indices=list(query.indices), values=list(query.values))
            if isinstance(query, SparseVector)
            else query
        )
        response = self._client.query_points(
            self._collection,
            query=vector,
            using=name,
            query_filter=qdrant_filter(selection),
            limit=limit,
            with_payload=True if fields is None else list(fields),
            with_vectors=False,
        )
        return [
            ScoredPoint(id=str(p.id), score=float(p.score), payload=p.payload or {})
            for p in response.points
        ]

    def _search_two_stage(
        self, stage: TwoStage, rows: list[list[float]], selection: Selection, limit: int
    ) -> list[ScoredPoint]:
        flt = qdrant_filter(selection)
        # stage 0 and 1 score the same pooled vector, on its int8 codes or not
        pooled_params = qm.SearchParams(
            quantization=qm.QuantizationSearchParams(
                ignore=not stage.quantized_first_stage, rescore=False
            )
        )
        coarse = (
            qm.Prefetch(
                query=stage.coarse_query,
                using=stage.pooled,
                limit=stage.coarse_limit,
                filter=flt,
                params=pooled_params,
            )
            if stage.coarse_query
            else None
        )
        first_stage = qm.Prefetch(
            prefetch=coarse,
            query=rows,
            using=stage.pooled,
            limit=stage.prefetch,
            filter=flt,
            params=pooled_params,
        )
        response = self._client.query_points(
            self._collection,
            prefetch=first_stage,
            query=rows,
            using=stage.full,
            query_filter=flt,
            limit=limit,
            with_payload=True,
            with_vectors=False,
        )
        return [
            ScoredPoint(id=str(p.id), score=float(p.score), payload=p.payload or {})
            for p in response.points
        ]

    def _multivectors(self, ids: list[str], name: str) -> dict[str, list[list[float]]]:
        records = self._client.retrieve(
            self._collection, ids=ids, with_payload=False, with_vectors=[name]
        )
        out: dict[str, list[list[float]]] = {}
        for record in records:
            vectors = record.vector
            if isinstance(vectors, dict) and name in vectors:
                rows = vectors[name]
                out[str(record.id)] = [[float(v) for v in row] for row in rows]  # type: ignore[union-attr]
        return out

    def _scroll_multivectors(
        self, selection: Selection, name: str
    ) -> Iterator[tuple[str, list[list[float]]]]:
        # A filtered scroll, not retrieve(ids): retrieve takes no filter.
        for record in self._scroll_records(selection, False, [name]):
            vectors = record.vector
            if isinstance(vectors, dict) and name in vectors:
                # ``name`` is a multi-vector of the schema (checked by vectors_of).
                yield str(record.id), cast("list[list[float]]", vectors[name])

    def _scroll(self, selection: Selection, fields: list[str] | None) -> Iterator[StoredPoint]:
        with_payload: bool | list[str] = True if fields is None else list(fields)
        for record in self._scroll_records(selection, with_payload, False):
            yield StoredPoint(id=str(record.id), payload=record.payload or {})

    def _scroll_records(
        self,
        selection: Selection,
        with_payload: bool | list[str],
        with_vectors: bool | list[str],
    ) -> Iterator[Any]:
        """Every record ``selection`` matches, a page of ``scroll_page`` at a time."""
        flt = qdrant_filter(selection)
        offset: Any = None
        while True:
            records, offset = self._client.scroll(
                self._collection,
                scroll_filter=flt,
                limit=self._scroll_page,
                offset=offset,
                with_payload=with_payload,
                with_vectors=with_vectors,
            )
            yield from records
            if offset is None:
                return

    def _count(self, selection: Selection) -> int:
        result = self._client.count(
            self._collection, count_filter=qdrant_filter(selection), exact=True
        )
        return int(result.count)

    def _flush(self) -> None:
        # Every write above waits for the server's acknowledgement (wait=True, WAL-backed).
        return None

    def _close(self) -> None:
        # The client may serve other stores (a CollectionManager's); its owner closes it,
        # or a close hook does when this store was handed the client (pagesight.index.factory).
        return None


def resolve_alias(client: QdrantClient, name: str) -> str:
    """The collection an alias points to, or ``name`` itself when it is not an alias."""
    for alias in client.get_aliases().aliases:
        if alias.alias_name == name:
            return str(alias.collection_name)
    return name
