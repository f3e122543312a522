"""Parse throughput on born-digital pages, against PyMuPDF's raw render + text extraction.

Both run in this process on the same pages, one after the other, so the ratio is read against a
baseline measured in the same run on the same machine:

- raw:   ``page.get_pixmap(dpi)`` + ``page.get_text("dict")`` per page (the floor any
         PyMuPDF-based parser pays);
- parse: the full parse stage (layout model, tables, captions, section paths, page images
         rendered and PNG-encoded into the content-addressed store) plus chunking.

``ratio_vs_raw_pymupdf`` = parse pages/s / raw pages/s (1.0 would mean structure is free).

A third pass runs the whole ingestion (parse in the isolated child process, chunk, dense and
BM25 embedding, upsert into the embedded index, catalog) on the same files in one process:
``ingest_pages_per_s`` is the born-digital ingest throughput.

    python bench/bench_parse.py --out var/bench/parse.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

DEFAULT_EVAL = REPO_ROOT.parent / "shared" / "eval"
DEFAULT_DOCS = (
    "ULTABEAUTY_2023Q4_EARNINGS.pdf",
    "2303.05039v2.pdf",
    "MGMRESORTS_2022Q4_EARNINGS.pdf",
    "PG_2020.03.09_US-Germany_FINAL.pdf",
)


def raw_pass(paths: list[Path], dpi: int, png: bool = False) -> tuple[int, float]:
    """(pages, seconds) of PyMuPDF's floor per page: render at ``dpi`` (and encode it as PNG
    with ``png``), read the text as a dict."""
    import pymupdf

    pages = 0
    start = time.perf_counter()
    for path in paths:
        with pymupdf.open(path) as doc:
            for page in doc:
                pixmap = page.get_pixmap(dpi=dpi, alpha=False)
                if png:
                    pixmap.tobytes("png")
                page.get_text("dict")
                pages += 1
    return pages, time.perf_counter() - start


def _parse_pass(paths: list[Path], data_dir: Path) -> tuple[int, int, int, float]:
    from pagesight.core.settings import Settings
    from pagesight.ingestion.chunk import Chunker
    from pagesight.ingestion.pipeline import DocumentParser
    from pagesight.ingestion.render import PageImageStore

    settings = Settings(data_dir=data_dir)
    parser = DocumentParser(settings, PageImageStore(settings.page_image_dir, settings.render))
    chunker = Chunker(settings.chunk)
    pages = elements = chunks = 0
    start = time.perf_counter()
    for path in paths:
        parsed = parser.parse(path)
        pages += len(parsed.pages)
        elements += len(parsed.elements)
        chunks += len(chunker(parsed))
    return pages, elements, chunks, time.perf_counter() - start


def _ingest_pass(paths: list[Path], data_dir: Path) -> tuple[int, float]:
    from pagesight.core.settings import Settings
    from pagesight.services.stack import LocalStack

    with LocalStack(Settings(data_dir=data_dir)) as stack:
        stack.embedder.warm_up()
        start = time.perf_counter()
        jobs = stack.ingestor.ingest([stack.request(p) for p in paths])
        elapsed = time.perf_counter() - start
    failed = [j for j in jobs if j.state.value != "READY"]
    if failed:
        raise SystemExit(f"ingest failed: {failed}")
    return sum(j.pages for j in jobs), elapsed


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--eval-dir", type=Path, default=DEFAULT_EVAL)
    ap.add_argument(
        "--docs", nargs="*", default=list(DEFAULT_DOCS), help="born-digital PDFs in pdfs/"
    )
    ap.add_argument("--dpi", type=int, default=144)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    paths = [args.eval_dir / "pdfs" / name for name in args.docs]
    # Warm both paths once (imports, ONNX session creation) so neither pays start-up in the timing.
    with tempfile.TemporaryDirectory() as warm:
        raw_pass(paths[:1], args.dpi)
        _parse_pass(paths[:1], Path(warm))
    raw_pages, raw_s = raw_pass(paths, args.dpi)
    with tempfile.TemporaryDirectory() as data_dir:
        pages, elements, chunks, parse_s = _parse_pass(paths, Path(data_dir))
    with tempfile.TemporaryDirectory() as data_dir:
        ingest_pages, ingest_s = _ingest_pass(paths, Path(data_dir))
    raw_rate = raw_pages / raw_s
    parse_rate = pages / parse_s
    result = {
        "docs": args.docs,
        "pages": pages,
        "dpi": args.dpi,
        "raw_pymupdf_pages_per_s": round(raw_rate, 2),
        "parse_pages_per_s": round(parse_rate, 2),
        "ratio_vs_raw_pymupdf": round(parse_rate / raw_rate, 3),
        "ingest_pages_per_s": round(ingest_pages / ingest_s, 2),
        "ingest_ratio_vs_raw_pymupdf": round(ingest_pages / ingest_s / raw_rate, 3),
        "raw_s": round(raw_s, 2),
        "ingest_s": round(ingest_s, 2),
        "parse_s": round(parse_s, 2),
        "elements": elements,
        "chunks": chunks,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
