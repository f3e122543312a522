"""bench/bench_ops.py's pure parts: which PDFs it takes, when each event of a bulk run came,
and how the figures are shown."""

from __future__ import annotations

import json
from pathlib import Path

from bench.bench_ops import done_event, event_times, ratio, rows, smallest, table


def test_smallest_by_size_then_name(tmp_path: Path) -> None:
    for name, size in (("big.pdf", 300), ("b.pdf", 10), ("a.pdf", 10), ("mid.pdf", 50)):
        (tmp_path / name).write_bytes(b"x" * size)
    assert [p.name for p in smallest(tmp_path.iterdir(), 3)] == ["a.pdf", "b.pdf", "mid.pdf"]


def _line(**event: object) -> str:
    return json.dumps(event)


def test_event_times_take_the_first_of_each_and_skip_what_is_not_an_event() -> None:
    lines = [
        (0.5, "Token authentication is enabled"),
        (1.0, _line(event="plan", files=3, to_do=2)),
        (2.0, _line(event="progress", files_done=1, phase="starting")),  # one was done already
        (3.0, _line(event="progress", files_done=1, phase="running")),
        (9.0, _line(event="progress", files_done=2, phase="running")),
        (9.5, _line(event="progress", files_done=3, phase="done")),
        (9.6, _line(event="done", wall_s=8.1, pages=7)),
        (9.7, "[1, 2]"),
    ]
    assert event_times(lines) == {
        "plan_s": 1.0,
        "first_progress_s": 2.0,
        "first_file_s": 9.0,
        "done_s": 9.6,
    }
    assert done_event(lines) == {"event": "done", "wall_s": 8.1, "pages": 7}
    assert event_times(lines[:3]) == {
        "plan_s": 1.0,
        "first_progress_s": 2.0,
        "first_file_s": None,
        "done_s": None,
    }
    assert done_event(lines[:3]) == {}


def test_ratio_and_table() -> None:
    assert ratio(3.0, 12.0) == 0.25
    assert ratio(None, 2.0) is None and ratio(1.0, 0.0) is None
    assert table([("a", 1.234), ("longer", None), ("n", 3)]) == "a       1.23\nlonger  -\nn       3"


def test_rows_show_every_measurement_and_a_serve_that_never_started() -> None:
    results = {
        "db_failure": {
            "keys_list": {"seconds": 1.2, "exit_code": 1},
            "db_current": {"seconds": 1.0, "exit_code": 1},
            "keys_over_db": 1.2,
        },
        "shutdown": [
            {
                "mode": "no-ray",
                "started": True,
                "serving_s": 10.0,
                "exit_s": 1.5,
                "tree_gone_s": 1.6,
                "left_after_wait": [],
                "events": ["starting", "serving", "stopping"],
            },
            {"mode": "ray", "started": False},
        ],
        "bulk_first_progress": {
            "files": ["a.pdf", "b.pdf", "c.pdf"],
            "pages": 9,
            "plan_s": 4.0,
            "first_progress_s": 5.0,
            "first_file_s": 40.0,
            "done_s": 60.0,
            "first_progress_over_first_file": 0.125,
        },
    }
    shown = dict(rows(results))
    assert shown["serve no-ray: SIGTERM -> whole tree gone, s"] == 1.6
    assert shown["serve no-ray: events"] == "starting serving stopping"
    assert "serve ray: did not start" in shown
    assert shown["bulk 3 PDFs (9 pages): s to plan"] == 4.0
    assert shown["  first progress / first file"] == 0.125
