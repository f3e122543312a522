"""The structure cache on a real stack (issue 33): a document's structure is read once and then
served from memory to every search, until the index changes under it: a re-ingested file (a
write through the stack's own index) or a re-index promoted (a new index version)."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from pagesight.core.settings import IndexOptions, ReindexOptions, Settings, VisualEmbedderOptions
from pagesight.core.types import AccessFilter, RouteName
from pagesight.index.live import require_live
from pagesight.services.reindex_job import run_reindex
from pagesight.services.stack import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUERY = "What does page 3 of the annual report say about the graduates?"
FILLER = (
    "The group continued to invest in its people and its plants during the year, and the "
    "board reviewed the progress of every programme at each of its meetings. "
)


def _report(path: Path, first_folio_sheet: int) -> Path:
    """Ten sheets of text with a printed folio in the footer from ``first_folio_sheet`` on
    (printed "1" there), so printed page 3 is sheet ``first_folio_sheet + 2``."""
    with pymupdf.open() as pdf:
        for sheet in range(1, 11):
            page = pdf.new_page(width=612, height=792)
            body = f"Section {sheet}. " + ("Graduates rotated through four plants. " * 2) + FILLER
            page.insert_textbox(pymupdf.Rect(72, 72, 540, 700), body, fontsize=11)
            if sheet >= first_folio_sheet:
                page.insert_text((300, 770), str(sheet - first_folio_sheet + 1), fontsize=9)
        pdf.save(path)
    return path


def _page_3(stack: LocalStack) -> list[tuple[str, int]]:
    result = stack.search(QUERY, AccessFilter(tenant="default"), RouteName.TEXT, 5)
    (resolved,) = result.trace.references
    assert "structure_lookup" in result.trace.stages_ms
    return resolved.pages


def test_the_cache_refreshes_on_a_reingest_and_on_a_reindex(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "var",
        visual=VisualEmbedderOptions(enabled=False),
        # neither the alias nor the catalog rows are re-read on a timer during the test: what
        # refreshes the cache is the index changing
        index=IndexOptions(alias_check_s=600),
        reindex=ReindexOptions(runner="local"),
    )
    pdf = _report(tmp_path / "report.pdf", first_folio_sheet=3)
    with LocalStack(settings) as stack:
        (job,) = stack.ingestor.ingest([stack.request(pdf)])
        assert job.state.value == "READY", job.error_message
        doc_id = job.doc_id
        stats = stack.structures.stats
        assert _page_3(stack) == [(doc_id, 5)]
        reads, structures = stats.catalog_reads, stats.structure_reads
        assert structures == 1
        for _ in range(3):  # searches read neither the catalog nor the structure again
            assert _page_3(stack) == [(doc_id, 5)]
        assert (stats.catalog_reads, stats.structure_reads) == (reads, structures)

        # the file changes and is ingested again: printed "3" is now sheet 4
        _report(pdf, first_folio_sheet=2)
        (again,) = stack.ingestor.ingest([stack.request(pdf)])
        assert again.state.value == "READY" and again.doc_id == doc_id
        assert _page_3(stack) == [(doc_id, 4)]
        assert stats.structure_reads == structures + 1

        # a re-index builds and promotes a new index version; the searcher switches to it
        live = require_live(stack.store)
        before = live.version
        report = run_reindex(settings)
        assert report.promoted, report.as_dict()
        assert live.check_now() != before
        clears = stats.clears
        assert _page_3(stack) == [(doc_id, 4)]
        assert stats.clears == clears + 1
        assert stats.structure_reads == structures + 2
