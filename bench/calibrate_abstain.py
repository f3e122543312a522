"""Calibrate the answer pipeline's abstain threshold on questions outside the smoke subset.

Reads the per-question rows of a ``bench/eval_answers.py`` run made with the threshold at 0
(``--exclude-subset smoke --abstain-threshold 0``: every question answered, each with the
confidence the pipeline computed), drops every question about a smoke document (so the smoke
numbers stay an honest test), and picks the **highest threshold that abstains on at most
``--max-false-abstain`` of the answerable questions** (default 10 %): wrongly refusing a question
the documents do answer is the costlier mistake for a search product. It reports the separation
the confidence achieves (ROC AUC, answerable vs unanswerable: 0.5 = no signal) and the
abstention rates the chosen threshold gives on the calibration set, and writes them to ``--out``.
Store the threshold as ``PAGESIGHT_ANSWER__ABSTAIN_THRESHOLD`` (or the AnswerOptions default for
the profile it was measured on); recalibrate whenever the ranker changes, since the threshold is
on that ranker's confidence scale.

    python bench/eval_answers.py ... --exclude-subset smoke --abstain-threshold 0 \\
        --out var/bench/answers_calibration.json
    python bench/calibrate_abstain.py var/bench/answers_calibration.json \\
        --out var/bench/abstain_threshold.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def roc_auc(positive: list[float], negative: list[float]) -> float | None:
    """P(a random answerable question scores above a random unanswerable one), ties half."""
    if not positive or not negative:
        return None
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


def choose_threshold(
    answerable: list[float], unanswerable: list[float], max_false_abstain: float
) -> float:
    """The highest candidate threshold (0 or an observed confidence) under which at most
    ``max_false_abstain`` of the answerable confidences fall."""
    best = 0.0
    for t in sorted(set(answerable) | set(unanswerable)):
        false_abstain = sum(c < t for c in answerable) / len(answerable) if answerable else 0.0
        if false_abstain <= max_false_abstain:
            best = max(best, t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("rows", type=Path, help="eval_answers.py output (threshold 0)")
    ap.add_argument("--subsets", type=Path, default=Path("../shared/eval/subsets.json"))
    ap.add_argument("--holdout", default="smoke", help="subset whose documents are left out")
    ap.add_argument("--max-false-abstain", type=float, default=0.10)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    run = json.loads(args.rows.read_text())
    if run.get("abstain_threshold", 0) != 0:
        raise SystemExit("calibrate on a run made with --abstain-threshold 0")
    held_out = set(json.loads(args.subsets.read_text())[args.holdout])
    rows = [r for r in run["rows"] if r["doc"] not in held_out]
    answerable = [float(r["confidence"]) for r in rows if r["answerable"]]
    unanswerable = [float(r["confidence"]) for r in rows if not r["answerable"]]
    threshold = choose_threshold(answerable, unanswerable, args.max_false_abstain)
    result: dict[str, Any] = {
        "ranker": run.get("ranker"),
        "held_out": args.holdout,
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "roc_auc": None if (auc := roc_auc(answerable, unanswerable)) is None else round(auc, 4),
        "max_false_abstain": args.max_false_abstain,
        "abstain_threshold": round(threshold, 4),
        "abstain_rate_answerable": round(
            sum(c < threshold for c in answerable) / len(answerable), 4
        )
        if answerable
        else None,
        "abstain_rate_unanswerable": round(
            sum(c < threshold for c in unanswerable) / len(unanswerable), 4
        )
        if unanswerable
        else None,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
