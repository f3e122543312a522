"""bench/compare_retrieval.py: two retrieval runs compared question by question."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from bench.compare_retrieval import compare, main


def _run() -> dict[str, Any]:
    return {
        "page_hit@5": 0.5,
        "per_question": [
            {
                "id": "q1",
                "auto": {"top5": ["a.pdf#1", "a.pdf#2"], "hit@5": 1.0},
                "baseline": {"top5": ["a.pdf#2"], "hit@5": 1.0},
            },
            {"id": "q2", "auto": {"top5": ["b.pdf#3"], "hit@5": 0.0}},
        ],
    }


def test_identical_runs_pass(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(_run()))
    (tmp_path / "b.json").write_text(json.dumps(_run()))
    assert compare(_run(), _run()) == ([], [])
    assert main([str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0


def test_a_reordered_top_five_is_a_difference(tmp_path: Path) -> None:
    after = copy.deepcopy(_run())
    after["per_question"][0]["auto"]["top5"] = ["a.pdf#2", "a.pdf#1"]
    differences, problems = compare(_run(), after)
    assert differences == ["q1 [auto]: ['a.pdf#1', 'a.pdf#2'] -> ['a.pdf#2', 'a.pdf#1']"]
    assert not problems
    (tmp_path / "a.json").write_text(json.dumps(_run()))
    (tmp_path / "b.json").write_text(json.dumps(after))
    assert main([str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1


def test_headline_figures_and_missing_questions_are_reported() -> None:
    after = copy.deepcopy(_run())
    after["page_hit@5"] = 0.6
    after["per_question"].pop()
    differences, problems = compare(_run(), after)
    assert differences == ["page_hit@5: 0.5 -> 0.6"]
    assert problems == ["questions differ: 1 only before, 0 only after"]
