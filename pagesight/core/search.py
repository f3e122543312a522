"""What a search is made of and returns: sparse (keyword) vectors, ranked pages, and the
result with its trace."""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field, model_validator

from pagesight.core.document import BBox, source_name
from pagesight.core.traces import RetrievalTrace


class SparseVector(BaseModel):
    """A sparse vector as (index, value) pairs; indices are unique and need not be sorted."""

    indices: list[int] = Field(default_factory=list)
    values: list[float] = Field(default_factory=list)

    @model_validator(mode="after")
    def _aligned(self) -> SparseVector:
        if len(self.indices) != len(self.values):
            raise ValueError("sparse vector indices and values differ in length")
        return self


class PageHit(BaseModel):
    """One page in a ranked result: the unit users see and evaluation scores."""

    doc_id: str
    page_number: int
    page_label: str | None = Field(
        default=None, description="the page's printed label ('17', 'iv'), where known"
    )
    rank: int = Field(ge=1)
    score: float = Field(description="fused score of the page's best candidate")
    route_scores: dict[str, float] = Field(
        default_factory=dict, description="raw score of the best candidate per route"
    )
    chunk_ids: list[str] = Field(default_factory=list)
    element_ids: list[str] = Field(default_factory=list)
    kinds: list[str] = Field(default_factory=list)
    snippet: str = ""
    title: str | None = None
    source_uri: str | None = None
    bboxes: list[BBox] = Field(default_factory=list, description="evidence boxes on this page")

    @computed_field(  # type: ignore[prop-decorator]
        description="the file name: the last component of source_uri, shown next to the title"
    )
    @property
    def source_name(self) -> str | None:
        return source_name(self.source_uri)


class SearchResult(BaseModel):
    hits: list[PageHit]
    trace: RetrievalTrace
