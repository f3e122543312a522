"""``pagesight reindex`` and ``rollback``: a re-index while a search loop runs (no failed
search, the searcher switches versions), the catalog following the live version through
promote and rollback, refusals that leave the live version untouched, and the CLI's paths."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from pagesight.api.caller import Caller
from pagesight.api.models import SearchRequest
from pagesight.core.settings import (
    ChunkOptions,
    IndexOptions,
    ReindexOptions,
    Settings,
    VisualEmbedderOptions,
)
from pagesight.core.types import AccessFilter, JobState, SearchFilters
from pagesight.entrypoints.cli import app
from pagesight.index.factory import alias_name, collection_manager
from pagesight.index.live import require_live
from pagesight.index.vectors import CHUNK_COLLECTION, DENSE_VECTOR
from pagesight.ingestion import samples
from pagesight.services import reindex_job
from pagesight.services.index_service import IndexService
from pagesight.services.reindex_job import rollback, run_reindex
from pagesight.services.stack import LocalStack
from pagesight.store.catalog import Catalog

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ADMIN = Caller(key_id="test", tenant="default", principals=None)
QUERY = "pump station inspection"
ADMIN_ACCESS = AccessFilter(tenant="default")


@contextlib.contextmanager
def _moved_away(path: Path) -> Iterator[None]:
    """``path`` renamed out of reindex's way (its source is gone) until the block ends."""
    hidden = path.with_name(f".{path.name}.hidden")
    path.rename(hidden)
    try:
        yield
    finally:
        hidden.rename(path)


def _settings(data_dir: Path, **update: object) -> Settings:
    settings = Settings(
        data_dir=data_dir,
        visual=VisualEmbedderOptions(enabled=False),
        index=IndexOptions(alias_check_s=0),
        reindex=ReindexOptions(runner="local"),
    )
    return settings.model_copy(update=update)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Four small PDFs ingested into a data directory: (docs folder, data dir)."""
    root = tmp_path_factory.mktemp("reindex")
    docs = root / "docs"
    docs.mkdir()
    samples.text_pdf(docs / "report.pdf")
    samples.table_pdf(docs / "table.pdf")
    samples.chart_pdf(docs / "chart.pdf")
    with pymupdf.open() as pdf:
        page = pdf.new_page()
        page.insert_text((72, 72), "Memo: the pump station inspection is due in week 3.")
        pdf.save(docs / "memo.pdf")
    data_dir = root / "var"
    with LocalStack(_settings(data_dir)) as stack:
        jobs = stack.ingestor.ingest([stack.request(p) for p in sorted(docs.iterdir())])
    assert [j.state for j in jobs] == [JobState.READY] * 4, [j.error_message for j in jobs]
    return docs, data_dir


@pytest.fixture()
def data_dir(corpus: tuple[Path, Path], tmp_path: Path) -> Path:
    """A private copy of the ingested data directory (the version alias is a relative
    symlink: the copy is an index of its own)."""
    copy = tmp_path / "var"
    shutil.copytree(corpus[1], copy, symlinks=True)
    return copy


def _live(settings: Settings) -> str | None:
    with collection_manager(settings) as manager:
        return manager.live_version(alias_name(settings, CHUNK_COLLECTION))


def _versions(settings: Settings) -> list[str]:
    with collection_manager(settings) as manager:
        return manager.versions(alias_name(settings, CHUNK_COLLECTION))


@dataclass
class SearchLoop:
    """Searches through an :class:`IndexService` in a thread until stopped, recording every
    failure and which version answered."""

    service: IndexService
    errors: list[str] = field(default_factory=list)
    empty: int = 0
    versions: list[str | None] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        stack = self.service._ready()
        store = require_live(stack.store)
        while not self.stop.is_set():
            try:
                response = self.service.search(
                    ADMIN, SearchRequest(query=QUERY, top_k=5), uuid.uuid4().hex
                )
                if not response.hits:
                    self.empty += 1
                self.versions.append(store.version)
            except Exception as exc:  # what the test is about: none may happen
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def searches_on(self, version: str | None) -> int:
        return sum(v == version for v in self.versions)


@contextlib.contextmanager
def searching(settings: Settings) -> Iterator[SearchLoop]:
    """A warm index service with a search loop running in a thread."""
    service = IndexService(settings)
    service.warm_up(worker=False)
    loop = SearchLoop(service)
    thread = threading.Thread(target=loop.run, name="search-loop", daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.stop.set()
        thread.join(timeout=120)
        service.close()


def _wait_for(loop: SearchLoop, version: str | None, searches: int = 3) -> None:
    """Until the loop has answered ``searches`` times from ``version``."""
    deadline = 300.0
    waited = threading.Event()
    while loop.searches_on(version) < searches and deadline > 0 and not loop.errors:
        waited.wait(0.05)
        deadline -= 0.05
    assert loop.searches_on(version) >= searches, (version, loop.versions[-5:], loop.errors)


def test_reindex_while_searching_then_rollback(corpus: tuple[Path, Path], data_dir: Path) -> None:
    settings = _settings(data_dir)
    before = _live(settings)
    catalog = Catalog(data_dir / "catalog.sqlite3")
    rows_before = {d.doc_id: d for d in catalog.documents("default")}
    catalog.close()
    # a chunker change (table rows as units of their own): chunk ids and counts change, the
    # schema (model, dims) does not
    rebuilt_with = _settings(data_dir, chunk=ChunkOptions(table_rows=True))
    with LocalStack(settings) as stack:
        points_before = stack.store.count()
    with searching(settings) as loop:
        _wait_for(loop, before)
        searches = len(loop.versions)
        report = run_reindex(rebuilt_with)
        assert len(loop.versions) > searches  # the loop kept searching during the build
        assert report.promoted, report.as_dict()
        after = report.indexes["text"].new
        assert after is not None and after != before
        assert _live(settings) == after
        _wait_for(loop, after)
        assert loop.errors == []

        back = rollback(settings, "text")
        assert back["text"]["from"] == after and back["text"]["to"] == before
        assert back["text"]["catalog_documents"] == 4
        _wait_for(loop, before, searches=loop.searches_on(before) + 3)
    assert loop.errors == [], loop.errors[:3]
    assert loop.empty == 0
    summary = report.as_dict()
    assert summary["verified"] and summary["documents"] == summary["rebuilt"] == 4
    assert summary["mismatches"] == [] and summary["missing"] == []
    assert summary["points"]["text"] > points_before  # the row units
    assert summary["indexes"]["text"]["dims"] == {DENSE_VECTOR: 384}
    # both versions are kept: the previous one for rollback, the newer one untouched by it
    assert _versions(settings) == [before, after]
    catalog = Catalog(data_dir / "catalog.sqlite3")
    assert {d.doc_id: d for d in catalog.documents("default")} == rows_before
    catalog.close()
    # the rolled-back version still answers, with each document's original points
    with LocalStack(settings) as stack:
        assert require_live(stack.store).version == before
        hits = stack.search(QUERY, ADMIN_ACCESS).hits
        assert hits


def test_missing_source_refuses_and_allow_missing_leaves_it_out(
    corpus: tuple[Path, Path], data_dir: Path
) -> None:
    docs, _ = corpus
    settings = _settings(data_dir)
    before, versions = _live(settings), _versions(settings)
    gone = docs / "chart.pdf"
    with _moved_away(gone):
        report = run_reindex(settings)
        assert not report.promoted and report.refused is not None
        assert report.refused.code.value == "NOT_FOUND"
        assert [m.reason for m in report.missing] == ["gone"]
        assert (_live(settings), _versions(settings)) == (before, versions)

        report = run_reindex(settings, allow_missing=True)
        assert report.promoted, report.as_dict()
        assert [m.source_uri for m in report.left_out] == [gone.as_uri()]
        assert report.rebuilt == 3
        (left_out,) = report.left_out
        assert _states(data_dir) == {**_ready(data_dir, 3), left_out.doc_id: "MISSING"}
        only = AccessFilter(tenant="default", doc_ids=[left_out.doc_id])
        with LocalStack(settings) as stack:
            assert stack.catalog.pages("default", left_out.doc_id) == []
            assert stack.search(CHART_QUERY, only).hits == []
        rollback(settings)
        # the rows live with that version: READY again, with its pages, and searchable
        assert _states(data_dir) == _ready(data_dir, 4)
        assert _live(settings) == before
        with LocalStack(settings) as stack:
            assert len(stack.catalog.pages("default", left_out.doc_id)) == 1
            assert {h.doc_id for h in stack.search(CHART_QUERY, only).hits} == {left_out.doc_id}


#: Words of chart.pdf's caption ("Figure 1: Revenue by region in fiscal 2024"): a reference
#: the structure routes resolve, and text the other routes find.
CHART_QUERY = "Figure 1 revenue by region in fiscal 2024"


def _states(data_dir: Path) -> dict[str, str]:
    """doc id -> document state, as the catalog lists them (every state, MISSING too)."""
    catalog = Catalog(data_dir / "catalog.sqlite3")
    try:
        return {d.doc_id: d.state.value for d in catalog.documents("default")}
    finally:
        catalog.close()


def _ready(data_dir: Path, count: int) -> dict[str, str]:
    """The READY entries of :func:`_states`, checked to be ``count`` of them."""
    ready = {k: v for k, v in _states(data_dir).items() if v == "READY"}
    assert len(ready) == count, _states(data_dir)
    return ready


def test_a_left_out_document_is_missing_until_its_file_is_ingested_again(
    corpus: tuple[Path, Path], data_dir: Path
) -> None:
    """``reindex --allow-missing``: the document it leaves out stays listed as MISSING (jobs,
    documents), and no search finds it, not even one limited to it that names its figure;
    a later re-index without --allow-missing is not refused for it (nothing more to lose);
    ingesting its file again brings it back READY and searchable."""
    docs, _ = corpus
    settings = _settings(data_dir)
    chart = docs / "chart.pdf"
    with _moved_away(chart):
        report = run_reindex(settings, allow_missing=True)
        assert report.promoted, report.as_dict()
        (left_out,) = report.left_out
        doc_id = left_out.doc_id
        assert not left_out.already_missing
        assert _states(data_dir)[doc_id] == "MISSING"

        code, stdout, stderr = _cli("jobs", "--json", data_dir=data_dir)
        assert code == 0, stderr
        shown = {j["doc_id"]: (j["state"], j["document_state"]) for j in json.loads(stdout)["jobs"]}
        assert shown[doc_id] == ("READY", "MISSING")
        assert sorted(v for k, v in shown.items() if k != doc_id) == [("READY", "READY")] * 3
        code, stdout, stderr = _cli("jobs", data_dir=data_dir)
        assert code == 0, stderr
        (line,) = [ln for ln in stdout.splitlines() if doc_id in ln]
        assert line.startswith("MISSING") and "chart.pdf" in line and "chunks" not in line

        service = IndexService(settings)
        service.warm_up(worker=False)
        try:
            listed = {d.doc_id: d.state.value for d in service.documents(ADMIN)}
            assert listed == _states(data_dir) and listed[doc_id] == "MISSING"
            detail = service.document(ADMIN, doc_id)
            assert detail is not None and detail.document.state == "MISSING"
            only = SearchRequest(query=CHART_QUERY, filters=SearchFilters(doc_ids=[doc_id]))
            assert service.search(ADMIN, only, uuid.uuid4().hex).hits == []
            everything = SearchRequest(query=CHART_QUERY, top_k=20)
            hits = service.search(ADMIN, everything, uuid.uuid4().hex).hits
            assert hits and doc_id not in {h.doc_id for h in hits}
        finally:
            service.close()

        again = run_reindex(settings)
        assert again.refused is None and again.promoted, again.as_dict()
        assert [(m.doc_id, m.already_missing) for m in again.left_out] == [(doc_id, True)]
        assert _states(data_dir)[doc_id] == "MISSING"

    with LocalStack(settings) as stack:
        (job,) = stack.ingestor.ingest([stack.request(chart)])
        assert job.state == JobState.READY and not job.unchanged, job.error_message
        assert job.doc_id == doc_id
        assert len(stack.catalog.pages("default", doc_id)) == 1
        only_chart = AccessFilter(tenant="default", doc_ids=[doc_id])
        assert {h.doc_id for h in stack.search(CHART_QUERY, only_chart).hits} == {doc_id}
    assert _states(data_dir) == _ready(data_dir, 4)
    code, stdout, stderr = _cli("jobs", "--json", data_dir=data_dir)
    assert code == 0, stderr
    assert {j["document_state"] for j in json.loads(stdout)["jobs"]} == {"READY"}


def test_delete_removes_a_missing_document(corpus: tuple[Path, Path], data_dir: Path) -> None:
    docs, _ = corpus
    settings = _settings(data_dir)
    gone = docs / "memo.pdf"
    with _moved_away(gone):
        report = run_reindex(settings, allow_missing=True)
    assert report.promoted, report.as_dict()
    (left_out,) = report.left_out
    assert _states(data_dir)[left_out.doc_id] == "MISSING"
    code, stdout, stderr = _cli("delete", left_out.doc_id, "--json", data_dir=data_dir)
    assert code == 0, stderr
    assert json.loads(stdout) == {"doc_id": left_out.doc_id, "deleted": True}
    assert _states(data_dir) == _ready(data_dir, 3)
    code, stdout, stderr = _cli("jobs", "--json", data_dir=data_dir)
    assert code == 0, stderr
    assert left_out.doc_id not in {j["doc_id"] for j in json.loads(stdout)["jobs"]}
    catalog = Catalog(data_dir / "catalog.sqlite3")
    try:
        (entry, *_) = catalog.audit_entries("default", left_out.doc_id)
        assert entry.action == "delete"
    finally:
        catalog.close()


def test_failed_verification_refuses_and_drops_the_new_version(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document deleted from the catalog while the re-index runs (a concurrent delete):
    the new version no longer matches the catalog, so it must not go live."""
    settings = _settings(data_dir)
    before, versions = _live(settings), _versions(settings)
    real = reindex_job._local_documents

    def deleting(*args: object, **kwargs: object) -> Iterator[object]:
        catalog = Catalog(data_dir / "catalog.sqlite3")
        victim = catalog.documents("default")[0]
        catalog.delete_document("default", victim.doc_id)
        catalog.close()
        yield from real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reindex_job, "_local_documents", deleting)
    report = run_reindex(settings)
    assert not report.promoted and report.refused is not None
    assert report.refused.code.value == "INDEX_FAILED"
    assert any("deleted from the catalog" in m.problem for m in report.mismatches)
    assert (_live(settings), _versions(settings)) == (before, versions)


def test_rollback_never_brings_back_a_deleted_document(data_dir: Path) -> None:
    settings = _settings(data_dir)
    before = _live(settings)
    assert run_reindex(settings).promoted
    with LocalStack(settings) as stack:
        victim = stack.catalog.documents("default")[0].doc_id
        assert stack.ingestor.delete("default", victim, actor="test", via="cli")
    back = rollback(settings)
    assert back["text"]["to"] == before and back["text"]["purged"] == [victim]
    with LocalStack(settings) as stack:
        assert require_live(stack.store).version == before
        assert victim not in stack.store.document_versions("default")
        assert stack.catalog.document("default", victim) is None
        assert len(stack.catalog.documents("default")) == 3


def test_missing_ready_and_rollback_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    """The same states with the catalog in PostgreSQL: left out -> MISSING, not searchable;
    its file ingested again -> READY and searchable; rollback -> READY from the saved rows."""
    docs = tmp_path / "docs"
    docs.mkdir()
    samples.text_pdf(docs / "report.pdf")
    chart = samples.chart_pdf(docs / "chart.pdf")
    settings = _settings(tmp_path / "var", database_url=SecretStr(postgres_url))
    with LocalStack(settings) as stack:
        jobs = stack.ingestor.ingest([stack.request(p) for p in sorted(docs.iterdir())])
    assert [j.state for j in jobs] == [JobState.READY] * 2, [j.error_message for j in jobs]
    (doc_id,) = [j.doc_id for j in jobs if j.source_uri == chart.as_uri()]
    only = AccessFilter(tenant="default", doc_ids=[doc_id])
    with _moved_away(chart):
        report = run_reindex(settings, allow_missing=True)
    assert report.promoted and [m.doc_id for m in report.left_out] == [doc_id]
    with LocalStack(settings) as stack:
        assert stack.catalog.document_states("default", [doc_id]) == {doc_id: "MISSING"}
        assert stack.search(CHART_QUERY, only).hits == []
        (job,) = stack.ingestor.ingest([stack.request(chart)])
        assert job.state == JobState.READY and not job.unchanged, job.error_message
        assert stack.catalog.document_states("default", [doc_id]) == {doc_id: "READY"}
        assert {h.doc_id for h in stack.search(CHART_QUERY, only).hits} == {doc_id}
    back = rollback(settings, "text")
    assert back["text"]["catalog_documents"] == 2
    with LocalStack(settings) as stack:
        document = stack.catalog.document("default", doc_id)
        assert document is not None and document.state == "READY"
        assert len(stack.catalog.pages("default", doc_id)) == 1
        assert {h.doc_id for h in stack.search(CHART_QUERY, only).hits} == {doc_id}


# -- the command line ------------------------------------------------------------------------

RUNNER = CliRunner()


def _cli(*args: str, data_dir: Path) -> tuple[int, str, str]:
    env = {
        "PAGESIGHT_DATA_DIR": str(data_dir),
        "PAGESIGHT_VISUAL__ENABLED": "false",
        "PAGESIGHT_REINDEX__RUNNER": "local",
        "PAGESIGHT_SERVER_URL": None,
        "PAGESIGHT_DEBUG": None,
    }
    result = RUNNER.invoke(app, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def test_cli_error_paths(tmp_path: Path) -> None:
    code, _, stderr = _cli("rollback", "--index", "everything", data_dir=tmp_path)
    assert code == 2 and "everything" in stderr
    code, stdout, stderr = _cli("reindex", data_dir=tmp_path / "empty")
    assert (code, stdout) == (1, "")
    # progress lines may come first (the plan); the error is the last line
    assert stderr.splitlines()[-1].startswith("input/NOT_FOUND: nothing to reindex"), stderr
    code, stdout, stderr = _cli("rollback", data_dir=tmp_path / "empty")
    assert (code, stdout) == (1, "")
    assert stderr.startswith("index/NOT_FOUND: no text index"), stderr


def test_cli_reindex_json_and_rollback(data_dir: Path) -> None:
    settings = _settings(data_dir)
    before = _live(settings)
    code, stdout, stderr = _cli("reindex", "--json", data_dir=data_dir)
    assert code == 0, stderr
    report = json.loads(stdout.splitlines()[-1])  # the "done" event, after plan and progress
    assert report["event"] == "done"
    assert report["promoted"] and report["verified"] and report["rebuilt"] == 4
    assert report["indexes"]["text"]["previous"] == before
    assert _live(settings) == report["indexes"]["text"]["new"]
    code, stdout, stderr = _cli("rollback", "--index", "text", "--json", data_dir=data_dir)
    assert code == 0, stderr
    assert json.loads(stdout)["text"]["to"] == before
    assert _live(settings) == before


def test_reindex_on_ray_as_a_separate_process(data_dir: Path) -> None:
    """The default runner (the bulk pipeline on a local Ray) as a process of its own, while
    this process holds the live version open and searches it: no lock is fought over, and the
    searcher switches to the promoted version without a failed search."""
    settings = _settings(data_dir)
    before = _live(settings)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGESIGHT_")}
    env |= {
        "PAGESIGHT_DATA_DIR": str(data_dir),
        "PAGESIGHT_VISUAL__ENABLED": "false",
        "PAGESIGHT_BULK__OBJECT_STORE_MB": "128",
    }
    with searching(settings) as loop:
        _wait_for(loop, before)
        done = subprocess.run(
            [sys.executable, "-m", "pagesight.entrypoints.cli", "reindex", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads(done.stdout.splitlines()[-1])  # the "done" event
        after = report["indexes"]["text"]["new"]
        _wait_for(loop, after)
    assert loop.errors == [] and loop.empty == 0, loop.errors[:3]
    assert report["promoted"] and report["verified"] and report["rebuilt"] == 4
    assert _live(settings) == after != before
    # the previous version is kept for rollback (it was open in this process until the switch)
    assert _versions(settings) == [before, after]
