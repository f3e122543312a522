"""The catalog's document states on SQLite: the ``state`` column (revision 0003) follows the
body's ``Document.state`` on every write, ``document_states`` reads it per tenant, a catalog
file from revision 0002 gains the column with every document READY, and a job's body never
stores the document state a listing shows with it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pagesight.core.types import Document, DocumentState, DocumentStructure, Page
from pagesight.store.catalog import Catalog
from pagesight.store.schema import head_revision


def _doc(doc_id: str, tenant: str = "t", state: DocumentState = DocumentState.READY) -> Document:
    return Document(
        doc_id=doc_id, version="v1", tenant=tenant, source_uri=f"upload:{doc_id}", state=state
    )


def _page(doc_id: str) -> Page:
    return Page(doc_id=doc_id, page_number=1, width=612, height=792, image_ref=f"img-{doc_id}")


def _column(path: Path) -> dict[tuple[str, str], str]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT tenant, doc_id, state FROM documents").fetchall()
    db.close()
    return {(t, d): s for t, d, s in rows}


def test_the_state_column_follows_each_write(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite3"
    catalog = Catalog(path)
    try:
        catalog.put_document(_doc("a"), [_page("a")])
        catalog.put_document(_doc("b"), [_page("b")])
        assert _column(path) == {("t", "a"): "READY", ("t", "b"): "READY"}
        # what a re-index does to a document it leaves out: MISSING, no pages, no structure
        orphans = catalog.put_document(_doc("a", state=DocumentState.MISSING), [])
        assert orphans == ["img-a"]  # the caller decides: a re-index keeps them for rollback
        assert _column(path)[("t", "a")] == "MISSING"
        document = catalog.document("t", "a")
        assert document is not None and document.state is DocumentState.MISSING
        assert catalog.pages("t", "a") == []
        assert catalog.structure(document) == DocumentStructure(doc_id="a", version="v1")
        assert {d.doc_id: d.state for d in catalog.documents("t")} == {
            "a": DocumentState.MISSING,
            "b": DocumentState.READY,
        }
        # ingested again: READY
        catalog.put_document(_doc("a"), [_page("a")])
        assert _column(path)[("t", "a")] == "READY"
        assert catalog.delete_document("t", "a") == ["img-a"]
        assert ("t", "a") not in _column(path)
    finally:
        catalog.close()


def test_document_states_reads_one_tenants_named_documents(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog.sqlite3")
    try:
        catalog.put_document(_doc("a", state=DocumentState.MISSING), [])
        catalog.put_document(_doc("a", tenant="other"), [])
        for i in range(1, 1200):  # more ids than one IN (...) list holds
            catalog.put_document(_doc(f"d{i:04d}"), [])
        wanted = ["a", "unknown", *(f"d{i:04d}" for i in range(1, 1200))]
        states = catalog.document_states("t", wanted)
        assert states["a"] is DocumentState.MISSING
        assert "unknown" not in states and len(states) == 1200
        assert set(states.values()) == {DocumentState.READY, DocumentState.MISSING}
        assert catalog.document_states("other", ["a", "d0001"]) == {"a": DocumentState.READY}
        assert catalog.document_states("t", []) == {}
    finally:
        catalog.close()


def test_a_catalog_at_revision_0002_gains_the_column_all_ready(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite3"
    catalog = Catalog(path)
    catalog.put_document(_doc("a"), [_page("a")])
    catalog.close()
    with sqlite3.connect(path) as db:  # back to the file revision 0002 made
        db.execute("ALTER TABLE documents DROP COLUMN state")
        db.execute("UPDATE alembic_version SET version_num = '0002'")
    db.close()
    catalog = Catalog(path)
    try:
        assert _column(path) == {("t", "a"): "READY"}
        assert catalog.document_states("t", ["a"]) == {"a": DocumentState.READY}
        catalog.put_document(_doc("a", state=DocumentState.MISSING), [])
        assert _column(path) == {("t", "a"): "MISSING"}
    finally:
        catalog.close()
    with sqlite3.connect(path) as db:
        (version,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    db.close()
    assert version == head_revision()


def test_a_jobs_body_never_stores_a_document_state(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite3"
    catalog = Catalog(path)
    try:
        job = catalog.new_job(tenant="t", source_uri="upload:a", path="/x", doc_id="a", acl=[])
        shown = job.model_copy(update={"document_state": DocumentState.MISSING})
        catalog.save_job(shown)
        stored = catalog.job(job.job_id)
        assert stored is not None and stored.document_state is None
    finally:
        catalog.close()
    with sqlite3.connect(path) as db:
        (body,) = db.execute("SELECT body FROM jobs").fetchone()
    db.close()
    assert "document_state" not in body
