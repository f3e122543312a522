"""Tesseract vs RapidOCR on the eval corpus: speed, yield and text quality on real pages.

Two measurements, because the corpus's image-only pages have no ground truth:

* **Image-only pages** (``pages_without_text`` in ``docs.jsonl``): N pages spread over every
  document that has any, rendered at ``--dpi``. Reported per engine: seconds per page (p50, mean),
  non-space characters per page, and ``dictionary_word_rate``, the share of recognised tokens
  (lower-cased alphanumeric runs of three or more characters) that occur in a vocabulary built from
  the text layers of the corpus's born-digital PDFs. Garbled OCR makes non-words; a high rate
  means the engine reads real words, not that it found every word.
* **Born-digital pages with known text**: a few single-column pages whose text layer is the ground
  truth, rasterised at ``--dpi`` (an image-only copy) and OCRed. Reported: character error rate
  (edit distance / ground-truth length, whitespace removed, so line breaks and spacing do not
  count; reading order does) and order-free word recall. The same for a few pages of the Japanese
  set (``ja/pdfs``, not chosen for layout, so their CER includes reading-order differences), with
  order-free character recall in place of word recall.

Seconds per page are over the image-only and English born-digital pages; Japanese pages are timed
separately (``ja_s_per_page_mean``) because ``jpn`` makes Tesseract several times slower.

Run from the repo root: ``.venv/bin/python -m bench.bench_ocr --out var/bench_ocr.json``.
Timings are of this machine; compare engines within one run, not across machines.
"""

from __future__ import annotations

import argparse
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

#: Single-column born-digital pages (file, 1-based page): an earnings release, a Pew report page
#: and a 10-K page in ~8 pt print. Single-column and figure-free so that CER measures reading,
#: not the order in which an engine visits columns or figure labels.
CER_PAGES = [
    ("ULTABEAUTY_2023Q4_EARNINGS.pdf", 1),
    ("PG_2020.03.09_US-Germany_FINAL.pdf", 3),
    ("3M_2018_10K.pdf", 17),
]

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


def bench_engine(
    engine: OcrEngine,
    image_pages: list[tuple[PageRef, Image.Image]],
    known_pages: list[KnownTextPage],
    vocabulary: set[str],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    started = time.perf_counter()
    engine.warm_up()
    load_s = time.perf_counter() - started

    rows: list[dict[str, Any]] = []
    for ref, image in image_pages:
        started, cpu_started = time.perf_counter(), cpu_seconds()
        result = engine.recognize(image)
        elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
        found = tokens(result.text)
        rows.append(
            {
                "doc": ref.doc,
                "page": ref.page,
                "kind": "image-only",
                "s": round(elapsed, 3),
                "cpu_s": round(cpu, 3),
                "chars": len(_WHITESPACE.sub("", result.text)),
                "lines": len(result.lines),
                "tokens": len(found),
                "dictionary_words": sum(t in vocabulary for t in found),
                "rotation_applied": result.rotation_applied,
                "language": result.language,
            }
        )
    for known in known_pages:
        started, cpu_started = time.perf_counter(), cpu_seconds()
        result = engine.recognize(known.image)
        elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
        rows.append(
            {
                "doc": known.ref.doc,
                "page": known.ref.page,
                "kind": f"born-digital-{known.corpus}",
                "s": round(elapsed, 3),
                "cpu_s": round(cpu, 3),
                "cer": round(character_error_rate(result.text, known.truth), 4),
                "word_recall": round(word_recall(result.text, known.truth), 4),
                "char_recall": round(character_recall(result.text, known.truth), 4),
                "rotation_applied": result.rotation_applied,
                "language": result.language,
            }
        )

    image_only = [r for r in rows if r["kind"] == "image-only"]
    english = [r for r in rows if r["kind"] == "born-digital-en"]
    japanese = [r for r in rows if r["kind"] == "born-digital-ja"]
    seconds = [r["s"] for r in image_only + english]
    all_tokens = sum(r["tokens"] for r in image_only)
    summary = {
        "load_s": round(load_s, 3),
        "s_per_page_p50": _rounded(statistics.median, seconds, 3),
        "s_per_page_mean": _rounded(statistics.fmean, seconds, 3),
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
    }
    return summary, rows


def _rounded(aggregate: Any, values: list[float], digits: int) -> float | None:
    return round(aggregate(values), digits) if values else None


def recommend(engines: dict[str, dict[str, Any]]) -> str:
    """Best quality (dictionary word rate x (1 - CER)); within 2 points of it, the fastest."""

    def quality(name: str) -> float:
        e = engines[name]
        return (e["dictionary_word_rate"] or 0.0) * (1.0 - min(1.0, e["cer_mean"] or 0.0))

    best = max(quality(name) for name in engines)
    close = [name for name in engines if quality(name) >= best - 0.02]
    return min(close, key=lambda name: engines[name]["s_per_page_mean"] or float("inf"))


def pick_japanese_pages(eval_dir: Path, count: int) -> list[PageRef]:
    """Page 3 (or the last, if shorter) of the first ``count`` Japanese PDFs by name."""
    pdf_dir = eval_dir / "ja" / "pdfs"
    picked = []
    for path in sorted(pdf_dir.glob("*.pdf"))[:count]:
        with pymupdf.open(path) as pdf:
            picked.append(PageRef(path.name, min(3, pdf.page_count)))
    return picked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval-dir", type=Path, default=DEFAULT_EVAL_DIR)
    parser.add_argument("--pages", type=int, default=12, help="image-only pages to OCR")
    parser.add_argument("--dpi", type=int, default=300, help="render resolution")
    parser.add_argument("--cer-pages", type=int, default=len(CER_PAGES), help="born-digital pages")
    parser.add_argument(
        "--ja-pages", type=int, default=2, help="born-digital pages of the Japanese set"
    )
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)

    bench_started = time.perf_counter()
    docs = load_docs(args.eval_dir)
    refs = pick_image_only_pages(docs, args.pages)
    image_pages = [
        (ref, render(args.eval_dir / "pdfs" / ref.doc, ref.page, args.dpi)[0]) for ref in refs
    ]
    known_pages = [
        KnownTextPage(
            PageRef(doc, page), "en", *render(args.eval_dir / "pdfs" / doc, page, args.dpi)
        )
        for doc, page in CER_PAGES[: args.cer_pages]
    ] + [
        KnownTextPage(
            ref, "ja", *render(args.eval_dir / "ja" / "pdfs" / ref.doc, ref.page, args.dpi)
        )
        for ref in pick_japanese_pages(args.eval_dir, args.ja_pages)
    ]
    started = time.perf_counter()
    vocabulary = build_vocabulary(args.eval_dir, docs)
    vocabulary_s = time.perf_counter() - started

    engines: dict[str, dict[str, Any]] = {}
    pages: dict[tuple[str, int], dict[str, Any]] = {}
    for options in (TesseractOptions(), RapidOcrOptions()):
        engine = build_ocr_engine(options)
        print(f"running {engine.name} ...", file=sys.stderr, flush=True)
        summary, rows = bench_engine(engine, image_pages, known_pages, vocabulary)
        engines[engine.name] = summary
        for row in rows:
            page = pages.setdefault(
                (row["doc"], row["page"]),
                {"doc": row["doc"], "page": row["page"], "kind": row["kind"]},
            )
            page[engine.name] = {k: v for k, v in row.items() if k not in ("doc", "page", "kind")}

    report = {
        "engines": engines,
        "pages": list(pages.values()),
        "recommended": recommend(engines),
        "config": {
            "dpi": args.dpi,
            "image_only_pages": len(refs),
            "born_digital_pages": sum(k.corpus == "en" for k in known_pages),
            "japanese_pages": sum(k.corpus == "ja" for k in known_pages),
            "vocabulary_tokens": len(vocabulary),
            "vocabulary_s": round(vocabulary_s, 2),
            "cpu_count": os.cpu_count(),
            "total_s": round(time.perf_counter() - bench_started, 1),
        },
    }
    _print_table(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


def _print_table(report: dict[str, Any]) -> None:
    columns = [
        ("s_per_page_p50", "s/page p50"),
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
    print(f"{'engine':<10}" + "".join(f"{title:>15}" for _, title in columns))
    for name, figures in report["engines"].items():
        print(f"{name:<10}" + "".join(f"{figures[key]!s:>15}" for key, _ in columns))
    for page in report["pages"]:
        cells = []
        for name in report["engines"]:
            row = page.get(name, {})
            detail = f"cer={row['cer']}" if "cer" in row else f"chars={row.get('chars')}"
            if "char_recall" in row and page["kind"].endswith("-ja"):
                detail += f" char_recall={row['char_recall']}"
            cells.append(f"{name}: {row.get('s')} s {detail} rot={row.get('rotation_applied', 0)}")
        print(f"  {page['doc'][:40]:<40} p{page['page']:<4} " + " | ".join(cells))
    print(f"recommended: {report['recommended']}  (total {report['config']['total_s']} s)")


if __name__ == "__main__":
    raise SystemExit(main())
