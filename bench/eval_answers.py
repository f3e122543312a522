"""Answer evaluation on the golden set: evidence-backed answers and honest abstentions.

Ingests the subset's PDFs and the documents of every unanswerable question (the "unanswerable"
set is all of them, whatever the subset), then asks each question through the same
:class:`~services.index_service.IndexService` code path ``POST /v1/answer`` runs, with the
retrieval scoped to exactly those documents. Scored (see ../shared/eval/README.md):

- ``answered_with_evidence_rate``: answerable questions answered (not abstained) with at least
  one citation on one of the question's evidence pages;
- ``accuracy`` and ``f1`` (with ``scored_n``), overall, per ``kind`` and per answer format
  (``by_format``), scored the way MMLongBench-Doc scores (``bench/answer_scoring.py``): one value
  is extracted from the answer by its answer format (an abstention is "Not answerable"), then
  scored (Int exact, Float within 1 %, Str exact or ANLS, List element by element, None = 1
  for "Not answerable"). Accuracy is the mean score over the answerable and unanswerable
  questions asked; F1 combines precision over the questions answered with recall over the
  answerable ones. A question without ``answer_format`` (FinanceBench, UDA) takes the format
  its gold answer looks like: a list literal is List, a plain integer Int, another plain number
  Float, "Not answerable" None, anything else (sentences too) Str;
- ``unanswerable_abstention_rate``: unanswerable questions whose extracted value is "Not
  answerable" (abstained, or an answer that says the documents do not tell);
- ``answer_accuracy`` (and ``answer_accuracy_n``), the earlier rule, kept to compare with the
  figures reported before: questions whose ``answer_format`` is Int, Float or Str; a Str answer
  counts when its normalised text occurs in the normalised answer, a number when the answer
  states the same number anywhere (1 % relative tolerance). It rewards quoting more (a table
  row holds the gold figure among others); ``accuracy`` does not;
- ``abstain_rate_unanswerable`` / ``abstain_rate_answerable``: the share of abstentions;
- ``citations_in_context_rate``: answers whose every citation names a chunk that was in the
  context given (from each answer's trace; must be 1.0);
- per ``kind`` and the confidence of every answer, for calibrating the abstain threshold
  (``bench/calibrate_abstain.py`` fits it on the questions outside the smoke subset).

    python bench/eval_answers.py --pdfs ../shared/eval/pdfs \\
        --questions ../shared/eval/questions.jsonl \\
        --unanswerable ../shared/eval/questions_unanswerable.jsonl --subset smoke \\
        --out var/bench/answers_smoke.json

``--crag on`` grades the candidates and corrects the search once before answering
(``query.corrective``); run it with ``on`` and ``off`` to compare on the same questions.
``--data-dir`` keeps the index between runs (unchanged files are not parsed again) and may hold
more documents than the run uses: retrieval is filtered to the run's documents inside the
engine. ``--llm-url`` answers with an OpenAI-compatible server (vLLM) instead of extractively;
``--vision auto|always`` then sends page images too (a VLM), and each row records how many
images its request carried and whether the model failed on them (``vision_fallback``); a
question the LLM server fails on is listed under ``errors`` and not scored.
``bench/gpu_answers.sh`` runs it with images on and off against a local VLM checkpoint.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.answer_scoring import (  # noqa: E402  (after the sys.path line, as a script)
    NOT_ANSWERABLE,
    ScoredAnswer,
    accuracy,
    extract_value,
    f1,
    resolve_format,
    score_value,
)

TENANT = "eval"
SCORED_FORMATS = ("Int", "Float", "Str")

# -- scoring -----------------------------------------------------------------------------------

_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
_PUNCT = re.compile(r"[^\w\s%.]")


def normalise(text: str) -> str:
    """Lower case, punctuation other than ``%`` and ``.`` removed, whitespace collapsed."""
    return " ".join(_PUNCT.sub(" ", text.casefold()).split())


def numbers_in(text: str) -> list[float]:
    out = []
    for match in _NUMBER.findall(text):
        try:
            out.append(float(match.replace(",", "")))
        except ValueError:
            continue
    return out


def answer_matches(gold: str, answer: str, answer_format: str) -> bool:
    """The earlier rule behind ``answer_accuracy``, kept to compare with the figures reported
    before (superseded by :mod:`bench.answer_scoring`: it accepts the gold number anywhere in
    the answer, so quoting more scores more). Normalised containment for Str, numeric equality
    (1 % relative) for Int and Float; a numeric gold answer that is not a number
    (``"14:04 CET"``, ``"yes"``) falls back to containment."""
    if answer_format in ("Int", "Float"):
        wanted = numbers_in(gold)
        if len(wanted) == 1 and re.fullmatch(r"\s*[-+]?[\d,.]+\s*%?\s*", gold):
            target = wanted[0]
            return any(
                abs(value - target) <= max(1e-9, 0.01 * abs(target)) for value in numbers_in(answer)
            )
    needle = normalise(gold)
    return bool(needle) and needle in normalise(answer)


def rate(values: list[bool]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def score_answer(question: dict[str, Any], answer: str, abstained: bool) -> dict[str, Any]:
    """The row fields of the MMLongBench-style score: the format scored by, the value extracted
    from the answer (an abstention is "Not answerable") and its score."""
    gold = str(question["answer"])
    fmt = resolve_format(gold, question.get("answer_format"))
    predicted = NOT_ANSWERABLE if abstained else extract_value(answer, fmt)
    return {
        "scored_format": fmt,
        "prediction": predicted,
        "score": score_value(gold, predicted, fmt),
    }


def accuracy_and_f1(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``accuracy`` and ``f1`` of scored rows (``None`` where undefined: no rows; for F1, no
    answerable question among them)."""
    items = [
        ScoredAnswer(
            answerable=row["answerable"],
            answered=row["prediction"] != NOT_ANSWERABLE,
            score=float(row["score"]),
        )
        for row in rows
    ]
    return {"accuracy": rounded(accuracy(items)), "f1": rounded(f1(items))}


# -- run ---------------------------------------------------------------------------------------


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pdfs", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--unanswerable", type=Path, required=True)
    ap.add_argument("--subset", help="a key of subsets.json next to the questions file")
    ap.add_argument(
        "--exclude-subset", help="answerable questions NOT in this subset (calibration)"
    )
    ap.add_argument(
        "--route", default="text", choices=["auto", "text", "keyword", "visual", "hybrid"]
    )
    ap.add_argument("--llm-url", help="OpenAI-compatible base URL (…/v1); unset = extractive")
    ap.add_argument("--llm-model", default=None, help="model name the server serves")
    ap.add_argument(
        "--vision",
        choices=["off", "auto", "always"],
        default="off",
        help="page images in the answer request (PAGESIGHT_LLM__VISION; needs --llm-url)",
    )
    ap.add_argument(
        "--context-budget", type=int, default=None, help="answer.context_budget_tokens override"
    )
    ap.add_argument("--abstain-threshold", type=float, default=None, help="override the config")
    ap.add_argument(
        "--crag",
        choices=["on", "off"],
        default="off",
        help="corrective retrieval (grade, rewrite or widen once) before answering",
    )
    ap.add_argument("--data-dir", type=Path, help="keep the index here (default: a temp dir)")
    ap.add_argument("--limit", type=int, default=0, help="ask at most this many of each set")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    from core.errors import PageSightError
    from core.settings import Settings
    from core.types import AccessFilter, Question, SearchFilters
    from services.engine import build_answer_pipeline
    from services.stack import LocalStack

    all_docs = sorted(p.name for p in args.pdfs.glob("*.pdf"))
    subset_docs = set(all_docs)
    if args.subset or args.exclude_subset:
        subsets = json.loads((args.questions.parent / "subsets.json").read_text())
        if args.subset:
            subset_docs = set(subsets[args.subset])
        else:
            subset_docs -= set(subsets[args.exclude_subset])
    answerable = [q for q in load_jsonl(args.questions) if q["doc"] in subset_docs]
    unanswerable = load_jsonl(args.unanswerable)
    if args.limit:
        answerable, unanswerable = answerable[: args.limit], unanswerable[: args.limit]
    names = sorted(subset_docs | {q["doc"] for q in unanswerable})
    paths = {name: args.pdfs / name for name in names}

    with tempfile.TemporaryDirectory() as tmp:
        overrides: dict[str, Any] = {"data_dir": args.data_dir or Path(tmp)}
        if args.llm_url:
            overrides["llm"] = {
                "base_url": args.llm_url,
                "model": args.llm_model or "default",
                "vision": args.vision,
            }
        answer: dict[str, Any] = {"corrective": {"enabled": args.crag == "on"}}
        if args.context_budget is not None:
            answer["context_budget_tokens"] = args.context_budget
        if args.abstain_threshold is not None:
            answer["abstain_threshold"] = args.abstain_threshold
        overrides["answer"] = answer
        settings = Settings(**overrides)
        started = time.perf_counter()
        stack = LocalStack(settings)
        jobs = stack.ingestor.ingest(
            [stack.request(path, tenant=TENANT) for path in paths.values()], progress=None
        )
        name_of = {stack.doc_id_for(TENANT, path): name for name, path in paths.items()}
        ingest_s = time.perf_counter() - started
        failed = [j for j in jobs if j.state.value != "READY"]

        pipeline = build_answer_pipeline(settings, stack)  # the engine the service runs
        access = AccessFilter(tenant=TENANT, principals=[])
        scope = SearchFilters(doc_ids=sorted(name_of))
        rows: list[dict[str, Any]] = []
        errors: list[dict[str, str]] = []
        try:
            for answerable_set, questions in ((True, answerable), (False, unanswerable)):
                for q in questions:
                    trace_id = uuid.uuid4().hex
                    t0 = time.perf_counter()
                    request = Question(query=q["question"], route=args.route, filters=scope)
                    try:
                        done = pipeline.run(request, access, trace_id)
                    except PageSightError as exc:  # the LLM server failed: counted, not scored
                        errors.append({"id": q["id"], "error": f"{exc.code}: {exc.message}"})
                        continue
                    response, trace = done.response, done.trace
                    elapsed_ms = (time.perf_counter() - t0) * 1000
                    context = set(trace.answer.context) if trace and trace.answer else set()
                    vision = trace.answer.vision if trace and trace.answer else None
                    cited = [
                        (name_of.get(c.doc_id, c.doc_id), c.page_number) for c in response.citations
                    ]
                    evidence = {(q["doc"], p) for p in q.get("evidence_pages", [])}
                    fmt = q.get("answer_format")
                    rows.append(
                        {
                            "id": q["id"],
                            "doc": q["doc"],
                            "answerable": answerable_set,
                            "kind": q.get("kind"),
                            "answer_format": fmt,
                            "abstained": response.abstained,
                            "confidence": response.confidence,
                            "with_evidence": not response.abstained
                            and any(c in evidence for c in cited),
                            "correct": (
                                answer_matches(str(q["answer"]), response.answer, fmt)
                                if answerable_set and fmt in SCORED_FORMATS
                                else None
                            ),
                            "citations_in_context": all(
                                c.chunk_id in context for c in response.citations
                            ),
                            "reason": response.reason,
                            "corrective": (
                                trace.answer.corrective.action
                                if trace and trace.answer and trace.answer.corrective
                                else None
                            ),
                            "images": len(vision.images) if vision and vision.sent else 0,
                            "vision_fallback": vision.fallback if vision else None,
                            "ms": round(elapsed_ms, 1),
                            **score_answer(q, response.answer, response.abstained),
                            "answer": response.answer,
                        }
                    )
        finally:
            stack.close()

    result = summarise(rows)
    result.update(
        {
            "subset": args.subset,
            "exclude_subset": args.exclude_subset,
            "route": args.route,
            "mode": "llm" if args.llm_url else "extractive",
            "vision": args.vision if args.llm_url else "off",
            "context_budget_tokens": settings.answer.context_budget_tokens,
            "crag": args.crag,
            "abstain_threshold": settings.answer.abstain_threshold,
            "ranker": settings.reranker.model if settings.reranker.active else "fused",
            "docs": len(names),
            "ingest": {
                "ingest_s": round(ingest_s, 1),
                "failed": [{"path": j.path, "code": j.error_code} for j in failed],
            },
            "errors": errors,
            "rows": rows,
        }
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    shown = {k: v for k, v in result.items() if k not in ("rows", "by_kind", "by_format")}
    print(json.dumps(shown, indent=1))


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    scored = [r for r in answerable if r["correct"] is not None]
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in answerable:
        by_kind[str(r["kind"])].append(r)
    by_format: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_format[r["scored_format"]].append(r)
    latencies = [r["ms"] for r in rows]
    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "answered_with_evidence_rate": rate([r["with_evidence"] for r in answerable]),
        **accuracy_and_f1(rows),
        "scored_n": len(rows),
        "unanswerable_abstention_rate": rate(
            [r["prediction"] == NOT_ANSWERABLE for r in unanswerable]
        ),
        "answer_accuracy": rate([r["correct"] for r in scored]),
        "answer_accuracy_n": len(scored),
        "abstain_rate_unanswerable": rate([r["abstained"] for r in unanswerable]),
        "abstain_rate_answerable": rate([r["abstained"] for r in answerable]),
        "citations_in_context_rate": rate([r["citations_in_context"] for r in rows]),
        "with_images_rate": rate([r.get("images", 0) > 0 for r in rows]),
        "vision_fallback_rate": rate([r.get("vision_fallback") is not None for r in rows]),
        "by_kind": {
            kind: {
                "n": len(group),
                "answered_with_evidence_rate": rate([r["with_evidence"] for r in group]),
                "abstain_rate": rate([r["abstained"] for r in group]),
                **accuracy_and_f1(group),
            }
            for kind, group in sorted(by_kind.items())
        },
        "by_format": {
            fmt: {"n": len(group), **accuracy_and_f1(group)}
            for fmt, group in sorted(by_format.items())
        },
        "latency_ms": {
            "p50": round(statistics.median(latencies), 1) if latencies else None,
            "p95": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 1)
            if latencies
            else None,
        },
    }


if __name__ == "__main__":
    main()
