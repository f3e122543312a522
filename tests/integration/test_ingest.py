"""Ingestion end to end on the embedded stack: idempotency, replacement, sync, tenancy, resume."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pagesight.core.settings import Settings
from pagesight.core.types import AccessFilter, JobState, RouteName
from pagesight.ingestion import samples
from pagesight.services.stack import LocalStack
from pagesight.store.catalog import Catalog

pytestmark = pytest.mark.integration


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "var"


@pytest.fixture()
def stack(data_dir: Path) -> Iterator[LocalStack]:
    with LocalStack(Settings(data_dir=data_dir)) as opened:
        yield opened


def _points(stack: LocalStack, tenant: str, doc_id: str) -> list[dict[str, object]]:
    return [p.payload for p in stack.store.points_of_document(tenant, doc_id)]


def test_same_file_twice_changes_nothing(stack: LocalStack, docs: Path) -> None:
    path = docs / "report.pdf"
    first = stack.ingestor.ingest([stack.request(path)])[0]
    assert first.state == JobState.READY and first.chunks > 0
    before = sorted(p["chunk_id"] for p in _points(stack, "default", first.doc_id))
    second = stack.ingestor.ingest([stack.request(path)])[0]
    assert second.state == JobState.READY and second.unchanged
    after = sorted(p["chunk_id"] for p in _points(stack, "default", first.doc_id))
    assert before == after and len(after) == first.chunks


def test_changed_file_replaces_all_old_points(stack: LocalStack, docs: Path) -> None:
    path = docs / "report.pdf"
    old = stack.ingestor.ingest([stack.request(path)])[0]
    shutil.copy(docs / "table.pdf", path)  # same source URI, new bytes
    new = stack.ingestor.ingest([stack.request(path)])[0]
    assert new.doc_id == old.doc_id and new.version != old.version
    payloads = _points(stack, "default", new.doc_id)
    assert {p["version"] for p in payloads} == {new.version}
    assert len(payloads) == new.chunks
    hits = stack.search("Northwind parcels", AccessFilter(tenant="default"), RouteName.KEYWORD)
    assert all(h.doc_id != new.doc_id or "Northwind" not in h.snippet for h in hits.hits)


def test_sync_deletes_documents_missing_from_the_folder(stack: LocalStack, docs: Path) -> None:
    report = stack.ingestor.sync(docs, tenant="acme")
    assert [j.state for j in report.ingested] == [JobState.READY] * 3 and report.deleted == []
    gone = stack.doc_id_for("acme", docs / "chart.pdf")
    images = [p.image_ref for p in stack.catalog.pages("acme", gone)]
    assert images and all((stack.settings.page_image_dir / str(r)).exists() for r in images)
    (docs / "chart.pdf").unlink()
    report = stack.ingestor.sync(docs, tenant="acme")
    assert report.deleted == [gone]
    assert all(j.unchanged for j in report.ingested)
    assert _points(stack, "acme", gone) == []
    assert stack.catalog.document("acme", gone) is None
    assert not any((stack.settings.page_image_dir / str(r)).exists() for r in images)


def test_delete_removes_points_and_page_images(stack: LocalStack, docs: Path) -> None:
    job = stack.ingestor.ingest([stack.request(docs / "chart.pdf")])[0]
    refs = [p.image_ref for p in stack.catalog.pages("default", job.doc_id)]
    assert stack.ingestor.delete("default", job.doc_id)
    assert _points(stack, "default", job.doc_id) == []
    assert not any((stack.settings.page_image_dir / str(r)).exists() for r in refs)
    assert not stack.ingestor.delete("default", job.doc_id)


def test_same_bytes_in_two_tenants_never_share_a_point(stack: LocalStack, docs: Path) -> None:
    path = docs / "report.pdf"
    a = stack.ingestor.ingest([stack.request(path, tenant="a")])[0]
    b = stack.ingestor.ingest([stack.request(path, tenant="b")])[0]
    assert a.doc_id != b.doc_id and a.version == b.version
    ids_a = {p.id for p in stack.store.points_of_document("a", a.doc_id)}
    ids_b = {p.id for p in stack.store.points_of_document("b", b.doc_id)}
    assert ids_a and ids_b and not ids_a & ids_b
    for route in (RouteName.KEYWORD, RouteName.TEXT):
        hits = stack.search("Northwind parcels 2024", AccessFilter(tenant="a"), route).hits
        assert hits and {h.doc_id for h in hits} == {a.doc_id}
    stack.ingestor.delete("a", a.doc_id)
    assert stack.search("Northwind parcels", AccessFilter(tenant="b"), RouteName.KEYWORD).hits
    refs_b = [p.image_ref for p in stack.catalog.pages("b", b.doc_id)]
    assert all((stack.settings.page_image_dir / str(r)).exists() for r in refs_b)


def test_acl_filters_inside_retrieval(stack: LocalStack, docs: Path) -> None:
    stack.ingestor.ingest([stack.request(docs / "report.pdf", acl=["alice"])])
    query = "Northwind parcels"
    for route in (RouteName.KEYWORD, RouteName.TEXT):
        assert (
            stack.search(query, AccessFilter(tenant="default", principals=["bob"]), route).hits
            == []
        )
        assert stack.search(query, AccessFilter(tenant="default", principals=["alice"]), route).hits


def test_kill_minus_nine_then_rerun_indexes_each_document_once(tmp_path: Path, docs: Path) -> None:
    samples.scan_pdf(docs / "scan.pdf")  # the slow one (OCR): the kill lands while it runs
    data_dir = tmp_path / "var"
    env = {**os.environ, "PAGESIGHT_DATA_DIR": str(data_dir)}
    cli = [sys.executable, "-m", "pagesight.entrypoints.cli", "ingest", str(docs)]
    proc = subprocess.Popen(
        cli, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    catalog_path = data_dir / "catalog.sqlite3"
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            if catalog_path.exists():
                catalog = Catalog(catalog_path)
                jobs = catalog.jobs()
                catalog.close()
                if any(j.state == JobState.READY for j in jobs) and not all(
                    j.state.terminal for j in jobs
                ):
                    break
            time.sleep(0.2)
        else:
            pytest.fail("the first ingest never got half-way")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    rerun = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr

    with LocalStack(Settings(data_dir=data_dir)) as stack:
        documents = stack.catalog.documents("default")
        assert len(documents) == 4
        for doc in documents:
            payloads = _points(stack, "default", doc.doc_id)
            latest = next(j for j in stack.catalog.jobs("default") if j.doc_id == doc.doc_id)
            assert latest.state == JobState.READY
            assert {p["version"] for p in payloads} == {doc.version}
            assert len(payloads) == len({p["chunk_id"] for p in payloads})
        assert not stack.catalog.unfinished_jobs()


def test_a_file_with_no_text_is_skipped_when_unchanged(stack: LocalStack, tmp_path: Path) -> None:
    """A blank page yields no chunks; ingesting the same file again must not parse it again
    (it did on every run: the index held no point to say it was already there)."""
    import pymupdf

    blank = tmp_path / "blank.pdf"
    with pymupdf.open() as pdf:
        pdf.new_page()
        pdf.save(blank)
    (first,) = stack.ingestor.ingest([stack.request(blank)])
    assert first.state == JobState.READY and first.chunks == 0, first
    document = stack.catalog.document(first.tenant, first.doc_id)
    assert document is not None and document.chunk_count == 0
    (second,) = stack.ingestor.ingest([stack.request(blank)])
    assert second.state == JobState.READY and second.unchanged, second
