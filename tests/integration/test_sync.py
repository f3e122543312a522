"""`sync` deletes only what came from the synced folder, and nothing when the folder is unreadable.

Regression tests for a data-loss defect: a sync of a missing or empty folder, or of folder A,
deleted every document of the tenant, uploads and other folders' documents included.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import Settings
from pagesight.core.types import JobState
from pagesight.entrypoints.cli import app
from pagesight.ingestion import samples
from pagesight.ingestion.ingest import IngestRequest
from pagesight.services.stack import LocalStack

pytestmark = pytest.mark.integration

TENANT = "acme"


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "var"


@pytest.fixture()
def stack(data_dir: Path) -> Iterator[LocalStack]:
    with LocalStack(Settings(data_dir=data_dir)) as opened:
        yield opened


def _folder(path: Path, *names: str) -> Path:
    """A folder of small one-page PDFs (same bytes, distinct paths: distinct documents)."""
    path.mkdir(parents=True)
    first = samples.text_pdf(path / names[0])
    for name in names[1:]:
        shutil.copy(first, path / name)
    return path


def _upload(stack: LocalStack, source: Path) -> str:
    """What the gateway's upload does: a spooled file with an ``upload:`` source URI."""
    spool = source.parent.parent / "spool"
    spool.mkdir(exist_ok=True)
    spooled = spool / "x.pdf"
    shutil.copy(source, spooled)
    job = stack.ingestor.ingest(
        [IngestRequest(path=spooled, tenant=TENANT, source_uri="upload:x.pdf")]
    )[0]
    assert job.state == JobState.READY
    return job.doc_id


def _known(stack: LocalStack) -> set[str]:
    """Every document id of the tenant, in the catalog or in the index."""
    return set(stack.store.document_versions(TENANT)) | {
        d.doc_id for d in stack.catalog.documents(TENANT)
    }


def _ids(stack: LocalStack, folder: Path) -> set[str]:
    return {stack.doc_id_for(TENANT, p) for p in folder.iterdir()}


def _ingest(stack: LocalStack, folder: Path) -> None:
    jobs = stack.ingestor.ingest([stack.request(p, TENANT) for p in sorted(folder.iterdir())])
    assert [j.state for j in jobs] == [JobState.READY] * len(jobs)


def test_sync_of_a_missing_folder_deletes_nothing(stack: LocalStack, tmp_path: Path) -> None:
    a = _folder(tmp_path / "a", "one.pdf")
    _ingest(stack, a)
    upload = _upload(stack, a / "one.pdf")
    before = _known(stack)
    assert upload in before and len(before) == 2
    for missing in (tmp_path / "nonexistent", a / "one.pdf"):  # missing, not a folder
        with pytest.raises(PageSightError) as raised:
            stack.ingestor.sync(missing, tenant=TENANT)
        assert raised.value.code == ErrorCode.NOT_FOUND and raised.value.stage == Stage.INPUT
        assert str(missing) in raised.value.message
        assert _known(stack) == before


def test_sync_with_an_unlistable_subfolder_deletes_nothing(
    stack: LocalStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _folder(tmp_path / "a", "one.pdf")
    sub = _folder(a / "sub", "two.pdf")
    stack.ingestor.sync(a, tenant=TENANT)
    before = _known(stack)
    assert _ids(stack, sub) <= before
    scandir = os.scandir

    def denied(path: Any = ".") -> Any:  # root ignores chmod: refuse the listing instead
        if Path(os.fsdecode(path)).resolve() == sub.resolve():
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", denied)
    with pytest.raises(PageSightError) as raised:
        stack.ingestor.sync(a, tenant=TENANT)
    monkeypatch.undo()
    assert raised.value.code == ErrorCode.NOT_FOUND and raised.value.stage == Stage.INPUT
    assert _known(stack) == before


def test_sync_of_an_emptied_folder_is_refused_unless_allowed(
    stack: LocalStack, tmp_path: Path
) -> None:
    a = _folder(tmp_path / "a", "one.pdf", "two.pdf")
    b = _folder(tmp_path / "b", "three.pdf")
    _ingest(stack, a)
    _ingest(stack, b)
    from_a = _ids(stack, a)
    upload = _upload(stack, b / "three.pdf")
    before = _known(stack)
    for path in list(a.iterdir()):
        path.unlink()
    with pytest.raises(PageSightError) as raised:
        stack.ingestor.sync(a, tenant=TENANT)
    assert raised.value.code == ErrorCode.INVALID_REQUEST
    assert "--allow-empty" in raised.value.message and "no files" in raised.value.message
    assert _known(stack) == before

    report = stack.ingestor.sync(a, tenant=TENANT, allow_empty=True)
    assert report.ingested == [] and set(report.deleted) == from_a
    assert _known(stack) == before - from_a
    assert upload in _known(stack) and _ids(stack, b) <= _known(stack)


def test_sync_of_an_empty_folder_with_nothing_from_it_is_fine(
    stack: LocalStack, tmp_path: Path
) -> None:
    b = _folder(tmp_path / "b", "one.pdf")
    _ingest(stack, b)
    empty = tmp_path / "empty"
    empty.mkdir()
    report = stack.ingestor.sync(empty, tenant=TENANT)
    assert report.ingested == [] and report.deleted == []
    assert _ids(stack, b) <= _known(stack)


def test_sync_deletes_only_removed_files_under_its_own_folder(
    stack: LocalStack, tmp_path: Path
) -> None:
    a = _folder(tmp_path / "data" / "a", "keep.pdf", "gone.pdf")
    ab = _folder(tmp_path / "data" / "ab", "sibling.pdf")  # "…/a" is a string prefix of "…/ab"
    b = _folder(tmp_path / "data" / "b", "other.pdf")
    _ingest(stack, ab)
    _ingest(stack, b)
    upload = _upload(stack, b / "other.pdf")
    first = stack.ingestor.sync(a, tenant=TENANT)
    assert [j.state for j in first.ingested] == [JobState.READY] * 2 and first.deleted == []
    others = _ids(stack, ab) | _ids(stack, b) | {upload}
    assert others <= _known(stack)

    gone = stack.doc_id_for(TENANT, a / "gone.pdf")
    (a / "gone.pdf").unlink()
    report = stack.ingestor.sync(a, tenant=TENANT, actor="cli:tester")
    assert report.deleted == [gone]
    (entry,) = stack.catalog.audit_entries(TENANT, doc_id=gone)  # who deleted it, and how
    assert (entry.action, entry.actor, entry.via) == ("delete", "cli:tester", "sync")
    assert all(j.unchanged for j in report.ingested)
    assert gone not in _known(stack) and stack.catalog.document(TENANT, gone) is None
    assert stack.store.points_of_document(TENANT, gone) == []
    assert _known(stack) == others | {stack.doc_id_for(TENANT, a / "keep.pdf")}


def test_sync_keeps_index_only_documents_with_no_known_source(
    stack: LocalStack, tmp_path: Path
) -> None:
    a = _folder(tmp_path / "a", "keep.pdf", "orphan.pdf")
    stack.ingestor.sync(a, tenant=TENANT)
    orphan = stack.doc_id_for(TENANT, a / "orphan.pdf")
    stack.catalog.delete_document(TENANT, orphan)  # points stay, the catalog row goes
    (a / "orphan.pdf").unlink()
    report = stack.ingestor.sync(a, tenant=TENANT)
    assert report.deleted == []
    assert orphan in stack.store.document_versions(TENANT)


# -- the command line ----------------------------------------------------------------------


def _cli_state(data_dir: Path, docs: Path) -> tuple[set[str], str]:
    with LocalStack(Settings(data_dir=data_dir)) as stack:
        _ingest(stack, docs)
        upload = _upload(stack, docs / "report.pdf")
        return _known(stack), upload


def _cli_known(data_dir: Path) -> set[str]:
    with LocalStack(Settings(data_dir=data_dir)) as stack:
        return _known(stack)


def test_cli_sync_of_a_missing_folder_fails_and_deletes_nothing(
    data_dir: Path, docs: Path, tmp_path: Path
) -> None:
    before, _ = _cli_state(data_dir, docs)
    result = CliRunner().invoke(
        app,
        ["sync", str(tmp_path / "nonexistent"), "--tenant", TENANT],
        env={"PAGESIGHT_DATA_DIR": str(data_dir)},
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "deleted" not in result.output
    assert "input/NOT_FOUND" in result.output
    assert _cli_known(data_dir) == before


def test_cli_sync_of_an_emptied_folder_is_refused(
    data_dir: Path, docs: Path, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "report.pdf").write_bytes((docs / "report.pdf").read_bytes())
    with LocalStack(Settings(data_dir=data_dir)) as stack:
        _ingest(stack, inbox)
        before = _known(stack)
    (inbox / "report.pdf").unlink()
    env = {"PAGESIGHT_DATA_DIR": str(data_dir)}
    result = CliRunner().invoke(app, ["sync", str(inbox), "--tenant", TENANT], env=env)
    assert result.exit_code == 1, result.output
    assert "input/INVALID_REQUEST" in result.output and "--allow-empty" in result.output
    assert "Traceback" not in result.output
    assert _cli_known(data_dir) == before

    result = CliRunner().invoke(
        app, ["sync", str(inbox), "--tenant", TENANT, "--allow-empty"], env=env
    )
    assert result.exit_code == 0, result.output
    assert _cli_known(data_dir) == set()


def test_cli_sync_deletes_a_removed_file_and_keeps_uploads(data_dir: Path, docs: Path) -> None:
    before, upload = _cli_state(data_dir, docs)
    gone = LocalStack.doc_id_for(TENANT, docs / "chart.pdf")
    (docs / "chart.pdf").unlink()
    result = CliRunner().invoke(
        app, ["sync", str(docs), "--tenant", TENANT], env={"PAGESIGHT_DATA_DIR": str(data_dir)}
    )
    assert result.exit_code == 0, result.output
    assert f"deleted {gone}" in result.output
    assert "unchanged" in result.output
    assert _cli_known(data_dir) == before - {gone}
    assert upload in before
