"""The embedded backend: Qdrant's engine in-process (``qdrant_edge``), one shard per directory.

No server, no network: the default profile on a laptop. One version of an index is a directory::

    <version dir>/
        schema.json   the IndexSchema, written once at creation, checked on every open
        shard/        the qdrant_edge shard (WAL + segments)
        .lock         flock held while a process has the index open

qdrant_edge has no collections and no aliases (:mod:`pagesight.index.factory` versions directories
and swaps a symlink instead) and lets exactly one open handle own a shard. Its own refusal of a
second open is an opaque WAL error, so the store takes an ``flock`` on ``.lock`` first and
turns a conflict into a clear error: one writer per embedded index (DESIGN.md section 5).

The engine has no background optimizer: new points stay in one appendable segment until
:meth:`EdgeVectorStore.optimize`. A page (multi-vector) index seals that segment itself whenever
about ``segment_mb`` of vectors went in, so a large one is several optimized segments that one
query searches in parallel, one per core (see :meth:`EdgeVectorStore._upsert`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, cast

import qdrant_edge as qe

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import IndexOptions
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
from pagesight.index.payload_cache import PayloadCache

SCHEMA_FILE = "schema.json"
#: Vector bytes written since the last seal, saved on flush and close: a batch job that opens
#: the index, adds a few hundred pages and exits must still lead to a seal over many runs.
UNSEALED_FILE = "unsealed.json"
SHARD_DIR = "shard"
LOCK_FILE = ".lock"

_DISTANCES = {
    "cosine": qe.Distance.Cosine,
    "dot": qe.Distance.Dot,
    "euclid": qe.Distance.Euclid,
}
_DATATYPES = {
    "float32": qe.VectorStorageDatatype.Float32,
    "float16": qe.VectorStorageDatatype.Float16,
    "turbo8": qe.VectorStorageDatatype.Turbo8,
    # in the engine's enum, not (yet) in its type stubs
    "turbo4": getattr(qe.VectorStorageDatatype, "Turbo4"),  # noqa: B009
}
#: Bytes a dimension counts towards ``segment_mb`` per datatype. Turbo codes count as float16:
#: a segment's scan time follows its rows more than their bytes, so every page layout seals
#: at the same page count (~2,500 ColQwen2 pages) and a query keeps its parallel segments.
SEAL_BYTES_PER_DIM = {"float32": 4, "float16": 2, "turbo8": 2, "turbo4": 2}
#: Scalar int8 codes kept in RAM; the 0.99 quantile clips outliers so they don't waste range.
_INT8 = qe.ScalarQuantizationConfig(qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Pinned)


class DirectoryLock:
    """An exclusive, non-blocking ``flock`` on ``<dir>/.lock``: who owns an index directory.

    The kernel drops the lock when its process dies, so a crashed ``serve`` never leaves a
    stale lock behind. ``flock`` locks belong to an open file, so a second store in the same
    process conflicts too.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self._file: IO[bytes] | None = None

    def try_acquire(self) -> bool:
        handle = self.path.open("a+b")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._file = handle
        return True

    def acquire(self) -> None:
        if not self.try_acquire():
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"index at {self.path.parent} is open in another process (is `pagesight serve` "
                "running? then send the command to the server) or already open in this one",
            )

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


#: Vector data written before a page index seals its appendable segment (``segment_mb``):
#: ~2,500 ColQwen2 pages, so 10k pages are 4 segments (see EdgeVectorStore._upsert). The
#: setting's default, so a store opened without settings seals where a configured one does.
DEFAULT_SEGMENT_MB: int = IndexOptions.model_fields["segment_mb"].default
#: Segments under this many KB of vectors stay plain when optimized (no graph, no int8 codes).
INDEXING_THRESHOLD_KB = 10_000


def edge_config(schema: IndexSchema, segment_mb: int = DEFAULT_SEGMENT_MB) -> qe.EdgeConfig:
    """The shard configuration a schema asks for (dense: cosine by default; sparse: IDF).

    Full multi-vectors that a pooled stage stands in for (page rows: 750 x 128 float16, ~80 %
    of a page index) are memory-mapped and read on demand (``Memory.Cold``) instead of being
    copied into RAM when the shard loads: a two-stage query reads them only for its ``prefetch``
    candidates, while copying them made every open read the whole index (bench_maxsim, 10k
    pages: 2.9 GB, 3-8 s; 0.9 GB and ~1 s without them). Queries were no slower once the pages
    were cached; :meth:`EdgeVectorStore.open` streams them into the cache in the background.

    ``segment_mb`` caps what the engine's merge step may join (``max_segment_size``), so the
    segments the store seals stay apart and a query searches them in parallel.
    """
    lazy = {spec.pooled_from for spec in schema.multivector.values() if spec.pooled_from}
    vectors: dict[str, qe.EdgeVectorParams] = {
        name: qe.EdgeVectorParams(size=spec.dim, distance=_DISTANCES[spec.distance])
        for name, spec in schema.dense.items()
    }
    for name, mspec in schema.multivector.items():
        vectors[name] = qe.EdgeVectorParams(
            size=mspec.dim,
            distance=_DISTANCES[mspec.distance],
            multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
            datatype=_DATATYPES[mspec.datatype],
            # m=0 disables the graph: MaxSim runs as a scan over a prefiltered candidate set.
            hnsw_config=None
            if mspec.hnsw
            else qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
            quantization_config=_INT8 if mspec.quantization == "int8" else None,
            memory=qe.Memory.Cold if name in lazy else None,
        )
    sparse = {
        name: qe.EdgeSparseVectorParams(
            modifier=qe.Modifier.Idf if spec.modifier == "idf" else None
        )
        for name, spec in schema.sparse.items()
    }
    return qe.EdgeConfig(
        vectors=vectors or None,
        sparse_vectors=sparse or None,
        optimizers=qe.EdgeOptimizersConfig(
            max_segment_size=segment_mb * 1024,
            # a segment below the indexing threshold is never optimized, so it never seals
            indexing_threshold=min(segment_mb * 1024 // 2, INDEXING_THRESHOLD_KB),
        ),
    )


def edge_filter(selection: Selection) -> qe.Filter | None:
    """The one translation of a :class:`Selection` into a qdrant_edge filter."""
    must: list[Any] = []
    if selection.tenant is not None:
        must.append(qe.FieldCondition("tenant", match=qe.MatchValue(selection.tenant)))
    if selection.acl_any is not None:
        must.append(qe.FieldCondition("acl", match=qe.MatchAny(list(selection.acl_any))))
    if selection.valid_at is not None:
        # is_empty matches an absent field, null and []: "valid forever".
        must.append(
            qe.Filter(
                should=[
                    qe.IsEmptyCondition("valid_until"),
                    qe.FieldCondition("valid_until", range=qe.RangeFloat(gte=selection.valid_at)),
                ]
            )
        )
    if selection.doc_ids is not None:
        must.append(qe.FieldCondition("doc_id", match=qe.MatchAny(list(selection.doc_ids))))
    if selection.ids is not None:
        must.append(qe.HasIdCondition(set(selection.ids)))
    must_not: list[Any] = []
    if selection.not_version is not None:
        must_not.append(qe.FieldCondition("version", match=qe.MatchValue(selection.not_version)))
    if not must and not must_not:
        return None
    return qe.Filter(must=must or None, must_not=must_not or None)


class EdgeVectorStore(VectorStore):
    """A :class:`VectorStore` on one qdrant_edge shard directory (see :meth:`create`)."""

    def __init__(
        self,
        path: Path,
        shard: qe.EdgeShard,
        lock: DirectoryLock,
        schema: IndexSchema,
        *,
        upsert_batch: int = 256,
        scroll_page: int = 1024,
        segment_mb: int = DEFAULT_SEGMENT_MB,
        payload_cache_points: int = 0,
    ) -> None:
        super().__init__(schema, upsert_batch=upsert_batch, scroll_page=scroll_page)
        if segment_mb < 1:
            raise ValueError(f"segment_mb must be positive, got {segment_mb}")
        self._path = path
        self._shard = shard
        self._lock = lock
        self._warm_up: _BackgroundRead | None = None
        # Only page indexes seal (see _upsert); a chunk index's seal would build its dense
        # HNSW graph, minutes at the ~170k chunks that fill a segment, all of it GIL-held.
        self._seal_bytes = segment_mb * 1024 * 1024 if schema.multivector else None
        # Vector bytes upserted since the last seal (UNSEALED_FILE carries it across opens).
        saved = _read_json(path / UNSEALED_FILE) or {}
        self._unsealed_bytes = int(saved.get("bytes", 0))
        # This store is the shard's only writer (the lock above), so it can keep what searches
        # read of the candidates' payloads and drop it on its own writes.
        self._payloads = PayloadCache(payload_cache_points)

    @classmethod
    def create(
        cls,
        path: Path,
        schema: IndexSchema,
        *,
        upsert_batch: int = 256,
        scroll_page: int = 1024,
        segment_mb: int = DEFAULT_SEGMENT_MB,
        payload_cache_points: int = 0,
    ) -> EdgeVectorStore:
        """Create a new, empty index in ``path`` (which must not exist or be empty).

        ``segment_mb``: vector data per sealed segment (see :meth:`upsert`); the engine is
        told not to merge segments past it, which holds for the life of the index.
        """
        path = Path(path)
        if path.exists() and any(path.iterdir()):
            raise PageSightError(
                ErrorCode.INDEX_FAILED, Stage.INDEX, f"cannot create an index at {path}: not empty"
            )
        path.mkdir(parents=True, exist_ok=True)
        path = path.resolve()
        lock = DirectoryLock(path)
        lock.acquire()
        shard: qe.EdgeShard | None = None
        try:
            shard = qe.EdgeShard.create(str(path / SHARD_DIR), edge_config(schema, segment_mb))
            for field in KEYWORD_INDEX_FIELDS:
                params = qe.KeywordIndexParams(is_tenant=field == TENANT_FIELD)
                shard.update(qe.UpdateOperation.create_field_index(field, params))
            for field in FLOAT_INDEX_FIELDS:
                shard.update(
                    qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Float)
                )
            shard.flush()
            # Written last: a directory without schema.json is an unfinished creation.
            _write_json_atomically(path / SCHEMA_FILE, schema.to_metadata())
        except BaseException as exc:
            if shard is not None:
                shard.close()
            lock.release()
            shutil.rmtree(path, ignore_errors=True)
            if isinstance(exc, PageSightError | KeyboardInterrupt | SystemExit):
                raise
            raise PageSightError(
                ErrorCode.INDEX_FAILED, Stage.INDEX, f"cannot create an index at {path}: {exc}"
            ) from exc
        return cls(
            path,
            shard,
            lock,
            schema,
            upsert_batch=upsert_batch,
            scroll_page=scroll_page,
            segment_mb=segment_mb,
            payload_cache_points=payload_cache_points,
        )

    @classmethod
    def open(
        cls,
        path: Path,
        schema: IndexSchema | None = None,
        *,
        upsert_batch: int = 256,
        scroll_page: int = 1024,
        segment_mb: int = DEFAULT_SEGMENT_MB,
        payload_cache_points: int = 0,
    ) -> EdgeVectorStore:
        """Open the index in ``path`` (symlinks resolved, so a later alias swap cannot move it).

        With ``schema``, the stored schema must equal it; without, the stored one is used
        (for operations that write no vectors: delete, count, listings).
        """
        path = Path(path).resolve()
        if not (path / SHARD_DIR).is_dir() or not (path / SCHEMA_FILE).is_file():
            raise PageSightError(ErrorCode.NOT_FOUND, Stage.INDEX, f"no PageSight index at {path}")
        stored = IndexSchema.from_metadata(_read_json(path / SCHEMA_FILE), str(path))
        if schema is not None:
            stored.require_same(schema, str(path))
        lock = DirectoryLock(path)
        lock.acquire()
        try:
            loaded, mapped = shard_files(path / SHARD_DIR)
            read_files(loaded)
            shard = qe.EdgeShard.load(str(path / SHARD_DIR))
        except Exception as exc:
            lock.release()
            if "WouldBlock" in str(exc):  # qdrant_edge's own WAL lock
                raise PageSightError(
                    ErrorCode.INDEX_FAILED,
                    Stage.INDEX,
                    f"index at {path} is open in another process (is `pagesight serve` running?)",
                ) from exc
            raise PageSightError(
                ErrorCode.INDEX_FAILED, Stage.INDEX, f"cannot open the index at {path}: {exc}"
            ) from exc
        store = cls(
            path,
            shard,
            lock,
            stored,
            upsert_batch=upsert_batch,
            scroll_page=scroll_page,
            segment_mb=segment_mb,
            payload_cache_points=payload_cache_points,
        )
        # The memory-mapped full rows are not read by the load; streaming them into the page
        # cache now turns the first queries' disk reads (4 KiB faults) into memory hits.
        store._warm_up = _BackgroundRead(mapped) if mapped else None
        return store

    @property
    def collection(self) -> str:
        return self._path.name

    @property
    def location(self) -> str:
        return str(self._path)

    @property
    def path(self) -> Path:
        return self._path

    def optimize(self) -> None:
        """Merge segments and build HNSW/payload indexes now, blocking (after a bulk load).

        This is also when the engine builds int8 codes of quantized vectors: it quantizes a
        segment once it holds more than its indexing threshold of vector data (~20 MB), so
        the newest points of a bulk load may stay unquantized (scored on floats) until more
        follow. The rebuilt segments are flushed before returning, so the work is durable and
        a later ``close`` (e.g. a server handing the index over) does not pay for it: at 10k
        pages that first flush took ~2 s.
        """
        self._check_open()
        with self._backend_errors(Stage.INDEX, "optimize"):
            self._seal()

    def _seal(self) -> None:
        """Optimize the appendable segment into a sealed one (and flush the result)."""
        self._shard.optimize()
        self._shard.flush()
        self._unsealed_bytes = 0
        self._save_unsealed()

    def _save_unsealed(self) -> None:
        if self._seal_bytes is not None:
            _write_json_atomically(self._path / UNSEALED_FILE, {"bytes": self._unsealed_bytes})

    def shard_info(self) -> dict[str, int]:
        """Points, segments and indexed (optimized: graph / quantized) vectors of the shard."""
        self._check_open()
        with self._backend_errors(Stage.QUERY, "shard_info"):
            info = self._shard.info()
        return {
            "points": int(info.points_count),
            "segments": int(info.segments_count),
            "indexed_vectors": int(info.indexed_vectors_count),
        }

    # -- primitives --

    def _upsert(self, points: Sequence[IndexPoint]) -> None:
        records = []
        for point in points:
            vectors: dict[str, Any] = dict(point.dense)
            vectors.update(point.multivector)
            for name, sparse in point.sparse.items():
                vectors[name] = qe.SparseVector(list(sparse.indices), list(sparse.values))
            records.append(qe.Point(point.id, vectors, point.payload))
        self._shard.update(qe.UpdateOperation.upsert_points(records))
        self._payloads.invalidate()
        if self._seal_bytes is None:
            return
        # The engine scans one segment on one core: a 10k-page index in one segment took
        # ~42 ms a two-stage query, in 2 or 4 sealed segments 26-28 ms (bench_maxsim.py, two
        # cores); 10 segments of 1k pages 32 ms (more per-segment work, slower reopen). A
        # seal optimizes only the new segment (~1 s per 1,000 pages) but holds the GIL, so
        # a process that also serves queries stalls that long once per segment.
        self._unsealed_bytes += sum(self._vector_bytes(point) for point in points)
        if self._unsealed_bytes >= self._seal_bytes:
            self._seal()

    def _vector_bytes(self, point: IndexPoint) -> int:
        """What ``point``'s vectors take in storage (the size a segment is sealed at)."""
        size = sum(4 * len(vector) for vector in point.dense.values())
        size += sum(8 * len(sparse.indices) for sparse in point.sparse.values())
        for name, rows in point.multivector.items():
            spec = self._schema.multivector[name]
            size += len(rows) * spec.dim * SEAL_BYTES_PER_DIM[spec.datatype]
        return size

    def _delete(self, selection: Selection) -> None:
        flt = edge_filter(selection)
        if flt is None:  # never "delete everything" by accident
            raise ValueError("refusing to delete with an empty selection")
        self._shard.update(qe.UpdateOperation.delete_points_by_filter(flt))
        self._payloads.invalidate()

    def _search(
        self,
        name: str,
        query: QueryVector,
        selection: Selection,
        limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredPoint]:
        vector = (
            qe.SparseVector(list(query.indices), list(query.values))
            if isinstance(query, SparseVector)
            else query
        )
        # With the cache, the query reads no payload: the cache has it, or one retrieve does.
        cached = tuple(fields) if fields is not None and self._payloads.enabled else None
        generation = self._payloads.generation
        with_payload: bool | qe.PayloadSelector = True
        if cached is not None:
            with_payload = False
        elif fields is not None:
            with_payload = qe.PayloadSelector.Include(list(fields))
        hits = self._shard.query(
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(vector, using=name),
                filter=edge_filter(selection),
                with_payload=with_payload,
                with_vector=False,
            )
        )
        if cached is not None:
            return self._with_cached_payloads(hits, cached, generation)
        return [
            ScoredPoint(id=str(hit.id), score=float(hit.score), payload=hit.payload or {})
            for hit in hits
        ]

    def _with_cached_payloads(
        self, hits: list[Any], fields: tuple[str, ...], generation: int
    ) -> list[ScoredPoint]:
        """``hits`` with their ``fields`` from :class:`PayloadCache` and, for the points it
        lacks, one ``retrieve`` (a point deleted since the query is left out)."""
        ids = [str(hit.id) for hit in hits]
        payloads, missing = self._payloads.get_many(ids, fields)
        if missing:
            records = self._shard.retrieve(
                [hits[i].id for i in missing],
                with_payload=qe.PayloadSelector.Include(list(fields)),
                with_vector=False,
            )
            read = [(str(record.id), record.payload or {}) for record in records]
            self._payloads.put_many(generation, fields, read)
            payloads.update(read)
        return [
            ScoredPoint(id=point_id, score=float(hit.score), payload=payloads[point_id])
            for point_id, hit in zip(ids, hits, strict=True)
            if point_id in payloads
        ]

    def _search_two_stage(
        self, stage: TwoStage, rows: list[list[float]], selection: Selection, limit: int
    ) -> list[ScoredPoint]:
        flt = edge_filter(selection)
        # stage 0 and 1 score the same pooled vector, on its int8 codes or not
        pooled_params = qe.SearchParams(
            quantization=qe.QuantizationSearchParams(
                ignore=not stage.quantized_first_stage, rescore=False
            )
        )
        coarse = (
            [
                qe.Prefetch(
                    limit=stage.coarse_limit,
                    query=qe.Query.Nearest(stage.coarse_query, using=stage.pooled),
                    filter=flt,
                    params=pooled_params,
                )
            ]
            if stage.coarse_query
            else None
        )
        first_stage = qe.Prefetch(
            limit=stage.prefetch,
            query=qe.Query.Nearest(rows, using=stage.pooled),
            prefetches=coarse,
            filter=flt,
            params=pooled_params,
        )
        hits = self._shard.query(
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(rows, using=stage.full),
                prefetches=[first_stage],
                filter=flt,
                with_payload=True,
                with_vector=False,
            )
        )
        return [
            ScoredPoint(id=str(hit.id), score=float(hit.score), payload=hit.payload or {})
            for hit in hits
        ]

    def _multivectors(self, ids: list[str], name: str) -> dict[str, list[list[float]]]:
        point_ids: list[qe.PointId] = list(ids)
        records = self._shard.retrieve(point_ids, with_payload=False, with_vector=[name])
        out: dict[str, list[list[float]]] = {}
        for record in records:
            vectors = record.vector
            rows = vectors.get(name) if isinstance(vectors, dict) else None
            if isinstance(rows, list):
                out[str(record.id)] = [list(row) for row in rows]  # type: ignore[arg-type]
        return out

    def _scroll_multivectors(
        self, selection: Selection, name: str
    ) -> Iterator[tuple[str, list[list[float]]]]:
        # A filtered scroll, not retrieve(ids): the engine's retrieve takes no filter.
        for record in self._scroll_records(selection, False, [name]):
            vectors = record.vector
            rows = vectors.get(name) if isinstance(vectors, dict) else None
            if isinstance(rows, list):
                # ``name`` is a multi-vector of the schema (checked by vectors_of).
                yield str(record.id), cast("list[list[float]]", rows)

    def _scroll(self, selection: Selection, fields: list[str] | None) -> Iterator[StoredPoint]:
        with_payload: bool | qe.PayloadSelector = (
            True if fields is None else qe.PayloadSelector.Include(fields)
        )
        for record in self._scroll_records(selection, with_payload, False):
            yield StoredPoint(id=str(record.id), payload=record.payload or {})

    def _scroll_records(
        self,
        selection: Selection,
        with_payload: bool | qe.PayloadSelector,
        with_vector: bool | list[str],
    ) -> Iterator[Any]:
        """Every record ``selection`` matches, a page of ``scroll_page`` at a time."""
        flt = edge_filter(selection)
        offset: Any = None
        while True:
            records, offset = self._shard.scroll(
                qe.ScrollRequest(
                    offset=offset,
                    limit=self._scroll_page,
                    filter=flt,
                    with_payload=with_payload,
                    with_vector=with_vector,
                )
            )
            yield from records
            if offset is None:
                return

    def _count(self, selection: Selection) -> int:
        return int(self._shard.count(qe.CountRequest(exact=True, filter=edge_filter(selection))))

    def _flush(self) -> None:
        self._shard.flush()
        self._save_unsealed()

    def _close(self) -> None:
        if self._warm_up is not None:
            self._warm_up.stop()
        try:
            self._shard.flush()
            self._save_unsealed()
            self._shard.close()
        finally:
            self._lock.release()


#: Chunk of one sequential read in :func:`read_files` (large enough for the kernel's readahead
#: to stream, small enough to reuse one buffer per reader).
_READ_CHUNK = 8 << 20


def shard_files(directory: Path) -> tuple[list[str], list[str]]:
    """The files of a shard: (those its load copies into RAM, those it memory-maps lazily).

    A vector is mapped lazily when the shard's persisted configuration says ``"memory":
    "cold"`` (see :func:`edge_config`); an unreadable configuration puts every file in the
    first list, which costs time, never correctness. Largest files first.
    """
    config = _read_json(directory / "edge_config.json") or {}
    vectors = config.get("vectors")
    lazy = {
        f"vector_storage-{name}"
        for name, params in (vectors.items() if isinstance(vectors, dict) else ())
        if isinstance(params, dict) and params.get("memory") == "cold"
    }
    loaded: list[tuple[int, str]] = []
    mapped: list[tuple[int, str]] = []
    for root, _dirs, names in os.walk(directory):
        # segments/<segment>/vector_storage-<name>/... holds the vectors of <name>
        parts = Path(root).relative_to(directory).parts
        bucket = mapped if len(parts) > 2 and parts[2] in lazy else loaded
        for name in names:
            path = os.path.join(root, name)
            try:
                bucket.append((os.stat(path).st_size, path))
            except OSError:
                continue
    loaded.sort(reverse=True)
    mapped.sort(reverse=True)
    return [path for _, path in loaded], [path for _, path in mapped]


def read_files(files: Sequence[str], threads: int = 2, stop: threading.Event | None = None) -> int:
    """Read ``files`` once each, sequentially, so that they sit in the page cache.

    Loading a shard copies its in-RAM vector storages out of memory-mapped files; on a cold
    page cache every 4 KiB page of that copy is a page fault that waits for a small readahead
    window, several times slower than streaming the file (~1 GB/s here). The engine also
    drops a shard's pages from the cache when it closes, so every reopen starts cold: a
    10k-page index took 3-5 s to load (6-8 s on a busy machine). A warm cache costs one memory
    copy. Two readers keep the disk busy while one waits; errors are ignored (the load reports
    them). ``stop`` ends the reading early. Returns the bytes read.
    """

    def read(path: str) -> int:
        buffer = bytearray(_READ_CHUNK)
        total = 0
        try:
            with open(path, "rb", buffering=0) as handle:
                while not (stop is not None and stop.is_set()):
                    count = handle.readinto(buffer)
                    if not count:
                        break
                    total += count
        except OSError:
            pass
        return total

    with ThreadPoolExecutor(max(1, threads)) as pool:
        return sum(pool.map(read, files))


class _BackgroundRead:
    """:func:`read_files` in a daemon thread, stopped (within one chunk) by :meth:`stop`."""

    def __init__(self, files: Sequence[str]) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=read_files, args=(files, 1, self._stop), name="edge-warm-up", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def read_schema(path: Path) -> IndexSchema:
    """The schema stored in an edge index directory, without opening (or locking) the shard."""
    return IndexSchema.from_metadata(_read_json(path / SCHEMA_FILE), str(path))


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
