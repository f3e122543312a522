"""``pagesight.ingestion.reindex``'s plain steps without engines: which documents can be rebuilt
from where, and the catalog snapshot that rollback puts back."""

from __future__ import annotations

from pathlib import Path

from pagesight.core.ids import file_version
from pagesight.core.types import Document, JobState, Page
from pagesight.ingestion.reindex import CatalogSnapshot, ReindexPlanner
from pagesight.store.catalog import Catalog


def _document(catalog: Catalog, doc_id: str, source_uri: str, version: str, tenant: str) -> None:
    doc = Document(doc_id=doc_id, version=version, tenant=tenant, source_uri=source_uri)
    page = Page(doc_id=doc_id, page_number=1, width=612, height=792)
    catalog.put_document(doc, [page])


def test_plan_finds_sources_and_reports_gone_and_changed(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog.sqlite3")
    same, changed, upload = tmp_path / "same.pdf", tmp_path / "changed.pdf", tmp_path / "up.pdf"
    for path in (same, changed, upload):
        path.write_bytes(b"%PDF-1.7 " + path.name.encode())
    _document(catalog, "same", same.as_uri(), file_version(same), "a")
    _document(catalog, "gone", (tmp_path / "gone.pdf").as_uri(), "v", "a")
    _document(catalog, "changed", changed.as_uri(), file_version(changed), "b")
    changed.write_bytes(b"%PDF-1.7 other bytes")
    _document(catalog, "upload", "upload:up.pdf", file_version(upload), "b")
    job = catalog.new_job(
        tenant="b", source_uri="upload:up.pdf", path=str(upload), doc_id="upload", acl=[]
    )
    catalog.advance(job, JobState.READY)

    plan = ReindexPlanner(catalog).plan(catalog.tenants())
    assert catalog.tenants() == ["a", "b"]
    assert len(plan.documents) == 4
    assert {(t.job.doc_id, t.job.path) for t in plan.tasks} == {
        ("same", str(same)),
        ("upload", str(upload)),  # the stored copy the newest READY job names
    }
    assert all(t.job.version == t.version for t in plan.tasks)
    assert {(m.doc_id, m.reason) for m in plan.missing} == {
        ("gone", "gone"),
        ("changed", "changed"),
    }
    catalog.close()


def test_snapshot_restores_the_rows_live_with_a_version(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog.sqlite3")
    _document(catalog, "kept", "file:///kept.pdf", "v1", "a")
    _document(catalog, "left-out", "file:///left.pdf", "v1", "a")
    snapshots = CatalogSnapshot(tmp_path / "reindex")
    snapshots.save(catalog, catalog.tenants(), "chunks", "00000000000000000001")
    # what a promote does: new rows for one, the other left out; a document added later
    _document(catalog, "kept", "file:///kept.pdf", "v2", "a")
    catalog.delete_document("a", "left-out")
    _document(catalog, "later", "file:///later.pdf", "v1", "c")

    assert snapshots.restore(catalog, "chunks", "00000000000000000002") is None
    assert snapshots.restore(catalog, "chunks", "00000000000000000001") == 2
    assert {(d.doc_id, d.version) for d in catalog.documents("a")} == {
        ("kept", "v1"),
        ("left-out", "v1"),
    }
    assert catalog.documents("c") == []  # not in the index version rolled back to
    assert [p.page_number for p in catalog.pages("a", "left-out")] == [1]
    catalog.close()
