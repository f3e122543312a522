"""The one vector-store interface over every backend, and the schema each index is stamped with.

:class:`VectorStore` is here; the schema (:class:`IndexSchema` and its vector specs) is in
:mod:`pagesight.index.schema`, points, hits and selections in :mod:`pagesight.index.points`; both
are re-exported here, so callers import everything from this module.

Callers (ingestion, retrieval) see :class:`VectorStore` only; the embedded engine
(:mod:`pagesight.index.edge`) and a Qdrant server (:mod:`pagesight.index.qdrant_server`) implement
it, the way qdrant-client offers one API for its local and remote modes. Fusion is not done here:
each query returns one ranked list, so the caller can fuse them itself and trace every route's
scores.

Payload contract (every point; the backends index the fields marked *)
-----------------------------------------------------------------------
Access and lifecycle fields, checked by :class:`IndexPoint` because retrieval filters on them:

- ``tenant`` * (str): the only tenant that can ever see the point.
- ``acl`` * (list[str]): principals allowed to read it; :data:`pagesight.core.types.EVERYONE`
  (``"*"``)
  lets every principal of the tenant read it; an empty list leaves it to ``principals=None``
  callers (tenant administrators, batch jobs).
- ``doc_id`` * (str) and ``version`` * (str, sha256 of the file): a changed file is written as
  new points, then ``delete_document(..., keep_version=new)`` removes every older point.
- ``valid_until`` * (float epoch seconds, or null/absent = forever): expired points are invisible.

Content fields (not checked here; what retrieval and citations read back):
``page_numbers`` (list[int], 1-based), ``kinds`` * (list[str],
:class:`pagesight.core.types.ElementKind` values), ``section_path`` (list[str]), ``element_ids``
(list[str]), ``chunk_id`` (str), ``text`` (str), ``bboxes`` (list of ``[page_number, [x0, y0, x1,
y1]]`` in PDF points), ``parser`` (str or list[str]), ``source_uri`` (str). Other keys are stored as
given.

Access filtering happens inside every query (DESIGN.md section 5: never after retrieval):
:meth:`Selection.visible_to` turns an :class:`pagesight.core.types.AccessFilter` into one
backend-neutral condition set, and each backend translates that into its own filter in exactly one
function.
"""

from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.types import AccessFilter, SparseVector
from pagesight.index.points import (
    IndexPoint,
    ScoredPoint,
    Selection,
    StoredPoint,
    TwoStage,
    epoch_seconds,
)
from pagesight.index.schema import (
    DEFAULT_PAGE_LAYOUT,
    FLOAT_INDEX_FIELDS,
    KEYWORD_INDEX_FIELDS,
    PAGE_LAYOUTS,
    POOLED_SUFFIX,
    SCHEMA_METADATA_KEY,
    SCHEMA_VERSION,
    TENANT_FIELD,
    DenseVectorSpec,
    DistanceName,
    IndexSchema,
    MultiVectorSpec,
    SparseVectorSpec,
    pooled_vector_name,
)

__all__ = [
    "DEFAULT_PAGE_LAYOUT",
    "FLOAT_INDEX_FIELDS",
    "KEYWORD_INDEX_FIELDS",
    "PAGE_LAYOUTS",
    "POOLED_SUFFIX",
    "SCHEMA_METADATA_KEY",
    "SCHEMA_VERSION",
    "TENANT_FIELD",
    "DenseVectorSpec",
    "DistanceName",
    "IndexPoint",
    "IndexSchema",
    "MultiVectorSpec",
    "QueryVector",
    "ScoredPoint",
    "Selection",
    "SparseVectorSpec",
    "StoredPoint",
    "TwoStage",
    "VectorStore",
    "epoch_seconds",
    "pooled_vector_name",
]

log = logging.getLogger(__name__)

# -- the interface -----------------------------------------------------------------------------

QueryVector = list[float] | SparseVector | list[list[float]]


class VectorStore(ABC):
    """One index collection (one physical version), whichever backend holds it.

    Public methods validate against the schema and translate access rules; subclasses implement
    the ``_``-prefixed primitives on one :class:`Selection` each. Backend exceptions surface as
    :class:`PageSightError` with code INDEX_FAILED (stage INDEX for writes, QUERY for reads).
    """

    def __init__(self, schema: IndexSchema, *, upsert_batch: int = 256, scroll_page: int = 1024):
        if upsert_batch < 1 or scroll_page < 1:
            raise ValueError("upsert_batch and scroll_page must be positive")
        self._schema = schema
        self._upsert_batch = upsert_batch
        self._scroll_page = scroll_page
        self._closed = False
        self._close_hooks: list[Callable[[], None]] = []
        self._writes = 0

    # -- identity --

    @property
    def schema(self) -> IndexSchema:
        return self._schema

    @property
    @abstractmethod
    def collection(self) -> str:
        """The physical collection (index version) this store reads and writes; for traces."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the index lives (a path or a server URL), for messages."""

    @property
    def writes(self) -> int:
        """How many writes (upserts and deletes) this object has made: what a cache of what
        the index holds (:mod:`pagesight.query.structure_cache`) compares to notice that this
        process changed it. Writes by other processes are not counted."""
        return self._writes

    # -- writes --

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or overwrite points by id; writing the same points again changes nothing."""
        self._check_open()
        for point in points:
            self._check_point(point)
        try:
            with self._backend_errors(Stage.INDEX, "upsert"):
                for start in range(0, len(points), self._upsert_batch):
                    self._upsert(points[start : start + self._upsert_batch])
        finally:
            self._writes += 1

    def delete_document(self, tenant: str, doc_id: str, keep_version: str | None = None) -> None:
        """Delete every point of ``doc_id`` in ``tenant``, except those of ``keep_version``.

        Ingesting a changed file upserts the new version's points first and then calls this
        with ``keep_version`` = the new version, so readers never see the document vanish.
        """
        self._check_open()
        if not tenant or not doc_id:
            raise ValueError("delete_document needs a tenant and a doc_id")
        selection = Selection(tenant=tenant, doc_ids=(doc_id,), not_version=keep_version)
        try:
            with self._backend_errors(Stage.INDEX, "delete"):
                self._delete(selection)
        finally:
            self._writes += 1

    def delete_points(self, tenant: str, doc_id: str, keep: set[str]) -> None:
        """Delete every point of ``doc_id`` in ``tenant`` whose id is not in ``keep``: what a
        re-parse of the same version leaves behind when it makes fewer points."""
        self._check_open()
        if not tenant or not doc_id:
            raise ValueError("delete_points needs a tenant and a doc_id")
        try:
            with self._backend_errors(Stage.INDEX, "delete"):
                stale = [
                    point.id
                    for point in self._scroll(
                        Selection(tenant=tenant, doc_ids=(doc_id,)), ["doc_id"]
                    )
                    if point.id not in keep
                ]
                for start in range(0, len(stale), self._upsert_batch):
                    selection = Selection(tenant=tenant, doc_ids=(doc_id,)).with_ids(
                        stale[start : start + self._upsert_batch]
                    )
                    self._delete(selection)
        finally:
            self._writes += 1

    def flush(self) -> None:
        """Make every acknowledged write durable (a no-op where the backend already is)."""
        self._check_open()
        with self._backend_errors(Stage.INDEX, "flush"):
            self._flush()

    def optimize(self) -> None:
        """Merge segments and build indexes now (after a bulk load); servers do it themselves."""
        self._check_open()

    def close(self) -> None:
        """Flush and release the index (and, for a store that owns it, the client). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            with self._backend_errors(Stage.INDEX, "close"):
                self._close()
        finally:
            hooks, self._close_hooks = self._close_hooks, []
            for hook in hooks:
                hook()

    def add_close_hook(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` after the store closes (e.g. close a client the store was handed)."""
        self._close_hooks.append(hook)

    # -- reads --

    def query_dense(
        self,
        name: str,
        vector: Sequence[float],
        access: AccessFilter,
        limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredPoint]:
        """Nearest points to ``vector`` on dense vector ``name`` among what ``access`` may see.

        ``fields``: only these payload keys (candidate lists need ids and pages, not texts:
        converting 100 full payloads was a sixth of a text search's time); None = all.
        """
        spec = self._schema.dense.get(name)
        if spec is None:
            raise self._unknown_vector("dense", name, Stage.QUERY)
        query = _finite_row(vector, spec.dim, f"dense query on {name!r}", Stage.QUERY)
        return self._query(name, query, access, limit, fields)

    def query_sparse(
        self,
        name: str,
        vector: SparseVector,
        access: AccessFilter,
        limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredPoint]:
        """Best lexical matches on sparse vector ``name`` (IDF applied by the index);
        ``fields`` as in :meth:`query_dense`."""
        if name not in self._schema.sparse:
            raise self._unknown_vector("sparse", name, Stage.QUERY)
        if not vector.indices:
            self._check_open()
            return []  # no known term: nothing can match, and some backends reject it
        return self._query(name, _sparse(vector, Stage.QUERY), access, limit, fields)

    def query_multivector(
        self,
        name: str,
        vectors: Sequence[Sequence[float]],
        access: AccessFilter,
        limit: int,
        ids: Sequence[str] | None = None,
    ) -> list[ScoredPoint]:
        """Late-interaction (MaxSim) ranking on multi-vector ``name``: an exact full scan.

        ``ids``: score only these points (those ``access`` may see), e.g. to rescore pages
        other routes found. The engine scores the rows where they are stored instead of
        shipping them out: on the embedded engine, 30 pages of 790 x 128 rows took ~7 ms this
        way against ~500 ms for :meth:`vectors_of` plus MaxSim in numpy, because every row
        value crosses the Python binding as a separate float object.
        """
        spec = self._schema.multivector.get(name)
        if spec is None:
            raise self._unknown_vector("multivector", name, Stage.QUERY)
        rows = _finite_rows(vectors, spec.dim, f"multivector query on {name!r}", Stage.QUERY)
        return self._query(name, rows, access, limit, ids=ids)

    def query_two_stage(  # noqa: PLR0913  # each stage's vector name and size
        self,
        multivector_name: str,
        pooled_name: str,
        query_rows: Sequence[Sequence[float]],
        access: AccessFilter,
        limit: int,
        prefetch: int,
        quantized: bool | None = None,
        coarse_query: Sequence[Sequence[float]] | None = None,
        coarse_limit: int | None = None,
    ) -> list[ScoredPoint]:
        """MaxSim ranking in two stages: the pooled first stage, then an exact rerank.

        Stage 1 ranks every visible point by MaxSim of ``query_rows`` against its pooled rows
        (``pooled_name``, ~55 per page instead of ~750) and keeps the best ``prefetch``; stage 2
        scores only those by exact MaxSim on the full rows (``multivector_name``) and returns
        the best ``limit`` with their exact scores. The access filter is applied inside the
        first stage (so an invisible page can never take a candidate slot, nor be returned) and
        again at the top level. With ``prefetch`` at least the number of visible points the
        result equals :meth:`query_multivector`'s.

        ``quantized``: score stage 1 on the pooled vector's int8 codes (None: when the schema
        gives it ``quantization="int8"``; True requires that; False scores the floats). A
        quantized first stage is not rescored on the floats: its only job is to choose
        candidates, and stage 2 rescores every candidate exactly anyway. The embedded engine
        builds the codes when it optimizes a segment (:meth:`optimize` after a bulk load);
        until then it scores the floats.

        ``coarse_query`` (with ``coarse_limit``) adds a stage 0 in front: MaxSim of these few
        rows, a summary of the query (:func:`pagesight.models.pooling.query_centroids`: 3 centroids
        of ~20 rows), against the same pooled vector ranks every visible point and keeps
        ``coarse_limit``; stage 1 then ranks only those with the full query. The flat scan
        over every page is what grows with the collection; making it several times cheaper
        and running the full first stage over ~1,000 pages keeps the cost down with nothing
        more stored (bench_maxsim.py).
        """
        full = self._schema.multivector.get(multivector_name)
        if full is None:
            raise self._unknown_vector("multivector", multivector_name, Stage.QUERY)
        pooled = self._schema.multivector.get(pooled_name)
        if pooled is None:
            raise self._unknown_vector("multivector", pooled_name, Stage.QUERY)
        if pooled.pooled_from != multivector_name:  # the schema guarantees dim and distance
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.QUERY,
                f"multivector {pooled_name!r} of index {self.collection} is not a first stage "
                f"of {multivector_name!r} (its pooled_from is {pooled.pooled_from!r})",
            )
        if prefetch < limit:
            raise ValueError(f"prefetch ({prefetch}) must be at least limit ({limit})")
        coarse_rows = None
        if coarse_query is not None:
            coarse_rows = _finite_rows(
                coarse_query, full.dim, f"stage 0 of {multivector_name!r}", Stage.QUERY
            )
            if coarse_limit is None or coarse_limit < prefetch:
                raise ValueError(
                    f"coarse_limit ({coarse_limit}) must be given and at least prefetch "
                    f"({prefetch})"
                )
        if quantized and pooled.quantization == "none":
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.QUERY,
                f"a quantized first stage was asked for, but {pooled_name!r} of index "
                f"{self.collection} has no quantization (set it in its MultiVectorSpec)",
            )
        use_quantized = pooled.quantization != "none" if quantized is None else quantized
        rows = _finite_rows(
            query_rows, full.dim, f"two-stage query on {multivector_name!r}", Stage.QUERY
        )
        self._check_open()
        if limit < 1:
            raise ValueError(f"limit must be positive, got {limit}")
        selection = Selection.visible_to(access)
        if selection.matches_nothing:
            return []
        stage = TwoStage(
            full=multivector_name,
            pooled=pooled_name,
            prefetch=prefetch,
            quantized_first_stage=use_quantized,
            coarse_query=coarse_rows,
            coarse_limit=coarse_limit or 0,
        )
        with self._backend_errors(Stage.QUERY, f"two-stage query on {multivector_name!r}"):
            return self._search_two_stage(stage, rows, selection, limit)

    def multivectors(self, ids: Sequence[str], name: str) -> dict[str, list[list[float]]]:
        """The stored rows of multi-vector ``name`` of the given points that exist and have it.

        For evidence (which patches of a hit page matched the query); no access filter, so
        call it only with ids a filtered query returned. Values come back as stored (float16
        storage rounds them).
        """
        if name not in self._schema.multivector:
            raise self._unknown_vector("multivector", name, Stage.QUERY)
        self._check_open()
        canonical = list(dict.fromkeys(str(uuid.UUID(i)) for i in ids))
        if not canonical:
            return {}
        with self._backend_errors(Stage.QUERY, f"multivectors {name!r}"):
            return self._multivectors(canonical, name)

    def vectors_of(
        self, ids: Sequence[str], name: str, access: AccessFilter
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The stored rows of multi-vector ``name`` of those ``ids`` that ``access`` may see.

        For scoring pages that a query other than a visual one found (a visual rerank of text
        candidates): unlike :meth:`multivectors`, the access filter travels inside the read,
        as in :meth:`retrieve`, so ids from anywhere can be passed without leaking another
        tenant's, principal's or expired page. Ids that do not exist, are not visible or lack
        ``name`` are absent from the result. Each value is a float32 ``(rows, dim)`` matrix of
        the rows as stored (float16 storage rounds them; cosine storage normalises them).
        """
        if name not in self._schema.multivector:
            raise self._unknown_vector("multivector", name, Stage.QUERY)
        self._check_open()
        canonical = tuple(dict.fromkeys(str(uuid.UUID(i)) for i in ids))
        selection = Selection.visible_to(access).with_ids(canonical)
        if selection.matches_nothing:
            return {}
        with self._backend_errors(Stage.QUERY, f"vectors_of {name!r}"):
            return {
                point: np.asarray(rows, dtype=np.float32)
                for point, rows in self._scroll_multivectors(selection, name)
            }

    def visible_points(
        self, access: AccessFilter, fields: Sequence[str] | None = None
    ) -> list[StoredPoint]:
        """Every point ``access`` may see, in id order; only ``fields`` of the payload if given.

        Narrow it with ``access.doc_ids``: without them it reads a whole tenant. This is how a
        caller that knows pages by (doc_id, page_number) but not their version finds their
        point ids without deriving them, and without seeing what the caller may not.
        """
        self._check_open()
        selection = Selection.visible_to(access)
        if selection.matches_nothing:
            return []
        with self._backend_errors(Stage.QUERY, "visible_points"):
            return list(self._scroll(selection, None if fields is None else list(fields)))

    def retrieve(
        self, ids: Sequence[str], access: AccessFilter | None = None
    ) -> dict[str, dict[str, Any]]:
        """Payloads of the given point ids that exist (and, with ``access``, are visible)."""
        self._check_open()
        canonical = tuple(dict.fromkeys(str(uuid.UUID(i)) for i in ids))
        base = Selection() if access is None else Selection.visible_to(access)
        selection = base.with_ids(canonical)
        if selection.matches_nothing:
            return {}
        with self._backend_errors(Stage.QUERY, "retrieve"):
            return {p.id: p.payload for p in self._scroll(selection, None)}

    def count(self, access: AccessFilter | None = None) -> int:
        """Points visible to ``access``; every point of the collection when ``access`` is None."""
        self._check_open()
        selection = Selection() if access is None else Selection.visible_to(access)
        if selection.matches_nothing:
            return 0
        with self._backend_errors(Stage.QUERY, "count"):
            return self._count(selection)

    def document_versions(self, tenant: str) -> dict[str, str | None]:
        """Every document of ``tenant`` in the index with its version (for sync and idempotency).

        The value is ``None`` when a document has points of more than one version: a replace
        was interrupted between writing the new points and deleting the old ones. ``None``
        never equals a version, so the caller re-ingests the file and the replace completes.
        Scrolls only the ``doc_id`` and ``version`` fields, a page at a time.
        """
        self._check_open()
        versions: dict[str, str | None] = {}
        with self._backend_errors(Stage.QUERY, "document_versions"):
            for point in self._scroll(Selection(tenant=tenant), ["doc_id", "version"]):
                doc_id, version = point.payload.get("doc_id"), point.payload.get("version")
                if not isinstance(doc_id, str):
                    continue
                if doc_id not in versions:
                    versions[doc_id] = version
                elif versions[doc_id] != version:
                    versions[doc_id] = None
        return versions

    def points_of_document(
        self, tenant: str, doc_id: str, fields: Sequence[str] | None = None
    ) -> list[StoredPoint]:
        """Every point of one document of one tenant, whatever its ACL or validity, by id;
        only ``fields`` of the payload if given (a page map needs ``page_numbers`` only: a
        whole payload costs several times more to read)."""
        self._check_open()
        with self._backend_errors(Stage.QUERY, "points_of_document"):
            selection = Selection(tenant=tenant, doc_ids=(doc_id,))
            return list(self._scroll(selection, None if fields is None else list(fields)))

    # -- context manager --

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- backend primitives --

    @abstractmethod
    def _upsert(self, points: Sequence[IndexPoint]) -> None: ...

    @abstractmethod
    def _delete(self, selection: Selection) -> None: ...

    @abstractmethod
    def _search(
        self,
        name: str,
        query: QueryVector,
        selection: Selection,
        limit: int,
        fields: Sequence[str] | None = None,
    ) -> list[ScoredPoint]:
        """Top ``limit`` by ``query`` on vector ``name``; payloads cut to ``fields`` if given."""

    @abstractmethod
    def _search_two_stage(
        self, stage: TwoStage, rows: list[list[float]], selection: Selection, limit: int
    ) -> list[ScoredPoint]:
        """A prefetch of ``stage.prefetch`` on ``stage.pooled`` then exact MaxSim on
        ``stage.full``, with ``selection``'s filter inside the prefetch and at the top level."""

    @abstractmethod
    def _multivectors(self, ids: list[str], name: str) -> dict[str, list[list[float]]]: ...

    @abstractmethod
    def _scroll_multivectors(
        self, selection: Selection, name: str
    ) -> Iterator[tuple[str, list[list[float]]]]:
        """``(id, rows of multi-vector name)`` of every selected point that has it, a page
        (``self._scroll_page``) at a time; ``selection``'s filter is applied inside the read."""

    @abstractmethod
    def _scroll(self, selection: Selection, fields: list[str] | None) -> Iterator[StoredPoint]:
        """All selected points a page (``self._scroll_page``) at a time, in id order; only
        ``fields`` of the payload when given."""

    @abstractmethod
    def _count(self, selection: Selection) -> int: ...

    @abstractmethod
    def _flush(self) -> None: ...

    @abstractmethod
    def _close(self) -> None: ...

    # -- helpers --

    def _query(
        self,
        name: str,
        query: QueryVector,
        access: AccessFilter,
        limit: int,
        fields: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[ScoredPoint]:
        self._check_open()
        if limit < 1:
            raise ValueError(f"limit must be positive, got {limit}")
        selection = Selection.visible_to(access)
        if ids is not None:
            selection = selection.with_ids(list(dict.fromkeys(str(uuid.UUID(i)) for i in ids)))
        if selection.matches_nothing:
            return []
        with self._backend_errors(Stage.QUERY, f"query on {name!r}"):
            return self._search(name, query, selection, limit, fields)

    def _check_open(self) -> None:
        if self._closed:
            raise PageSightError(
                ErrorCode.INDEX_FAILED, Stage.INDEX, f"index {self.location} is closed"
            )

    def _check_point(self, point: IndexPoint) -> None:
        where = f"point {point.id}"
        for name, vector in point.dense.items():
            spec = self._schema.dense.get(name)
            if spec is None:
                raise self._unknown_vector("dense", name, Stage.INDEX)
            _finite_row(vector, spec.dim, f"{where}, dense {name!r}", Stage.INDEX)
        for name, sparse in point.sparse.items():
            if name not in self._schema.sparse:
                raise self._unknown_vector("sparse", name, Stage.INDEX)
            _sparse(sparse, Stage.INDEX)
        for name, rows in point.multivector.items():
            mspec = self._schema.multivector.get(name)
            if mspec is None:
                raise self._unknown_vector("multivector", name, Stage.INDEX)
            _finite_matrix(rows, mspec.dim, f"{where}, multivector {name!r}", Stage.INDEX)
            # A page without its first stage could never be found by query_two_stage, and a
            # first stage without its page would be a candidate with nothing to rerank.
            partners = [mspec.pooled_from] if mspec.pooled_from else self._schema.pooled_of(name)
            for partner in partners:
                if partner not in point.multivector:
                    raise PageSightError(
                        ErrorCode.INDEX_FAILED,
                        Stage.INDEX,
                        f"{where} has multivector {name!r} but not {partner!r}: "
                        "a page's full and pooled vectors are written together",
                    )
        if not (point.dense or point.sparse or point.multivector):
            raise PageSightError(ErrorCode.INDEX_FAILED, Stage.INDEX, f"{where} has no vector")

    def _unknown_vector(self, kind: str, name: str, stage: Stage) -> PageSightError:
        known = sorted(getattr(self._schema, kind))
        return PageSightError(
            ErrorCode.INDEX_FAILED,
            stage,
            f"index {self.collection} has no {kind} vector {name!r} (it has {known})",
        )

    @contextmanager
    def _backend_errors(self, stage: Stage, operation: str) -> Iterator[None]:
        try:
            yield
        except PageSightError:
            raise
        except Exception as exc:
            # The engine's message names files and internals: the log keeps it, the caller
            # (an API response, a job record) gets the operation and the error's type.
            log.exception("%s failed on index %s at %s", operation, self.collection, self.location)
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                stage,
                f"{operation} failed on index {self.collection} ({type(exc).__name__}); "
                "the service log has the details",
            ) from exc


def _finite_row(vector: Sequence[float], dim: int, what: str, stage: Stage) -> list[float]:
    row = np.asarray(vector, dtype=np.float64)
    if row.shape != (dim,):
        raise PageSightError(
            ErrorCode.INDEX_FAILED, stage, f"{what}: expected {dim} values, got shape {row.shape}"
        )
    if not np.isfinite(row).all():
        raise PageSightError(ErrorCode.INDEX_FAILED, stage, f"{what}: NaN or infinite values")
    return [float(v) for v in vector]


def _finite_rows(
    rows: Sequence[Sequence[float]], dim: int, what: str, stage: Stage
) -> list[list[float]]:
    rows_out: list[list[float]] = _finite_matrix(rows, dim, what, stage).tolist()
    return rows_out


def _finite_matrix(
    rows: Sequence[Sequence[float]], dim: int, what: str, stage: Stage
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """``rows`` as a checked float64 matrix (one or more rows of ``dim`` finite values)."""
    matrix = np.asarray(rows, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] != dim:
        raise PageSightError(
            ErrorCode.INDEX_FAILED,
            stage,
            f"{what}: expected one or more rows of {dim} values, got shape {matrix.shape}",
        )
    if not np.isfinite(matrix).all():
        raise PageSightError(ErrorCode.INDEX_FAILED, stage, f"{what}: NaN or infinite values")
    return matrix


def _sparse(vector: SparseVector, stage: Stage) -> SparseVector:
    if len(set(vector.indices)) != len(vector.indices):
        raise PageSightError(ErrorCode.INDEX_FAILED, stage, "sparse vector has duplicate indices")
    if any(i < 0 or i >= 2**32 for i in vector.indices):
        raise PageSightError(ErrorCode.INDEX_FAILED, stage, "sparse index outside [0, 2^32)")
    if not np.isfinite(np.asarray(vector.values, dtype=np.float64)).all():
        raise PageSightError(ErrorCode.INDEX_FAILED, stage, "sparse vector has NaN or inf values")
    return vector
