"""What a vector store writes, reads back and selects: points (:class:`IndexPoint`, which checks
the access fields of the payload contract in :mod:`pagesight.index.base`), hits, and the
backend-neutral
:class:`Selection` that every backend turns into its own filter in exactly one function.

Part of the vector-store interface (:mod:`pagesight.index.base`, which re-exports these names).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator

from pagesight.core.types import EVERYONE, AccessFilter, SparseVector

# -- points ------------------------------------------------------------------------------------


class IndexPoint(BaseModel):
    """One point to write: a chunk (dense + sparse) or, later, a page (multi-vector + pooled)."""

    id: str = Field(description="a UUID string, e.g. pagesight.core.ids.point_id(tenant, key)")
    dense: dict[str, list[float]] = Field(default_factory=dict)
    sparse: dict[str, SparseVector] = Field(default_factory=dict)
    multivector: dict[str, list[list[float]]] = Field(default_factory=dict)
    payload: dict[str, Any]

    @field_validator("id")
    @classmethod
    def _uuid(cls, value: str) -> str:
        # Qdrant accepts unsigned integers or UUIDs; canonical form keeps ids comparable.
        return str(uuid.UUID(value))

    @field_validator("payload")
    @classmethod
    def _access_fields(cls, payload: dict[str, Any]) -> dict[str, Any]:
        # A point without these would be invisible to (or worse, mis-filtered for) every query.
        for key in ("tenant", "doc_id", "version"):
            if not isinstance(payload.get(key), str) or not payload[key]:
                raise ValueError(f"payload[{key!r}] must be a non-empty string")
        acl = payload.get("acl")
        if not isinstance(acl, list) or not all(isinstance(p, str) for p in acl):
            raise ValueError("payload['acl'] must be a list of principal strings")
        valid_until = payload.get("valid_until")
        if valid_until is not None and (
            isinstance(valid_until, bool) or not isinstance(valid_until, int | float)
        ):
            raise ValueError("payload['valid_until'] must be epoch seconds (float) or None")
        return payload


@dataclass(frozen=True, slots=True)
class StoredPoint:
    """A point read back by id or by scrolling: its id and payload."""

    id: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ScoredPoint:
    """One hit of a ranked query; ``score`` is the backend's raw similarity (higher is better)."""

    id: str
    score: float
    payload: dict[str, Any]


# -- selections (the backend-neutral filter) ---------------------------------------------------


def epoch_seconds(moment: datetime | None) -> float:
    """``moment`` as epoch seconds; ``None`` means now.

    Naive datetimes are read as local time, exactly as ``datetime.timestamp()`` reads them when
    ingestion stamps ``valid_until``, so both sides of the comparison agree.
    """
    return time.time() if moment is None else moment.timestamp()


@dataclass(frozen=True)
class Selection:
    """Which points an operation touches, before translation into a backend filter.

    Every field left ``None`` is no constraint. Each backend has exactly one function that
    turns a selection into its filter, so access rules cannot drift between query paths.
    """

    tenant: str | None = None
    #: the point's ``acl`` must contain one of these (already including :data:`EVERYONE`)
    acl_any: tuple[str, ...] | None = None
    #: the point's ``valid_until`` must be null/absent or at least this (epoch seconds)
    valid_at: float | None = None
    doc_ids: tuple[str, ...] | None = None
    ids: tuple[str, ...] | None = None
    #: exclude points whose ``version`` equals this (delete all but the kept version)
    not_version: str | None = None

    @classmethod
    def visible_to(cls, access: AccessFilter) -> Selection:
        """What ``access`` may see: its tenant, its ACL (unless ``principals`` is None), what is
        still valid at ``access.now`` (the current time when ``now`` is None), its ``doc_ids``."""
        acl_any = None
        if access.principals is not None:
            acl_any = tuple(dict.fromkeys([*access.principals, EVERYONE]))
        return cls(
            tenant=access.tenant,
            acl_any=acl_any,
            valid_at=epoch_seconds(access.now),
            doc_ids=None if access.doc_ids is None else tuple(access.doc_ids),
        )

    @property
    def matches_nothing(self) -> bool:
        """An empty id or document list selects no point; backends never see such a filter."""
        return self.doc_ids == () or self.ids == ()

    def with_ids(self, ids: Sequence[str]) -> Selection:
        return replace(self, ids=tuple(ids))


@dataclass(frozen=True)
class TwoStage:
    """A resolved two-stage MaxSim query plan, handed to the backends."""

    full: str
    pooled: str
    prefetch: int
    #: score the first stage on the pooled vector's int8 codes, not rescored
    quantized_first_stage: bool
    #: an optional stage 0: these rows (a summary of the query) against the pooled vector,
    #: keeping ``coarse_limit`` points for the first stage
    coarse_query: list[list[float]] | None = None
    coarse_limit: int = 0
