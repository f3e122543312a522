"""Structure-aware chunking: parsed elements → retrieval chunks (DESIGN.md sections 1–2).

Rules, in the order they apply:

1. **Sections.** Elements are grouped into sections: a TITLE element always opens a new section
   and so does any change of ``section_path``. A chunk never spans two sections, so it never
   crosses a heading and never mixes elements with different ``section_path``.

   Parsers set a heading's own ``section_path`` to the path it opens (it ends with the heading
   itself), so the heading and the body below it share one section. The heading element is then
   the start of the first chunk of its section ("Revenue" + its paragraph is one chunk). We
   chose that over prefixing every chunk with its section path because it keeps every character
   of ``Chunk.text`` traceable to one of its ``element_ids`` (extractive answers and the citation
   check quote chunk text and point at element bboxes) and keeps heading words from being
   counted once per chunk in BM25 statistics. Later chunks of a long section still know their
   context through ``Chunk.section_path``, which an embedder may prepend if it wants to.

2. **Atomic elements.** TABLE, FIGURE and EQUATION elements (:data:`ATOMIC_KINDS`) are one chunk
   each, never split, whatever their length, and carry their caption:
   ``text = caption + "\\n" + body``. The caption is ``Element.caption``; a separate CAPTION
   element right next to the atomic element in the same section joins the chunk too (tables
   look for it before themselves first, figures and equations after themselves first, the
   usual typesetting conventions).

3. **Merging.** Consecutive TITLE/TEXT/LIST/CODE/CAPTION elements of a section are joined with
   newlines while the result fits ``max_chars``. A chunk shorter than ``min_chars`` merges with
   its next neighbour in the section, even past ``max_chars``; one with no next neighbour to take
   (the section ends, or an atomic element follows) joins its previous text chunk instead, which
   mostly catches the short remainder of a split paragraph. Either merge keeps a text chunk
   within ``max_chars + min_chars``: a small overshoot is better for retrieval than an orphan
   fragment, and a heading is never left alone when its paragraph just misses ``max_chars``.

4. **Splitting.** An element longer than ``max_chars`` is split at sentence ends: 。！？．｡
   (CJK, no space needed), and ``.``/``!``/``?`` only when whitespace follows and the next word
   does not start in lower case (so "3.5", "e.g. x" and "Fig. 3" stay whole), and blank lines.
   Code is split at line ends. A single sentence longer than ``max_chars`` is hard-split at the
   last whitespace that fits or, with none (CJK), at ``max_chars``. Every piece of a split
   element carries that element's id and bbox, and the spans of the lines it covers.

5. **Table rows.** A statement-style table (:func:`pagesight.ingestion.tables.is_statement_table`:
   three or more data rows labelled with words, a numeric column, not a table of contents) is
   also indexed row by row, after all the chunks of rules 1-4: one extra chunk per data row with
   ``unit="table_row"``, its text the caption, then the line item and each value with its column
   header and the table's unit ("Current assets: Inventories | December 31, 2016: 11,461 | 2017:
   16,047 (in millions)"). The whole-table chunk stays: it answers questions about the table as a
   whole and is the verbatim markdown, whereas a row text is a rendering (header labels added,
   split "$" and "1,234" cells joined) and must not be matched against the page as a quote. The
   rows are there because a filing has dozens of look-alike statement tables and a question asks
   for one line item in one year; in a whole-table chunk that line is a few percent of the text,
   diluted in BM25 and in the dense embedding, while a row unit is nothing but that line and the
   headers that say what its numbers are. A row chunk names the table element only
   (``element_ids``, ``bboxes``, its page, ``kinds=[TABLE]``, the table's ``section_path``), so
   citations point at the table. The section path is not repeated in the row text:
   :func:`pagesight.ingestion.ingest.chunk_index_text` puts it in front of every chunk's indexed
   text already. ``ChunkOptions.table_rows`` turns rows off; ``max_table_rows`` caps them per table
   (a 10,000-row dump must not flood the index); a row text is at most
   :data:`pagesight.ingestion.tables.MAX_ROW_TEXT_CHARS` characters. The rows are the table's
   grid as the parser found it (``Element.cells``); only a table without one (a VLM's markdown,
   an element stored before cells were kept) is read out of its markdown text.

Chunks may span pages (a paragraph continuing onto the next page in the same section):
``page_numbers`` lists every page in order and ``bboxes`` holds one ``(page, bbox)`` per element.
``spans`` says where each character of the text is printed, so a quote is cited on the page and
in the boxes of exactly its characters: an element's text maps through its ``lines`` (one span
per printed line the chunk's piece of it covers), or is one span with the element's box when
the parser gave no lines; an atomic chunk's caption maps through its CAPTION element (else the
atomic element's box) and its body is one span with the element's box; a table row is one span
with the table's box. The joining newlines belong to no span.
Chunk ids are ``chunk_id(doc_id, version, seq)`` with ``seq`` the chunk's position (row chunks
continue the numbering after the last ordinary chunk), so the same parsed document always gives
identical chunks, and turning table rows on or off never renumbers the ordinary ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pagesight.core.ids import chunk_id
from pagesight.core.settings import ChunkOptions
from pagesight.core.types import (
    ATOMIC_KINDS,
    BBox,
    Chunk,
    Element,
    ElementKind,
    ParsedDocument,
    TextSpan,
)
from pagesight.ingestion.tables import element_tables, is_statement_table, row_texts

#: Joins the texts of the elements inside one chunk.
ELEMENT_SEPARATOR = "\n"

# A sentence end: CJK terminators need no following space; ASCII ones need whitespace and a next
# word that does not start in lower case (or the end of the text); a blank line is a paragraph
# end. Closing quotes/brackets stay with their sentence, and the whitespace after a boundary
# stays with the sentence before it, so joining sentences back gives the original text.
_SENTENCE_END = re.compile(
    r"[。！？．｡]+[」』）】〕〉》”’\"')\]]*\s*"
    r"|[.!?]+[”’\"')\]]*(?:\s+(?=[^\sa-z])|\s*$)"
    r"|\n[^\S\n]*\n\s*"
)

# Words whose trailing period is almost never a sentence end, even before a capital or digit.
_ABBREVIATIONS = frozenset(
    {
        "al.",
        "approx.",
        "cf.",
        "dr.",
        "e.g.",
        "eq.",
        "eqs.",
        "fig.",
        "figs.",
        "i.e.",
        "mr.",
        "mrs.",
        "ms.",
        "no.",
        "nos.",
        "p.",
        "pp.",
        "prof.",
        "sec.",
        "st.",
        "vol.",
        "vs.",
    }
)


_BREAKABLE_SPACES = (" ", "\n", "\t", "\u3000")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` after each sentence end; ``"".join(result) == text``."""
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        if end <= start or end >= len(text):
            continue
        if match.group(0)[0] == "." and _ends_with_abbreviation(text, match.start() + 1):
            continue
        pieces.append(text[start:end])
        start = end
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _ends_with_abbreviation(text: str, period_end: int) -> bool:
    word_start = max(text.rfind(" ", 0, period_end), text.rfind("\n", 0, period_end)) + 1
    return text[word_start:period_end].lower() in _ABBREVIATIONS


def hard_split(text: str, limit: int, first_limit: int | None = None) -> list[str]:
    """Cut ``text`` into pieces of at most ``limit`` chars, at the last whitespace that fits.

    The first piece gets at most ``first_limit`` chars when given (the room left in an open
    chunk). Text without whitespace (CJK, long tokens) is cut at exactly the limit.
    """
    pieces: list[str] = []
    rest = text.strip()
    current_limit = first_limit if first_limit is not None else limit
    while len(rest) > current_limit:
        cut = max(rest.rfind(space, 0, current_limit + 1) for space in _BREAKABLE_SPACES)
        if cut <= 0:
            cut = current_limit
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
        current_limit = limit
    if rest:
        pieces.append(rest)
    return pieces


def sentence_windows(
    text: str, max_chars: int, first_budget: int | None = None, *, by_line: bool = False
) -> tuple[str, list[str]]:
    """Pack the sentences of ``text`` into windows of at most ``max_chars`` characters.

    Returns ``(head, windows)``: ``head`` is the leading run of sentences that fits
    ``first_budget`` (the room left in a chunk that is still open; ``""`` when the first sentence
    does not fit it) and ``windows`` the rest. With ``by_line`` the units are lines (code).
    """
    units = text.splitlines(keepends=True) if by_line else split_sentences(text)
    budget = max_chars if first_budget is None else first_budget
    windows: list[str] = []
    head: str | None = None if first_budget is not None else ""
    current = ""

    def emit(window: str) -> None:
        nonlocal head, budget
        if head is None:
            head = window
        elif window:
            windows.append(window)
        budget = max_chars

    for unit in units:
        if len((current + unit).strip()) <= budget:
            current += unit
            continue
        if current.strip() or len(unit.strip()) <= max_chars:
            emit(current.strip())  # may be "" for the head: nothing joins the open chunk
            current = ""
            if len(unit.strip()) <= budget:
                current = unit
                continue
        # A sentence longer than max_chars: hard-split; its first piece may fill the head.
        pieces = hard_split(unit, max_chars, first_limit=budget)
        for piece in pieces[:-1]:
            emit(piece)
        current = pieces[-1]
    emit(current.strip())
    return head or "", windows


#: ``(start, end, page_number, bbox)``: where characters ``start:end`` of a part are printed.
_Loc = tuple[int, int, int, BBox]


def _align(piece: str, source: str, start: int) -> list[int] | None:
    """Where each character of ``piece`` sits in ``source``, reading from ``start``: ``piece``
    is ``source``'s text from there on with whitespace dropped or changed at most (a hard
    split's piece loses the whitespace after it). ``-1`` marks whitespace ``source`` lacks;
    ``None`` when ``piece`` is not there."""
    found = source.find(piece, start)
    if found >= 0:
        return list(range(found, found + len(piece)))
    out: list[int] = []
    j = start
    for ch in piece:
        while j < len(source) and source[j] != ch and source[j].isspace():
            j += 1
        if j < len(source) and source[j] == ch:
            out.append(j)
            j += 1
        elif ch.isspace():
            out.append(-1)
        else:
            return None
    return out


def _locs(element: Element, piece: str, positions: list[int] | None) -> list[_Loc]:
    """Where ``piece`` (a part of ``element.text`` at ``positions``) is printed: one loc per
    line of the element it covers; one loc with the element's box when the element has no
    lines or the piece could not be placed in its text; none when there is no box either."""
    if not piece:
        return []
    if positions is None or not element.lines:
        return [(0, len(piece), element.page_number, element.bbox)] if element.bbox else []
    lines = sorted(element.lines, key=lambda line: line.start)
    runs: list[list[int]] = []  # [line index, first char, last char]
    li = 0
    for i, j in enumerate(positions):
        if j < 0:
            continue
        while li < len(lines) and lines[li].end <= j:
            li += 1
        if li == len(lines):
            break
        if j < lines[li].start:
            continue  # a joining space between two lines
        if runs and runs[-1][0] == li:
            runs[-1][2] = i
        else:
            runs.append([li, i, i])
    return [(first, last + 1, element.page_number, lines[li].bbox) for li, first, last in runs]


class _Pieces:
    """Places the consecutive pieces a chunker cuts from one element in the element's text."""

    def __init__(self, element: Element) -> None:
        self.element = element
        self.cursor = 0

    def locs(self, piece: str) -> list[_Loc]:
        positions = _align(piece, self.element.text, self.cursor)
        if positions is None:
            positions = _align(piece, self.element.text, 0)
        placed = [j for j in positions or [] if j >= 0]
        if placed:
            self.cursor = placed[-1] + 1
        return _locs(self.element, piece, positions)


@dataclass
class _Draft:
    """A chunk under construction: its text parts, where each part is printed (``locs``, one
    list per part, offsets within the part) and the elements they came from."""

    section_path: list[str]
    atomic: bool = False
    parts: list[str] = field(default_factory=list)
    locs: list[list[_Loc]] = field(default_factory=list)
    elements: list[Element] = field(default_factory=list)

    @property
    def text(self) -> str:
        return ELEMENT_SEPARATOR.join(self.parts)

    @property
    def length(self) -> int:
        return len(self.text)

    @property
    def spans(self) -> list[TextSpan]:
        out: list[TextSpan] = []
        offset = 0
        for part, locs in zip(self.parts, self.locs, strict=True):
            for start, end, page, bbox in locs:
                out.append(
                    TextSpan(start=offset + start, end=offset + end, page_number=page, bbox=bbox)
                )
            offset += len(part) + len(ELEMENT_SEPARATOR)
        return out

    def add(self, element: Element, text: str, locs: list[_Loc]) -> None:
        self.parts.append(text)
        self.locs.append(locs)
        if not any(e.element_id == element.element_id for e in self.elements):
            self.elements.append(element)

    def absorb(self, other: _Draft) -> None:
        self.parts.extend(other.parts)
        self.locs.extend(other.locs)
        for element in other.elements:
            if not any(e.element_id == element.element_id for e in self.elements):
                self.elements.append(element)


@dataclass
class _AtomicUnit:
    """An atomic element with the caption text and CAPTION elements that travel with it."""

    element: Element
    caption: str
    caption_elements: list[Element]


class Chunker:
    """Turns a :class:`ParsedDocument` into retrieval chunks (rules in the module docstring)."""

    def __init__(self, options: ChunkOptions | None = None) -> None:
        self.options = options or ChunkOptions()
        if self.options.min_chars > self.options.max_chars:
            raise ValueError(
                f"chunk.min_chars ({self.options.min_chars}) must not exceed "
                f"chunk.max_chars ({self.options.max_chars})"
            )

    def __call__(self, parsed: ParsedDocument) -> list[Chunk]:
        document = parsed.document
        elements = sorted(parsed.elements, key=lambda e: (e.page_number, e.seq))
        sections = _sections(elements)
        drafts: list[_Draft] = []
        for section in sections:
            drafts.extend(self._chunk_section(section))
        chunks = [
            _to_chunk(draft, document.doc_id, document.version, seq)
            for seq, draft in enumerate(drafts)
        ]
        if self.options.table_rows:
            for section in sections:
                for unit in _units(section):
                    if isinstance(unit, _AtomicUnit) and unit.element.kind == ElementKind.TABLE:
                        chunks.extend(
                            _row_chunks(
                                unit,
                                document.doc_id,
                                document.version,
                                len(chunks),
                                self.options.max_table_rows,
                            )
                        )
        return chunks

    def _chunk_section(self, section: list[Element]) -> list[_Draft]:
        packer = _SectionPacker(
            list(section[0].section_path), self.options.max_chars, self.options.min_chars
        )
        for unit in _units(section):
            if isinstance(unit, _AtomicUnit):
                packer.add_atomic(unit)
            else:
                packer.add_element(unit)
        packer.close()
        return packer.done


class _SectionPacker:
    """Packs one section's units, in order, into drafts: ``done`` holds the finished ones,
    ``open_draft`` the one still taking text (rules in the module docstring)."""

    def __init__(self, path: list[str], max_chars: int, min_chars: int) -> None:
        self.path = path
        self.max_chars = max_chars
        self.min_chars = min_chars
        self.done: list[_Draft] = []
        self.open_draft: _Draft | None = None

    def close(self) -> None:
        """Finish the open draft: a small one joins the previous text draft when the two fit
        together, otherwise it is a chunk of its own; an empty one is dropped."""
        draft, self.open_draft = self.open_draft, None
        if draft is None or not draft.parts:
            return
        previous = self.done[-1] if self.done else None
        if (
            draft.length < self.min_chars
            and previous is not None
            and not previous.atomic
            and previous.length + len(ELEMENT_SEPARATOR) + draft.length
            <= self.max_chars + self.min_chars
        ):
            previous.absorb(draft)
        else:
            self.done.append(draft)

    def add_atomic(self, unit: _AtomicUnit) -> None:
        """An atomic element (with its caption) is a chunk of its own."""
        atomic = _atomic_draft(unit, self.path)
        if atomic.parts:  # an uncaptioned picture has no text to retrieve by
            self.close()
            self.done.append(atomic)

    def add_element(self, element: Element) -> None:
        text = element.text.strip()
        if not text:
            return
        pieces = _Pieces(element)
        room = (
            self.max_chars - self.open_draft.length - len(ELEMENT_SEPARATOR)
            if self.open_draft is not None
            else self.max_chars
        )
        if self.open_draft is not None and len(text) <= room:
            self.open_draft.add(element, text, pieces.locs(text))
        elif len(text) <= self.max_chars:
            self._add_piece(element, text, pieces)
        else:
            self._add_long(element, text, pieces, room)

    def _add_piece(self, element: Element, text: str, pieces: _Pieces) -> None:
        """``text`` (at most ``max_chars``) into a small open draft, since a small chunk takes
        its next neighbour; otherwise the open draft is closed and ``text`` starts a new one."""
        if self.open_draft is not None and self.open_draft.length < self.min_chars:
            self.open_draft.add(element, text, pieces.locs(text))
            return
        self.close()
        self.open_draft = _Draft(section_path=self.path)
        self.open_draft.add(element, text, pieces.locs(text))

    def _add_long(self, element: Element, text: str, pieces: _Pieces, room: int) -> None:
        """``text`` longer than ``max_chars``: split at sentence ends. A small open chunk is
        filled with the leading sentences first; a big enough one is closed and the element
        starts anew."""
        if self.open_draft is not None and (self.open_draft.length >= self.min_chars or room <= 0):
            self.close()
        head, windows = sentence_windows(
            text,
            self.max_chars,
            room if self.open_draft is not None else None,
            by_line=element.kind == ElementKind.CODE,
        )
        if head:
            if self.open_draft is None:
                self.open_draft = _Draft(section_path=self.path)
            self.open_draft.add(element, head, pieces.locs(head))
        for window in windows:
            self._add_piece(element, window, pieces)


def _sections(elements: list[Element]) -> list[list[Element]]:
    """Consecutive runs of one ``section_path``; a TITLE element opens a new run.

    The exception is a heading broken over several TITLE elements (one per line, same
    ``section_path``): while a run holds nothing but such TITLEs, the next one joins it.
    """
    sections: list[list[Element]] = []
    for element in elements:
        current = sections[-1] if sections else None
        same_path = current is not None and element.section_path == current[0].section_path
        heading_continues = (
            element.kind == ElementKind.TITLE
            and current is not None
            and all(e.kind == ElementKind.TITLE for e in current)
        )
        if (
            current is not None
            and same_path
            and (element.kind != ElementKind.TITLE or heading_continues)
        ):
            current.append(element)
        else:
            sections.append([element])
    return sections


# Caption openings that name a kind; a caption naming another kind is not claimed.
_CAPTION_LABELS = {
    ElementKind.TABLE: re.compile(r"^\s*(?:table|tab\.|表)", re.IGNORECASE),
    ElementKind.FIGURE: re.compile(r"^\s*(?:figure|fig\.|chart|graph|plate|図|图)", re.IGNORECASE),
    ElementKind.EQUATION: re.compile(r"^\s*(?:equation|eq\.|式)", re.IGNORECASE),
}


def _caption_names_other_kind(caption: str, kind: ElementKind) -> bool:
    return any(label.match(caption) for other, label in _CAPTION_LABELS.items() if other != kind)


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _units(section: list[Element]) -> list[Element | _AtomicUnit]:
    """The section's elements, with each atomic element bundled with its caption."""
    claimed: set[int] = set()
    atomic_units: dict[int, _AtomicUnit] = {}
    for index, element in enumerate(section):
        if element.kind not in ATOMIC_KINDS:
            continue
        caption = (element.caption or "").strip()
        caption_elements: list[Element] = []
        # Table captions are usually set above the table, figure/equation captions below.
        neighbours = (index - 1, index + 1)
        if element.kind != ElementKind.TABLE:
            neighbours = (index + 1, index - 1)
        for neighbour in neighbours:
            if not 0 <= neighbour < len(section) or neighbour in claimed:
                continue
            candidate = section[neighbour]
            candidate_text = candidate.text.strip()
            if candidate.kind != ElementKind.CAPTION or not candidate_text:
                continue
            if caption and _normalised(candidate_text) != _normalised(caption):
                continue  # the element already has a different caption: this one is not its
            if not caption and _caption_names_other_kind(candidate_text, element.kind):
                continue  # "Figure 2: ..." next to a table belongs to a figure
            claimed.add(neighbour)
            caption_elements.append(candidate)
            caption = caption or candidate_text
            break
        atomic_units[index] = _AtomicUnit(element, caption, caption_elements)
    units: list[Element | _AtomicUnit] = []
    for index, element in enumerate(section):
        if index in atomic_units:
            units.append(atomic_units[index])
        elif index not in claimed:
            units.append(element)
    return units


def _atomic_draft(unit: _AtomicUnit, path: list[str]) -> _Draft:
    element = unit.element
    body = element.text.strip()
    body_locs = [(0, len(body), element.page_number, element.bbox)] if element.bbox else []
    # Parsers give figures their caption as text (DESIGN.md); don't say it twice.
    if unit.caption and body and body != unit.caption:
        text = unit.caption + ELEMENT_SEPARATOR + body
        shift = len(unit.caption) + len(ELEMENT_SEPARATOR)
        locs = _caption_locs(unit) + [(s + shift, e + shift, p, b) for s, e, p, b in body_locs]
    elif unit.caption:
        text, locs = unit.caption, _caption_locs(unit)
    else:
        text, locs = body, body_locs
    draft = _Draft(section_path=path, atomic=True)
    draft.elements = sorted([element, *unit.caption_elements], key=lambda e: (e.page_number, e.seq))
    if text:
        draft.parts.append(text)
        draft.locs.append(locs)
    return draft


def _caption_locs(unit: _AtomicUnit) -> list[_Loc]:
    """Where an atomic unit's caption is printed: its CAPTION element's lines or box, else
    the atomic element's box (a caption the parser merged into the element keeps no box)."""
    for caption_element in unit.caption_elements:
        positions = _align(unit.caption, caption_element.text, 0)
        if positions is not None:
            return _locs(caption_element, unit.caption, positions)
    element = unit.element
    return [(0, len(unit.caption), element.page_number, element.bbox)] if element.bbox else []


def _row_chunks(
    unit: _AtomicUnit, doc_id: str, version: str, first_seq: int, max_rows: int
) -> list[Chunk]:
    """Rule 5: one chunk per data row of a statement table (none for other tables)."""
    table = unit.element
    texts: list[str] = []
    for grid in element_tables(table):  # its cells; its markdown only when it has none
        if len(texts) >= max_rows:
            break
        if is_statement_table(grid):
            texts.extend(row_texts(grid, unit.caption or None, max_rows=max_rows - len(texts)))
    bboxes = [(table.page_number, table.bbox)] if table.bbox is not None else []

    def spans(text: str) -> list[TextSpan]:
        if table.bbox is None or not text:
            return []
        return [TextSpan(start=0, end=len(text), page_number=table.page_number, bbox=table.bbox)]

    return [
        Chunk(
            chunk_id=chunk_id(doc_id, version, first_seq + offset),
            doc_id=doc_id,
            seq=first_seq + offset,
            element_ids=[table.element_id],
            page_numbers=[table.page_number],
            section_path=list(table.section_path),
            kinds=[ElementKind.TABLE],
            text=text,
            bboxes=list(bboxes),
            spans=spans(text),
            unit="table_row",
        )
        for offset, text in enumerate(texts)
    ]


def _to_chunk(draft: _Draft, doc_id: str, version: str, seq: int) -> Chunk:
    page_numbers: list[int] = []
    kinds: list[ElementKind] = []
    bboxes: list[tuple[int, BBox]] = []
    for element in draft.elements:
        if element.page_number not in page_numbers:
            page_numbers.append(element.page_number)
        if element.kind not in kinds:
            kinds.append(element.kind)
        if element.bbox is not None:
            bboxes.append((element.page_number, element.bbox))
    return Chunk(
        chunk_id=chunk_id(doc_id, version, seq),
        doc_id=doc_id,
        seq=seq,
        element_ids=[e.element_id for e in draft.elements],
        page_numbers=sorted(page_numbers),
        section_path=list(draft.section_path),
        kinds=kinds,
        text=draft.text,
        bboxes=bboxes,
        spans=draft.spans,
    )
