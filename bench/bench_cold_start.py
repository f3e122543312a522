"""Cold start of ``pagesight search``: wall time of fresh processes, with and without the
verified ONNX cache of the text embedder (:mod:`pagesight.models.onnx_encoder`).

Every run is a new ``pagesight search QUERY --route text`` process against a small index (built
here from two generated sample PDFs unless ``--data-dir`` names one). The text embedder's ONNX
cache is a folder of this run's own (``PAGESIGHT_EMBEDDER__ONNX_CACHE_DIR``), never the user's:

* ``warm``: the verified export is recorded; the search loads it with onnxruntime and
  ``tokenizers`` only (no torch, transformers or sentence-transformers).
* ``verify``: the baseline, the behaviour before the record existed: the export is cached but
  its ``*.verified.json`` record is deleted before each run, so the process imports torch and
  sentence-transformers, loads the PyTorch weights and checks the export against them (then
  records it again, ~0.3 s more than the old code did).
* ``cold``: an empty cache (first run on a machine): export + check + record.

``warm`` and ``verify`` runs alternate, so a change in machine load hits both alike; the ratios
are the comparison to read, and absolute times only on an idle machine (the load average is
printed). A breakdown per mode comes from one more process per mode that times the phases of the
same search in-process (imports, opening the stack and index, loading the embedder, the query)
under ``-X importtime`` (cumulative import time of the heavy modules). No assertions: numbers
only.

Run from the repo root: ``.venv/bin/python -m bench.bench_cold_start --runs 5``
(``--out var/bench/cold_start.json`` to keep the numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: Modules whose cumulative import time the breakdown reports (when they are imported at all).
HEAVY = (
    "pagesight.entrypoints.cli",
    "pagesight.core.settings",
    "pagesight.services.stack",
    "pagesight.index.factory",
    "qdrant_client",
    "torch",
    "transformers",
    "sentence_transformers",
    "onnxruntime",
    "tokenizers",
)

#: Runs in a child process: the phases of ``pagesight search`` (as pagesight.entrypoints.cli does
#: them).
PHASES = r"""
import json, sys, time
marks = {}
t = time.perf_counter()
import pagesight.entrypoints.cli  # noqa: F401  # imported only to time the import
marks["import_cli_s"] = time.perf_counter() - t
t = time.perf_counter()
from pagesight.core.settings import Settings
from pagesight.core.types import AccessFilter, RouteName
from pagesight.services.stack import LocalStack
marks["import_stack_s"] = time.perf_counter() - t
t = time.perf_counter()
stack = LocalStack(Settings())
marks["open_stack_and_index_s"] = time.perf_counter() - t
t = time.perf_counter()
stack.embedder.warm_up()
marks["embedder_load_s"] = time.perf_counter() - t
t = time.perf_counter()
result = stack.search(sys.argv[1], AccessFilter(tenant="default"), RouteName(sys.argv[2]), 10)
marks["query_s"] = time.perf_counter() - t
t = time.perf_counter()
stack.close()
marks["close_s"] = time.perf_counter() - t
marks["hits"] = len(result.hits)
marks["backend"] = stack.embedder.backend
marks["imported"] = sorted(
    m for m in ("torch", "transformers", "sentence_transformers", "onnxruntime", "tokenizers",
                "qdrant_client") if m in sys.modules
)
print("PHASES " + json.dumps(marks))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per mode (warm, verify)")
    parser.add_argument("--cold-runs", type=int, default=1, help="runs with an empty cache")
    parser.add_argument("--query", default="fuel cost risk")
    parser.add_argument("--route", default="text")
    parser.add_argument("--data-dir", type=Path, help="an existing index (default: build one)")
    parser.add_argument("--no-breakdown", action="store_true", help="skip the phase timings")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="pagesight-cold-") as tmp:
        work = Path(tmp)
        cache = work / "onnx-cache"
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "PAGESIGHT_EMBEDDER__ONNX_CACHE_DIR": str(cache),
        }
        data_dir = args.data_dir or _build_index(work, env)
        env["PAGESIGHT_DATA_DIR"] = str(data_dir)
        search = [*_pagesight(), "search", args.query, "--route", args.route]
        load_before = os.getloadavg()

        cold: list[dict[str, float]] = []
        for _ in range(args.cold_runs):
            shutil.rmtree(cache, ignore_errors=True)
            cold.append(_timed(search, env))
        if not cold:  # the other modes need a recorded export
            _timed(search, env)
        runs: dict[str, list[dict[str, float]]] = {"warm": [], "verify": []}
        for _ in range(args.runs):
            runs["warm"].append(_timed(search, env))
            _drop_records(cache)
            runs["verify"].append(_timed(search, env))
        if cold:
            runs["cold"] = cold

        breakdown: dict[str, Any] = {}
        if not args.no_breakdown:
            breakdown["warm"] = _phases(args.query, args.route, env)
            _drop_records(cache)
            breakdown["verify"] = _phases(args.query, args.route, env)
        load_after = os.getloadavg()

    summary = {mode: _summary(samples) for mode, samples in runs.items()}
    report = {
        "query": args.query,
        "route": args.route,
        "runs": args.runs,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "summary": summary,
        "ratios": {
            f"{mode}/warm": round(
                summary[mode]["wall_median_s"] / summary["warm"]["wall_median_s"], 2
            )
            for mode in summary
            if mode != "warm"
        },
        "breakdown": breakdown,
        "samples": runs,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    _print(report)
    return 0


def _pagesight() -> list[str]:
    script = Path(sys.executable).with_name("pagesight")
    return (
        [str(script)] if script.is_file() else [sys.executable, "-m", "pagesight.entrypoints.cli"]
    )


def _build_index(work: Path, env: dict[str, str]) -> Path:
    """Two generated sample PDFs (prose, table) ingested into ``work/var``."""
    from pagesight.ingestion.samples import table_pdf, text_pdf

    pdfs = work / "pdfs"
    pdfs.mkdir()
    text_pdf(pdfs / "sample-text.pdf")
    table_pdf(pdfs / "sample-table.pdf")
    data_dir = work / "var"
    started = time.perf_counter()
    subprocess.run(
        [*_pagesight(), "ingest", str(pdfs)],
        env={**env, "PAGESIGHT_DATA_DIR": str(data_dir)},
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    print(f"index: 2 PDFs ingested in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return data_dir


def _drop_records(cache: Path) -> None:
    """Delete the verified records only: the exports stay, as before the records existed."""
    for record in cache.glob("*.verified.json"):
        record.unlink()


def _timed(command: list[str], env: dict[str, str]) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


def _phases(query: str, route: str, env: dict[str, str]) -> dict[str, Any]:
    """One in-process search under ``-X importtime``: phase times + heavy imports."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PHASES, query, route],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("PHASES ")]
    if done.returncode != 0 or not lines:
        tail = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
        return {"error": "\n".join(tail[-5:])}
    phases: dict[str, Any] = json.loads(lines[-1].removeprefix("PHASES "))
    phases["import_cumulative"] = _import_times(done.stderr)
    return phases


def _import_times(stderr: str) -> dict[str, float]:
    """Cumulative ``-X importtime`` seconds of the :data:`HEAVY` modules that were imported."""
    found: dict[str, float] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = line.removeprefix("import time:").split("|")
        if len(fields) != 3 or not fields[1].strip().isdigit():
            continue
        name = fields[2].strip()
        if name in HEAVY and name not in found:
            found[name] = round(int(fields[1]) / 1e6, 3)
    return found


def _summary(samples: list[dict[str, float]]) -> dict[str, float]:
    walls = [s["wall_s"] for s in samples]
    cpus = [s["cpu_s"] for s in samples]
    return {
        "n": len(samples),
        "wall_median_s": round(statistics.median(walls), 3),
        "wall_min_s": min(walls),
        "wall_max_s": max(walls),
        "cpu_median_s": round(statistics.median(cpus), 3),
    }


def _print(report: dict[str, Any]) -> None:
    before, after = report["load_average_before"], report["load_average_after"]
    print(
        f"pagesight search {report['query']!r} --route {report['route']}: fresh processes, "
        f"{report['cpus']} CPUs, load average {before[0]:.1f} -> {after[0]:.1f}"
    )
    print(f"{'mode':<8} {'n':>3} {'wall median':>12} {'min':>8} {'max':>8} {'cpu median':>11}")
    for mode, s in report["summary"].items():
        print(
            f"{mode:<8} {s['n']:>3} {s['wall_median_s']:>11.2f}s {s['wall_min_s']:>7.2f}s "
            f"{s['wall_max_s']:>7.2f}s {s['cpu_median_s']:>10.2f}s"
        )
    for name, ratio in report["ratios"].items():
        print(f"ratio {name} (median wall): {ratio:.2f}x")
    for mode, phases in report["breakdown"].items():
        if "error" in phases:
            print(f"breakdown {mode}: unavailable ({phases['error']})")
            continue
        steps = ", ".join(
            f"{k.removesuffix('_s')} {v:.2f}s" for k, v in phases.items() if k.endswith("_s")
        )
        imports = ", ".join(f"{k} {v:.2f}s" for k, v in phases["import_cumulative"].items())
        print(f"breakdown {mode} (backend {phases['backend']}, {phases['hits']} hits): {steps}")
        print(f"  imports (cumulative, -X importtime): {imports}")


if __name__ == "__main__":
    raise SystemExit(main())
