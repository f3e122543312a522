"""Document states on both catalog backends (SQLite, PostgreSQL): a document written MISSING
is listed MISSING with no pages, ``document_states`` reads it per tenant, writing it READY
again (a re-ingest) and deleting it behave the same on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pagesight.core.protocols import CatalogRepository
from pagesight.core.settings import Settings
from pagesight.core.types import Document, DocumentState, Page
from pagesight.store.catalog import open_catalog


@pytest.fixture(params=["sqlite", "postgres"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CatalogRepository]:
    """SQLite: the defaults. PostgreSQL: a fresh database migrated to head (the session's
    server, started only for this parameter)."""
    settings = Settings(data_dir=tmp_path / "var")
    if request.param == "postgres":
        settings = Settings(
            data_dir=tmp_path / "var", database_url=request.getfixturevalue("postgres_url")
        )
    repo = open_catalog(settings)
    yield repo
    repo.close()


def _doc(doc_id: str, tenant: str = "t", state: DocumentState = DocumentState.READY) -> Document:
    return Document(
        doc_id=doc_id, version="v1", tenant=tenant, source_uri=f"upload:{doc_id}", state=state
    )


def _pages(doc_id: str) -> list[Page]:
    return [Page(doc_id=doc_id, page_number=1, width=612, height=792, image_ref=f"i-{doc_id}")]


def test_missing_ready_and_delete(catalog: CatalogRepository) -> None:
    catalog.put_document(_doc("a"), _pages("a"))
    catalog.put_document(_doc("b"), _pages("b"))
    catalog.put_document(_doc("a", tenant="other"), _pages("a"))
    assert catalog.put_document(_doc("a", state=DocumentState.MISSING), []) == ["i-a"]

    listed = {d.doc_id: d.state for d in catalog.documents("t")}
    assert listed == {"a": DocumentState.MISSING, "b": DocumentState.READY}
    assert catalog.pages("t", "a") == [] and catalog.page("t", "a", 1) is None
    assert catalog.document_states("t", ["a", "b", "c"]) == listed
    assert catalog.document_states("other", ["a"]) == {"a": DocumentState.READY}
    assert catalog.tenants() == ["other", "t"]

    catalog.put_document(_doc("a"), _pages("a"))  # its file ingested again
    assert catalog.document_states("t", ["a"]) == {"a": DocumentState.READY}
    assert len(catalog.pages("t", "a")) == 1

    catalog.put_document(_doc("a", state=DocumentState.MISSING), [])
    assert catalog.delete_document("t", "a") == []  # known (not None); its pages went before
    assert catalog.document("t", "a") is None
    assert catalog.document_states("t", ["a", "b"]) == {"b": DocumentState.READY}


def test_migrate_from_sqlite_keeps_a_missing_state(tmp_path: Path, postgres_url: str) -> None:
    """``pagesight db migrate-from-sqlite`` copies the state column with the body: a MISSING
    document of an embedded installation is MISSING in PostgreSQL, in jobs listings too."""
    from pagesight.services.db_migrate import database, migrate_from_sqlite

    data_dir = tmp_path / "var"
    embedded = open_catalog(Settings(data_dir=data_dir))
    embedded.put_document(_doc("a", state=DocumentState.MISSING), [])
    embedded.put_document(_doc("b"), _pages("b"))
    embedded.close()
    settings = Settings(data_dir=tmp_path / "unused", database_url=postgres_url)
    with database(settings) as db:
        report = migrate_from_sqlite(data_dir, db)
    assert report.ok, report
    copied = open_catalog(settings)
    try:
        assert copied.document_states("t", ["a", "b"]) == {
            "a": DocumentState.MISSING,
            "b": DocumentState.READY,
        }
        document = copied.document("t", "a")
        assert document is not None and document.state is DocumentState.MISSING
    finally:
        copied.close()
