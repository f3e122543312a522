"""Retrieval evaluation on the golden set, against an in-run BM25 page baseline.

Ingests the PDFs (a subset of ``subsets.json`` or the whole folder) into a fresh index, asks
every question over the whole corpus, collapses the ranked results to distinct (doc, page)
pairs and scores them (see ../shared/eval/README.md, "Output contract"):

- ``page_hit@k``: share of questions with an evidence page in the top k;
- ``ndcg@5``: every evidence page has relevance 1;
- ``evidence_recall@5``/``ndcg@5`` over multi-page questions (``multi_page``);
- ``by_kind``: the same per question kind, with ``n``;
- ``baseline``: the same keys for page-level BM25 (``\\w+`` tokens, Okapi k1=1.5 b=0.75) over
  each page's text layer, or its OCR text when it has none — measured in this run.

    python bench/eval_retrieval.py --pdfs ../shared/eval/pdfs \\
        --questions ../shared/eval/questions.jsonl --subset smoke --route text --out smoke.json

``--data-dir`` keeps the index between runs: unchanged files are not parsed again.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

KS = (1, 3, 5, 10)
TENANT = "eval"


# -- metrics ---------------------------------------------------------------------------------


def score_ranking(
    ranked: list[tuple[str, int]], doc: str, evidence: Iterable[int]
) -> dict[str, float]:
    relevant = {(doc, p) for p in evidence}
    out: dict[str, float] = {}
    for k in KS:
        out[f"page_hit@{k}"] = float(any(r in relevant for r in ranked[:k]))
    dcg = sum(1 / math.log2(i + 2) for i, r in enumerate(ranked[:5]) if r in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(5, len(relevant))))
    out["ndcg@5"] = dcg / ideal if ideal else 0.0
    out["evidence_recall@5"] = len(relevant & set(ranked[:5])) / len(relevant) if relevant else 0.0
    return out


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [f"page_hit@{k}" for k in KS] + ["ndcg@5"]
    out: dict[str, Any] = {k: round(statistics.fmean(r[k] for r in rows), 4) for k in keys}
    out["n"] = len(rows)
    multi = [r for r in rows if r["n_evidence"] > 1]
    if multi:
        out["multi_page"] = {
            "n": len(multi),
            "evidence_recall@5": round(statistics.fmean(r["evidence_recall@5"] for r in multi), 4),
            "ndcg@5": round(statistics.fmean(r["ndcg@5"] for r in multi), 4),
        }
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r)
    out["by_kind"] = {
        kind: {
            **{k: round(statistics.fmean(r[k] for r in group), 4) for k in keys},
            "n": len(group),
        }
        for kind, group in sorted(by_kind.items())
    }
    return out


# -- baseline: page-level BM25 ---------------------------------------------------------------

_WORD = re.compile(r"\w+")


class PageBm25:
    """Okapi BM25 over whole pages with plain ``\\w+`` tokens: the in-run baseline."""

    def __init__(self, pages: dict[tuple[str, int], str], k1: float = 1.5, b: float = 0.75) -> None:
        self.keys = list(pages)
        self.tfs = [Counter(_WORD.findall(pages[key].lower())) for key in self.keys]
        self.lengths = [sum(tf.values()) for tf in self.tfs]
        self.avg = statistics.fmean(self.lengths) if self.lengths else 1.0
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(self.keys)
        self.idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self.k1, self.b = k1, b

    def search(self, query: str, k: int) -> list[tuple[str, int]]:
        terms = set(_WORD.findall(query.lower()))
        scores = []
        for i, tf in enumerate(self.tfs):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
            s = sum(self.idf[t] * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in terms if t in tf)
            if s > 0:
                scores.append((s, i))
        scores.sort(reverse=True)
        return [self.keys[i] for _, i in scores[:k]]


def page_texts(paths: dict[str, Path], stack: Any) -> dict[tuple[str, int], str]:
    """Each page's text layer, or (pages without one) the OCR text our parser indexed."""
    import pymupdf

    texts: dict[tuple[str, int], str] = {}
    for name, path in paths.items():
        doc_id = stack.doc_id_for(TENANT, path)
        ocr: dict[int, list[str]] = defaultdict(list)
        for point in stack.store.points_of_document(TENANT, doc_id):
            for page in point.payload.get("page_numbers", []):
                ocr[int(page)].append(point.payload.get("text", ""))
        with pymupdf.open(path) as doc:
            for page in doc:
                text = page.get_text("text")
                if len(text.strip()) < 20:
                    text = "\n".join(ocr.get(page.number + 1, []))
                texts[(name, page.number + 1)] = text
    return texts


# -- run -------------------------------------------------------------------------------------


def load_questions(path: Path, docs: set[str]) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [q for q in rows if q["doc"] in docs]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pdfs", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--subset", help="a key of subsets.json next to the questions file")
    ap.add_argument(
        "--route", default="text", choices=["auto", "text", "keyword", "visual", "hybrid"]
    )
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--data-dir", type=Path, help="keep the index here (default: a temp dir)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    from core.settings import Settings
    from core.types import AccessFilter, RouteName
    from services.stack import LocalStack

    if args.subset:
        subsets = json.loads((args.questions.parent / "subsets.json").read_text())
        names = list(subsets[args.subset])
    else:
        names = sorted(p.name for p in args.pdfs.glob("*.pdf"))
    paths = {name: args.pdfs / name for name in names}
    questions = load_questions(args.questions, set(names))

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=args.data_dir or Path(tmp))
        with LocalStack(settings) as stack:
            started = time.perf_counter()
            jobs = stack.ingestor.ingest(
                [stack.request(path, tenant=TENANT) for path in paths.values()],
                progress=None,
            )
            ingest_s = time.perf_counter() - started
            failed = [j for j in jobs if j.state.value != "READY"]
            parsed_pages = sum(j.pages for j in jobs if not j.unchanged)
            name_of = {stack.doc_id_for(TENANT, path): name for name, path in paths.items()}

            access = AccessFilter(tenant=TENANT)
            route = RouteName(args.route)
            rows, base_rows, latencies = [], [], []
            baseline = PageBm25(page_texts(paths, stack))
            for q in questions:
                t0 = time.perf_counter()
                result = stack.search(q["question"], access, route, args.top_k)
                latencies.append((time.perf_counter() - t0) * 1000)
                ranked = [(name_of.get(h.doc_id, h.doc_id), h.page_number) for h in result.hits]
                common = {"id": q["id"], "kind": q["kind"], "n_evidence": len(q["evidence_pages"])}
                rows.append({**common, **score_ranking(ranked, q["doc"], q["evidence_pages"])})
                base = baseline.search(q["question"], args.top_k)
                base_rows.append({**common, **score_ranking(base, q["doc"], q["evidence_pages"])})

    result_json = {
        "route": args.route,
        "subset": args.subset,
        "docs": len(names),
        "questions": len(questions),
        **aggregate(rows),
        "baseline": aggregate(base_rows),
        "latency_ms": {
            "p50": round(statistics.median(latencies), 1),
            "p95": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 1),
        },
        "ingest": {
            "pages_parsed": parsed_pages,
            "ingest_s": round(ingest_s, 1),
            "pages_per_s": round(parsed_pages / ingest_s, 3) if parsed_pages else None,
            "failed": [
                {"path": j.path, "code": j.error_code, "message": j.error_message} for j in failed
            ],
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result_json, indent=2, ensure_ascii=False))
    summary = {k: result_json[k] for k in ("page_hit@1", "page_hit@5", "ndcg@5")}
    base = {k: result_json["baseline"][k] for k in ("page_hit@1", "page_hit@5", "ndcg@5")}
    print(
        json.dumps(
            {"system": summary, "baseline": base, "by_kind": result_json["by_kind"]}, indent=1
        )
    )


if __name__ == "__main__":
    main()
