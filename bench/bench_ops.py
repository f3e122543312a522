"""What an operator waits for (issue 35): measured, never asserted.

- ``shutdown``: ``pagesight serve --no-ray --json`` (and ``pagesight serve --json`` on Ray
  Serve, unless ``--skip-ray``) on a fresh data directory with one key: seconds to the
  ``serving`` event, then from SIGTERM to the main process' exit and until every process it
  started (its process tree, sampled while it ran) is gone; the events it printed; what was
  left alive after ``--tree-wait-s``. Baseline in the same run: the start time
  (``shutdown_over_start``).
- ``db_failure``: ``pagesight keys list`` against a PostgreSQL URL whose port is closed
  (``PAGESIGHT_DATABASE_URL``): seconds to exit, the exit code and the error line; the
  baseline is ``pagesight db current`` against the same URL (``keys_over_db``).
- ``bulk_first_progress``: ``pagesight bulk --json`` on the 3 smallest PDFs (by size) of
  ``--pdfs`` in a fresh data directory: seconds from launch to the ``plan`` event, to the first
  ``progress`` event, and to the first one after a file finished -- where the first progress
  line used to come -- and to ``done``; ``first_progress_over_first_file`` is the ratio.

Run from the repo root: ``.venv/bin/python -m bench.bench_ops --out var/bench/ops.json``
(``make bench-ops``). Absolute times depend on the machine's load (the load average is
recorded); the ratios are the comparison to read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.asgi_server import free_port, free_ports

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "pagesight.entrypoints.cli"]


# -- pure helpers (tests/unit/bench/test_bench_ops.py) --------------------------------------


def smallest(paths: Iterable[Path], n: int) -> list[Path]:
    """The ``n`` smallest files by size (name breaks ties, so a run is repeatable)."""
    return sorted(paths, key=lambda p: (p.stat().st_size, p.name))[:n]


def event_times(lines: Sequence[tuple[float, str]]) -> dict[str, float | None]:
    """Seconds (since launch) of a ``bulk --json`` run's first ``plan``, first ``progress``,
    first progress after a file finished, and ``done`` event; None for one that never came.
    Lines that are not JSON events are ignored."""
    found: dict[str, float | None] = dict.fromkeys(
        ("plan_s", "first_progress_s", "first_file_s", "done_s")
    )
    decided = _already(lines)
    for at, line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        key = {"plan": "plan_s", "progress": "first_progress_s", "done": "done_s"}.get(str(kind))
        if key is not None and found[key] is None:
            found[key] = at
        finished = kind == "progress" and event.get("files_done", 0) > decided
        if finished and found["first_file_s"] is None:
            found["first_file_s"] = at
    return found


def _already(lines: Sequence[tuple[float, str]]) -> int:
    """Files the plan counted as decided before any work (done, held or failed)."""
    for _, line in lines:
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("event") == "plan":
                return int(event["files"]) - int(event["to_do"])
    return 0


def done_event(lines: Sequence[tuple[float, str]]) -> dict[str, Any]:
    """The ``done`` event's fields (the report), or ``{}`` when the run never finished."""
    for _, line in reversed(lines):
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("event") == "done":
                return event
    return {}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)


def table(rows: Sequence[tuple[str, Any]]) -> str:
    """Two aligned columns: what, and its figure (``-`` for none)."""
    width = max((len(name) for name, _ in rows), default=0)
    shown = []
    for name, value in rows:
        text = "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)
        shown.append(f"{name:<{width}}  {text}")
    return "\n".join(shown)


# -- processes ------------------------------------------------------------------------------


@dataclass
class Watched:
    """A process whose output lines are timestamped (seconds since launch) as they come."""

    argv: list[str]
    env: dict[str, str]
    started: float = 0.0
    proc: subprocess.Popen[str] | None = None
    out: list[tuple[float, str]] = field(default_factory=list)
    err: list[tuple[float, str]] = field(default_factory=list)
    lines: queue.Queue[tuple[float, str]] = field(default_factory=queue.Queue)
    tree: set[int] = field(default_factory=set)

    def start(self) -> Watched:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(  # the CLI of this checkout, with this interpreter
            self.argv,
            env=self.env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for stream, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._pump, args=(stream, into), daemon=True).start()
        return self

    def _pump(self, stream: Any, into: list[tuple[float, str]]) -> None:
        for line in stream:
            stamped = (time.monotonic() - self.started, line.rstrip("\n"))
            into.append(stamped)
            if into is self.out:
                self.lines.put(stamped)

    def wait_for(self, event: str, timeout_s: float) -> float | None:
        """Seconds since launch of the first stdout JSON line with this ``event``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.sample_tree()
            try:
                at, line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc is not None and self.proc.poll() is not None:
                    return None
                continue
            with contextlib.suppress(ValueError):
                if json.loads(line).get("event") == event:
                    return at
        return None

    def sample_tree(self) -> None:
        if self.proc is not None:
            self.tree |= descendants(self.proc.pid) | {self.proc.pid}

    def kill_all(self) -> None:
        for pid in alive(self.tree):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pids: Iterable[int]) -> list[int]:
    """The pids still running (a zombie is not running)."""
    running = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            running.append(pid)
    return running


def base_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGESIGHT_")}
    return {
        **env,
        "PAGESIGHT_DATA_DIR": str(data_dir),
        "PAGESIGHT_VISUAL__ENABLED": "false",
        **extra,
    }


# -- the measurements ----------------------------------------------------------------------


def measure_shutdown(ray: bool, start_timeout_s: float, tree_wait_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-ops-serve-") as tmp:
        data_dir = Path(tmp)
        env = base_env(data_dir, PAGESIGHT_SERVE__OBJECT_STORE_MB="128")
        subprocess.run(
            [*CLI, "keys", "new", "--tenant", "bench"], env=env, cwd=ROOT, check=True,
            capture_output=True, timeout=120,
        )  # fmt: skip
        port = free_ports(2)  # on Ray: the gateway replica's, then Serve's proxy's
        argv = [*CLI, "serve", "--json", "--port", str(port)] + ([] if ray else ["--no-ray"])
        watched = Watched(argv, env).start()
        assert watched.proc is not None
        try:
            serving_s = watched.wait_for("serving", start_timeout_s)
            if serving_s is None:
                return {"mode": "ray" if ray else "no-ray", "started": False,
                        "stderr_tail": [line for _, line in watched.err[-5:]]}  # fmt: skip
            time.sleep(1.0)
            watched.sample_tree()
            sent = time.monotonic()
            watched.proc.send_signal(signal.SIGTERM)
            try:
                watched.proc.wait(timeout=tree_wait_s)
                exit_s: float | None = time.monotonic() - sent
            except subprocess.TimeoutExpired:
                exit_s = None
            gone_s = None
            while time.monotonic() - sent < tree_wait_s:
                if not alive(watched.tree):
                    gone_s = time.monotonic() - sent
                    break
                time.sleep(0.1)
            left = [_cmd(pid) for pid in alive(watched.tree)]
            time.sleep(0.2)
            return {
                "mode": "ray" if ray else "no-ray",
                "started": True,
                "serving_s": round(serving_s, 2),
                "exit_s": None if exit_s is None else round(exit_s, 2),
                "tree_gone_s": None if gone_s is None else round(gone_s, 2),
                "processes_seen": len(watched.tree),
                "left_after_wait": left,
                "exit_code": watched.proc.returncode,
                "events": [_event(line) for _, line in watched.out if _event(line)],
                "shutdown_over_start": ratio(gone_s, serving_s),
            }
        finally:
            watched.kill_all()


def _event(line: str) -> str | None:
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(line)["event"])
    return None


def _cmd(pid: int) -> str:
    try:
        shown = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return str(pid)
    return f"{pid} {shown[:80]}"


def measure_db_failure(timeout_s: float) -> dict[str, Any]:
    port = free_port()  # bound and closed: nothing listens there
    url = f"postgresql://pagesight@127.0.0.1:{port}/pagesight"
    found: dict[str, Any] = {"url": url}
    with tempfile.TemporaryDirectory(prefix="bench-ops-db-") as tmp:
        env = base_env(Path(tmp), PAGESIGHT_DATABASE_URL=url)
        for name, argv in (("keys_list", ["keys", "list"]), ("db_current", ["db", "current"])):
            started = time.monotonic()
            try:
                done = subprocess.run(
                    [*CLI, *argv], env=env, cwd=ROOT, capture_output=True, text=True,
                    timeout=timeout_s,
                )  # fmt: skip
                code: int | None = done.returncode
                line = (done.stderr.strip().splitlines() or [""])[-1]
            except subprocess.TimeoutExpired:
                code, line = None, f"no exit within {timeout_s} s"
            found[name] = {
                "seconds": round(time.monotonic() - started, 2),
                "exit_code": code,
                "message": line[:300],
            }
    found["keys_over_db"] = ratio(found["keys_list"]["seconds"], found["db_current"]["seconds"])
    return found


def measure_bulk(pdfs: Path, timeout_s: float) -> dict[str, Any]:
    files = smallest(pdfs.glob("*.pdf"), 3)
    with tempfile.TemporaryDirectory(prefix="bench-ops-bulk-") as tmp:
        source = Path(tmp) / "in"
        source.mkdir()
        for path in files:
            (source / path.name).symlink_to(path)
        env = base_env(Path(tmp) / "var", PAGESIGHT_BULK__OBJECT_STORE_MB="128")
        watched = Watched([*CLI, "bulk", str(source), "--json"], env).start()
        assert watched.proc is not None
        try:
            watched.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            watched.sample_tree()
            watched.kill_all()
        time.sleep(0.5)  # the readers' last lines
        times = event_times(watched.out)
        report = done_event(watched.out)
        return {
            "files": [p.name for p in files],
            "bytes": sum(p.stat().st_size for p in files),
            "exit_code": watched.proc.returncode,
            **{k: None if v is None else round(v, 2) for k, v in times.items()},
            "pages": report.get("pages"),
            "report_wall_s": report.get("wall_s"),
            "first_progress_over_first_file": ratio(
                times["first_progress_s"], times["first_file_s"]
            ),
        }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, help="write the figures here (JSON)")
    p.add_argument("--pdfs", type=Path, default=ROOT.parent / "shared" / "eval" / "pdfs")
    p.add_argument("--skip-ray", action="store_true", help="no Ray Serve shutdown run")
    p.add_argument("--start-timeout-s", type=float, default=240.0)
    p.add_argument("--tree-wait-s", type=float, default=30.0)
    p.add_argument("--timeout-s", type=float, default=600.0, help="per command")
    return p


def main() -> None:
    args = parser().parse_args()
    results: dict[str, Any] = {"load_average": list(os.getloadavg()), "cpus": os.cpu_count()}
    results["db_failure"] = measure_db_failure(args.timeout_s)
    results["shutdown"] = [measure_shutdown(False, args.start_timeout_s, args.tree_wait_s)]
    if not args.skip_ray:
        results["shutdown"].append(measure_shutdown(True, args.start_timeout_s, args.tree_wait_s))
    results["bulk_first_progress"] = measure_bulk(args.pdfs, args.timeout_s)
    print(table(rows(results)))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")


def rows(results: dict[str, Any]) -> list[tuple[str, Any]]:
    """The table's rows, from the figures ``main`` gathered."""
    db, bulk = results["db_failure"], results["bulk_first_progress"]
    shown: list[tuple[str, Any]] = [
        ("keys list, database unreachable: s to exit", db["keys_list"]["seconds"]),
        ("  exit code", db["keys_list"]["exit_code"]),
        ("db current, same URL (baseline): s to exit", db["db_current"]["seconds"]),
        ("  keys / db", db["keys_over_db"]),
    ]
    for run in results["shutdown"]:
        mode = run["mode"]
        if not run.get("started"):
            shown.append((f"serve {mode}: did not start", None))
            continue
        shown += [
            (f"serve {mode}: s to serving", run["serving_s"]),
            (f"serve {mode}: SIGTERM -> main process exit, s", run["exit_s"]),
            (f"serve {mode}: SIGTERM -> whole tree gone, s", run["tree_gone_s"]),
            (f"serve {mode}: processes left", len(run["left_after_wait"])),
            (f"serve {mode}: events", " ".join(run["events"])),
        ]
    shown += [
        (f"bulk {len(bulk['files'])} PDFs ({bulk['pages']} pages): s to plan", bulk["plan_s"]),
        ("  s to first progress line", bulk["first_progress_s"]),
        ("  s to first finished file (the old first line)", bulk["first_file_s"]),
        ("  s to done", bulk["done_s"]),
        ("  first progress / first file", bulk["first_progress_over_first_file"]),
    ]
    return shown


if __name__ == "__main__":
    main()
