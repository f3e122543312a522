"""Chunks that run across a page break, on real pages of ../shared/eval/pdfs: every span of
such a chunk is printed on the page it names, inside the box it gives (issue 31: citations on
the exact page)."""

from __future__ import annotations

import re
from pathlib import Path

import pymupdf
import pytest

from pagesight.core.settings import Settings
from pagesight.core.types import ATOMIC_KINDS, BBox, Chunk
from pagesight.ingestion.chunk import Chunker
from pagesight.ingestion.pipeline import DocumentParser
from tests.conftest import extract_pages

pytestmark = pytest.mark.integration

#: (document, its pages that a chunk runs across)
PAGE_BREAKS = [
    ("PG_2020.03.09_US-Germany_FINAL.pdf", [7, 8]),
    ("ULTABEAUTY_2023Q4_EARNINGS.pdf", [1, 2]),
]

# How the parsers read the text layer: ligatures expanded, ActualText ignored.
_FLAGS = (
    pymupdf.TEXT_MEDIABOX_CLIP
    | pymupdf.TEXT_CID_FOR_UNKNOWN_UNICODE
    | pymupdf.TEXT_IGNORE_ACTUALTEXT
)


def _squeeze(text: str) -> str:
    """Letters and digits only, case folded: words read one by one lose the spaces and
    hyphens the line reading has."""
    return re.sub(r"[\W_]+", "", text).casefold()


def _chunks(
    eval_dir: Path, tmp_path: Path, settings: Settings, doc: str, pages: list[int]
) -> tuple[Path, list[Chunk]]:
    """``pages`` of ``doc`` copied into their own PDF, parsed and chunked by the pipeline."""
    source = eval_dir / "pdfs" / doc
    if not source.is_file():
        pytest.skip(f"{doc} is not in the evaluation corpus")
    pdf = extract_pages(source, pages, tmp_path / doc)
    return pdf, Chunker(settings.chunk)(DocumentParser(settings).parse(pdf))


@pytest.mark.parametrize(("doc", "pages"), PAGE_BREAKS, ids=[d for d, _ in PAGE_BREAKS])
def test_a_chunk_across_a_page_break_is_cited_on_each_page_where_its_text_is(
    eval_dir: Path, tmp_path: Path, settings: Settings, doc: str, pages: list[int]
) -> None:
    pdf, chunks = _chunks(eval_dir, tmp_path, settings, doc, pages)
    crossing = [c for c in chunks if len({s.page_number for s in c.spans}) > 1]
    assert crossing, "a chunk of these pages runs across the page break"

    with pymupdf.open(pdf) as opened:
        layers = {
            n: (
                " ".join(opened[n - 1].get_text("text", flags=_FLAGS).split()),
                opened[n - 1].get_text("words", flags=_FLAGS),
            )
            for n in range(1, opened.page_count + 1)
        }
    for chunk in chunks:
        previous_end = 0
        for span in chunk.spans:
            assert previous_end <= span.start < span.end <= len(chunk.text)
            previous_end = span.end
    # Every span of running text (tables are markdown, figures their labels: boxes only) is
    # printed on its page, in its box; the chunks across the break are among them.
    running = [c for c in chunks if not set(c.kinds) & ATOMIC_KINDS]
    crossing_ids = {c.chunk_id for c in crossing}
    assert crossing_ids <= {c.chunk_id for c in running}
    for chunk in running:
        for span in chunk.spans:
            piece = " ".join(chunk.text[span.start : span.end].split())
            page_text, words = layers[span.page_number]
            if chunk.chunk_id in crossing_ids:
                assert piece in page_text, (span.page_number, piece)
            else:  # chart labels: a legend's two columns, "100" and "%" read apart
                squeezed = _squeeze(page_text)
                assert all(_squeeze(word) in squeezed for word in piece.split()), (span, piece)
            inside = [
                w[4]
                for w in words
                if BBox.of(w[:4]).intersection_area(span.bbox) > 0.5 * BBox.of(w[:4]).area
            ]
            assert _squeeze(piece) in _squeeze(" ".join(inside)), (span, piece, inside)
    for chunk in crossing:
        # in text order, the first page's lines, then the second's
        pages_in_order = [s.page_number for s in chunk.spans]
        assert pages_in_order == sorted(pages_in_order)
