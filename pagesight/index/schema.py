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
#: How a multi-vector's rows are stored. ``turbo8`` / ``turbo4`` are the engine's TurboQuant
#: storage (rows rotated and coded at 8 / 4 bits a dimension plus a norm, ~1 / ~0.5 byte a
#: dimension): a float query is scored against the codes, nothing is kept at float precision.
MultiVectorDatatype = Literal["float32", "float16", "turbo8", "turbo4"]

#: The format of the stamp itself (which fields and values it may hold). Version 2 added this
#: field and the ``turbo8``/``turbo4`` datatypes; a stamp without it is version 1. Code that
#: predates a version refuses the stamp (``extra="forbid"``: "unreadable schema"), so an index
#: written in a newer layout is never read with the wrong storage assumptions.
SCHEMA_VERSION = 2


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
    datatype: MultiVectorDatatype = "float16"
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
        if self.quantization != "none" and self.datatype.startswith("turbo"):
            raise ValueError("a turbo-stored multi-vector is already coded: no int8 codes on it")
        return self


#: A pooled first-stage multi-vector is named after its full one plus this suffix.
POOLED_SUFFIX = "-pooled"


def pooled_vector_name(name: str) -> str:
    """The conventional name of the pooled first stage of multi-vector ``name``."""
    return f"{name}{POOLED_SUFFIX}"


#: Page layouts: how a page collection stores its full rows and its pooled first stage
#: (``PAGESIGHT_INDEX__PAGE_LAYOUT``). The vectors written and read are the same floats in
#: every layout; only their storage differs, so a layout change is a re-index, nothing else.
#:
#: - ``float16``: full rows float16 (~192 KB a ColQwen2 page), pooled rows float32;
#: - ``turbo8``: full rows and pooled rows as 8-bit TurboQuant codes (~99 KB a page);
#: - ``turbo4``: full rows as 4-bit codes (~51 KB a page), pooled rows as 8-bit codes.
#:
#: bench/bench_maxsim.py measures each layout's bytes on disk, speed and recall against exact
#: float MaxSim (README, "Compact page layouts"): at 5k synthetic pages turbo4 recalled 0.937
#: (float16 0.980) and turbo8 reranked ~1.7x slower, so float16 stays the default.
PageLayout = Literal["float16", "turbo8", "turbo4"]
PAGE_LAYOUTS: dict[str, tuple[MultiVectorDatatype, MultiVectorDatatype]] = {
    "float16": ("float16", "float32"),
    "turbo8": ("turbo8", "turbo8"),
    "turbo4": ("turbo4", "turbo8"),
}
#: The layout a page collection gets unless the setting says otherwise.
DEFAULT_PAGE_LAYOUT: PageLayout = "float16"


_VECTOR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class IndexSchema(BaseModel):
    """Collection-level facts stamped at creation and checked on every open.

    Ids, dimensions, distances and model names decide what a stored vector means; opening an
    index with different ones would silently compare incompatible vectors, so a mismatch is an
    error that asks for a re-index into a new collection (DESIGN.md section 2).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(
        default=SCHEMA_VERSION,
        ge=1,
        le=SCHEMA_VERSION,
        description="format of this stamp; absent in a stored stamp means 1",
    )
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

    def page_layout(self) -> str | None:
        """The :data:`PAGE_LAYOUTS` name this schema's page vectors are stored in; None when it
        has no pooled multi-vector (not a page schema) or mixes datatypes no layout names."""
        found: set[str] = set()
        for name, spec in self.multivector.items():
            pooled = self.pooled_of(name)
            if spec.pooled_from is not None or not pooled:
                continue
            pair = {(spec.datatype, self.multivector[p].datatype) for p in pooled}
            found |= {layout for layout, types in PAGE_LAYOUTS.items() if pair == {types}} or {"?"}
        return found.pop() if len(found) == 1 and "?" not in found else None

    def with_page_layout(self, layout: str) -> IndexSchema:
        """This schema with every page vector (a full multi-vector with a pooled first stage,
        and that stage) stored in ``layout``; a schema without page vectors is returned as is.

        A pooled stage's int8 codes are dropped in the turbo layouts (their rows are codes
        already)."""
        if layout not in PAGE_LAYOUTS:
            raise ValueError(f"unknown page layout {layout!r}: one of {sorted(PAGE_LAYOUTS)}")
        full_type, pooled_type = PAGE_LAYOUTS[layout]
        changed: dict[str, MultiVectorSpec] = {}
        for name, spec in self.multivector.items():
            if spec.pooled_from is not None:
                update: dict[str, Any] = {"datatype": pooled_type}
                if pooled_type.startswith("turbo"):
                    update["quantization"] = "none"
                changed[name] = spec.model_copy(update=update)
            elif self.pooled_of(name):
                changed[name] = spec.model_copy(update={"datatype": full_type})
        if not changed:
            return self
        return self.model_copy(update={"multivector": {**self.multivector, **changed}})

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
        if not diffs:
            return
        stored_layout, wanted_layout = self.page_layout(), requested.page_layout()
        if (
            stored_layout is not None
            and wanted_layout is not None
            and stored_layout != wanted_layout
            and not self.with_page_layout(wanted_layout).differences(requested)
        ):
            raise PageSightError(
                ErrorCode.INDEX_FAILED,
                Stage.INDEX,
                f"index {where} stores its page vectors in the {stored_layout!r} layout, but "
                f"the {wanted_layout!r} layout is configured (PAGESIGHT_INDEX__PAGE_LAYOUT): run "
                "`pagesight reindex` to rewrite it in the new layout, or set "
                f"PAGESIGHT_INDEX__PAGE_LAYOUT={stored_layout} to keep using it",
            )
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
        layout: str = DEFAULT_PAGE_LAYOUT,
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

        ``layout`` (:data:`PAGE_LAYOUTS`) sets both datatypes; the default is the float layout
        above.
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
        schema = cls(id_scheme=id_scheme, multivector=multivector)
        return schema if layout == DEFAULT_PAGE_LAYOUT else schema.with_page_layout(layout)

    def fingerprint(self) -> str:
        """A short, stable hash of the schema, e.g. for traces and cache keys.

        The stamp's format ``version`` is left out: the same vectors stamped by an older
        release are the same index."""
        canonical = json.dumps(self.model_dump(mode="json", exclude={"version"}), sort_keys=True)
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
        stamp = metadata[SCHEMA_METADATA_KEY]
        if isinstance(stamp, dict) and "version" not in stamp:
            stamp = {**stamp, "version": 1}  # written before the stamp carried its version
        try:
            return cls.model_validate(stamp)
        except ValueError as exc:
            raise PageSightError(
                ErrorCode.INDEX_FAILED, Stage.INDEX, f"{where} has an unreadable schema: {exc}"
            ) from exc
