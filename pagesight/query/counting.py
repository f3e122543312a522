"""Counting questions answered from the document's structure (issue 34, route ``count``).

"How many figures are in the report?", "how many slides have charts?", "list the tables in
Section 3", "図はいくつ", "何枚のスライド", "表の数": a question that counts or lists pages,
slides, figures, charts, tables, images or equations asks about the whole document, and no
passage states the answer. Keyword and dense search find one or two of the pages at best;
the parsed structure knows every one of them. So:

- :func:`count_question` reads the question (English and Japanese; regular expressions, no
  model): what is counted (``target``), whether pages or items are counted ("how many pages
  contain tables" counts pages), whether it is a list, a kind ("bar charts": words their
  captions and axis labels must carry), charts over years (two years or more among the
  labels), topic terms ("related to Airbus", "that include 'F1'") and a scope (a section, a
  chapter, an appendix, a page range, "the first 10 slides", through
  :func:`pagesight.query.references.parse_references`). A question with no counting cue is
  rejected by a keyword test before any pattern runs, so the route costs ~0 for it.
- :class:`PageInventory`: what a document shows per page, built once per document version
  and index version: on the :class:`~pagesight.query.structure_cache.StructureView` the
  stack's structure cache keeps (a new view, after a re-index or a re-ingest, builds a new
  inventory). Its items are the index's atomic chunks (one per table, figure with text, or
  equation, with its caption and, for a figure, the words printed inside it: chart labels,
  values) and the numbered items of the structure that no chunk carries (a caption whose
  picture has no words). A page counts as *known* when a parser that finds figures and
  tables read it (the text-layer layout model, Docling, a VLM); a page read by OCR alone (an
  image-only slide) or with no text at all is *unknown*: its figures and tables cannot be
  counted, and the answer says so instead of counting it as none.
- :class:`StructureCounter` counts one question in one document (:class:`CountResult`);
  the route returns every matching page (evidence recall, not one hit), and the answer step
  (:func:`count_answer`) says "N pages in the parsed structure show …: p. 3, 7, 12",
  labelled as a structure count, with a citation per page.

What it does not do: see figures no parser found (a picture without words or caption is not
indexed), or tell a bar chart from a pie chart by looking at it (only by its words).
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pagesight.core.links import page_image_url
from pagesight.core.types import (
    AccessFilter,
    AnswerResponse,
    AnswerSentence,
    AnswerUnit,
    BBox,
    Citation,
    PageKey,
    Passage,
    QuotePart,
    StructuralReference,
)
from pagesight.index.base import VectorStore
from pagesight.models.text import tokenize
from pagesight.query.counting_questions import CountQuestion, Target, count_question
from pagesight.query.structure_cache import StructureView, ViewSource

__all__ = [
    "COUNT_ROUTE",
    "CountQuestion",
    "CountResult",
    "PageInventory",
    "StructureCounter",
    "count",
    "count_answer",
    "count_question",
    "structure_answer",
]

#: The route's name, as traces and ``RetrievalOptions.weights`` spell it.
COUNT_ROUTE = "count"
#: Characters of an item's text kept for its terms and its quote.
MAX_ITEM_CHARS = 1500
MAX_QUOTE_CHARS = 200
#: Citations an answer carries at most (one per counted page, first pages first).
MAX_CITATIONS = 30

ItemKind = Literal["figure", "table", "equation"]

#: Parsers that classify a page's regions (so a page they read without a table has none):
#: the text layer's layout model and its plain-text rules, Docling, a VLM ("vlm:<model>").
LAYOUT_PARSERS = frozenset({"text-layer", "text-layer-rules", "docling"})

# ---------------------------------------------------------------------------------------------
# What a document shows per page


@dataclass(frozen=True)
class InventoryItem:
    """A table, figure or equation on a page, with the words that describe it."""

    kind: ItemKind
    page_number: int
    #: Its caption and the words printed in it (chart labels and values, a table's cells).
    text: str
    terms: frozenset[str]
    #: Distinct years among its words (a chart over years has two or more).
    years: int
    #: A figure with chart words or several numbers among its labels.
    chart: bool
    number: str | None = None
    chunk_id: str = ""
    element_ids: tuple[str, ...] = ()
    bboxes: tuple[BBox, ...] = ()


@dataclass
class PageInventory:
    """What a document shows per page (module doc), built by :func:`build_inventory`."""

    doc_id: str
    #: Pages in the document.
    count: int
    items: list[InventoryItem]
    #: Pages a parser that finds figures and tables read.
    known: frozenset[int]
    #: Pages with any text in the index.
    texted: frozenset[int]
    #: Page number -> its terms; read on first use (a question about the pages' text).
    _page_terms: dict[int, frozenset[str]] | None = field(default=None, repr=False)
    _terms_loader: Callable[[], dict[int, frozenset[str]]] | None = field(default=None, repr=False)

    def page_terms(self) -> dict[int, frozenset[str]]:
        if self._page_terms is None:
            self._page_terms = self._terms_loader() if self._terms_loader else {}
        return self._page_terms


_CHART_WORDS = re.compile(
    r"\b(?:chart|graph|plot|axis|legend|percent|share|trend|survey|%)|グラフ|推移|割合|%",
    re.IGNORECASE,
)
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d{2}(?!\d)")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?%?")
_ITEM_KINDS: tuple[ItemKind, ...] = ("table", "figure", "equation")
_INVENTORY_FIELDS = (
    "page_numbers", "kinds", "text", "chunk_id", "element_ids", "bboxes", "parser", "unit",
)  # fmt: skip


def _is_layout_parser(name: str) -> bool:
    return name in LAYOUT_PARSERS or name.startswith("vlm:")


def _item_of(payload: dict[str, Any]) -> InventoryItem | None:
    if payload.get("unit") == "table_row":
        return None
    kinds = payload.get("kinds") or []
    kind = next((k for k in _ITEM_KINDS if k in kinds), None)
    pages = payload.get("page_numbers") or []
    if kind is None or not pages:
        return None
    page = int(pages[0])
    text = " ".join(str(payload.get("text") or "")[:MAX_ITEM_CHARS].split())
    boxes = tuple(BBox.of(box) for n, box in payload.get("bboxes") or [] if n == page)
    years = len(set(_YEAR.findall(text)))
    numbers = len(_NUMBER.findall(text))
    return InventoryItem(
        kind=kind,
        page_number=page,
        text=text,
        terms=frozenset(tokenize(text)),
        years=years,
        chart=kind == "figure" and (bool(_CHART_WORDS.search(text)) or numbers >= 3),
        chunk_id=str(payload.get("chunk_id") or ""),
        element_ids=tuple(payload.get("element_ids") or ()),
        bboxes=boxes,
    )


def build_inventory(view: StructureView, payloads: Sequence[dict[str, Any]]) -> PageInventory:
    """The inventory of ``view``'s document from its chunk payloads (``_INVENTORY_FIELDS``)."""
    structure = view.structure
    count = view.prepared.count
    items: list[InventoryItem] = []
    known: set[int] = set()
    texted: set[int] = set()
    carried: set[str] = set()
    for payload in payloads:
        pages = [int(n) for n in payload.get("page_numbers") or []]
        if str(payload.get("text") or "").strip():
            texted.update(pages)
        if any(_is_layout_parser(str(p)) for p in payload.get("parser") or []):
            known.update(pages)
        item = _item_of(payload)
        if item is not None:
            items.append(item)
            carried.update(item.element_ids)
    numbers = {e: s.number for s in structure.items if (e := s.element_id)}
    items = [
        _numbered(i, next((numbers[e] for e in i.element_ids if e in numbers), None)) for i in items
    ]
    for numbered in structure.items:  # a numbered caption whose item no chunk carries
        if numbered.element_id in carried or numbered.kind not in _ITEM_KINDS:
            continue
        text = " ".join((numbered.caption or "").split())
        items.append(
            InventoryItem(
                kind=numbered.kind,
                page_number=numbered.page_number,
                text=text,
                terms=frozenset(tokenize(text)),
                years=len(set(_YEAR.findall(text))),
                chart=numbered.kind == "figure" and bool(_CHART_WORDS.search(text)),
                number=numbered.number,
                element_ids=(numbered.element_id,) if numbered.element_id else (),
                bboxes=(numbered.bbox,) if numbered.bbox else (),
            )
        )
    items.sort(key=lambda i: i.page_number)
    return PageInventory(
        doc_id=view.doc_id,
        count=count,
        items=items,
        known=frozenset(known),
        texted=frozenset(texted),
    )


def _numbered(item: InventoryItem, number: str | None) -> InventoryItem:
    return item if number is None else replace(item, number=number)


# ---------------------------------------------------------------------------------------------
# Counting


@dataclass
class CountResult:
    """One counting question counted in one document."""

    question: CountQuestion
    doc_id: str
    #: Matching pages, in page order.
    pages: list[int]
    #: Matching items (none for a page count), in page order.
    items: list[InventoryItem]
    #: Pages looked at (the scope, else the document).
    scope_pages: list[int]
    #: Pages in scope whose structure cannot show the target (OCR only, or no text).
    unknown: list[int]
    #: What the scope is called ("Section 3"), None for the whole document.
    scope_name: str | None = None
    #: Why the kind words were dropped ("no caption or label says 'bar'"), else None.
    loosened: str | None = None
    #: Why there is nothing to count in ("no Section 9"), else None.
    unresolved: str | None = None

    @property
    def known_share(self) -> float:
        """The share of the pages in scope whose structure can show the target: the count's
        confidence (1 when every page is known)."""
        if not self.scope_pages:
            return 0.0
        return round(1 - len(self.unknown) / len(self.scope_pages), 4)

    @property
    def available(self) -> bool:
        """The structure can count here: some page in scope is known."""
        return self.unresolved is None and len(self.unknown) < len(self.scope_pages)

    def route_pages(
        self, rank: dict[PageKey, int] | None = None, limit: int = 100
    ) -> list[PageKey]:
        """The pages the route returns: every matching page (an unscoped page count has none
        to show), those the other routes ranked first, in their order, then page order."""
        question = self.question
        whole = question.scope is None and question.edge is None
        if question.target == "page" and not question.terms and whole:
            return []
        keys = [(self.doc_id, n) for n in self.pages]
        rank = rank or {}
        keys.sort(key=lambda k: (rank.get(k, len(rank) + 1), k[1]))
        return keys[:limit]


class StructureCounter:
    """Counts questions in documents (:class:`CountResult`), over the structure views of a
    :class:`~pagesight.query.structure_cache.ViewSource` and the chunk index; each view's
    inventory is built once (module doc) and dropped with the view."""

    def __init__(self, views: ViewSource, chunk_store: VectorStore) -> None:
        self.views = views
        self.chunk_store = chunk_store
        self._inventories: weakref.WeakKeyDictionary[StructureView, PageInventory] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        #: inventories built (tests and benchmarks read it)
        self.built = 0

    def count_in(
        self, question: CountQuestion, access: AccessFilter, doc_ids: Sequence[str]
    ) -> CountResult | None:
        """``question`` counted in the first of ``doc_ids`` that ``access`` may see."""
        for doc_id in doc_ids:
            view = self.views.view_of(access, doc_id)
            if view is not None:
                return count(question, self.inventory(access.tenant, view), view)
        return None

    def inventory(self, tenant: str, view: StructureView) -> PageInventory:
        with self._lock:
            found = self._inventories.get(view)
        if found is not None:
            return found
        payloads = [
            p.payload
            for p in self.chunk_store.points_of_document(tenant, view.doc_id, _INVENTORY_FIELDS)
        ]
        built = build_inventory(view, payloads)
        built._terms_loader = lambda: self._page_terms(tenant, view.doc_id)
        with self._lock:
            self._inventories.setdefault(view, built)
            self.built += 1
            return self._inventories[view]

    def _page_terms(self, tenant: str, doc_id: str) -> dict[int, frozenset[str]]:
        terms: dict[int, set[str]] = {}
        for point in self.chunk_store.points_of_document(tenant, doc_id, ("page_numbers", "text")):
            words = tokenize(str(point.payload.get("text") or ""))
            for n in point.payload.get("page_numbers") or []:
                terms.setdefault(int(n), set()).update(words)
        return {n: frozenset(t) for n, t in terms.items()}


def _scope_pages(
    question: CountQuestion, view: StructureView, count_: int
) -> tuple[list[int], str | None, str | None]:
    """(pages in scope, the scope's name, why it resolved nowhere)."""
    pages = list(range(1, count_ + 1))
    name = None
    reference = question.scope
    if reference is not None:
        resolution = view.resolve(reference)
        if not resolution.pages:
            return [], reference.text, resolution.reason or f"no {reference.text}"
        found = sorted(resolution.pages)
        pages = _whole_span(reference, found, view, count_)
        name = reference.text.strip()
    if question.edge:
        n = question.edge
        pages = pages[:n] if n > 0 else pages[n:]
        edge_name = f"the {'first' if n > 0 else 'last'} {abs(n)} pages"
        name = edge_name if name is None else f"{name}, {edge_name}"
    return pages, name, None


def _whole_span(
    reference: StructuralReference, found: list[int], view: StructureView, count_: int
) -> list[int]:
    """A section's or a page range's every page (a resolution stops at its first 20)."""
    first = found[0]
    if reference.kind in ("page", "slide"):
        end = reference.end
        if end and end.isdigit() and reference.value and reference.value.isdigit():
            last = min(count_, first + int(end) - int(reference.value))
            return list(range(first, last + 1))
        return found
    spans = [
        s for s in view.structure.sections if s.page_start == first and s.page_end >= found[-1]
    ]
    if spans:
        widest = max(spans, key=lambda s: s.page_end)
        return list(range(first, min(count_ or widest.page_end, widest.page_end) + 1))
    return found


def _matches_terms(terms: frozenset[str], question: CountQuestion) -> bool:
    wanted = question.terms
    if not wanted:
        return True
    shared = sum(1 for t in wanted if t in terms)
    if question.quoted:
        return shared == len(wanted)
    return shared * 2 >= len(wanted) and shared > 0


_KIND_TEXT = {"bar": ("bar", "棒"), "pie": ("pie", "円グラフ"), "line": ("line", "折れ線")}


def _has_kinds(item: InventoryItem, kinds: tuple[str, ...]) -> bool:
    lowered = item.text.lower()
    return all(
        any(
            re.search(rf"\b{re.escape(w)}", lowered) if w.isascii() else w in lowered
            for w in _KIND_TEXT.get(kind, (kind,))
        )
        for kind in kinds
    )


def _of_target(item: InventoryItem, target: Target) -> bool:
    if target in ("figure", "image"):
        return item.kind == "figure"
    if target == "chart":
        return item.kind == "figure" and item.chart
    return item.kind == target


def count(question: CountQuestion, inventory: PageInventory, view: StructureView) -> CountResult:
    """``question`` counted in one document (:class:`CountResult`)."""
    scope, name, unresolved = _scope_pages(question, view, inventory.count)
    result = CountResult(
        question=question,
        doc_id=inventory.doc_id,
        pages=[],
        items=[],
        scope_pages=scope,
        unknown=[],
        scope_name=name,
        unresolved=unresolved,
    )
    if unresolved is not None:
        return result
    in_scope = set(scope)
    if question.target == "page":
        pages = scope
        if question.terms:
            page_terms = inventory.page_terms()
            pages = [n for n in scope if _matches_terms(page_terms.get(n, frozenset()), question)]
            result.unknown = [n for n in scope if n not in inventory.texted]
        result.pages = pages
        return result
    result.unknown = [n for n in scope if n not in inventory.known]
    items = [
        i
        for i in inventory.items
        if i.page_number in in_scope
        and _of_target(i, question.target)
        and _matches_terms(i.terms, question)
        and (not question.over_years or i.years >= 2)
    ]
    if question.kinds:
        kinded = [i for i in items if _has_kinds(i, question.kinds)]
        if not kinded and items:
            said = " ".join(question.kinds)
            result.loosened = f"no caption or label in the parsed structure says '{said}'"
        else:
            items = kinded
    result.items = items
    result.pages = sorted({i.page_number for i in items})
    return result


# ---------------------------------------------------------------------------------------------
# The answer


def _page_list(pages: Sequence[int]) -> str:
    """'3, 7, 12' with runs as ranges: '3–5, 9'."""
    runs: list[list[int]] = []
    for n in pages:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _what(result: CountResult) -> str:
    question = result.question
    what = question.noun
    if question.terms:
        joined = " ".join(question.terms)
        what += f" that mention '{joined}'" if question.quoted else f" about '{joined}'"
    if question.over_years:
        what += " over years"
    if result.scope_name:
        what += f" in {result.scope_name}"
    return what


def count_sentence(result: CountResult) -> str:
    """What the answer says (module doc): the count and its pages, or why there is none."""
    question = result.question
    what = _what(result)
    if result.unresolved is not None:
        return f"Structure count not available: {result.unresolved}."
    if not result.available:
        return (
            f"Structure count not available: the parsed structure has no figure or table "
            f"layout for p. {_page_list(result.unknown)} (pages read by OCR only, or without "
            f"text, such as image-only slides without captions), so it cannot count {what}."
        )
    pages = result.pages
    if question.target == "page" and not question.terms:
        unit = "slides" if "slide" in question.noun else "pages"
        if result.scope_name:
            said = f"{result.scope_name} spans {len(pages)} {unit}: p. {_page_list(pages)}"
        else:
            said = f"the parsed structure has {len(pages)} {unit}"
        return f"Structure count: {said}."
    label = "Structure list" if question.listing else "Structure count"
    if not pages:
        said = f"no page in the parsed structure shows {what}"
    else:
        plural = "page" if len(pages) == 1 else "pages"
        verb = "shows" if len(pages) == 1 else "show"
        said = f"{len(pages)} {plural} in the parsed structure {verb} {what}"
        if not question.counts_pages:
            said += f" ({len(result.items)} in all)"
        said += f": p. {_page_list(pages)}"
    notes = []
    if result.loosened:
        notes.append(f"{result.loosened}, so every {question.noun.split()[-1][:-1]} is counted")
    if result.unknown:
        notes.append(
            f"p. {_page_list(result.unknown)} have no figure or table layout in the parsed "
            "structure (OCR only, or no text) and are not counted"
        )
    return f"{label}: {said}" + "".join(f"; {n}" for n in notes) + "."


def count_answer(
    result: CountResult,
    trace_id: str,
    mode: Literal["llm", "extractive"],
    titles: dict[str, tuple[str | None, str | None]] | None = None,
) -> AnswerResponse:
    """The answer to a counting question from the structure: the count sentence (the lead),
    one citation per counted page (its first item's words as the quote), and for a list the
    items as supporting units. ``titles``: doc id -> (title, file name) for the citations."""
    title, source = (titles or {}).get(result.doc_id, (None, None))
    citations: list[Citation] = []
    first_on: dict[int, InventoryItem] = {}
    for each in result.items:
        first_on.setdefault(each.page_number, each)
    for page in result.pages[:MAX_CITATIONS]:
        item = first_on.get(page)
        quote = item.text[:MAX_QUOTE_CHARS] if item is not None else ""
        boxes = list(item.bboxes) if item is not None else []
        citations.append(
            Citation(
                n=len(citations) + 1,
                doc_id=result.doc_id,
                page_number=page,
                chunk_id=item.chunk_id if item is not None else "",
                element_ids=list(item.element_ids) if item is not None else [],
                bboxes=boxes,
                page_image_url=page_image_url(result.doc_id, page, boxes),
                quote=quote,
                parts=[QuotePart(page_number=page, text=quote, bboxes=boxes)] if quote else [],
                title=title,
                source_name=source,
            )
        )
    text = count_sentence(result)
    numbers = [c.n for c in citations]
    lead = AnswerUnit(
        text=text, kind="sentence", value=str(len(_counted(result))), citations=numbers
    )
    supporting: list[AnswerUnit] = []
    if result.question.listing:
        by_page = {c.page_number: c.n for c in citations}
        for item in result.items[:MAX_CITATIONS]:
            name = f"{item.kind.capitalize()} {item.number}" if item.number else item.kind
            words = item.text[:MAX_QUOTE_CHARS] or "(no caption)"
            cited = [by_page[item.page_number]] if item.page_number in by_page else []
            supporting.append(
                AnswerUnit(text=f"{name}, p. {item.page_number}: {words}", citations=cited)
            )
    return AnswerResponse(
        answer=text,
        abstained=False,
        reason="a structure count: counted in the parsed structure, not quoted from the text",
        sentences=[AnswerSentence(text=text, citations=numbers)],
        lead=lead,
        supporting=supporting,
        citations=citations,
        confidence=result.known_share,
        mode=mode,
        trace_id=trace_id,
    )


def _counted(result: CountResult) -> Sequence[object]:
    if result.question.counts_pages:
        return result.pages
    return result.items


def structure_answer(
    counter: StructureCounter,
    query: str,
    access: AccessFilter,
    passages: Sequence[Passage],
    trace_id: str,
    mode: Literal["llm", "extractive"],
) -> tuple[AnswerResponse | None, str | None]:
    """The answer step's structure count: ``(answer, None)`` when ``query`` is a counting
    question the structure can count, ``(None, why not)`` when it cannot (pages without
    layout, a scope that resolves nowhere: the caller answers from the passages and says so),
    ``(None, None)`` for any other query, which costs a keyword test (the counter is not
    asked). The document: the one the request is scoped to, else the best passage's."""
    question = count_question(query)
    if question is None:
        return None, None
    scoped = access.doc_ids if access.doc_ids is not None and len(access.doc_ids) == 1 else None
    documents = list(scoped or dict.fromkeys(p.doc_id for p in passages))[:1]
    result = counter.count_in(question, access, documents)
    if result is None:
        return None, None
    if not result.available:
        return None, count_sentence(result)
    titles = {p.doc_id: (p.title, p.source_name) for p in reversed(passages)}
    return count_answer(result, trace_id, mode, titles), None
