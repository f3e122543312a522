"""What an index collection is stamped with: its vector names, kinds, dimensions, distances and
models (:class:`IndexSchema`), and the payload fields every backend indexes.

Part of the vector-store interface (:mod:`pagesight.index.base`, which re-exports these names).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagesight.core.errors import ErrorCode, PageSightError, Stage

# -- payload contract --------------------------------------------------------------------------

#: Payload fields with a keyword index: the access filter and the per-document operations use
#: them on every call, so a server must not scan payloads to evaluate them.
KEYWORD_INDEX_FIELDS = ("tenant", "acl", "doc_id", "version", "kinds")
#: Payload fields with a float (range) index.
FLOAT_INDEX_FIELDS = ("valid_until",)
#: The field a multi-tenant server partitions by (Qdrant's ``is_tenant`` keyword index).
TENANT_FIELD = "tenant"

#: Key under which the schema is stored (collection metadata, or the edge schema file).
SCHEMA_METADATA_KEY = "pagesight_schema"

DistanceName = Literal["cosine", "dot", "euclid"]


# -- schema ------------------------------------------------------------------------------------


class DenseVectorSpec(BaseModel):
    """One named dense vector: one embedding per point from one model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dim: int = Field(ge=1)
    distance: DistanceName = "cosine"
    model_id: str = Field(min_length=1, description="embedding model; a change means re-index")


class SparseVectorSpec(BaseModel):
    """One named sparse vector (BM25 term weights); the index applies IDF at query time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_id: str = Field(
        min_length=1, description="tokenizer and weighting: term ids depend on it"
    )
    modifier: Literal["idf", "none"] = "idf"


class MultiVectorSpec(BaseModel):
    """One named multi-vector (e.g. ColQwen2 page patches) scored by late interaction.

    The defaults are what ColPali-style page vectors want: MaxSim, float16 storage (half the
    memory for ~1.4x time, STACK-FACTS) and no HNSW graph, because a graph over single patch
    vectors is useless for MaxSim: a smaller pooled multi-vector is the first stage instead.

    A *pooled* spec (the first stage of :meth:`VectorStore.query_two_stage`) names the full
    multi-vector it is derived from in ``pooled_from`` and how in ``pooling`` (e.g.
    ``"mean-rows-cols"``, :data:`pagesight.models.pooling.ROWS_COLS`); both are stamped so that
    changing the pooling means a re-index. By convention its name is the full one plus
    :data:`POOLED_SUFFIX` (``page-colqwen`` + ``page-colqwen-pooled``), see
    :meth:`IndexSchema.for_pages`. ``quantization="int8"`` (pooled specs only: the full
    vectors are the exact stage) adds scalar int8 codes of the vectors, kept in RAM, that a
    quantized first stage scores instead of the floats.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    dim: int = Field(ge=1)
    model_id: str = Field(min_length=1)
    distance: DistanceName = "cosine"
    comparator: Literal["max_sim"] = "max_sim"
    datatype: Literal["float32", "float16"] = "float16"
    hnsw: bool = False
    quantization: Literal["none", "int8"] = "none"
    pooled_from: str | None = Field(
        default=None, description="the full multi-vector this first-stage vector pools"
    )
    pooling: str | None = Field(
        default=None, description="how it was pooled; a change means re-index"
    )

    @model_validator(mode="after")
    def _pooled(self) -> MultiVectorSpec:
        if (self.pooled_from is None) != (self.pooling is None):
            raise ValueError("a pooled multi-vector needs both pooled_from and pooling")
        if self.quantization != "none" and self.pooled_from is None:
            # The full vectors are the exact stage (query_multivector, the two-stage rerank);
            # approximate scores there would change results, not just their cost.
            raise ValueError("only a pooled (first-stage) multi-vector can be quantized")
        return self


#: A pooled first-stage multi-vector is named after its full one plus this suffix.
POOLED_SUFFIX = "-pooled"


def pooled_vector_name(name: str) -> str:
    """The conventional name of the pooled first stage of multi-vector ``name``."""
    return f"{name}{POOLED_SUFFIX}"


_VECTOR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class IndexSchema(BaseModel):
    """Collection-level facts stamped at creation and checked on every open.

    Ids, dimensions, distances and model names decide what a stored vector means; opening an
    index with different ones would silently compare incompatible vectors, so a mismatch is an
    error that asks for a re-index into a new collection (DESIGN.md section 2).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id_scheme: str = Field(default="v1", description="how point ids derive from content")
    dense: dict[str, DenseVectorSpec] = Field(default_factory=dict)
    sparse: dict[str, SparseVectorSpec] = Field(default_factory=dict)
    multivector: dict[str, MultiVectorSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> IndexSchema:
        names = [*self.dense, *self.sparse, *self.multivector]
        if not names:
            raise ValueError("an index schema needs at least one vector")
        if len(set(names)) != len(names):
            raise ValueError(f"vector names must be unique across kinds: {names}")
        for name in names:
            if not _VECTOR_NAME.match(name):
                raise ValueError(f"bad vector name {name!r}: letters, digits, '_', '.', '-'")
        for name, spec in self.multivector.items():
            if spec.pooled_from is None:
                continue
            full = self.multivector.get(spec.pooled_from)
            if full is None or full.pooled_from is not None:
                raise ValueError(
                    f"pooled multi-vector {name!r} pools {spec.pooled_from!r}, "
                    "which is not a full multi-vector of this schema"
                )
            if (full.dim, full.distance) != (spec.dim, spec.distance):
                raise ValueError(
                    f"pooled multi-vector {name!r} must have the dim and distance of "
                    f"{spec.pooled_from!r}: the same query rows score both"
                )
        return self

    def pooled_of(self, name: str) -> list[str]:
        """The pooled first-stage multi-vectors derived from multi-vector ``name``."""
        return [n for n, spec in self.multivector.items() if spec.pooled_from == name]

    def differences(self, other: IndexSchema) -> list[str]:
        """Human-readable differences from ``other`` (``self`` = stored, ``other`` = requested)."""
        out: list[str] = []
        if self.id_scheme != other.id_scheme:
            out.append(f"id_scheme: stored {self.id_scheme!r}, requested {other.id_scheme!r}")
        for kind in ("dense", "sparse", "multivector"):
            stored: dict[str, BaseModel] = getattr(self, kind)
            wanted: dict[str, BaseModel] = getattr(other, kind)
            for name in sorted(stored.keys() - wanted.keys()):
                out.append(f"{kind} vector {name!r}: stored but not requested")
            for name in sorted(wanted.keys() - stored.keys()):
                out.append(f"{kind} vector {name!r}: requested but not stored")
            for name in sorted(stored.keys() & wanted.keys()):
                have, want = stored[name].model_dump(), wanted[name].model_dump()
                for field in have:
                    if have[field] != want[field]:
                        out.append(
                            f"{kind} vector {name!r}: {field} stored {have[field]!r}, "
                            f"requested {want[field]!r}"
                        )
        return out

    def require_same(self, requested: IndexSchema, where: str) -> None:
        """Raise INDEX_FAILED naming every difference of this stored schema from ``requested``."""
        diffs = self.differences(requested)
        if diffs:
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"index {where} was built with a different schema ({'; '.join(diffs)}); "
                "re-index into a new collection version (and promote it) to use the new one",
            )

    @classmethod
    def for_text(
        cls,
        *,
        dense_name: str,
        dense_dim: int,
        dense_model: str,
        sparse_name: str,
        sparse_model: str,
        id_scheme: str = "v1",
    ) -> IndexSchema:
        """The schema of a chunk collection: one cosine dense vector and one IDF sparse vector."""
        return cls(
            id_scheme=id_scheme,
            dense={dense_name: DenseVectorSpec(dim=dense_dim, model_id=dense_model)},
            sparse={sparse_name: SparseVectorSpec(model_id=sparse_model)},
        )

    @classmethod
    def for_pages(
        cls,
        *,
        name: str,
        dim: int,
        model_id: str,
        pooling: str = "mean-rows-cols",
        pooled_quantization: Literal["none", "int8"] = "none",
        id_scheme: str = "v1",
    ) -> IndexSchema:
        """The schema of a page collection: full page multi-vectors plus their pooled first stage.

        ``name`` holds every row of a page (float16, exact MaxSim, no graph); ``name`` +
        :data:`POOLED_SUFFIX` holds the ``pooling`` of its image patches (``"mean-rows-cols"``
        = :data:`pagesight.models.pooling.ROWS_COLS`). The pooled vectors stay float32: they are ~55
        rows instead of ~750, and the engine's MaxSim scan of them was ~1.4x faster on float32
        than on float16 (10k pages of 55 rows: 164 vs 232 ms on two cores). Neither has an HNSW
        graph: a graph over multi-vectors compares pooled sets pairwise while building (~2
        minutes for 2k pages of 55 rows on two cores), and the first stage is a flat scan of the
        pooled rows anyway; bench/bench_maxsim.py measures what that costs.
        """
        multivector = {
            name: MultiVectorSpec(dim=dim, model_id=model_id),
            pooled_vector_name(name): MultiVectorSpec(
                dim=dim,
                model_id=model_id,
                datatype="float32",
                quantization=pooled_quantization,
                pooled_from=name,
                pooling=pooling,
            ),
        }
        return cls(id_scheme=id_scheme, multivector=multivector)

    def fingerprint(self) -> str:
        """A short, stable hash of the schema, e.g. for traces and cache keys."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def to_metadata(self) -> dict[str, Any]:
        return {SCHEMA_METADATA_KEY: self.model_dump(mode="json")}

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any] | None, where: str) -> IndexSchema:
        if not metadata or SCHEMA_METADATA_KEY not in metadata:
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"{where} carries no PageSight index schema: it was not created by PageSight",
            )
        try:
            return cls.model_validate(metadata[SCHEMA_METADATA_KEY])
        except ValueError as exc:
            raise PageSightError(
                ErrorCode.INDEX_FAILED, Stage.INDEX, f"{where} has an unreadable schema: {exc}"
            ) from exc
