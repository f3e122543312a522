"""Document states through a re-index's catalog steps, without engines: promote leaves a
left-out document listed as MISSING with no pages and no structure (so no structure route can
resolve a reference in it), a rollback's snapshot makes it READY again, the next plan knows it
was MISSING already, and ingesting its file again is never "unchanged"."""

from __future__ import annotations

from pathlib import Path

from pagesight.core.ids import file_version
from pagesight.core.types import (
    Document,
    DocumentState,
    DocumentStructure,
    Page,
    StructurePage,
    StructureSection,
)
from pagesight.ingestion.ingest import is_current
from pagesight.ingestion.reindex import CatalogSnapshot, Rebuilt, ReindexPlanner, write_rows
from pagesight.ingestion.structure import STRUCTURE_VERSION
from pagesight.store.catalog import Catalog

VERSION = "00000000000000000001"


def _rows(
    doc_id: str, version: str = "v1", uri: str = ""
) -> tuple[Document, list[Page], DocumentStructure]:
    doc = Document(
        doc_id=doc_id, version=version, tenant="t", source_uri=uri or f"file:///{doc_id}.pdf"
    )
    pages = [
        Page(doc_id=doc_id, page_number=n, width=612, height=792, image_ref=f"{doc_id}-{n}")
        for n in (1, 2)
    ]
    structure = DocumentStructure(
        doc_id=doc_id,
        version=version,
        pages=[StructurePage(page_number=n, label=str(n), width=612, height=792) for n in (1, 2)],
        sections=[StructureSection(title="Revenue", page_start=1, page_end=2)],
    )
    return doc, pages, structure


def _catalog(tmp_path: Path, *doc_ids: str) -> Catalog:
    catalog = Catalog(tmp_path / "catalog.sqlite3")
    for doc_id in doc_ids:
        catalog.put_document(*_rows(doc_id))
    return catalog


def _rebuilt(doc_id: str) -> Rebuilt:
    doc, pages, structure = _rows(doc_id)
    return Rebuilt(document=doc, pages=pages, structure=structure, chunks=3, page_points=2)


def test_promote_keeps_a_left_out_document_listed_as_missing(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path, "kept", "lost")
    try:
        write_rows(catalog, {("t", "kept"): _rebuilt("kept")}, [("t", "lost"), ("t", "deleted")])
        states = {d.doc_id: d.state for d in catalog.documents("t")}
        assert states == {"kept": DocumentState.READY, "lost": DocumentState.MISSING}
        lost = catalog.document("t", "lost")
        assert lost is not None and lost.version == "v1" and lost.source_uri == "file:///lost.pdf"
        # nothing a route could find it by: no pages, no sections, no labels
        assert catalog.pages("t", "lost") == []
        assert catalog.structure(lost) == DocumentStructure(doc_id="lost", version="v1")
        assert len(catalog.pages("t", "kept")) == 2
        assert catalog.document_states("t", ["kept", "lost"]) == states
    finally:
        catalog.close()


def test_rollback_snapshot_makes_a_missing_document_ready_again(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path, "kept", "lost")
    snapshots = CatalogSnapshot(tmp_path / "reindex")
    try:
        snapshots.save(catalog, catalog.tenants(), "chunks", VERSION)  # before promote
        write_rows(catalog, {("t", "kept"): _rebuilt("kept")}, [("t", "lost")])
        assert snapshots.restore(catalog, "chunks", VERSION) == 2
        lost = catalog.document("t", "lost")
        assert lost is not None and lost.state is DocumentState.READY
        assert [p.page_number for p in catalog.pages("t", "lost")] == [1, 2]
        assert catalog.structure(lost).sections[0].title == "Revenue"
    finally:
        catalog.close()


def test_a_snapshot_keeps_a_document_missing_in_its_version(tmp_path: Path) -> None:
    """The rows live with a version where the document was MISSING say MISSING."""
    catalog = _catalog(tmp_path, "lost")
    snapshots = CatalogSnapshot(tmp_path / "reindex")
    try:
        write_rows(catalog, {}, [("t", "lost")])
        snapshots.save(catalog, catalog.tenants(), "chunks", VERSION)
        catalog.put_document(*_rows("lost"))  # ingested again while a newer version was live
        snapshots.restore(catalog, "chunks", VERSION)
        lost = catalog.document("t", "lost")
        assert lost is not None and lost.state is DocumentState.MISSING
    finally:
        catalog.close()


def test_the_next_plan_knows_which_documents_were_missing_already(tmp_path: Path) -> None:
    back, gone = tmp_path / "back.pdf", tmp_path / "gone.pdf"
    back.write_bytes(b"%PDF-1.7 back")
    catalog = Catalog(tmp_path / "catalog.sqlite3")
    try:
        for path in (back, gone):
            doc = _rows(path.stem, file_version(back), path.as_uri())[0]
            catalog.put_document(doc.model_copy(update={"state": DocumentState.MISSING}), [])
        catalog.put_document(*_rows("newly", uri=(tmp_path / "newly.pdf").as_uri()))
        plan = ReindexPlanner(catalog).plan(catalog.tenants())
        # a MISSING document whose file is back at its version is rebuilt (READY at promote)
        assert [t.job.doc_id for t in plan.tasks] == ["back"]
        assert {(m.doc_id, m.already_missing) for m in plan.missing} == {
            ("gone", True),
            ("newly", False),
        }
        assert {m.as_dict()["already_missing"] for m in plan.missing} == {True, False}
    finally:
        catalog.close()


def test_a_missing_document_is_never_current() -> None:
    doc, _, _ = _rows("d")
    doc.structure_version = STRUCTURE_VERSION
    assert is_current(doc, "v1", [], None)
    missing = doc.model_copy(update={"state": DocumentState.MISSING})
    assert not is_current(missing, "v1", [], None)
