"""``pagesight bulk`` end to end, as a subprocess on a local Ray: exactly once across a SIGKILL
of the driver or of a worker, one hostile file failing alone, the report, the refusal while
another process owns the embedded index, and what an operator sees (the plan before any work,
progress while nothing finishes, one wall time, Ray's own lines only with --verbose)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pymupdf
import pytest

from bench.bench_ops import descendants
from pagesight.core.settings import Settings
from pagesight.core.types import JobState
from pagesight.ingestion import samples
from pagesight.services.stack import LocalStack
from pagesight.store.catalog import Catalog

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGESIGHT_")}
    return {
        **env,
        "PAGESIGHT_DATA_DIR": str(data_dir),
        "PAGESIGHT_VISUAL__ENABLED": "false",
        "PAGESIGHT_BULK__PROGRESS_INTERVAL_S": "0",
        "PAGESIGHT_BULK__OBJECT_STORE_MB": "128",
        **extra,
    }


def _bulk(source: Path, data_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pagesight.entrypoints.cli", "bulk", str(source), *args]


def _six_pdfs(folder: Path) -> Path:
    """Six small PDFs; the scans (OCR, seconds each) keep the run going long enough to kill."""
    folder.mkdir()
    samples.text_pdf(folder / "report.pdf")
    samples.table_pdf(folder / "table.pdf")
    samples.chart_pdf(folder / "chart.pdf")
    samples.scan_pdf(folder / "scan.pdf")
    for n in (1, 2):
        with pymupdf.open() as pdf:
            page = pdf.new_page()
            page.insert_text((72, 72), f"Memo {n}: the pump station inspection is due in week {n}.")
            pdf.save(folder / f"memo{n}.pdf")
    return folder


def _done(stdout: str) -> dict[str, object]:
    """``--json``: the last event, the report (plan and progress events come before it)."""
    event = json.loads(stdout.splitlines()[-1])
    assert event.pop("event") == "done"
    return event


def _descendants(pid: int) -> list[int]:
    """Every live process under ``pid`` (Ray's workers run in sessions of their own)."""
    return sorted(descendants(pid))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _run_until(
    cli: list[str], env: dict[str, str], data_dir: Path, act: Callable[[subprocess.Popen], bool]
) -> subprocess.Popen:
    """Start ``cli``; once the catalog has a READY document and not all are, call ``act``
    until it returns True."""
    proc = subprocess.Popen(
        cli, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    catalog_path = data_dir / "catalog.sqlite3"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if catalog_path.exists():
            catalog = Catalog(catalog_path)
            jobs = catalog.jobs()
            catalog.close()
            ready = sum(j.state == JobState.READY for j in jobs)
            if ready and not all(j.state.terminal for j in jobs) and act(proc):
                return proc
        time.sleep(0.1)
    _kill_all([*_descendants(proc.pid), proc.pid])
    pytest.fail("the bulk run never got half-way: " + proc.communicate()[1].decode()[-2000:])


def _assert_each_document_once(data_dir: Path, expected: int) -> None:
    """Catalog and index agree: every document READY once, its index points exactly its
    catalog job's chunks, all of one version; nothing left unfinished."""
    with LocalStack(Settings(data_dir=data_dir)) as stack:
        documents = stack.catalog.documents("default")
        assert len(documents) == expected
        jobs = stack.catalog.jobs("default")
        for doc in documents:
            latest = next(j for j in jobs if j.doc_id == doc.doc_id and not j.unchanged)
            assert latest.state == JobState.READY, latest
            points = stack.store.points_of_document("default", doc.doc_id)
            assert len(points) == latest.chunks > 0
            assert len({p.payload["chunk_id"] for p in points}) == len(points)
            assert {p.payload["version"] for p in points} == {doc.version}
        assert not stack.catalog.unfinished_jobs()


def test_sigkill_of_the_driver_then_rerun_indexes_each_document_once(tmp_path: Path) -> None:
    docs = _six_pdfs(tmp_path / "docs")
    data_dir = tmp_path / "var"
    env = _env(data_dir, PAGESIGHT_BULK__WRITE_BATCH_DOCS="1")
    cli = _bulk(docs, data_dir)
    started: list[int] = []

    def kill_driver(proc: subprocess.Popen) -> bool:
        started.extend(_descendants(proc.pid))
        os.killpg(proc.pid, signal.SIGKILL)
        return True

    proc = _run_until(cli, env, data_dir, kill_driver)
    proc.wait()
    time.sleep(2)
    _kill_all(started)  # Ray's processes outlive a SIGKILLed driver for a while: not ours to keep

    report = tmp_path / "report.json"
    rerun = subprocess.run(
        [*cli, "--report", str(report)], env=env, capture_output=True, text=True, timeout=600
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    summary = json.loads(report.read_text())
    assert summary["files"] == 6
    assert summary["skipped"] >= 1 and summary["ready"] + summary["skipped"] == 6
    assert summary["unfinished"] == 0 and summary["failed"] == 0
    _assert_each_document_once(data_dir, 6)

    again = subprocess.run([*cli, "--json"], env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert _done(again.stdout)["skipped"] == 6


def test_sigkill_of_a_worker_is_retried_and_the_run_completes(tmp_path: Path) -> None:
    docs = _six_pdfs(tmp_path / "docs")
    data_dir = tmp_path / "var"
    env = _env(data_dir, PAGESIGHT_BULK__WRITE_BATCH_DOCS="1")
    killed: list[str] = []

    def kill_parse_worker(proc: subprocess.Popen) -> bool:
        for pid in _descendants(proc.pid):
            title = _cmdline(pid)
            if title.startswith("ray::MapBatches(parse_batch)"):
                os.kill(pid, signal.SIGKILL)
                killed.append(title)
                return True
        return False

    proc = _run_until(_bulk(docs, data_dir, "--json"), env, data_dir, kill_parse_worker)
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        _kill_all([*_descendants(proc.pid), proc.pid])
    assert killed
    assert proc.returncode == 0, stderr.decode()[-3000:]
    summary = _done(stdout.decode())
    assert summary["ready"] == 6 and summary["failed"] == 0 and summary["aborted"] is None
    _assert_each_document_once(data_dir, 6)


def test_a_hostile_file_fails_alone_with_its_code(tmp_path: Path, eval_dir: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    samples.text_pdf(docs / "report.pdf")
    samples.table_pdf(docs / "table.pdf")
    (docs / "garbage.pdf").write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 40)
    encrypted = (eval_dir / "robust" / "unstructured__password.pdf").read_bytes()
    (docs / "locked.pdf").write_bytes(encrypted)
    data_dir = tmp_path / "var"
    report = tmp_path / "report.json"
    run = subprocess.run(
        _bulk(docs, data_dir, "--report", str(report)),
        env=_env(data_dir),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 3, run.stdout + run.stderr  # partly failed
    assert "Traceback" not in run.stderr
    progress = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    assert progress and progress[-1]["files_done"] == 4 and progress[-1]["failed"] == 2
    summary = json.loads(report.read_text())
    assert summary["ready"] == 2 and summary["failed"] == 2
    codes = {Path(j["source_uri"]).name: j["error_code"] for j in summary["jobs"]}
    assert codes == {
        "garbage.pdf": "CORRUPT",
        "locked.pdf": "ENCRYPTED",
        "report.pdf": None,
        "table.pdf": None,
    }
    assert summary["failures"] == {"render/CORRUPT": 1, "render/ENCRYPTED": 1}
    parse = summary["stages"]["parse"]
    assert parse["documents"] == 4 and parse["failures"] == {"CORRUPT": 1, "ENCRYPTED": 1}
    assert 0 < parse["busy_share"] <= 1 and parse["pages_per_busy_s"] > 0
    assert set(summary["stages"]) == {"parse", "text_embed", "write"}
    for line in run.stdout.splitlines()[:-1]:
        assert line.startswith("FAILED")


def test_refused_while_another_process_owns_the_index(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    samples.text_pdf(docs / "report.pdf")
    data_dir = tmp_path / "var"
    with LocalStack(Settings(data_dir=data_dir)):  # what `pagesight serve` holds
        run = subprocess.run(
            _bulk(docs, data_dir), env=_env(data_dir), capture_output=True, text=True, timeout=120
        )
    assert run.returncode == 1
    assert run.stderr.startswith("index/CONFLICT: bulk writes the index itself"), run.stderr
    assert "pagesight serve" in run.stderr and "PAGESIGHT_QDRANT_URL" in run.stderr


def test_each_parse_task_keeps_its_layout_model_to_its_own_cpus(tmp_path: Path) -> None:
    from pagesight.ingestion.bulk import ParseStage

    settings = Settings(data_dir=tmp_path)
    settings.bulk.parse_cpus = 2.0
    assert ParseStage(settings).settings.parse.layout_threads == 2
    assert settings.parse.layout_threads == 0  # the caller's settings are left alone
    settings.parse.layout_threads = 3
    assert ParseStage(settings).settings.parse.layout_threads == 3


def test_json_events_plan_first_then_ticks_then_one_wall_time(tmp_path: Path) -> None:
    """--json: stdout is events only; the plan comes before any work, progress lines come
    while no file has finished (Ray's start alone takes seconds), and the report's wall time is
    the last progress line's clock. Ray's own lines go to the run's log, not stderr."""
    docs = tmp_path / "docs"
    docs.mkdir()
    samples.text_pdf(docs / "report.pdf")
    data_dir = tmp_path / "var"
    run = subprocess.run(
        _bulk(docs, data_dir, "--json"),
        env=_env(data_dir, PAGESIGHT_BULK__PROGRESS_INTERVAL_S="0.5"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert events[0] == {
        "event": "plan",
        "command": "bulk",
        "files": 1,
        "already_done": 0,
        "held": 0,
        "missing": 0,
        "failed": 0,
        "to_do": 1,
    }
    progress = [e for e in events if e["event"] == "progress"]
    assert [e["event"] for e in events] == ["plan"] + ["progress"] * len(progress) + ["done"]
    waiting = [e for e in progress if e["files_done"] == 0]
    assert waiting and waiting[0]["phase"] in ("starting", "running")  # a tick, not a file
    assert progress[-1]["phase"] == "done" and progress[-1]["files_done"] == 1
    assert progress[-1]["pages_counted"] == 1 and progress[-1]["files_counted"] == 1
    report = events[-1]
    assert report["ready"] == 1 and report["wall_s"] == progress[-1]["elapsed_s"]
    assert "core_worker" not in run.stderr and "Token authentication" not in run.stderr
    assert not [line for line in run.stderr.splitlines() if line.startswith(("[", "("))]
    assert (data_dir / "logs" / "bulk-ray.log").exists()


def test_verbose_shows_rays_lines_and_the_summary_has_one_wall_time(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    samples.text_pdf(docs / "report.pdf")
    data_dir = tmp_path / "var"
    run = subprocess.run(
        _bulk(docs, data_dir, "--verbose"),
        env=_env(data_dir),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stderr.splitlines()
    ours = [json.loads(line) for line in lines if line.startswith('{"event": ')]
    assert ours[0]["event"] == "plan" and ours[-1]["phase"] == "done"
    assert [line for line in lines if not line.startswith('{"event": ')], "no Ray line shown"
    assert not (data_dir / "logs" / "bulk-ray.log").exists()
    (summary,) = run.stdout.splitlines()
    assert summary.startswith("1 ready, 0 failed")
    assert len(re.findall(r"\d s\b", summary)) == 1, summary  # one wall time
