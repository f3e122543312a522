"""A document's title, chosen at ingest: what the document list, search hits and citations
show, and what every chunk's embedding text starts with
(:func:`pagesight.ingestion.ingest.chunk_index_text`).

In order of preference:

1. the PDF's metadata title, when it is a real title: not empty, not a file name or path
   ("Microsoft Word - report.docx", "draft_v2_final"), not a placeholder ("Untitled",
   "Slide 1"), not a bare number or id (an EDGAR accession number), not an exhibit label of a
   filing ("Q4 Exhibit 99.1"), not the producing application's name;
2. on an SEC form's cover page, the registrant's name (the line printed above "(Exact name of
   registrant as specified in its charter)") with the form ("Costco Wholesale Corporation —
   Form 10-K"): the cover's largest line is otherwise the commission's letterhead;
3. the largest text of the first page: font sizes of the text layer, or the height of each
   line read by OCR; lines of the same size printed one under the other make one title;
   lines that head a page without naming the document ("Table of Contents", "For immediate
   release", "Recommended citation", a byline, a date, a URL) never qualify, and a line must
   stand out from the page's body text unless the page carries hardly any text (a cover);
4. the quoted title in a "Recommended citation" / "Suggested citation" printed on the first
   pages (reports whose cover title is an image);
5. the largest text of the second page, when the first carries almost no text.

``None`` when nothing fits: the file name is shown instead. Whitespace is collapsed and a
title is at most :data:`MAX_TITLE_CHARS` characters.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pagesight.core.types import Element, ElementKind

MAX_TITLE_CHARS = 200
#: The first pages a title is looked for on.
TITLE_PAGES = 2
#: A title's text is at least this much larger than the page's body text ...
_STANDOUT = 1.15
#: ... unless the page carries fewer words than this (a cover, a title slide).
_SPARSE_PAGE_WORDS = 40
#: The second page is looked at only when the first carries fewer words than this.
_EMPTY_PAGE_WORDS = 5
#: Longer runs of large text are paragraphs (a pull quote), not titles.
_MAX_TITLE_WORDS = 40
#: OCR lines read with less confidence are left out (logos, pictures read as letters).
_MIN_OCR_CONFIDENCE = 0.5
#: The widest a character is in ems: an OCR box much taller than its text is wide is a
#: picture with letters in it, and its height is not the text's size.
_MAX_EM_PER_CHAR = 2.2


@dataclass(frozen=True)
class TitleLine:
    """One printed line of a first page, with the size its text is set in.

    ``size`` is the font size in points for a text layer, the line's height (bounded by its
    width) for OCR (``ocr``: sizes measured that way vary by a few points between lines of one
    heading); sizes are only compared within a page, so the two scales never meet."""

    text: str
    size: float
    page_number: int
    x0: float
    y0: float
    x1: float
    y1: float
    ocr: bool = False


# --------------------------------------------------------------------------------------------
# Lines of a page


def text_layer_lines(text: dict[str, Any], page_number: int) -> list[TitleLine]:
    """The horizontal lines of a page's text layer (``get_text("dict")``, as
    :func:`pagesight.ingestion.parse.pdf.page_text` reads it), each with its largest font size."""
    from pagesight.ingestion.parse.text import line_text

    out: list[TitleLine] = []
    for block in text.get("blocks", []):
        if block.get("type") != 0:
            continue
        for line in block.get("lines", []):
            dx, dy = line.get("dir", (1.0, 0.0))
            if dx < 0.9 or abs(dy) > 0.1:  # rotated: margin stamps, axis labels
                continue
            sizes = [
                float(span.get("size") or 0.0)
                for span in line.get("spans", [])
                if str(span.get("text", "")).strip()
            ]
            words = line_text(line)
            if not words or not sizes:
                continue
            x0, y0, x1, y1 = line["bbox"]
            out.append(TitleLine(words, max(sizes), page_number, x0, y0, x1, y1))
    return out


def ocr_lines(elements: Iterable[Element]) -> list[TitleLine]:
    """The lines OCR read on a page: each line of an element where the parser kept them
    (``Element.lines``), else the element as one line; sized by their height, bounded by
    their width (:data:`_MAX_EM_PER_CHAR`)."""
    out: list[TitleLine] = []
    for element in elements:
        if element.kind in (ElementKind.TABLE, ElementKind.FIGURE, ElementKind.EQUATION):
            continue
        if element.confidence is not None and element.confidence < _MIN_OCR_CONFIDENCE:
            continue
        if element.lines:
            pieces = [
                (element.text[line.start : line.end], line.bbox.as_tuple())
                for line in element.lines
            ]
        elif element.bbox is not None:
            pieces = [(element.text, element.bbox.as_tuple())]
        else:
            continue
        for text, (x0, y0, x1, y1) in pieces:
            text = " ".join(text.split())
            if not text:
                continue
            size = min(y1 - y0, _MAX_EM_PER_CHAR * (x1 - x0) / len(text))
            if size > 0:
                out.append(TitleLine(text, size, element.page_number, x0, y0, x1, y1, ocr=True))
    return out


# --------------------------------------------------------------------------------------------
# What is not a title

_FILE_EXTENSION = re.compile(
    r"\.(pdf|docx?|dotx?|rtf|odt|pages|xlsx?|ods|pptx?|odp|key|indd|qxd|qxp|pub|txt|md|"
    r"html?|tex|dvi|ps|eps|ai|psd|png|jpe?g|gif|tiff?|bmp)\s*$",
    re.IGNORECASE,
)
#: Applications that put their own name (and the file's) into the title field.
_APPLICATION_PREFIX = re.compile(
    r"^(microsoft\s*(office\s*)?(word|powerpoint|excel|publisher)|adobe\s+\w+|"
    r"libreoffice|openoffice|google\s+(docs|slides)|wps\s+\w+)\b",
    re.IGNORECASE,
)
_PLACEHOLDER = re.compile(
    r"^(untitled\b.*|no\s+title|title|\(?anonymous\)?|none|null|unknown|blank|template|"
    r"new\s+document|document\s*\d*|doc\s*\d*|presentation\s*\d*|powerpoint\s+presentation|"
    r"slide\s*\d+|page\s*\d+|draft|final|print|scan\w*\s*\d*|image\s*\d*|img[\s_-]*\d*)$",
    re.IGNORECASE,
)
#: An exhibit number of an SEC filing ("Exhibit 99.1", "EX-10.2"): the filer's label of the
#: attachment, not the document's title.
_EXHIBIT_NUMBER = re.compile(r"\bex(hibit)?[\s.-]*\d{1,3}\.\d{1,2}\b", re.IGNORECASE)
#: Lines that head or end a page without naming the document. Matched against the whole
#: line, lower case, whitespace collapsed.
_BOILERPLATE = re.compile(
    r"^("
    r"(table\s+of\s+)?contents?|index|目次|もくじ"
    r"|(recommended|suggested)\s+citation\b.*|(please\s+)?cite\s+(this|as)\b.*|how\s+to\s+cite\b.*"
    r"|for\s+(immediate\s+)?release\b.*|embargo(ed)?\b.*|(news|press|media)\s+release"
    r"|for\s+(media|further|more)\b.*(inquiries|information|contact)\b.*|(media\s+)?contacts?:?"
    r"|united\s+states|.*\bsecurities\s+and\s+exchange\s+commission\b.*"
    r"|washington,?\s*d\.?\s*c\.?\b.*|form\s+[\w/-]+|\(?mark\s+one\)?"
    r"|(annual|quarterly|current|transition)\s+report\b.*\bpursuant\b.*|current\s+report"
    r"|commission\s+file\b.*|\(exact\s+name\s+of\s+registrant\b.*"
    r"|exhibit\s+[\d.]+[a-z]?|(参考)?資料\s*[\d０-９\-－]*|別[紙添]\s*[\d０-９\-－]*"
    r"|abstract|summary|executive\s+summary|introduction|foreword|preface|overview"
    r"|acknowledge?ments?|disclaimer|copyright\b.*|©.*|all\s+rights\s+reserved\b.*"
    r"|about\b.*|by\s.*|authors?:.*|prepared\s+(by|for)\b.*"
    r"|page\s+\d+(\s+of\s+\d+)?|.*\bpage\s+\d+\s+of\s+\d+\b.*|slide\s*\d+"
    r"|(draft|confidential|internal|proprietary|preliminary|restricted)(\s+\w+)?"
    r"|arxiv:.*|doi:.*|https?://.*|www\..*|.*\S@\S+\.\S+.*|@\w+.*"
    r")$",
)
_MONTHS = (
    r"(jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sep(t(ember)?)?|"
    r"oct(ober)?|nov(ember)?|dec(ember)?)\.?"
)
_DATE_ONLY = re.compile(
    rf"^((\w+day,?\s+)?{_MONTHS}\s+\d{{1,2}}(st|nd|rd|th)?,?\s+\d{{4}}|\d{{1,2}}\s+{_MONTHS},?\s+\d{{4}}"
    rf"|{_MONTHS},?\s+\d{{4}}|\d{{1,4}}[./-]\d{{1,2}}[./-]\d{{1,4}}|(fy\s*)?\d{{4}})$",
    re.IGNORECASE,
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_WORD = re.compile(r"[^\W\d_]{2,}")


def clean(text: str) -> str:
    """Whitespace collapsed, edge punctuation of a heading dropped, at most
    :data:`MAX_TITLE_CHARS` characters (cut at a word, with an ellipsis)."""
    text = " ".join(text.split()).strip(" •·–—-:;,|")
    if text.count("(") > text.count(")"):  # a parenthesis the next (smaller) line closes
        head = text[: text.rindex("(")].rstrip(" •·–—-:;,|")
        text = head if _wordy(head) else text
    if len(text) <= MAX_TITLE_CHARS:
        return text
    cut = text[: MAX_TITLE_CHARS - 1].rsplit(" ", 1)[0].rstrip(" ,;:–—-")
    return cut + "…"


def _letters(text: str) -> int:
    return sum(ch.isalpha() for ch in text)


def _wordy(text: str) -> bool:
    """Mostly letters, and enough of them to name something: two words, or a word and a
    number ("2024 Camry"), or three CJK characters."""
    visible = "".join(text.split())
    if not visible or _letters(text) < 0.5 * len(visible):
        return False
    words = _WORD.findall(text)
    if len(words) >= 2 or len(_CJK.findall(text)) >= 3:
        return True
    return bool(words) and len(text.split()) >= 2 and _letters(text) >= 4


def is_boilerplate(text: str) -> bool:
    """True for a line that heads or ends a page without naming the document, or that is no
    name at all (a date, a number, a single word, a URL)."""
    line = " ".join(text.split()).strip(" •·:").lower()
    if not line or _BOILERPLATE.match(line) or _DATE_ONLY.match(line):
        return True
    return not _wordy(line)


def metadata_title(raw: object, *, producer_names: Sequence[object] = ()) -> str | None:
    """The metadata title, cleaned, when it is a real title (see the module docstring);
    ``producer_names``: the metadata's producer, creator and author, which some producers copy
    into the title."""
    if not isinstance(raw, str):
        return None
    title = " ".join(raw.replace("\x00", "").split())
    if len(title) < 3 or _letters(title) < 3:
        return None
    lowered = title.lower()
    if _FILE_EXTENSION.search(title) or _APPLICATION_PREFIX.match(title):
        return None
    if re.search(r"\w_\w", title) or "\\" in title or re.match(r"^(/|~/|file:)", lowered):
        return None
    if " " not in title and ("/" in title or re.search(r"\d", title)):
        return None  # a path, a version, an id ("report2019v3", "0001018724-18-000005")
    if _PLACEHOLDER.match(lowered) or _EXHIBIT_NUMBER.search(title) or _DATE_ONLY.match(title):
        return None
    names = {" ".join(str(n).split()).lower() for n in producer_names if n}
    if lowered in names:
        return None
    return clean(title)


# --------------------------------------------------------------------------------------------
# Runs of large text


@dataclass
class _Run:
    """Lines of one size printed one under the other (or side by side): one heading."""

    lines: list[TitleLine]

    @property
    def size(self) -> float:
        return max(line.size for line in self.lines)

    @property
    def top(self) -> float:
        return min(line.y0 for line in self.lines)

    @property
    def text(self) -> str:
        out = ""
        for line in self.lines:
            piece = line.text
            # Hyphenation across lines: "ab-" + "straction", "AB-" + "STRACTION".
            joined = re.search(r"([^\W\d_]{2,})-$", out)
            if joined and (
                piece[:1].islower() or (joined.group(1).isupper() and piece.split()[0].isupper())
            ):
                out = out[:-1] + piece
            else:
                out = f"{out} {piece}" if out else piece
        return " ".join(out.split())

    def takes(self, line: TitleLine) -> bool:
        last = self.lines[-1]
        if line.page_number != last.page_number:
            return False
        tolerance = 0.2 if line.ocr or last.ocr else 0.05
        if abs(line.size - last.size) > max(0.6, tolerance * last.size):
            return False
        same_row = abs(line.y0 - last.y0) <= 0.3 * last.size
        if same_row:  # one printed line the extractor split
            return 0 <= line.x0 - last.x1 <= 1.5 * last.size
        gap = line.y0 - last.y1
        overlap = min(line.x1, last.x1) - max(line.x0, last.x0)
        return -0.3 * last.size <= gap <= 0.9 * last.size and overlap > 0


def _runs(lines: Iterable[TitleLine]) -> list[_Run]:
    runs: list[_Run] = []
    for line in sorted(lines, key=lambda li: (li.page_number, round(li.y0, 1), li.x0)):
        for run in reversed(runs):  # a run interrupted by a line beside it continues
            if run.takes(line):
                run.lines.append(line)
                break
        else:
            runs.append(_Run([line]))
    return runs


def _words(lines: Sequence[TitleLine]) -> int:
    return sum(len(line.text.split()) + len(_CJK.findall(line.text)) for line in lines)


def _body_size(lines: Sequence[TitleLine]) -> float:
    """The size most of the page's characters are set in (a character-weighted median)."""
    weighted = sorted((line.size, len(line.text)) for line in lines)
    total = sum(n for _, n in weighted)
    seen = 0
    for size, n in weighted:
        seen += n
        if seen * 2 >= total:
            return size
    return statistics.median(line.size for line in lines)


def largest_text(lines: Sequence[TitleLine], *, sparse: bool = False) -> str | None:
    """The largest run of text on one page that can be a title (see the module docstring):
    one that stands out from the page's body text, or with ``sparse``, on a page that carries
    hardly any text, any run."""
    if not lines:
        return None
    sparse = sparse and _words(lines) < _SPARSE_PAGE_WORDS
    floor = 0.0 if sparse else _STANDOUT * _body_size(lines)
    candidates = [
        run
        for run in _runs(lines)
        if run.size >= floor
        and not is_boilerplate(run.text)
        and len(run.text.split()) <= _MAX_TITLE_WORDS
    ]
    if not candidates:
        return None
    best = max(candidates, key=lambda run: (round(run.size, 1), -run.top))
    return clean(best.text)


_REGISTRANT_NOTE = re.compile(r"^\(?\s*exact\s+name\s+of\s+registrant", re.IGNORECASE)
_FORM_LINE = re.compile(r"^form\s+([a-z0-9]{1,3}-[a-z0-9]{1,3}(?:/a)?)$", re.IGNORECASE)


def sec_cover_title(lines: Sequence[TitleLine]) -> str | None:
    """On an SEC form's cover: the registrant's name (the run printed just above "(Exact name
    of registrant as specified in its charter)") and the form ("Form 10-K")."""
    note = next((li for li in lines if _REGISTRANT_NOTE.match(li.text)), None)
    if note is None:
        return None
    above = [
        r
        for r in _runs(lines)
        if r.lines[-1].y1 <= note.y0 + 1
        and note.y0 - r.lines[-1].y1 <= 4 * r.size
        and not is_boilerplate(r.text)
    ]
    if not above:
        return None
    registrant = max(above, key=lambda r: r.lines[-1].y1).text
    form = next((m for li in lines if (m := _FORM_LINE.match(" ".join(li.text.split())))), None)
    return clean(f"{registrant} — Form {form.group(1).upper()}" if form else registrant)


_CITATION_LABEL = re.compile(
    r"\b(recommended|suggested)\s+citation\b|\bcite\s+(this\s+\w+|as)\b|\bhow\s+to\s+cite\b",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"[“\"]([^”\"]{8,300}?)[”\"]")


def citation_title(lines: Sequence[TitleLine]) -> str | None:
    """The title a printed "Recommended citation" gives the document: its first quoted part
    within the citation's first ~400 characters."""
    text = " ".join(
        line.text for line in sorted(lines, key=lambda li: (li.page_number, li.y0, li.x0))
    )
    label = _CITATION_LABEL.search(text)
    if label is None:
        return None
    quoted = _QUOTED.search(text, label.end(), label.end() + 400)
    if quoted is None:
        return None
    title = quoted.group(1).strip().rstrip(".,;:")
    return clean(title) if not is_boilerplate(title) else None


# --------------------------------------------------------------------------------------------
# The choice


def choose_title(
    metadata: object,
    pages: Sequence[Sequence[TitleLine]],
    *,
    producer_names: Sequence[object] = (),
) -> str | None:
    """The document's title (see the module docstring): ``metadata`` is the PDF's metadata
    title, ``pages`` the lines of its first pages in order (:data:`TITLE_PAGES`)."""
    found = metadata_title(metadata, producer_names=producer_names)
    if found:
        return found
    first = pages[0] if pages else []
    found = (
        sec_cover_title(first)
        or largest_text(first)
        or citation_title([line for page in pages[:TITLE_PAGES] for line in page])
        or largest_text(first, sparse=True)
    )
    if found:
        return found
    if len(pages) > 1 and _words(first) < _EMPTY_PAGE_WORDS:
        return largest_text(pages[1], sparse=True)
    return None
