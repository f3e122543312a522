"""The answer step's candidate search: retrieved pages -> passages with their full text.

Search hits carry snippets only; an answer needs each chunk's whole text, its elements and its
boxes on the page. :class:`PassageSearch` is a :data:`pagesight.core.protocols.CandidateSearch` over
a page search (a :class:`pagesight.query.retrieval.Retriever`, or the
:class:`pagesight.query.multistep.MultiStepSearch` over one, which also serves route ``agentic``)
and the chunk index; corrective retrieval wraps it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

from pagesight.core.ids import point_id
from pagesight.core.types import (
    AccessFilter,
    BBox,
    Candidates,
    Passage,
    RouteName,
    SearchResult,
    TextSpan,
    source_name,
)
from pagesight.index.base import VectorStore


class PageSearch(Protocol):
    """What ranks pages for a query: :meth:`pagesight.query.retrieval.Retriever.search` and
    :meth:`pagesight.query.multistep.MultiStepSearch.search` have this signature."""

    def search(
        self,
        query: str,
        access: AccessFilter,
        route: RouteName = ...,
        top_k: int = ...,
        trace_id: str | None = ...,
    ) -> SearchResult: ...


def spans_from_payload(payload: Mapping[str, Any]) -> list[TextSpan]:
    """A chunk payload's ``spans`` (``[[start, end, page, x0, y0, x1, y1], ...]``, written by
    :func:`pagesight.ingestion.ingest.span_payload`); entries that do not fit the chunk's text are
    skipped, and chunks indexed before spans existed have none."""
    length = len(str(payload.get("text", "")))
    out: list[TextSpan] = []
    for entry in payload.get("spans") or []:
        try:
            start, end, page, x0, y0, x1, y1 = entry
            span = TextSpan(
                start=int(start),
                end=int(end),
                page_number=int(page),
                bbox=BBox.of((x0, y0, x1, y1)),
            )
        except (TypeError, ValueError):
            continue
        if span.start < span.end <= length:
            out.append(span)
    return sorted(out, key=lambda span: span.start)


def passage_from_payload(payload: Mapping[str, Any], page_number: int, score: float) -> Passage:
    """A :class:`Passage` from a chunk's index payload (keys ``text``, ``doc_id``,
    ``element_ids``, ``bboxes`` as ``[[page, [x0, y0, x1, y1]], ...]``, ``spans`` as
    ``[[start, end, page, x0, y0, x1, y1], ...]``, ``section_path``, ``title``, ``source_uri``,
    ``chunk_id``), keeping only the boxes on ``page_number`` but the spans of every page."""
    return Passage(
        chunk_id=str(payload.get("chunk_id", "")),
        doc_id=str(payload["doc_id"]),
        page_number=page_number,
        text=str(payload.get("text", "")),
        score=float(score),
        element_ids=[str(e) for e in payload.get("element_ids") or []],
        bboxes=[BBox.of(box) for page, box in payload.get("bboxes") or [] if page == page_number],
        section_path=[str(s) for s in payload.get("section_path") or []],
        title=payload.get("title"),
        spans=spans_from_payload(payload),
        source_name=source_name(payload.get("source_uri")),
    )


class PassageSearch:
    """``(query, access, route, limit)`` -> the retriever's pages, each with its chunks' full
    text, best page first, chunks in the page's order; and the search's trace, which the
    answer's trace extends.

    The passage score answers read is the dense route's cosine (the best chunk's on that page),
    the embedded profile's confidence (a fused RRF score only says where a page ranked); NaN
    where the dense route did not score the page or skipped the query's language.
    """

    def __init__(self, retriever: PageSearch, store: VectorStore) -> None:
        self.retriever = retriever
        self.store = store

    def __call__(
        self, query: str, access: AccessFilter, route: RouteName, limit: int
    ) -> Candidates:
        result = self.retriever.search(query, access, route, limit)
        ids = {
            point_id(access.tenant, chunk_id): chunk_id
            for hit in result.hits
            for chunk_id in hit.chunk_ids
            if chunk_id
        }
        payloads = self.store.retrieve(list(ids), access) if ids else {}
        by_chunk = {ids[pid]: payload for pid, payload in payloads.items() if pid in ids}
        passages = [
            passage_from_payload(
                by_chunk[chunk_id], hit.page_number, hit.route_scores.get("dense", math.nan)
            )
            for hit in result.hits
            for chunk_id in hit.chunk_ids
            if chunk_id in by_chunk
        ][:limit]
        return Candidates(passages=passages, trace=result.trace)
