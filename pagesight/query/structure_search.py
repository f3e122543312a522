"""Routes that follow the document rather than its words: a page signal, references, sections.

Chunk routes rank passages; three questions they answer badly are asked often of long reports
and filings (issue 16):

- **Which page, as a whole, matches?** A page whose evidence was split over several chunks has
  no single chunk that ranks high, yet BM25 over whole pages (the evaluation's baseline) finds
  it. :func:`page_ranking` sums each page's chunk BM25 scores with decaying weights (its best
  chunk in full, the next at half, ...), which approximates whole-page scoring from the chunk
  candidates the keyword route already fetched, with no second index.
- **"Page 17", "Figure 3", "Note 7", "the last page"**: :class:`StructureRoutes` parses the
  references (:mod:`pagesight.query.references`) and resolves them against the structure of the
  documents the text routes found most relevant, in that order; a page that does not exist is
  reported in the trace, never guessed.
- **"The cash flow statement", "capex", "return on equity"**: the domain packs' references
  (:mod:`pagesight.query.domains`; the ``finance`` pack's financial statements) that a query
  names go with the references; those its terms only imply rank the statement pages as the
  pack's route (``statement``), weighted on its own; both only in the documents the pack acts
  on, each page by its confidence.
- **"In the Leadership program section"**: the section tree is searchable by its titles; the
  candidate pages inside the best-matching sections are promoted, in the order the text routes
  ranked them (a PageIndex-like descent, lexical, no LLM needed).

Each yields a ranking of pages that fuses with the chunk routes by weighted RRF, like the
visual route: a page's rank is given to every chunk candidate on it. The retriever runs them as
routes of its registry (:mod:`pagesight.query.routes`: ``PageRoute``, ``ReferenceRoute``,
``StatementRoute``, ``SectionRoute``); this module holds what they compute.

The documents' structures come as :class:`~pagesight.query.structure_cache.StructureView`:
from a :class:`~pagesight.query.structure_cache.CachedStructures` (a stack's), read and
prepared once per document version and index version, every reference resolved once per
document version; from any other source, anew on each search.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pagesight.core.protocols import StructureSource
from pagesight.core.types import (
    AccessFilter,
    PageKey,
    ResolvedReference,
    StructuralReference,
    StructureSection,
)
from pagesight.index.base import ScoredPoint
from pagesight.models.text import tokenize
from pagesight.query import domains
from pagesight.query.domains.finance import STATEMENT_ROUTE
from pagesight.query.references import parse_references
from pagesight.query.structure_cache import (
    CachedStructures,
    FreshViews,
    StructureView,
    ViewSource,
)

#: Route names, as traces and ``RetrievalOptions.weights`` spell them.
PAGE_ROUTE = "page"
REFERENCE_ROUTE = "reference"
SECTION_ROUTE = "section"
__all__ = ["PAGE_ROUTE", "REFERENCE_ROUTE", "SECTION_ROUTE", "STATEMENT_ROUTE", "StructureRoutes"]


def page_ranking(hits: Sequence[ScoredPoint], decay: float = 0.5) -> list[tuple[PageKey, float]]:
    """Pages ranked by their chunks' summed scores: the best chunk of a page counts in full,
    the next ``decay`` times, the next ``decay**2`` times, and so on (so one long page with
    many weak matches does not beat a page with one strong match by sheer number)."""
    per_page: dict[PageKey, list[float]] = {}
    for hit in hits:
        doc_id = hit.payload.get("doc_id")
        if doc_id is None:
            continue
        for number in hit.payload.get("page_numbers") or []:
            per_page.setdefault((str(doc_id), int(number)), []).append(hit.score)
    totals = {
        key: sum(score * decay**i for i, score in enumerate(sorted(scores, reverse=True)))
        for key, scores in per_page.items()
    }
    order = {key: i for i, key in enumerate(per_page)}
    ranked = sorted(totals, key=lambda key: (-totals[key], order[key]))
    return [(key, totals[key]) for key in ranked]


def document_order(page_order: Sequence[PageKey], limit: int) -> list[str]:
    """The first ``limit`` distinct documents of a page ranking."""
    docs: list[str] = []
    for doc_id, _ in page_order:
        if doc_id not in docs:
            docs.append(doc_id)
            if len(docs) == limit:
                break
    return docs


@dataclass
class StructureRanking:
    """What a structure route found: pages best first, and (references) the trace entries;
    ``lookup_ms``: the time spent getting the documents' structures (the trace's
    ``structure_lookup``)."""

    pages: list[PageKey]
    references: list[ResolvedReference]
    lookup_ms: float = 0.0
    #: A domain pack's confidence in a page (pages not listed: 1).
    confidence: dict[PageKey, float] = field(default_factory=dict)


class StructureRoutes:
    """The reference and section routes over a :class:`~pagesight.core.protocols.StructureSource`.

    ``documents``: how many of the most relevant documents (by the text routes) a reference or
    a section title is resolved in. A search scoped to one document resolves only there.
    ``tail_documents``: how many candidate documents in all a reference is also confirmed in
    (:meth:`reference_pages`).
    """

    def __init__(
        self,
        structures: StructureSource,
        documents: int = 3,
        pages_per_section: int = 5,
        sections: int = 2,
        tail_documents: int = 20,
    ) -> None:
        self.structures = structures
        self.views: ViewSource = (
            structures if isinstance(structures, CachedStructures) else FreshViews(structures)
        )
        self.documents = documents
        self.tail_documents = tail_documents
        self.pages_per_section = pages_per_section
        self.sections = sections

    @staticmethod
    def references_in(
        query: str, modes: Mapping[str, str] | None = None
    ) -> list[StructuralReference]:
        """The places the query names, then what the domain packs not switched off in
        ``modes`` read in it (the financial statements it names or implies; ``inferred``:
        the pack's route, ``statement``; the rest: route ``reference``)."""
        return [*parse_references(query), *domains.references_in(query, modes)]

    def _views(
        self, access: AccessFilter, doc_ids: Sequence[str], spent: list[float]
    ) -> list[StructureView]:
        """The views of those of ``doc_ids`` that ``access`` may see, in order; the time it
        took is added to ``spent[0]`` (ms)."""
        since = time.perf_counter()
        found = []
        for doc_id in doc_ids:
            view = self.views.view_of(access, doc_id)
            if view is not None:
                found.append(view)
        spent[0] += (time.perf_counter() - since) * 1000
        return found

    def reference_pages(
        self,
        references: Sequence[StructuralReference],
        doc_order: Sequence[str],
        access: AccessFilter,
        page_rank: Mapping[PageKey, int] | None = None,
        modes: Mapping[str, str] | None = None,
    ) -> StructureRanking:
        """Every reference resolved in each of the leading documents, pages of the most
        relevant document first (a financial statement only in the first of them that prints
        one: a question about a statement is about one company's, and the others' statements
        would fill the top of the ranking with look-alikes); then, with ``page_rank`` (the
        candidates of the other routes, ranked), the pages it resolves to in the other
        candidate documents (up to ``tail_documents``) that those routes also found, in their
        order.

        Why the second part: a question such as "According to the chart on page 14, how much
        time was spent with family and friends in 2010?" names no document, and in a large
        corpus its document is often not among the few leading ones; but its page 14 is
        among the candidates its words found, while page 14 of an unrelated document is not.
        A financial statement is left out of it: every filing prints one, and a question
        about one names its company.

        A domain pack's reference (kind ``domain``) resolves only in the documents the pack
        acts on under ``modes`` (``RetrievalOptions.domains``), and its pages carry the pack's
        confidence (:attr:`StructureRanking.confidence`).
        """
        lead = list(doc_order[: self.documents])
        spent = [0.0]
        structures = self._views(access, lead, spent)
        pages: list[PageKey] = []
        confidence: dict[PageKey, float] = {}
        resolved = [_resolve_in(r, structures, modes, confidence) for r in references]
        for structure in structures:  # document-major: the most relevant document's pages first
            for entry in resolved:
                pages.extend(k for k in entry.pages if k[0] == structure.doc_id and k not in pages)
        if page_rank:
            confirmed = self._confirmed_elsewhere(resolved, lead, access, page_rank, spent)
            pages.extend(k for k in confirmed if k not in pages)
        for entry in resolved:
            if entry.pages:
                entry.unresolved = None
            elif not structures:
                entry.unresolved = "no document to resolve it in"
        return StructureRanking(
            pages=pages, references=resolved, lookup_ms=spent[0], confidence=confidence
        )

    def _confirmed_elsewhere(
        self,
        resolved: Sequence[ResolvedReference],
        lead: Sequence[str],
        access: AccessFilter,
        page_rank: Mapping[PageKey, int],
        spent: list[float],
    ) -> list[PageKey]:
        wanted = [e for e in resolved if e.reference.kind != "domain"]
        if not wanted:
            return []
        others = [d for d in document_order(list(page_rank), self.tail_documents) if d not in lead]
        confirmed: list[PageKey] = []
        for structure in self._views(access, others, spent):
            for entry in wanted:
                for number in structure.resolve(entry.reference).pages:
                    key = (structure.doc_id, number)
                    if key not in page_rank:
                        continue
                    if key not in entry.pages:
                        entry.pages.append(key)
                    if key not in confirmed:
                        confirmed.append(key)
        return sorted(confirmed, key=lambda key: page_rank[key])

    def section_pages(
        self,
        query: str,
        doc_order: Sequence[str],
        access: AccessFilter,
        page_rank: Mapping[PageKey, int],
    ) -> StructureRanking:
        """Pages of the sections whose titles best match the query that the text routes also
        found, in their order (``page_rank``): the section's title confirms a candidate; pages
        nothing else found are not added (measured: adding a span's other pages in reading
        order cost page_hit@1 0.61 -> 0.53 on smoke and 0.75 -> 0.49 on the Japanese set)."""
        terms = set(tokenize(query))
        if not terms:
            return StructureRanking(pages=[], references=[])
        spent = [0.0]
        views = self._views(access, doc_order[: self.documents], spent)
        scored: list[tuple[float, int, StructureView, StructureSection]] = []
        for doc_rank, view in enumerate(views):
            for section, title_terms in zip(
                view.structure.sections, view.section_terms(), strict=True
            ):
                score = section_match(terms, section, title_terms)
                if score > 0:
                    scored.append((score, doc_rank, view, section))
        scored.sort(key=lambda item: (-item[0], item[1]))
        pages: list[PageKey] = []
        for _, _, view, section in scored[: self.sections]:
            span = [(view.doc_id, n) for n in range(section.page_start, section.page_end + 1)]
            found = sorted((k for k in span if k in page_rank), key=lambda k: page_rank[k])
            for key in found[: self.pages_per_section]:
                if key not in pages:
                    pages.append(key)
        return StructureRanking(pages=pages, references=[], lookup_ms=spent[0])


def _resolve_in(
    reference: StructuralReference,
    structures: Sequence[StructureView],
    modes: Mapping[str, str] | None,
    confidence: dict[PageKey, float],
) -> ResolvedReference:
    """``reference`` resolved in each of ``structures`` in turn; a domain pack's only where
    the pack acts (:func:`pagesight.query.domains.enabled`) and only in the first document
    that resolves it (one company's statement), its pages' confidences into ``confidence``."""
    entry = ResolvedReference(reference=reference)
    pack = reference.domain if reference.kind == "domain" else None
    for structure in structures:
        if pack is not None and not domains.enabled(pack, structure.structure, modes):
            if entry.unresolved is None:
                entry.unresolved = f"the {pack} pack is off for this document"
            continue
        resolution = structure.resolve(reference)
        keys = [(structure.doc_id, n) for n in resolution.pages]
        entry.pages.extend(keys)
        if not keys and entry.unresolved is None and resolution.reason:
            entry.unresolved = resolution.reason
        if keys and resolution.confidences is not None:
            for key, value in zip(keys, resolution.confidences, strict=False):
                confidence[key] = min(confidence.get(key, 1.0), value)
            entry.confidence = max(resolution.confidences)
        if keys and pack is not None:
            break  # one company's statement: the most relevant document that prints it
    return entry


def section_match(
    query_terms: set[str],
    section: StructureSection,
    title_terms: frozenset[str] | set[str] | None = None,
) -> float:
    """How well a section title answers the query's terms: the share of the title's terms the
    query holds (at least half, and at least two terms unless the title has one), scaled down
    for long spans, which say less about where the answer is. ``title_terms``: the title's
    terms when already known (:meth:`StructureView.section_terms`)."""
    if title_terms is None:
        title_terms = set(tokenize(section.title))
    if not title_terms:
        return 0.0
    shared = len(title_terms & query_terms)
    if shared < min(2, len(title_terms)) or shared / len(title_terms) < 0.5:
        return 0.0
    span = section.page_end - section.page_start + 1
    return shared * (shared / len(title_terms)) / math.log2(2 + span)
