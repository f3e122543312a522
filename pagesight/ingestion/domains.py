"""Domain detectors run at ingest: which domain packs apply to a document, read from its content.

A domain pack (:mod:`pagesight.query.domains`) adds a domain's knowledge to retrieval (the
``finance`` pack: a glossary from analysis terms to financial statements, and a route to the
statement pages). It must only act on the documents it fits, and whether a document fits is a
property of the document, decided once when it is parsed and stored in its structure
(``DocumentStructure.domains``), never guessed per query or from a file name. Each pack has a
detector here: page texts (and section titles) in, a :class:`~pagesight.core.structure.DomainMark`
out. An index whose structures predate detection is detected when the query side first loads
a structure (:class:`pagesight.query.structure_cache.CachedStructures`, from the stored chunks).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pagesight.core.structure import DomainMark, StructureSection
from pagesight.core.types import Element, Page
from pagesight.ingestion.finance_statements import FINANCE, MAX_PAGE_CHARS, detect_finance

logger = logging.getLogger(__name__)

Detector = Callable[[Mapping[int, str], Sequence[StructureSection]], DomainMark]

#: Every pack's detector, by the pack's name.
DETECTORS: dict[str, Detector] = {FINANCE: detect_finance}


def detect_domains(
    page_texts: Mapping[int, str], sections: Sequence[StructureSection] = ()
) -> list[DomainMark]:
    """Every registered detector's mark for one document; a detector that fails leaves its
    pack off for the document (a detection bug must not fail ingestion)."""
    marks = []
    for name, detector in DETECTORS.items():
        try:
            marks.append(detector(page_texts, sections))
        except Exception:
            logger.exception("domain detector %s failed", name)
            marks.append(DomainMark(name=name))
    return marks


def element_page_texts(elements: Iterable[Element], pages: Iterable[Page] = ()) -> dict[int, str]:
    """Each page's text: its margin lines first (a statement's title printed as a running
    head is a margin line, not an element), then what its elements print, in reading order,
    one element per line (at most ``MAX_PAGE_CHARS`` characters a page)."""
    found: dict[int, list[str]] = {
        p.page_number: list(p.margin_text) for p in pages if p.margin_text
    }
    sizes: dict[int, int] = {n: sum(map(len, lines)) for n, lines in found.items()}
    for element in elements:
        text = (element.text or "").strip()
        page = element.page_number
        if not text or sizes.get(page, 0) >= MAX_PAGE_CHARS:
            continue
        found.setdefault(page, []).append(text)
        sizes[page] = sizes.get(page, 0) + len(text)
    return {page: "\n".join(texts) for page, texts in found.items()}


#: The payload fields :func:`chunk_page_texts` reads (what a caller asks the index for).
CHUNK_PAGE_TEXT_FIELDS = ("page_numbers", "text", "spans", "unit", "seq", "section_path")


def chunk_page_texts(
    payloads: Iterable[Mapping[str, Any]], pages: Iterable[Page] = ()
) -> dict[int, str]:
    """Each page's text from stored chunk payloads (``seq``, ``page_numbers``, ``text``,
    ``spans`` as ``[start, end, page, x0, y0, x1, y1]``, ``section_path``): what an index
    built before detection still has of its pages. Chunks are read in their document order
    (``seq``; table-row units left out: they repeat their table); the headings a chunk opens
    under (the last of its section path, which the chunk's text does not repeat) go first
    wherever the path changes, as the page printed them; a chunk's text goes to the pages its
    spans say each piece is printed on, a line per span (without spans, to its first page).
    ``pages``: the catalog's pages, whose margin lines go first, as at ingest."""
    found: dict[int, list[str]] = {
        p.page_number: list(p.margin_text) for p in pages if p.margin_text
    }
    sizes: dict[int, int] = {n: sum(map(len, lines)) for n, lines in found.items()}

    def add(page: int, text: str) -> None:
        if text and sizes.get(page, 0) < MAX_PAGE_CHARS:
            found.setdefault(page, []).append(text)
            sizes[page] = sizes.get(page, 0) + len(text)

    chunks = sorted(
        (p for p in payloads if p.get("unit") != "table_row"), key=lambda p: int(p.get("seq") or 0)
    )
    path: list[str] = []
    for payload in chunks:
        text = str(payload.get("text") or "")
        numbers = [int(n) for n in payload.get("page_numbers") or []]
        spans = [s for s in payload.get("spans") or [] if len(s) >= 3]
        pieces = [(int(s[2]), text[int(s[0]) : int(s[1])].strip()) for s in spans]
        if not pieces and numbers:
            pieces = [(numbers[0], text.strip())]
        if not pieces:
            continue
        section_path = [str(part) for part in payload.get("section_path") or []]
        if section_path != path:
            for heading in section_path[-1:]:
                add(pieces[0][0], heading.strip())
            path = section_path
        for page, piece in pieces:
            add(page, piece)
    return {page: "\n".join(texts) for page, texts in found.items()}
