"""Tesseract vs RapidOCR (current and new settings) on the eval corpus: speed, yield, text quality.

Two measurements, because the corpus's image-only pages have no ground truth:

* **Image-only pages** (``pages_without_text`` in ``docs.jsonl``): N pages spread over every
  document that has any, rendered at ``--dpi``. Reported per engine: seconds per page (p50, mean),
  non-space characters per page, and ``dictionary_word_rate``, the share of recognised tokens
  (lower-cased alphanumeric runs of three or more characters) that occur in a vocabulary built from
  the text layers of the corpus's born-digital PDFs. Garbled OCR makes non-words; a high rate
  means the engine reads real words, not that it found every word.
* **Born-digital pages with known text**, rasterised at ``--dpi`` (an image-only copy) and OCRed
  against their text layer: ``--en-pages`` pages of the main set's born-digital PDFs and
  ``--ja-pages`` of the Japanese set. Pages are chosen by a fixed rule that never looks at what a
  page says: every page whose text layer has at least ``MIN_TRUTH_CHARS`` non-space characters
  is a candidate, candidates are ranked by ``sha256("<file>:<page>")`` and taken in that order,
  at most one per document while documents last. Reported: character error rate (edit distance /
  ground-truth length, whitespace removed, so line breaks and spacing do not count; reading order
  does, so multi-column pages add order differences) and the order-free word recall (English) or
  character recall (Japanese).

Engines: ``tesseract`` (its defaults), ``rapidocr-current`` (RapidOCR as PageSight ran it before
issue 36: ``CURRENT_RAPID``) and ``rapidocr`` (today's ``RapidOcrOptions()`` defaults, or those
with ``--set KEY=VALUE`` applied). The machine is shared, so engines are not run one after the
other: every page is read by every engine back to back, in an order that alternates from page to
page, and ``ratios`` compares ``rapidocr`` with ``rapidocr-current`` within this one run (p50s,
and the median of per-page time ratios, which shrugs off load that changes during the run).

Seconds per page (``s_per_page_*``) are over the image-only and English born-digital pages,
``image_only_s_p50`` over the image-only pages alone; Japanese pages are timed separately
(``ja_s_per_page_mean``) because ``jpn`` makes Tesseract several times slower.

Run from the repo root: ``.venv/bin/python -m bench.bench_ocr --out var/bench_ocr.json``.
Timings are of this machine; compare engines within one run, not across machines.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_THREAD_LIMIT", "1")

import numpy as np
import pymupdf
from PIL import Image

from pagesight.core.settings import RapidOcrOptions, TesseractOptions
from pagesight.ingestion.ocr import OcrEngine, build_ocr_engine

DEFAULT_EVAL_DIR = Path(__file__).resolve().parents[2] / "shared" / "eval"

#: RapidOCR as PageSight ran it before issue 36 (RapidOCR's own detector bound and batch, float
#: models on ONNX Runtime with its thread default, OSD before every page): the baseline every
#: run measures the defaults against.
CURRENT_RAPID: dict[str, Any] = {
    "det_limit_side_len": 736,
    "det_limit_type": "min",
    "rec_batch_size": 6,
    "int8_detection": False,
    "int8_recognition": False,
    "threads": 0,
    "orientation": "always",
    "runtime": "onnxruntime",
}

#: A born-digital page is a CER candidate when its text layer has this many non-space characters
#: (a near-empty page has no error rate worth averaging).
MIN_TRUTH_CHARS = 200

_TOKEN = re.compile(r"[0-9a-z]+")
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class PageRef:
    doc: str
    page: int  # 1-based


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (Tesseract runs as a child process)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens of three or more characters (the quality proxy's unit)."""
    return [t for t in _TOKEN.findall(text.lower()) if len(t) >= 3]


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, one numpy row per character of ``a`` (pages are ~3k characters)."""
    if not a or not b:
        return max(len(a), len(b))
    b_codes = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    positions = np.arange(len(b) + 1)
    previous = positions.copy()
    for i, char in enumerate(a, 1):
        substitution = previous[:-1] + (b_codes != ord(char))
        deletion = previous[1:] + 1
        best = np.empty_like(previous)
        best[0] = i
        best[1:] = np.minimum(substitution, deletion)
        # Insertions chain along the row: current[j] = min_k (best[k] + j - k).
        previous = np.minimum.accumulate(best - positions) + positions
    return int(previous[-1])


def character_error_rate(predicted: str, truth: str) -> float:
    predicted, truth = _WHITESPACE.sub("", predicted), _WHITESPACE.sub("", truth)
    return edit_distance(predicted, truth) / max(1, len(truth))


def word_recall(predicted: str, truth: str) -> float:
    """Share of the truth's tokens (with multiplicity) that the OCR text also contains."""
    want, got = Counter(tokens(truth)), Counter(tokens(predicted))
    total = sum(want.values())
    return sum(min(n, got[t]) for t, n in want.items()) / total if total else 1.0


def character_recall(predicted: str, truth: str) -> float:
    """Share of the truth's non-space characters (with multiplicity) found anywhere in the OCR text.

    The order-free counterpart of CER for Japanese, which has no spaces to make tokens of.
    """
    want = Counter(_WHITESPACE.sub("", truth))
    got = Counter(_WHITESPACE.sub("", predicted))
    total = sum(want.values())
    return sum(min(n, got[c]) for c, n in want.items()) / total if total else 1.0


def load_docs(eval_dir: Path) -> list[dict[str, Any]]:
    with (eval_dir / "docs.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def pick_image_only_pages(docs: list[dict[str, Any]], count: int) -> list[PageRef]:
    """``count`` image-only pages spread over documents, evenly within each; deterministic.

    Pages are dealt round-robin over documents (sorted by name) so every document with
    image-only pages is represented before any gets a second; within a document, the chosen
    pages are evenly spaced through its list.
    """
    pools = {d["doc"]: list(d["pages_without_text"]) for d in docs if d.get("pages_without_text")}
    quota = dict.fromkeys(sorted(pools), 0)
    remaining = count
    while remaining > 0:
        progressed = False
        for doc in quota:
            if remaining and quota[doc] < len(pools[doc]):
                quota[doc] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            break
    picked = []
    for doc, n in quota.items():
        pages = pools[doc]
        picked += [PageRef(doc, pages[int((j + 0.5) * len(pages) / n)]) for j in range(n)]
    return picked


def build_vocabulary(eval_dir: Path, docs: list[dict[str, Any]]) -> set[str]:
    """Tokens of every born-digital PDF's text layer (``text_layer == 'full'``)."""
    vocabulary: set[str] = set()
    for doc in docs:
        if doc.get("text_layer") != "full":
            continue
        with pymupdf.open(eval_dir / "pdfs" / doc["doc"]) as pdf:
            for page in pdf:
                vocabulary.update(tokens(page.get_text()))
    return vocabulary


def render(path: Path, page_number: int, dpi: int) -> tuple[Image.Image, str]:
    """The page rasterised (an image-only copy, as far as OCR can tell) and its text layer."""
    with pymupdf.open(path) as pdf:
        page = pdf[page_number - 1]
        pix = page.get_pixmap(dpi=dpi)
        image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
        return image, page.get_text()


@dataclass(frozen=True)
class KnownTextPage:
    """A born-digital page rasterised: OCR input with its text layer as the ground truth."""

    ref: PageRef
    corpus: str  # "en" (main eval set) or "ja" (Japanese set)
    image: Image.Image
    truth: str


def pick_known_text_pages(pdf_dir: Path, names: list[str], count: int) -> list[PageRef]:
    """``count`` born-digital pages of ``names`` by the hash rule (module docstring).

    Candidates (pages with at least ``MIN_TRUTH_CHARS`` non-space characters of text layer) are
    ranked by ``sha256("<file>:<page>")``; the first pass takes each document's best-ranked page,
    later passes (only when ``count`` exceeds the documents) its next ones.
    """
    ranked: dict[str, list[tuple[str, int]]] = {}
    for name in sorted(names):
        with pymupdf.open(pdf_dir / name) as pdf:
            candidates = [
                (hashlib.sha256(f"{name}:{number}".encode()).hexdigest(), number)
                for number, page in enumerate(pdf, 1)
                if len(_WHITESPACE.sub("", page.get_text())) >= MIN_TRUTH_CHARS
            ]
        if candidates:
            ranked[name] = sorted(candidates)
    picked: list[tuple[str, PageRef]] = []
    for depth in range(max((len(c) for c in ranked.values()), default=0)):
        layer = sorted(
            (pages[depth][0], PageRef(name, pages[depth][1]))
            for name, pages in ranked.items()
            if depth < len(pages)
        )
        picked += layer[: count - len(picked)]
        if len(picked) >= count:
            break
    return [ref for _, ref in picked]


def read_page(engine: OcrEngine, image: Image.Image) -> tuple[Any, float, float]:
    """The engine's result on ``image``, with the wall and CPU seconds it took."""
    started, cpu_started = time.perf_counter(), cpu_seconds()
    result = engine.recognize(image)
    return result, time.perf_counter() - started, cpu_seconds() - cpu_started


def image_only_row(result: Any, elapsed: float, cpu: float, vocabulary: set[str]) -> dict[str, Any]:
    found = tokens(result.text)
    return {
        "s": round(elapsed, 3),
        "cpu_s": round(cpu, 3),
        "chars": len(_WHITESPACE.sub("", result.text)),
        "lines": len(result.lines),
        "tokens": len(found),
        "dictionary_words": sum(t in vocabulary for t in found),
        "rotation_applied": result.rotation_applied,
        "language": result.language,
        "stage_s": {k: round(v, 3) for k, v in result.stage_seconds.items()},
    }


def known_text_row(result: Any, elapsed: float, cpu: float, truth: str) -> dict[str, Any]:
    return {
        "s": round(elapsed, 3),
        "cpu_s": round(cpu, 3),
        "cer": round(character_error_rate(result.text, truth), 4),
        "word_recall": round(word_recall(result.text, truth), 4),
        "char_recall": round(character_recall(result.text, truth), 4),
        "rotation_applied": result.rotation_applied,
        "language": result.language,
        "stage_s": {k: round(v, 3) for k, v in result.stage_seconds.items()},
    }


def summarise(rows: list[dict[str, Any]], load_s: float) -> dict[str, Any]:
    """One engine's figures from its page rows (each with ``kind``)."""
    image_only = [r for r in rows if r["kind"] == "image-only"]
    english = [r for r in rows if r["kind"] == "born-digital-en"]
    japanese = [r for r in rows if r["kind"] == "born-digital-ja"]
    seconds = [r["s"] for r in image_only + english]
    all_tokens = sum(r["tokens"] for r in image_only)
    return {
        "load_s": round(load_s, 3),
        "s_per_page_p50": _rounded(statistics.median, seconds, 3),
        "s_per_page_mean": _rounded(statistics.fmean, seconds, 3),
        "image_only_s_p50": _rounded(statistics.median, [r["s"] for r in image_only], 3),
        # RapidOCR's ONNX Runtime uses every core, Tesseract one: CPU seconds decide throughput
        # when pages are OCRed in parallel workers.
        "cpu_s_per_page_mean": _rounded(
            statistics.fmean, [r["cpu_s"] for r in image_only + english], 3
        ),
        "chars_per_page_mean": _rounded(statistics.fmean, [r["chars"] for r in image_only], 1),
        "dictionary_word_rate": (
            round(sum(r["dictionary_words"] for r in image_only) / all_tokens, 4)
            if all_tokens
            else None
        ),
        "cer_mean": _rounded(statistics.fmean, [r["cer"] for r in english], 4),
        "word_recall_mean": _rounded(statistics.fmean, [r["word_recall"] for r in english], 4),
        "ja_cer_mean": _rounded(statistics.fmean, [r["cer"] for r in japanese], 4),
        "ja_char_recall_mean": _rounded(statistics.fmean, [r["char_recall"] for r in japanese], 4),
        "ja_s_per_page_mean": _rounded(statistics.fmean, [r["s"] for r in japanese], 3),
        # Where a page's time goes (engines that report stages: RapidOCR), image-only + English.
        "stage_s_mean": _stage_means(image_only + english),
    }


def _stage_means(rows: list[dict[str, Any]]) -> dict[str, float]:
    stages = sorted({k for r in rows for k in r.get("stage_s", {})})
    return {
        k: round(statistics.fmean(r["stage_s"].get(k, 0.0) for r in rows), 3)
        for k in stages
        if rows
    }


def _rounded(aggregate: Any, values: list[float], digits: int) -> float | None:
    return round(aggregate(values), digits) if values else None


def compare(
    pages: list[dict[str, Any]], engines: dict[str, dict[str, Any]], new: str, old: str
) -> dict[str, Any]:
    """``new`` against ``old`` in this run: time ratios and quality differences."""
    a, b = engines[new], engines[old]

    def ratio(key: str) -> float | None:
        return round(a[key] / b[key], 3) if a.get(key) and b.get(key) else None

    def delta(key: str) -> float | None:
        return round(a[key] - b[key], 4) if None not in (a.get(key), b.get(key)) else None

    per_page = [
        p[new]["s"] / p[old]["s"]
        for p in pages
        if p["kind"] in ("image-only", "born-digital-en") and p.get(old, {}).get("s")
    ]
    ja_per_page = [
        p[new]["s"] / p[old]["s"]
        for p in pages
        if p["kind"] == "born-digital-ja" and p.get(old, {}).get("s")
    ]
    return {
        "engines": f"{new} / {old}",
        "s_per_page_p50_ratio": ratio("s_per_page_p50"),
        "image_only_s_p50_ratio": ratio("image_only_s_p50"),
        "s_per_page_mean_ratio": ratio("s_per_page_mean"),
        "cpu_s_per_page_ratio": ratio("cpu_s_per_page_mean"),
        "per_page_ratio_median": _rounded(statistics.median, per_page, 3),
        "ja_per_page_ratio_median": _rounded(statistics.median, ja_per_page, 3),
        "cer_delta": delta("cer_mean"),
        "ja_cer_delta": delta("ja_cer_mean"),
        "dictionary_word_rate_delta": delta("dictionary_word_rate"),
    }


def recommend(engines: dict[str, dict[str, Any]]) -> str:
    """Best quality (dictionary word rate x (1 - CER)); within 2 points of it, the fastest."""

    def quality(name: str) -> float:
        e = engines[name]
        return (e["dictionary_word_rate"] or 0.0) * (1.0 - min(1.0, e["cer_mean"] or 0.0))

    best = max(quality(name) for name in engines)
    close = [name for name in engines if quality(name) >= best - 0.02]
    return min(close, key=lambda name: engines[name]["s_per_page_mean"] or float("inf"))


def rapid_options(overrides: list[str]) -> RapidOcrOptions:
    """``RapidOcrOptions()`` with ``KEY=VALUE`` overrides (values parsed as JSON, else text)."""
    values: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or key not in RapidOcrOptions.model_fields:
            raise SystemExit(f"--set wants KEY=VALUE with KEY a RapidOcrOptions field: {item!r}")
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw
    return RapidOcrOptions(**values)


def build_engines(names: list[str], overrides: list[str]) -> dict[str, OcrEngine]:
    engines: dict[str, OcrEngine] = {}
    for name in names:
        if name == "tesseract":
            engines[name] = build_ocr_engine(TesseractOptions())
        elif name == "rapidocr-current":
            engines[name] = build_ocr_engine(RapidOcrOptions(**CURRENT_RAPID))
        elif name == "rapidocr":
            engines[name] = build_ocr_engine(rapid_options(overrides))
        else:
            raise SystemExit(f"unknown engine {name!r}")
    return engines


def _runtime(engine: OcrEngine) -> str | None:
    """What runs a warm RapidOCR engine's models (or those of the one a fallback wraps), with
    OpenVINO's precision: "openvino bf16", "onnxruntime"; None for other engines."""
    primary = getattr(engine, "primary", engine)
    runtime = getattr(primary, "runtime", "")
    return " ".join(filter(None, [runtime, getattr(primary, "precision", "")])) or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval-dir", type=Path, default=DEFAULT_EVAL_DIR)
    parser.add_argument("--pages", type=int, default=12, help="image-only pages to OCR")
    parser.add_argument("--dpi", type=int, default=300, help="render resolution")
    parser.add_argument("--en-pages", type=int, default=20, help="born-digital pages, main set")
    parser.add_argument("--ja-pages", type=int, default=10, help="born-digital pages, Japanese set")
    parser.add_argument(
        "--engines",
        default="tesseract,rapidocr-current,rapidocr",
        help="comma-separated: tesseract, rapidocr-current, rapidocr",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a RapidOcrOptions field for the 'rapidocr' engine (repeatable)",
    )
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)

    bench_started = time.perf_counter()
    docs = load_docs(args.eval_dir)
    refs = pick_image_only_pages(docs, args.pages)
    image_pages = [
        (ref, render(args.eval_dir / "pdfs" / ref.doc, ref.page, args.dpi)[0]) for ref in refs
    ]
    full = [d["doc"] for d in docs if d.get("text_layer") == "full"]
    ja_dir = args.eval_dir / "ja" / "pdfs"
    known_pages = [
        KnownTextPage(ref, "en", *render(args.eval_dir / "pdfs" / ref.doc, ref.page, args.dpi))
        for ref in pick_known_text_pages(args.eval_dir / "pdfs", full, args.en_pages)
    ] + [
        KnownTextPage(ref, "ja", *render(ja_dir / ref.doc, ref.page, args.dpi))
        for ref in pick_known_text_pages(
            ja_dir, [p.name for p in ja_dir.glob("*.pdf")], args.ja_pages
        )
    ]
    started = time.perf_counter()
    vocabulary = build_vocabulary(args.eval_dir, docs)
    vocabulary_s = time.perf_counter() - started

    engines = build_engines([n.strip() for n in args.engines.split(",") if n.strip()], args.set)
    load_s = {}
    for name, engine in engines.items():
        started = time.perf_counter()
        engine.warm_up()
        load_s[name] = time.perf_counter() - started

    pages: list[dict[str, Any]] = []
    names = list(engines)
    work: list[tuple[PageRef, str, Image.Image, str | None]] = [
        (ref, "image-only", image, None) for ref, image in image_pages
    ] + [(k.ref, f"born-digital-{k.corpus}", k.image, k.truth) for k in known_pages]
    for index, (ref, kind, image, truth) in enumerate(work):
        print(f"[{index + 1}/{len(work)}] {ref.doc} p{ref.page}", file=sys.stderr, flush=True)
        page: dict[str, Any] = {"doc": ref.doc, "page": ref.page, "kind": kind}
        # Alternate the order so that neither engine always runs on a cache the other warmed.
        for name in names if index % 2 == 0 else names[::-1]:
            result, elapsed, cpu = read_page(engines[name], image)
            page[name] = (
                image_only_row(result, elapsed, cpu, vocabulary)
                if truth is None
                else known_text_row(result, elapsed, cpu, truth)
            )
        pages.append(page)

    summaries = {
        name: summarise([{"kind": p["kind"], **p[name]} for p in pages], load_s[name])
        for name in names
    }
    report: dict[str, Any] = {
        "engines": summaries,
        "pages": pages,
        "recommended": recommend(summaries),
        "config": {
            "dpi": args.dpi,
            "image_only_pages": len(refs),
            "born_digital_pages": sum(k.corpus == "en" for k in known_pages),
            "japanese_pages": sum(k.corpus == "ja" for k in known_pages),
            "rapidocr_current": CURRENT_RAPID,
            "rapidocr": (
                rapid_options(args.set).model_dump(mode="json", exclude={"fallback"})
                if "rapidocr" in engines
                else None
            ),
            # What ran each RapidOCR engine's models ("openvino" / "onnxruntime"), once warm.
            "runtimes": {name: _runtime(engine) for name, engine in engines.items()},
            "vocabulary_tokens": len(vocabulary),
            "vocabulary_s": round(vocabulary_s, 2),
            "cpu_count": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 1),
            "total_s": round(time.perf_counter() - bench_started, 1),
        },
    }
    if "rapidocr" in engines and "rapidocr-current" in engines:
        report["ratios"] = compare(pages, summaries, "rapidocr", "rapidocr-current")
    _print_table(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


def _print_table(report: dict[str, Any]) -> None:
    columns = [
        ("s_per_page_p50", "s/page p50"),
        ("image_only_s_p50", "img-only p50"),
        ("s_per_page_mean", "s/page mean"),
        ("cpu_s_per_page_mean", "cpu s/page"),
        ("chars_per_page_mean", "chars/page"),
        ("dictionary_word_rate", "dict word rate"),
        ("cer_mean", "CER"),
        ("word_recall_mean", "word recall"),
        ("ja_cer_mean", "ja CER"),
        ("ja_char_recall_mean", "ja char recall"),
        ("ja_s_per_page_mean", "ja s/page"),
        ("load_s", "load s"),
    ]
    print(f"{'engine':<17}" + "".join(f"{title:>15}" for _, title in columns))
    for name, figures in report["engines"].items():
        print(f"{name:<17}" + "".join(f"{figures[key]!s:>15}" for key, _ in columns))
    for page in report["pages"]:
        cells = []
        for name in report["engines"]:
            row = page.get(name, {})
            detail = f"cer={row['cer']}" if "cer" in row else f"chars={row.get('chars')}"
            if "char_recall" in row and page["kind"].endswith("-ja"):
                detail += f" char_recall={row['char_recall']}"
            cells.append(f"{name}: {row.get('s')} s {detail} rot={row.get('rotation_applied', 0)}")
        print(f"  {page['doc'][:40]:<40} p{page['page']:<4} " + " | ".join(cells))
    for name, figures in report["engines"].items():
        if figures["stage_s_mean"]:
            print(f"{name} stage s/page mean: " + json.dumps(figures["stage_s_mean"]))
    if "ratios" in report:
        print("ratios: " + json.dumps(report["ratios"]))
    print(f"recommended: {report['recommended']}  (total {report['config']['total_s']} s)")


if __name__ == "__main__":
    raise SystemExit(main())
