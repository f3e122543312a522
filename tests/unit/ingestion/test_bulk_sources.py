"""What ``pagesight bulk`` reads: folders, globs and JSONL manifests, with their limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.settings import BulkOptions
from pagesight.ingestion.bulk import BulkProgress, StageStats, list_sources


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"%PDF-1.7\n")
    return path


def test_folder_lists_non_hidden_files(tmp_path: Path) -> None:
    _touch(tmp_path / "a.pdf")
    _touch(tmp_path / "sub" / "b.pdf")
    _touch(tmp_path / ".hidden.pdf")
    _touch(tmp_path / ".cache" / "c.pdf")
    items = list_sources(str(tmp_path), BulkOptions(), tenant="acme", acl=["x"])
    assert [Path(i.uri).name for i in items] == ["a.pdf", "b.pdf"]
    assert {i.tenant for i in items} == {"acme"}
    assert all(i.uri.startswith("file://") and i.acl == ["x"] for i in items)


def test_glob_and_missing(tmp_path: Path) -> None:
    _touch(tmp_path / "a.pdf")
    _touch(tmp_path / "b.txt")
    items = list_sources(str(tmp_path / "*.pdf"), BulkOptions())
    assert [i.uri.rsplit("/", 1)[-1] for i in items] == ["a.pdf"]
    for source in (str(tmp_path / "*.docx"), str(tmp_path / "nope")):
        with pytest.raises(PageSightError) as err:
            list_sources(source, BulkOptions())
        assert err.value.code == ErrorCode.NOT_FOUND


def test_manifest_records(tmp_path: Path) -> None:
    _touch(tmp_path / "docs" / "a.pdf")
    manifest = tmp_path / "run.jsonl"
    records = [
        {"uri": "docs/a.pdf", "tenant": "acme", "doc_id": "a-1", "acl": ["fin"], "title": "A"},
        {"uri": (tmp_path / "docs" / "a.pdf").as_uri(), "tenant": "beta"},
    ]
    manifest.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    first, second = list_sources(str(manifest), BulkOptions())
    assert first.uri == (tmp_path / "docs" / "a.pdf").resolve().as_uri()
    assert (first.doc_id, first.acl, first.title) == ("a-1", ["fin"], "A")
    assert (second.tenant, second.doc_id) == ("beta", None)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"uri": "a.pdf"}', "line 2: tenant"),
        ('{"uri": "a.pdf", "tenant": "t", "colour": 1}', "line 2: colour"),
        ('{"uri": "https://example.com/a.pdf", "tenant": "t"}', "line 2: 'https"),
        ("not json", "line 2:"),
        ('{"uri": "' + "x" * 400 + '", "tenant": "t"}', "line 2: longer than 256 bytes"),
    ],
)
def test_bad_manifest_line_refuses_the_run(tmp_path: Path, line: str, expected: str) -> None:
    manifest = tmp_path / "run.jsonl"
    manifest.write_text('{"uri": "ok.pdf", "tenant": "t"}\n' + line + "\n")
    with pytest.raises(PageSightError) as err:
        list_sources(str(manifest), BulkOptions(max_manifest_line_bytes=256))
    assert err.value.code == ErrorCode.INVALID_REQUEST
    assert expected in err.value.message


def test_max_files(tmp_path: Path) -> None:
    for name in "abc":
        _touch(tmp_path / f"{name}.pdf")
    with pytest.raises(PageSightError) as err:
        list_sources(str(tmp_path), BulkOptions(max_files=2))
    assert err.value.code == ErrorCode.INVALID_REQUEST
    assert "MAX_FILES=2" in err.value.message


def test_progress_and_stage_numbers() -> None:
    progress = BulkProgress(files_total=4, files_done=2, pages_done=30, elapsed_s=10.0)
    assert progress.as_dict()["pages_per_s"] == 3.0
    stats = StageStats(workers=2, busy_s=10.0, pages=40)
    shown = stats.as_dict(wall_s=10.0)
    assert shown["busy_share"] == 0.5
    assert shown["pages_per_busy_s"] == 4.0


def test_rayjob_manifest_names_real_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """k8s/rayjob-bulk.yaml's environment is one the settings root accepts, field by field."""
    import yaml

    from pagesight.core.settings import Settings

    root = Path(__file__).resolve().parents[3]
    job = yaml.safe_load((root / "k8s" / "rayjob-bulk.yaml").read_text())
    assert job["kind"] == "RayJob" and job["spec"]["entrypoint"].startswith("pagesight bulk ")
    env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])["env_vars"]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
        if name.startswith("PAGESIGHT_BULK__"):
            assert name.removeprefix("PAGESIGHT_BULK__").lower() in BulkOptions.model_fields
    settings = Settings()
    assert settings.bulk.ray_address == "auto"
    assert settings.bulk.page_embed_actors == 2
