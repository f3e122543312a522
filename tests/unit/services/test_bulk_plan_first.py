"""``run_bulk`` reports its plan before Ray starts (an operator sees the size of the run within
seconds, not after Ray's start-up), and a run with nothing to do never starts Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pagesight.core.settings import Settings
from pagesight.ingestion import samples
from pagesight.ingestion.bulk import BulkProgress
from pagesight.services import bulk_job


class _RayStarted(Exception):
    pass


def _settings(tmp_path: Path) -> Settings:
    settings = Settings(data_dir=tmp_path / "var")
    settings.visual.enabled = False
    return settings


def test_the_plan_is_reported_before_ray_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    samples.text_pdf(docs / "a.pdf")
    samples.text_pdf(docs / "b.pdf")
    seen: list[tuple[str, dict[str, object]]] = []

    def record(progress: BulkProgress) -> None:
        seen.append((progress.phase, progress.plan_dict()))

    def start_ray(settings: Settings, *, verbose: bool = False) -> None:
        seen.append(("start_ray", {}))
        raise _RayStarted

    monkeypatch.setattr(bulk_job, "start_ray", start_ray)
    with pytest.raises(_RayStarted):
        bulk_job.run_bulk(_settings(tmp_path), str(docs), on_progress=record)
    assert [phase for phase, _ in seen] == ["planned", "starting", "start_ray"]
    assert seen[0][1] == {
        "event": "plan",
        "command": "bulk",
        "files": 2,
        "already_done": 0,
        "held": 0,
        "missing": 0,
        "failed": 0,
        "to_do": 2,
    }


def test_nothing_to_do_never_starts_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = tmp_path / "run.jsonl"
    manifest.write_text(json.dumps({"uri": str(tmp_path / "gone.pdf"), "tenant": "t"}) + "\n")
    phases: list[str] = []
    seen: list[BulkProgress] = []

    def record(progress: BulkProgress) -> None:
        phases.append(progress.phase)
        seen.append(progress)

    def start_ray(settings: Settings, *, verbose: bool = False) -> None:
        raise AssertionError("Ray started for a run with nothing to do")

    monkeypatch.setattr(bulk_job, "start_ray", start_ray)
    report = bulk_job.run_bulk(_settings(tmp_path), str(manifest), on_progress=record)
    assert phases == ["planned", "done"]
    assert seen[-1].plan_dict()["failed"] == 1 and seen[-1].to_do == 0
    assert report.wall_s == seen[-1].elapsed_s > 0  # one clock
    assert [j.error_code.value for j in report.failed if j.error_code] == ["NOT_FOUND"]
