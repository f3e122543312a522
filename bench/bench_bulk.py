"""Bulk pipeline (``pagesight bulk``, Ray Data) against single-process ``Ingestor.ingest``.

Both ingest the same files in this run, each into a fresh data directory, one after the other,
with the same settings (a page model only where one is configured), so the ratio is read
against a baseline measured on the same machine at the same time:

- ingest: ``LocalStack(...).ingestor.ingest(...)``: one file after the other, each parsed in its
          isolated child, then chunked, embedded and written in this process;
- bulk:   ``pagesight.services.bulk_job.run_bulk`` over a JSONL manifest naming the same files (read
  in
          place: eval files are never copied), Ray started for the run (its start-up counts).

``ratio`` = bulk pages/s / ingest pages/s. ``stages`` gives each side's seconds per stage and
the bulk side's busy share (stage busy seconds over wall time x workers). With CUDA present,
GPU utilisation is sampled (``nvidia-smi``) during the bulk run.

The default subset is 12 of ../shared/eval/pdfs, 407 pages: born-digital filings, reports and
papers, image-only slide decks (OCR) and a scanned manual with an OCR layer.

    nice python bench/bench_bulk.py --out var/bench/bulk.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

DEFAULT_EVAL = REPO_ROOT.parent / "shared" / "eval"
#: 407 pages; text_layer per ../shared/eval/docs.jsonl
DEFAULT_DOCS = (
    "ULTABEAUTY_2023Q4_EARNINGS.pdf",  # 9, full
    "2303.05039v2.pdf",  # 9, full
    "MGMRESORTS_2022Q4_EARNINGS.pdf",  # 15, full
    "0e94b4197b10096b1f4c699701570fbf.pdf",  # 15, partial
    "PG_2020.03.09_US-Germany_FINAL.pdf",  # 21, full
    "germanwingsdigitalcrisisanalysis-150403064828-conversion-gate01_95.pdf",  # 23, none
    "measuringsuccessonfacebooktwitterlinkedin-160317142140_95.pdf",  # 25, none
    "PIP_Seniors-and-Tech-Use_040314.pdf",  # 27, full
    "owners-manual-2170416.pdf",  # 32, scanned with an OCR layer
    "STEPBACK.pdf",  # 36, full
    "AMAZON_2017_10K.pdf",  # 85, full
    "ADI_2009.pdf",  # 110, full
)


class StageClock:
    """Seconds spent in each wrapped call, by stage name (the single-process side)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        return timed


class GpuSampler:
    """Mean and peak GPU utilisation (%) while running; nothing without CUDA."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def available() -> bool:
        try:
            import torch

            return bool(torch.cuda.is_available()) and shutil.which("nvidia-smi") is not None
        except ImportError:
            return False

    def __enter__(self) -> GpuSampler:
        if self.available():
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            result = subprocess.run(
                [  # noqa: S607  # nvidia-smi from PATH, where the driver installs it
                    "nvidia-smi",
                    "--query-gpu=utilization.gpu",
                    "--format=csv,noheader,nounits",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            values = [float(v) for v in result.stdout.split() if v.strip()]
            if values:
                self.samples.append(sum(values) / len(values))

    def summary(self) -> dict[str, Any] | None:
        if self._thread is None:
            return None
        if not self.samples:
            return {"samples": 0}
        return {
            "samples": len(self.samples),
            "mean_pct": round(sum(self.samples) / len(self.samples), 1),
            "max_pct": max(self.samples),
        }


def run_ingest(files: list[Path], data_dir: Path) -> dict[str, Any]:
    from pagesight.core.settings import Settings
    from pagesight.ingestion.ingest import IngestRequest
    from pagesight.services.stack import LocalStack

    clock = StageClock()
    started = time.perf_counter()
    with LocalStack(Settings(data_dir=data_dir)) as stack:
        ingestor = stack.ingestor
        ingestor.parse = clock.wrap("parse", ingestor.parse)
        ingestor.chunk_points.points = clock.wrap("text_embed", ingestor.chunk_points.points)
        if ingestor.page_points is not None:
            ingestor.page_points.points = clock.wrap("page_embed", ingestor.page_points.points)
        ingestor.writer.write = clock.wrap("write", ingestor.writer.write)
        jobs = ingestor.ingest([IngestRequest(path=p) for p in files])
    wall = time.perf_counter() - started
    pages = sum(j.pages for j in jobs if j.state.value == "READY")
    return {
        "wall_s": round(wall, 2),
        "pages": pages,
        "pages_per_s": round(pages / wall, 3),
        "failed": {j.source_uri.rsplit("/", 1)[-1]: j.error_code for j in jobs if j.error_code},
        "stages": {
            name: {"seconds": round(s, 2), "busy_share": round(s / wall, 4)}
            for name, s in clock.seconds.items()
        },
    }


def run_bulk_side(files: list[Path], data_dir: Path, manifest: Path) -> dict[str, Any]:
    from pagesight.core.settings import Settings
    from pagesight.services.bulk_job import run_bulk

    manifest.write_text(
        "".join(
            json.dumps({"uri": p.resolve().as_uri(), "tenant": "default"}) + "\n" for p in files
        )
    )
    started = time.perf_counter()
    with GpuSampler() as gpu:
        report = run_bulk(Settings(data_dir=data_dir), str(manifest))
    wall = time.perf_counter() - started
    shown = report.as_dict()
    return {
        "wall_s": round(wall, 2),
        "pipeline_wall_s": shown["wall_s"],
        "pages": shown["pages"],
        "pages_per_s": round(shown["pages"] / wall, 3),
        "failed": shown["failures"],
        "aborted": shown["aborted"],
        "stages": {
            name: {
                "seconds": stage["busy_s"],
                "busy_share": stage["busy_share"],
                "workers": stage["workers"],
                "pages_per_busy_s": stage["pages_per_busy_s"],
            }
            for name, stage in shown["stages"].items()
        },
        "gpu_utilisation": gpu.summary(),
    }


def born_digital(eval_dir: Path, names: list[str]) -> list[str]:
    """The files whose every page has a text layer (``text_layer: full`` in docs.jsonl)."""
    full = set()
    for line in (eval_dir / "docs.jsonl").read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            if record.get("text_layer") == "full":
                full.add(record["doc"])
    return [name for name in names if name in full]


def raw_png_pass(files: list[Path], dpi: int) -> dict[str, Any]:
    """PyMuPDF's floor for a page: render at the store's dpi, encode PNG, read the text."""
    from bench.bench_parse import raw_pass

    pages, wall = raw_pass(files, dpi, png=True)
    return {"pages": pages, "wall_s": round(wall, 2), "pages_per_s": round(pages / wall, 3)}


def parse_pass(files: list[Path], root: Path, plain_pages: bool) -> dict[str, Any]:
    """The parse stage in this process (page images stored), pages/s and how pages were read."""
    from pagesight.core.settings import Settings
    from pagesight.ingestion.pipeline import DocumentParser
    from pagesight.ingestion.render import PageImageStore

    settings = Settings(data_dir=root)
    settings.parse.plain_pages = plain_pages
    parser = DocumentParser(settings, PageImageStore(root / "images", settings.render))
    parser.parse(files[0])  # model load and first-call costs stay out of the timing
    pages = 0
    readers: dict[str, int] = defaultdict(int)
    kinds: dict[str, int] = defaultdict(int)
    started = time.perf_counter()
    for path in files:
        parsed = parser.parse(path)
        pages += len(parsed.pages)
        for page in parsed.pages:
            readers[page.parser] += 1
        for element in parsed.elements:
            kinds[element.kind.value] += 1
    wall = time.perf_counter() - started
    return {
        "pages": pages,
        "wall_s": round(wall, 2),
        "pages_per_s": round(pages / wall, 3),
        "pages_by_parser": dict(readers),
        "elements": dict(kinds),
    }


def parse_comparison(files: list[Path], root: Path) -> dict[str, Any]:
    """Born-digital parse against the raw render + PNG + text floor, with the default settings
    and with plain pages read from their fonts (``parse.plain_pages``), all in this run."""
    from pagesight.core.settings import Settings

    raw = raw_png_pass(files, Settings().render.dpi)
    model = parse_pass(files, root / "parse-model", plain_pages=False)
    plain = parse_pass(files, root / "parse-plain", plain_pages=True)
    return {
        "files": [p.name for p in files],
        "parse_ratio_vs_raw_png": round(model["pages_per_s"] / raw["pages_per_s"], 3),
        "parse_ratio_vs_raw_png_plain_pages": round(plain["pages_per_s"] / raw["pages_per_s"], 3),
        "raw_png": raw,
        "parse": model,
        "parse_plain_pages": plain,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval-dir", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--docs", nargs="+", default=list(DEFAULT_DOCS), help="files in pdfs/")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--parse-only", action="store_true", help="only the born-digital parse comparison"
    )
    args = parser.parse_args()

    files = [args.eval_dir / "pdfs" / name for name in args.docs]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        sys.exit(f"missing eval files: {', '.join(missing)}")
    digital = [args.eval_dir / "pdfs" / n for n in born_digital(args.eval_dir, args.docs)]
    with tempfile.TemporaryDirectory(prefix="bench-bulk-") as tmp:
        root = Path(tmp)
        parse = parse_comparison(digital, root) if digital else None
        if args.parse_only:
            _emit(
                {
                    "parse_ratio_vs_raw_png": parse and parse["parse_ratio_vs_raw_png"],
                    "parse": parse,
                },
                args.out,
            )
            return
        ingest = run_ingest(files, root / "ingest")
        bulk = run_bulk_side(files, root / "bulk", root / "manifest.jsonl")
    result = {
        "files": len(files),
        "bulk_pages_per_s": bulk["pages_per_s"],
        "ingest_pages_per_s": ingest["pages_per_s"],
        "ratio": round(bulk["pages_per_s"] / ingest["pages_per_s"], 3)
        if ingest["pages_per_s"]
        else None,
        "parse_ratio_vs_raw_png": parse and parse["parse_ratio_vs_raw_png"],
        "bulk": bulk,
        "ingest": ingest,
        "parse": parse,
    }
    _emit(result, args.out)


def _emit(result: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(result, indent=1, default=str)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


if __name__ == "__main__":
    main()
