"""Answer evaluation on the golden set: evidence-backed answers and honest abstentions.

Ingests the subset's PDFs and the documents of every unanswerable question (the "unanswerable"
set is all of them, whatever the subset; none without ``--unanswerable``), then asks each
question through the same :class:`~pagesight.services.index_service.IndexService` code path
``POST /v1/answer`` runs, with the retrieval scoped to exactly those documents. Scored (see
../shared/eval/README.md):

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

The lead and its quotes (issue 31; rules in ``bench/answer_metrics.py``), overall, per ``kind``
(``by_kind``) and per half of the documents (``halves``: ``a`` to fit on, ``b`` to check on,
``bench.eval_retrieval.half_of``):

- ``lead_value_accuracy`` (``lead_value_n``): over the answerable questions whose format
  (``answer_format``, else the one ``resolve_format`` infers) is Int, Float or Str, the lead's
  ``value`` scored by ``score_value`` (for Int and Float its number read by ``extract_value``:
  the value is verbatim, "$3.6 billion"); an abstention, no lead or a ``None`` value scores 0;
- ``printable_n`` and ``lead_value_accuracy_printable``: the same over the questions whose gold
  value is printed on one of their evidence pages (text layer, or the index's OCR text for pages
  read by OCR) as a whole token with its unit or sign, never a bare integer under 10;
  ``printable`` lists them with the ``page`` and ``line`` where the value was found;
- ``lead_evidence_rate``: answerable questions whose lead is cited (the pages of every part of
  the lead's citations) on one of their evidence pages; supporting quotes do not count;
- ``lead_words`` ``p50``/``p90`` over the answers with a lead (a CJK run counts len / 2 words);
- ``citation_page_exact_rate`` (``quotes_n``): the share of all quotes (each part of each
  citation, in answers and in ``related``) whose text occurs on the page they cite (case-folded,
  whitespace ignored; each " | " cell of a table-cell quote, each " … " piece of a joined one);
  ``inexact_quotes`` lists the others (question, doc, page, quote);
- ``tradeoff``: the abstention rates on unanswerable and answerable questions if
  ``answer.min_coverage`` were 0.0, 0.1, ..., 1.0, from each answer's ``coverage`` (trace);
- ``today``: the same keys (and ``latency_ms``) for today's extractive answer, asked in the same
  run on the same stack with ``answer.extractive = "quotes"``; its lead is ``response.lead`` or,
  without one, the first sentence with its first citation and the value ``extract_value`` takes
  out of it; ``latency_p50_ratio`` = this run's p50 / today's. ``--no-baseline`` skips it, and so
  does ``--llm-url`` (both pipelines would generate).

The three sets (``--limit N`` asks only the first N answerable and N unanswerable questions;
``--question-docs`` then ingests and searches only their documents, for a quick end-to-end check):

    python bench/eval_answers.py --pdfs ../shared/eval/pdfs \\
        --questions ../shared/eval/questions.jsonl \\
        --unanswerable ../shared/eval/questions_unanswerable.jsonl --subset smoke \\
        --out var/bench/answers_smoke.json      # or --exclude-subset smoke, or neither (all)
    python bench/eval_answers.py --pdfs ../shared/eval/check/pdfs \\
        --questions ../shared/eval/check/questions.jsonl \\
        --unanswerable ../shared/eval/check/questions_unanswerable.jsonl \\
        --out var/bench/answers_check.json      # no subsets.json: no --subset
    python bench/eval_answers.py --pdfs ../shared/eval/ja/pdfs \\
        --questions ../shared/eval/ja/questions.jsonl --out var/bench/answers_ja.json

The Japanese set has no unanswerable questions (``--unanswerable`` is optional) and its gold
answers are sentences: they resolve to Str, so its lead values score by ANLS and few are
printable; read its ``answered_with_evidence_rate`` and ``lead_evidence_rate``.

``--crag on`` grades the candidates and corrects the search once before answering
(``pagesight.query.corrective``); run it with ``on`` and ``off`` to compare on the same questions.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.answer_metrics import (  # noqa: E402  # after the sys.path line, as a script
    PageText,
    count_words,
    find_printed,
    index_page_texts,
    lead_of,
    lead_value_score,
    percentile,
    quote_on_page,
    quotes_of,
    tradeoff,
)
from bench.answer_scoring import (  # noqa: E402  # after the sys.path line
    NOT_ANSWERABLE,
    ScoredAnswer,
    accuracy,
    extract_value,
    f1,
    resolve_format,
    score_value,
)
from bench.eval_retrieval import half_of  # noqa: E402  # after the sys.path line

if TYPE_CHECKING:
    from pagesight.core.types import RouteName

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


# -- the lead, its quotes and where they are printed (issue 31) --------------------------------


class PageTexts:
    """Each page's text as printed: the text layer read the way the parser reads it
    (ligatures expanded, clipped to the page), plus the text the index holds from OCR on that
    page (a page without a text layer, or a picture on one the parser read by OCR): the chunk
    payloads an OCR engine produced, cut per page by their spans
    (:func:`bench.answer_metrics.index_page_texts`; no parse is repeated). Loaded once per
    document."""

    OCR_PARSERS = ("rapidocr", "tesseract", "vlm")

    def __init__(self, paths: dict[str, Path], stack: Any) -> None:
        self.paths = paths
        self.stack = stack
        self._docs: dict[str, dict[int, str]] = {}
        self._checked: dict[tuple[str, int], PageText] = {}

    def doc(self, name: str) -> dict[int, str]:
        if name not in self._docs:
            self._docs[name] = self._load(name) if name in self.paths else {}
        return self._docs[name]

    def text(self, name: str, page: int) -> str:
        return self.doc(name).get(page, "")

    def page(self, name: str, page: int) -> PageText:
        """The page's text as :func:`bench.answer_metrics.quote_on_page` reads it."""
        key = (name, page)
        if key not in self._checked:
            self._checked[key] = PageText(self.text(name, page))
        return self._checked[key]

    def _load(self, name: str) -> dict[int, str]:
        import pymupdf

        path = self.paths[name]
        doc_id = self.stack.doc_id_for(TENANT, path)
        read_by_ocr = {
            page.page_number
            for page in self.stack.catalog.pages(TENANT, doc_id)
            if not page.has_text_layer or page.parser.startswith(self.OCR_PARSERS)
        }

        def from_ocr(payload: dict[str, Any]) -> bool:
            if "parser" in payload:
                return any(str(p).startswith(self.OCR_PARSERS) for p in payload["parser"])
            return any(int(p) in read_by_ocr for p in payload.get("page_numbers", []))

        points = self.stack.store.points_of_document(TENANT, doc_id)
        ocr_text = index_page_texts([p.payload for p in points if from_ocr(p.payload)])
        flags = (
            pymupdf.TEXT_MEDIABOX_CLIP
            | pymupdf.TEXT_CID_FOR_UNKNOWN_UNICODE
            | pymupdf.TEXT_IGNORE_ACTUALTEXT
        )
        texts: dict[int, str] = {}
        with pymupdf.open(path) as pdf:
            for page in pdf:
                number = page.number + 1
                text = page.get_text("text", flags=flags)
                if number in ocr_text:
                    text = f"{text}\n{ocr_text[number]}"
                texts[number] = text
        return texts


def printable_of(question: dict[str, Any], pages: PageTexts) -> dict[str, Any] | None:
    """Where the gold value of a scored question is printed on one of its evidence pages (as
    :func:`bench.answer_metrics.find_printed` rules), or ``None``."""
    evidence = {p: pages.text(question["doc"], p) for p in question.get("evidence_pages", [])}
    found = find_printed(str(question["answer"]), evidence)
    return None if found is None else {"page": found.page, "line": found.line}


def lead_fields(
    question: dict[str, Any],
    response: Any,
    trace: Any,
    *,
    baseline: bool,
    answerable: bool,
    printable: dict[str, Any] | None,
    name_of: dict[str, str],
    pages: PageTexts,
) -> dict[str, Any]:
    """The row fields of issue 31's keys: the lead (its value scored), whether it is cited on
    an evidence page, its words, and each quote checked against the page it cites."""
    gold = str(question["answer"])
    fmt = resolve_format(gold, question.get("answer_format"))
    scored = answerable and fmt in SCORED_FORMATS
    lead = lead_of(response, fmt, baseline)
    evidence = {(question["doc"], p) for p in question.get("evidence_pages", [])}
    lead_pages = (
        [(name_of.get(doc_id, doc_id), page) for doc_id, page in lead.pages] if lead else []
    )
    quotes = []
    for quote in quotes_of(response):
        doc = name_of.get(quote.doc_id, quote.doc_id)
        quotes.append(
            {
                "doc": doc,
                "page": quote.page,
                "n": quote.n,
                "related": quote.related,
                "quote": quote.text,
                "exact": quote_on_page(quote.text, pages.page(doc, quote.page)),
            }
        )
    answer_trace = trace.answer if trace is not None else None
    return {
        "half": half_of(question["doc"]),
        "value_scored": scored,
        "printable": printable if scored else None,
        "lead": None
        if lead is None
        else {
            "text": lead.text,
            "kind": lead.kind,
            "value": lead.value,
            "pages": [list(p) for p in lead_pages],
            "from_sentence": lead.from_sentence,
        },
        "lead_value_score": lead_value_score(gold, fmt, lead) if scored else None,
        "lead_on_evidence": any(p in evidence for p in lead_pages) if answerable else None,
        "lead_words": count_words(lead.text) if lead else None,
        "quotes": quotes,
        "answer_type": answer_trace.answer_type if answer_trace else None,
        "coverage": answer_trace.coverage if answer_trace else None,
    }


def lead_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 31's keys over ``rows`` (see the module doc)."""
    answerable = [r for r in rows if r["answerable"]]
    scored = [r for r in answerable if r.get("value_scored")]
    printable = [r for r in scored if r.get("printable")]
    words = [r["lead_words"] for r in rows if r.get("lead_words") is not None]
    quotes = [q for r in rows for q in r.get("quotes", [])]
    return {
        "lead_value_n": len(scored),
        "lead_value_accuracy": mean([r["lead_value_score"] for r in scored]),
        "printable_n": len(printable),
        "lead_value_accuracy_printable": mean([r["lead_value_score"] for r in printable]),
        "lead_evidence_rate": rate([bool(r.get("lead_on_evidence")) for r in answerable]),
        "lead_n": len(words),
        "lead_words": {"p50": percentile(words, 0.5), "p90": percentile(words, 0.9)},
        "quotes_n": len(quotes),
        "citation_page_exact_rate": rate([q["exact"] for q in quotes]),
    }


def group_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The headline keys of one group of rows (a half, a kind): today's and issue 31's."""
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "answered_with_evidence_rate": rate([r["with_evidence"] for r in answerable]),
        "abstain_rate_unanswerable": rate([r["abstained"] for r in unanswerable]),
        "abstain_rate_answerable": rate([r["abstained"] for r in answerable]),
        **accuracy_and_f1(rows),
        **lead_summary(rows),
    }


def report(rows: list[dict[str, Any]], min_coverage: float) -> dict[str, Any]:
    """Everything one pipeline's rows score: :func:`summarise`'s keys, issue 31's keys overall,
    per kind (``by_kind``, answerable questions) and per half (``halves``), the trade-off curve
    and the quotes not found on the page they cite."""
    result = summarise(rows)
    result.update(lead_summary(rows))
    for kind, entry in result["by_kind"].items():
        entry.update(lead_summary([r for r in rows if r["answerable"] and str(r["kind"]) == kind]))
    result["halves"] = {
        half: group_summary([r for r in rows if r["half"] == half]) for half in ("a", "b")
    }
    result["tradeoff"] = tradeoff(rows, min_coverage)
    result["inexact_quotes"] = [
        {"id": r["id"], "doc": q["doc"], "page": q["page"], "n": q["n"], "quote": q["quote"]}
        for r in rows
        for q in r.get("quotes", [])
        if not q["exact"]
    ]
    return result


def mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


# -- run ---------------------------------------------------------------------------------------


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _argument_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pdfs", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument(
        "--unanswerable", type=Path, default=None, help="unanswerable questions (none: skipped)"
    )
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
    ap.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the in-run baseline (answer.extractive=quotes) and the 'today' keys",
    )
    ap.add_argument("--data-dir", type=Path, help="keep the index here (default: a temp dir)")
    ap.add_argument("--limit", type=int, default=0, help="ask at most this many of each set")
    ap.add_argument(
        "--question-docs",
        action="store_true",
        help="ingest and search only the documents of the questions asked (a quick check with "
        "--limit; its figures are not comparable with a run over the whole set)",
    )
    ap.add_argument("--out", type=Path, required=True)
    return ap


def _questions(
    args: argparse.Namespace, ap: argparse.ArgumentParser
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """The answerable and unanswerable questions to ask, and the documents to ingest."""
    all_docs = sorted(p.name for p in args.pdfs.glob("*.pdf"))
    subset_docs = set(all_docs)
    if args.subset or args.exclude_subset:
        subsets_file = args.questions.parent / "subsets.json"
        if not subsets_file.is_file():
            ap.error(f"--subset/--exclude-subset need {subsets_file}, which does not exist")
        subsets = json.loads(subsets_file.read_text())
        if args.subset:
            subset_docs = set(subsets[args.subset])
        else:
            subset_docs -= set(subsets[args.exclude_subset])
    answerable = [q for q in load_jsonl(args.questions) if q["doc"] in subset_docs]
    unanswerable = load_jsonl(args.unanswerable) if args.unanswerable else []
    if args.limit:
        answerable, unanswerable = answerable[: args.limit], unanswerable[: args.limit]
    names = sorted(subset_docs | {q["doc"] for q in unanswerable})
    if args.question_docs:
        names = sorted({q["doc"] for q in answerable + unanswerable})
    return answerable, unanswerable, names


def _settings(args: argparse.Namespace, data_dir: Path) -> Any:
    """The service's settings with this run's overrides (LLM, answer options)."""
    from pagesight.core.settings import Settings

    overrides: dict[str, Any] = {"data_dir": data_dir}
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
    return Settings(**overrides)


@dataclass
class _Asking:
    """Asks every question of a run of each pipeline, and keeps what the answers came to:
    the rows per pipeline, the questions the LLM server failed on, and where the gold values
    of the scored questions are printed."""

    pipelines: dict[str, Any]
    pages: PageTexts
    access: Any
    scope: Any
    route: RouteName
    name_of: dict[str, str]
    rows: dict[str, list[dict[str, Any]]] = field(init=False)
    errors: dict[str, list[dict[str, str]]] = field(init=False)
    printable: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rows = {name: [] for name in self.pipelines}
        self.errors = {name: [] for name in self.pipelines}

    def ask(self, q: dict[str, Any], answerable: bool) -> None:
        fmt = resolve_format(str(q["answer"]), q.get("answer_format"))
        where = None
        if answerable and fmt in SCORED_FORMATS:
            where = printable_of(q, self.pages)
            if where is not None:
                self.printable.append(
                    {"id": q["id"], "doc": q["doc"], "gold": q["answer"], **where}
                )
        for name, pipeline in self.pipelines.items():
            self._ask_one(name, pipeline, q, answerable, where)

    def _ask_one(
        self,
        name: str,
        pipeline: Any,
        q: dict[str, Any],
        answerable: bool,
        where: dict[str, Any] | None,
    ) -> None:
        from pagesight.core.errors import PageSightError
        from pagesight.core.types import Question

        trace_id = uuid.uuid4().hex
        t0 = time.perf_counter()
        request = Question(query=q["question"], route=self.route, filters=self.scope)
        try:
            done = pipeline.run(request, self.access, trace_id)
        except PageSightError as exc:  # the LLM server failed: not scored
            self.errors[name].append({"id": q["id"], "error": f"{exc.code}: {exc.message}"})
            return
        elapsed_ms = (time.perf_counter() - t0) * 1000
        row = answer_row(q, answerable, done.response, done.trace, self.name_of)
        row["ms"] = round(elapsed_ms, 1)
        row.update(
            lead_fields(
                q,
                done.response,
                done.trace,
                baseline=name == "today",
                answerable=answerable,
                printable=where,
                name_of=self.name_of,
                pages=self.pages,
            )
        )
        self.rows[name].append(row)


def main() -> None:
    ap = _argument_parser()
    args = ap.parse_args()

    from pagesight.core.types import AccessFilter, RouteName, SearchFilters
    from pagesight.services.engine import build_answer_pipeline
    from pagesight.services.stack import LocalStack

    answerable, unanswerable, names = _questions(args, ap)
    paths = {name: args.pdfs / name for name in names}
    # The baseline is today's extractive answer; with an LLM both pipelines would generate.
    with_baseline = not args.no_baseline and not args.llm_url

    with tempfile.TemporaryDirectory() as tmp:
        settings = _settings(args, args.data_dir or Path(tmp))
        baseline_settings = settings.model_copy(
            update={"answer": settings.answer.model_copy(update={"extractive": "quotes"})}
        )
        started = time.perf_counter()
        stack = LocalStack(settings)
        jobs = stack.ingestor.ingest(
            [stack.request(path, tenant=TENANT) for path in paths.values()], progress=None
        )
        name_of = {stack.doc_id_for(TENANT, path): name for name, path in paths.items()}
        ingest_s = time.perf_counter() - started
        failed = [j for j in jobs if j.state.value != "READY"]

        # the engine the service runs, and (same stack) today's extractive answer
        pipelines = {"after": build_answer_pipeline(settings, stack)}
        if with_baseline:
            pipelines["today"] = build_answer_pipeline(baseline_settings, stack)
        asking = _Asking(
            pipelines,
            PageTexts(paths, stack),
            AccessFilter(tenant=TENANT, principals=[]),
            SearchFilters(doc_ids=sorted(name_of)),
            RouteName(args.route),
            name_of,
        )
        try:
            for answerable_set, questions in ((True, answerable), (False, unanswerable)):
                for q in questions:
                    asking.ask(q, answerable_set)
        finally:
            stack.close()

    rows, errors = asking.rows, asking.errors
    result = report(rows["after"], settings.answer.min_coverage)
    result.update(
        {
            "subset": args.subset,
            "exclude_subset": args.exclude_subset,
            "questions": str(args.questions),
            "route": args.route,
            "mode": "llm" if args.llm_url else "extractive",
            "extractive": settings.answer.extractive,
            "vision": args.vision if args.llm_url else "off",
            "context_budget_tokens": settings.answer.context_budget_tokens,
            "crag": args.crag,
            "abstain_threshold": settings.answer.abstain_threshold,
            "min_coverage": settings.answer.min_coverage,
            "ranker": settings.reranker.model if settings.reranker.active else "fused",
            "docs": len(names),
            "question_docs_only": args.question_docs,
            "ingest": {
                "ingest_s": round(ingest_s, 1),
                "failed": [{"path": j.path, "code": j.error_code} for j in failed],
            },
            "printable": asking.printable,
            "errors": errors["after"],
        }
    )
    if with_baseline:
        today = report(rows["today"], settings.answer.min_coverage)
        today.pop("tradeoff")  # quotes mode judges no coverage
        today.update({"extractive": "quotes", "errors": errors["today"], "rows": rows["today"]})
        result["today"] = today
        after_p50 = result["latency_ms"]["p50"]
        today_p50 = today["latency_ms"]["p50"]
        result["latency_p50_ratio"] = (
            round(after_p50 / today_p50, 3) if after_p50 and today_p50 else None
        )
    result["rows"] = rows["after"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(json.dumps(headline(result), indent=1, ensure_ascii=False))


#: What is printed to the terminal: the scalar keys, the halves' and today's too.
_NOT_PRINTED = ("rows", "by_kind", "by_format", "inexact_quotes", "printable", "errors")


def headline(result: dict[str, Any]) -> dict[str, Any]:
    shown = {k: v for k, v in result.items() if k not in (*_NOT_PRINTED, "today")}
    if "today" in result:
        shown["today"] = {k: v for k, v in result["today"].items() if k not in _NOT_PRINTED}
    shown["inexact_quotes_n"] = len(result.get("inexact_quotes", []))
    return shown


def answer_row(
    q: dict[str, Any], answerable: bool, response: Any, trace: Any, name_of: dict[str, str]
) -> dict[str, Any]:
    """The row fields every run has had (``summarise`` and ``calibrate_abstain`` read them)."""
    context = set(trace.answer.context) if trace and trace.answer else set()
    vision = trace.answer.vision if trace and trace.answer else None
    cited = [(name_of.get(c.doc_id, c.doc_id), c.page_number) for c in response.citations]
    evidence = {(q["doc"], p) for p in q.get("evidence_pages", [])}
    fmt = q.get("answer_format")
    return {
        "id": q["id"],
        "doc": q["doc"],
        "answerable": answerable,
        "kind": q.get("kind"),
        "answer_format": fmt,
        "abstained": response.abstained,
        "confidence": response.confidence,
        "with_evidence": not response.abstained and any(c in evidence for c in cited),
        "correct": (
            answer_matches(str(q["answer"]), response.answer, fmt)
            if answerable and fmt in SCORED_FORMATS
            else None
        ),
        "citations_in_context": all(c.chunk_id in context for c in response.citations),
        "reason": response.reason,
        "corrective": (
            trace.answer.corrective.action
            if trace and trace.answer and trace.answer.corrective
            else None
        ),
        "images": len(vision.images) if vision and vision.sent else 0,
        "vision_fallback": vision.fallback if vision else None,
        **score_answer(q, response.answer, response.abstained),
        "answer": response.answer,
    }


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
