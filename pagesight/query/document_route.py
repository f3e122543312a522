"""The ``document`` route: a query that names its document ("Globex's FY2022 capex", "J&J's
US sales", "the 2022 annual report") is steered to it (issue 34).

Over a corpus, finding the document costs more than finding the page: a question about one
company's cash flow statement matches every filing's. When the query names documents
(:class:`~pagesight.query.document_identity.IdentityIndex`), this route

- ranks the pages of those documents by the query's words (one BM25 query scoped to them,
  the keyword route's encoded query reused), fused like any other route under its weight;
- puts them first among the documents the structure routes resolve in
  (:attr:`~pagesight.query.routes.Leading.documents`), and hands them to the reference route
  (:attr:`~pagesight.query.routes.RouteContext.named_documents`), which then resolves "page
  17" or "Note 7" in them only;
- lists what it recognised in the trace (``doc:<id> name 'Globex, Inc.'``).

A query that names no document costs one dictionary look-up per word. Matches are checked
against the caller's access exactly as search is: a document the caller may not see is never
recognised.
"""

from __future__ import annotations

from pagesight.core.document import DocumentState
from pagesight.core.types import AccessFilter, Document
from pagesight.index.base import VectorStore
from pagesight.index.vectors import SPARSE_VECTOR
from pagesight.query.document_identity import DocumentMention
from pagesight.query.routes import (
    CANDIDATE_FIELDS,
    BaseRoute,
    RouteContext,
    RouteResult,
    page_item,
    split_rows,
)
from pagesight.query.structure_cache import CachedStructures
from pagesight.query.structure_search import page_ranking

DOCUMENT_ROUTE = "document"


class DocumentRoute(BaseRoute):
    """Pages of the documents the query names (module doc); runs first of the routes that
    read the fusion so far, and only when a document is named."""

    name = DOCUMENT_ROUTE
    reads_fusion = True

    def __init__(self, chunk_store: VectorStore, structures: CachedStructures) -> None:
        self.chunk_store = chunk_store
        self.structures = structures

    def named(
        self, query: str, access: AccessFilter, limit: int, file_names: bool = True
    ) -> list[DocumentMention]:
        """The documents ``query`` names that ``access`` may see."""
        if access.doc_ids is not None and len(access.doc_ids) == 1:
            return []  # a search of one document: nothing to find
        index, documents = self.structures.identity_index(access.tenant)
        if not len(index):
            return []

        def admitted(doc_id: str) -> bool:
            document: Document | None = documents.get(doc_id)
            return (
                document is not None
                and document.state == DocumentState.READY  # a MISSING one has nothing to find
                and access.admits_document(document)
                and (access.doc_ids is None or doc_id in access.doc_ids)
            )

        return index.mentions(query, admitted, limit, file_names)

    def search(self, context: RouteContext) -> RouteResult | None:
        options = context.options
        mentions = self.named(
            context.query, context.access, options.document_matches, options.document_file_names
        )
        if not mentions:
            return None
        doc_ids = [m.doc_id for m in mentions]
        context.named_documents = doc_ids
        if context.leading is not None:
            context.leading.documents = [
                *doc_ids,
                *(d for d in context.leading.documents if d not in doc_ids),
            ]
        query = context.sparse_query
        if query is None:
            return RouteResult(candidates=[(m.describe(), m.score) for m in mentions])
        scoped = context.access.model_copy(update={"doc_ids": doc_ids})
        pool, _ = split_rows(
            self.chunk_store.query_sparse(
                SPARSE_VECTOR, query, scoped, options.page_candidates, CANDIDATE_FIELDS
            )
        )
        pages = page_ranking(pool)[: context.limit]
        return RouteResult(
            pages=pages,
            candidates=[
                *((m.describe(), m.score) for m in mentions),
                *((page_item(key), score) for key, score in pages),
            ],
            payloads=[(h.id, h.payload) for h in pool],
        )
