"""Retrieval evaluation on the golden set, against an in-run BM25 page baseline.

Ingests the PDFs (a subset of ``subsets.json`` or the whole folder) into a fresh index, asks
every question over the whole corpus, collapses the ranked results to distinct (doc, page)
pairs and scores them (see ../shared/eval/README.md, "Output contract"):

- ``page_hit@k``: share of questions with an evidence page in the top k;
- ``ndcg@5``: every evidence page has relevance 1;
- ``evidence_recall@5``/``ndcg@5`` over multi-page questions (``multi_page``);
- ``by_kind``: the same per question kind, with ``n``;
- ``routes``: the same for every route asked for (``--route auto,text,keyword``); the first
  is the headline at the top level;
- ``with_reference``/``without_reference``: every route and the baseline over the questions
  that do or do not name the document's structure (``bench/structural_refs.py``), with ``n``;
- ``halves``: the same over two fixed halves of the documents (``a`` to develop on, ``b`` to
  check on; a hash of the file name decides);
- ``per_question``: which pages each route returned, which routes found the evidence, and the
  references the query parser recognised;
- ``baseline``: the same keys for page-level BM25 (``\\w+`` tokens, Okapi k1=1.5 b=0.75) over
  each page's text layer, or its OCR text when it has none — measured in this run.
- ``latency_ms``: per route, p50/p95 of a search (ms) and of each stage its traces recorded
  (``RetrievalTrace.stages_ms``: each route's candidate search, the query embeddings, the
  structure look-ups, fusion, passage assembly, ...; with ``n`` and ``share``); each ablation
  has the same next to its quality (``ablations.<name>.latency_ms``). With ``--ablate
  structure``, ``structure_cost`` = p50(headline route) / p50(the same searches without the
  structure routes), both measured in this run (issue 33: at most 1.3). Every other question
  asks the ablations before the routes, so neither side always finds the other's caches warm.

    python bench/eval_retrieval.py --pdfs ../shared/eval/pdfs \\
        --questions ../shared/eval/questions.jsonl --subset smoke --route text --out smoke.json

``--data-dir`` keeps the index between runs: unchanged files are not parsed again.
``--scope document`` asks each question of its own document only (the baseline too), as
MMLongBench-Doc does: the gap to the corpus-wide figures is what finding the document costs.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
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
    if not rows:
        return {"n": 0}
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

    def search(self, query: str, k: int, doc: str | None = None) -> list[tuple[str, int]]:
        """The ``k`` best pages (of ``doc`` only, when given)."""
        terms = set(_WORD.findall(query.lower()))
        scores = []
        for i, tf in enumerate(self.tfs):
            if doc is not None and self.keys[i][0] != doc:
                continue
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

#: The fusion routes that follow the document's structure (pagesight.query.structure_search).
#: The routes that follow the document rather than its words (issues 16 and 34).
STRUCTURE_ROUTES = ("page", "reference", "statement", "section", "document", "count")


@contextlib.contextmanager
def routes_off(stack: Any, names: Iterable[str]) -> Iterator[None]:
    """Fusion weight 0 for ``names`` while the block runs: the same index, without them."""
    weights = stack.retriever.options.weights
    saved = dict(weights)
    weights.update({name: 0.0 for name in names})
    try:
        yield
    finally:
        weights.clear()
        weights.update(saved)


def load_questions(path: Path, docs: set[str]) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [q for q in rows if q["doc"] in docs]


def half_of(doc: str) -> str:
    """A fixed split of the documents into halves ``a`` (develop) and ``b`` (check): by a hash
    of the file name, so it depends on nothing a developer chose."""
    return "a" if hashlib.sha256(doc.encode()).digest()[0] % 2 == 0 else "b"


def parse_cache_fingerprint(settings: Any) -> str:
    """What a cached parse depends on: the parse settings and the parser's own source files."""
    digest = hashlib.sha256(settings.parse.model_dump_json().encode())
    digest.update(settings.render.model_dump_json().encode())
    ingestion = REPO_ROOT / "pagesight" / "ingestion"
    sources = [
        *sorted((ingestion / "parse").rglob("*.py")),
        *sorted((ingestion / "ocr").rglob("*.py")),
        ingestion / "pipeline.py",
        ingestion / "render.py",
    ]
    for source in sources:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def cached_parse(cache_dir: Path, fingerprint: str) -> Any:
    """The isolated parse, memoised on disk by (file bytes, parser fingerprint): re-running
    the evaluation after a change to chunking, indexing or retrieval re-parses nothing."""
    from pagesight.core.types import ParsedDocument
    from pagesight.ingestion.isolation import parse_isolated

    def parse(path: Path, settings: Any, source: Any = None, progress: Any = None) -> Any:
        key = hashlib.sha256(path.read_bytes()).hexdigest()[:24]
        entry = cache_dir / fingerprint / f"{key}.json"
        if entry.is_file():
            parsed = ParsedDocument.model_validate_json(entry.read_text())
            if source is not None and parsed.document.doc_id == source.doc_id:
                return parsed
        parsed = parse_isolated(path, settings, source, progress)
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text(parsed.model_dump_json())
        return parsed

    return parse


def latency_summary(timed: list[tuple[float, dict[str, float]]]) -> dict[str, Any]:
    """p50/p95 (ms) of searches timed as ``(total ms, the trace's stages_ms)``, and of each
    stage over the searches whose trace recorded it (``n``); ``share``: the stage's time over
    all searches' time (stages nest, e.g. ``embed_dense`` inside ``dense``, so shares do not
    add up to 1)."""
    if not timed:
        return {"n": 0}
    totals = [total for total, _ in timed]
    by_stage: dict[str, list[float]] = defaultdict(list)
    for _, stages in timed:
        for stage, ms in stages.items():
            by_stage[stage].append(ms)
    spent = sum(totals) or 1.0
    return {
        "n": len(totals),
        **percentiles(totals),
        "stages": {
            stage: {"n": len(values), **percentiles(values), "share": round(sum(values) / spent, 3)}
            for stage, values in sorted(by_stage.items())
        },
    }


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 1),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 1),
    }


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pdfs", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--subset", help="a key of subsets.json next to the questions file")
    ap.add_argument(
        "--route",
        default="text",
        help="one route or a comma list (auto,text,keyword,visual,hybrid); the first is the "
        "headline, every one is reported under 'routes'",
    )
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--data-dir", type=Path, help="keep the index here (default: a temp dir)")
    ap.add_argument(
        "--parse-cache", type=Path, help="keep parsed documents here between runs (bench only)"
    )
    ap.add_argument(
        "--ablate",
        default="",
        help="comma list of fusion routes (page,row,reference,statement,section,document,count; "
        "'structure' = page, reference, statement, section, document and count; 'a+b' = both "
        "at once) to switch off, one entry at a time, on the headline route: reported under "
        "'ablations', each with its latency; with 'structure', 'structure_cost' is "
        "p50(headline) / p50(without them)",
    )
    ap.add_argument(
        "--scope",
        choices=("corpus", "document"),
        default="corpus",
        help="corpus: every question over all ingested documents (the headline figures); "
        "document: each over its own document only, as MMLongBench-Doc asks them (separates "
        "finding the page from finding the document)",
    )
    ap.add_argument(
        "--neutral-names",
        action="store_true",
        help="ingest every PDF under a neutral name (its sha256, a hard link or copy in the data "
        "dir) so that nothing is found by a file name that spells company, year and form; the "
        "results still name the original files",
    )
    ap.add_argument("--out", type=Path, required=True)
    return ap.parse_args()


def neutral_copies(paths: dict[str, Path], folder: Path) -> dict[str, Path]:
    """Each file as ``<sha256>.pdf`` in ``folder`` (a hard link where the file system allows
    it, else a copy): its content, not its name, is all ingestion sees."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for name, path in paths.items():
        target = folder / f"{hashlib.sha256(path.read_bytes()).hexdigest()}{path.suffix.lower()}"
        if not target.exists():
            try:
                os.link(path, target)
            except OSError:
                shutil.copyfile(path, target)
        out[name] = target
    return out


class Run:
    """The searches of one evaluation: what each route and ablation returned, and how long
    each search took (its total and its trace's stages)."""

    def __init__(self, stack: Any, routes: list[Any], ablations: dict[str, tuple[str, ...]]):
        self.stack = stack
        self.routes = routes
        self.ablations = ablations
        self.rows: dict[str, list[dict[str, Any]]] = {r.value: [] for r in routes}
        self.timed: dict[str, list[tuple[float, dict[str, float]]]] = {r.value: [] for r in routes}
        self.ablation_rows: dict[str, list[dict[str, Any]]] = {f"no_{a}": [] for a in ablations}
        self.ablation_timed: dict[str, list[tuple[float, dict[str, float]]]] = {
            f"no_{a}": [] for a in ablations
        }

    def search(self, question: str, access: Any, route: Any, top_k: int) -> tuple[Any, float]:
        started = time.perf_counter()
        result = self.stack.search(question, access, route, top_k)
        return result, (time.perf_counter() - started) * 1000

    def ask_routes(
        self,
        q: dict[str, Any],
        access: Any,
        common: dict[str, Any],
        detail: dict[str, Any],
        name_of: dict[str, str],
        top_k: int,
    ) -> None:
        for route in self.routes:
            result, ms = self.search(q["question"], access, route, top_k)
            self.timed[route.value].append((ms, dict(result.trace.stages_ms)))
            ranked = [(name_of.get(h.doc_id, h.doc_id), h.page_number) for h in result.hits]
            scored = score_ranking(ranked, q["doc"], q["evidence_pages"])
            self.rows[route.value].append({**common, **scored})
            detail[route.value] = {
                "hit@5": scored["page_hit@5"],
                "top5": [f"{d}#{p}" for d, p in ranked[:5]],
                "found_by": {
                    f"{name_of.get(h.doc_id, h.doc_id)}#{h.page_number}": sorted(h.route_scores)
                    for h in result.hits[:5]
                    if name_of.get(h.doc_id) == q["doc"] and h.page_number in q["evidence_pages"]
                },
                "trace_route": result.trace.route.value,
                "references": [r.model_dump(mode="json") for r in result.trace.references],
            }

    def ask_ablations(
        self,
        q: dict[str, Any],
        access: Any,
        common: dict[str, Any],
        detail: dict[str, Any],
        name_of: dict[str, str],
        top_k: int,
    ) -> None:
        headline = self.routes[0]
        for name, switched_off in self.ablations.items():
            with routes_off(self.stack, switched_off):
                result, ms = self.search(q["question"], access, headline, top_k)
            self.ablation_timed[f"no_{name}"].append((ms, dict(result.trace.stages_ms)))
            ranked = [(name_of.get(h.doc_id, h.doc_id), h.page_number) for h in result.hits]
            scored = score_ranking(ranked, q["doc"], q["evidence_pages"])
            self.ablation_rows[f"no_{name}"].append({**common, **scored})
            detail[f"{headline.value}_no_{name}"] = {"hit@5": scored["page_hit@5"]}

    def latency(self) -> dict[str, Any]:
        """Per route: p50/p95 and per stage; ``auto_p50_over_text_p50``; and, with a
        ``structure`` ablation, ``structure_cost`` (the issue 33 ratio, target <= 1.3)."""
        out: dict[str, Any] = {route: latency_summary(t) for route, t in self.timed.items()}
        p50 = {route: statistics.median(ms for ms, _ in t) for route, t in self.timed.items() if t}
        if "auto" in p50 and "text" in p50 and p50["text"] > 0:
            out["auto_p50_over_text_p50"] = round(p50["auto"] / p50["text"], 3)
        cost = self.structure_cost()
        if cost is not None:
            out["structure_cost"] = cost
        return out

    def structure_cost(self) -> float | None:
        """p50 of the headline route over p50 of the same searches without the structure
        routes (``--ablate structure``), measured in this run; None without that ablation."""
        without = self.ablation_timed.get("no_structure")
        headline = self.timed[self.routes[0].value]
        if not without or not headline:
            return None
        return round(
            statistics.median(ms for ms, _ in headline)
            / statistics.median(ms for ms, _ in without),
            3,
        )


def ablation_map(spec: str) -> dict[str, tuple[str, ...]]:
    return {
        name: tuple(
            route
            for part in name.split("+")
            for route in (STRUCTURE_ROUTES if part == "structure" else (part,))
        )
        for name in (a.strip() for a in spec.split(",") if a.strip())
    }


def main() -> None:
    args = parse_args()

    from bench.structural_refs import has_structural_reference
    from pagesight.core.settings import Settings
    from pagesight.core.types import AccessFilter, RouteName
    from pagesight.services.stack import LocalStack

    routes = [RouteName(r.strip()) for r in args.route.split(",") if r.strip()]
    if args.subset:
        subsets = json.loads((args.questions.parent / "subsets.json").read_text())
        names = list(subsets[args.subset])
    else:
        names = sorted(p.name for p in args.pdfs.glob("*.pdf"))
    paths = {name: args.pdfs / name for name in names}
    questions = load_questions(args.questions, set(names))

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=args.data_dir or Path(tmp))
        if args.neutral_names:
            paths = neutral_copies(paths, settings.data_dir / "neutral-names")
        parse = (
            cached_parse(args.parse_cache, parse_cache_fingerprint(settings))
            if args.parse_cache
            else None
        )
        with LocalStack(settings, parse=parse) as stack:
            started = time.perf_counter()
            jobs = stack.ingestor.ingest(
                [stack.request(path, tenant=TENANT) for path in paths.values()],
                progress=None,
            )
            ingest_s = time.perf_counter() - started
            failed = [j for j in jobs if j.state.value != "READY"]
            parsed_pages = sum(j.pages for j in jobs if not j.unchanged)
            name_of = {stack.doc_id_for(TENANT, path): name for name, path in paths.items()}
            doc_id_of = {name: doc_id for doc_id, name in name_of.items()}

            corpus_access = AccessFilter(tenant=TENANT)
            run = Run(stack, routes, ablation_map(args.ablate))
            base_rows: list[dict[str, Any]] = []
            per_question: list[dict[str, Any]] = []
            baseline = PageBm25(page_texts(paths, stack))
            for number, q in enumerate(questions):
                common = {
                    "id": q["id"],
                    "kind": q["kind"],
                    "n_evidence": len(q["evidence_pages"]),
                    "reference": has_structural_reference(q["question"]),
                    "half": half_of(q["doc"]),
                }
                detail: dict[str, Any] = {
                    **common,
                    "doc": q["doc"],
                    "evidence_pages": q["evidence_pages"],
                }
                scoped = args.scope == "document"
                access = (
                    corpus_access.model_copy(update={"doc_ids": [doc_id_of[q["doc"]]]})
                    if scoped
                    else corpus_access
                )
                # every other question asks the ablations first: neither side of a latency
                # ratio always finds the other's caches warm
                ask = [run.ask_routes, run.ask_ablations]
                for step in ask if number % 2 == 0 else ask[::-1]:
                    step(q, access, common, detail, name_of, args.top_k)
                base = baseline.search(q["question"], args.top_k, q["doc"] if scoped else None)
                base_scored = score_ranking(base, q["doc"], q["evidence_pages"])
                base_rows.append({**common, **base_scored})
                detail["baseline"] = {
                    "hit@5": base_scored["page_hit@5"],
                    "top5": [f"{d}#{p}" for d, p in base[:5]],
                }
                per_question.append(detail)

    rows = run.rows

    def split(selected: Any) -> dict[str, Any]:
        """Every route and the baseline over the questions ``selected`` keeps."""
        out: dict[str, Any] = {
            route: aggregate([r for r in group if selected(r)]) for route, group in rows.items()
        }
        out["baseline"] = aggregate([r for r in base_rows if selected(r)])
        return out

    headline = routes[0].value
    latency = run.latency()
    result_json = {
        "route": headline,
        "subset": args.subset,
        "scope": args.scope,
        "names": "neutral" if args.neutral_names else "original",
        "docs": len(names),
        "questions": len(questions),
        **aggregate(rows[headline]),
        "baseline": aggregate(base_rows),
        "routes": {route: aggregate(group) for route, group in rows.items()},
        "ablations": {
            name: {
                "all": aggregate(group),
                "with_reference": aggregate([r for r in group if r["reference"]]),
                "halves": {
                    half: aggregate([r for r in group if r["half"] == half]) for half in ("a", "b")
                },
                "latency_ms": latency_summary(run.ablation_timed[name]),
            }
            for name, group in run.ablation_rows.items()
            if group
        },
        "with_reference": split(lambda r: r["reference"]),
        "without_reference": split(lambda r: not r["reference"]),
        "halves": {half: split(lambda r, h=half: r["half"] == h) for half in ("a", "b")},
        "latency_ms": latency,
        "structure_cost": latency.get("structure_cost"),
        "ingest": {
            "pages_parsed": parsed_pages,
            "ingest_s": round(ingest_s, 1),
            "pages_per_s": round(parsed_pages / ingest_s, 3) if parsed_pages else None,
            "failed": [
                {"path": j.path, "code": j.error_code, "message": j.error_message} for j in failed
            ],
        },
        "per_question": per_question,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result_json, indent=2, ensure_ascii=False))
    keys = ("page_hit@1", "page_hit@5", "ndcg@5")
    summary: dict[str, Any] = {
        route: {k: agg[k] for k in keys} | {"n": agg["n"]}
        for route, agg in {**result_json["routes"], "baseline": result_json["baseline"]}.items()
    }
    summary["latency_p50_ms"] = {
        route: entry["p50"]
        for route, entry in latency.items()
        if isinstance(entry, dict) and "p50" in entry
    } | {
        name: entry["latency_ms"]["p50"]
        for name, entry in result_json["ablations"].items()
        if "p50" in entry["latency_ms"]
    }
    summary["structure_cost"] = latency.get("structure_cost")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
