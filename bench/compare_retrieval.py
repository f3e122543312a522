"""Did a change keep retrieval as it was? Compares two ``bench/eval_retrieval.py`` outputs
question by question: every route both runs asked for (and the in-run BM25 baseline) must
return the same top 5 pages in the same order, and the headline figures must be equal.

    python bench/compare_retrieval.py before.json after.json

Prints each difference and exits 1 if there is one (2 if the runs asked different questions),
so a structural change shows "behaviour unchanged" as a command that passes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HEADLINE = ("page_hit@1", "page_hit@3", "page_hit@5", "page_hit@10", "ndcg@5")


def _rows(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in run["per_question"]}


def _routes(row: dict[str, Any]) -> set[str]:
    return {key for key, value in row.items() if isinstance(value, dict) and "top5" in value}


def compare(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(differences, problems): a difference is one route's top 5 of one question, or a
    headline figure; a problem is a question or route only one run has."""
    differences: list[str] = []
    problems: list[str] = []
    old, new = _rows(before), _rows(after)
    if old.keys() != new.keys():
        problems.append(
            f"questions differ: {len(old.keys() - new.keys())} only before, "
            f"{len(new.keys() - old.keys())} only after"
        )
    for qid in sorted(old.keys() & new.keys()):
        routes_old, routes_new = _routes(old[qid]), _routes(new[qid])
        if routes_old != routes_new:
            problems.append(
                f"{qid}: routes {sorted(routes_old)} before, {sorted(routes_new)} after"
            )
        for route in sorted(routes_old & routes_new):
            top_old, top_new = old[qid][route]["top5"], new[qid][route]["top5"]
            if top_old != top_new:
                differences.append(f"{qid} [{route}]: {top_old} -> {top_new}")
    for key in HEADLINE:
        if before.get(key) != after.get(key):
            differences.append(f"{key}: {before.get(key)} -> {after.get(key)}")
    return differences, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    before = json.loads(args.before.read_text())
    after = json.loads(args.after.read_text())
    differences, problems = compare(before, after)
    for line in problems + differences:
        print(line)
    n = len(_rows(before).keys() & _rows(after).keys())
    routes = sorted(set().union(*(_routes(row) for row in before["per_question"])))
    print(
        f"{n} questions, routes {', '.join(routes)}: "
        f"{len(differences)} differences, {len(problems)} problems"
    )
    if problems:
        return 2
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
