"""Element-by-element comparison of two parse settings on the eval PDFs (issue 36 item 3).

A cheaper layout stage (batched or quantised models, a smaller page image, a model called behind
our own stage) is only acceptable if it finds what the current one finds. This parses every PDF
twice in this process, once with the settings as they are ("before") and once with the
environment overrides given by ``--after KEY=VALUE`` (``PAGESIGHT_...`` names, as the service
reads them), and checks each table, figure and caption of "before" against "after":

- found: an element of the same kind on the same page whose box overlaps it at IoU >= 0.5
  (each "after" element matches at most one "before" element, best overlap first);
- same caption: for tables and figures, the matched element's ``caption`` is identical; for
  captions, the text is.

It reports per kind how many were found and kept their caption, lists every miss, counts the
elements "after" has that "before" lacks, and gives both sides' parse seconds per page: each file
is parsed by both, back to back and in alternating order, so load on the machine affects both
alike, after one untimed parse of the first file by each (model loads and first calls).

    python bench/compare_parse.py --after PAGESIGHT_PARSE__LAYOUT_THREADS=1 \
        --out var/bench/compare_parse.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from pagesight.core.document import BBox, Element, ElementKind  # noqa: E402

DEFAULT_PDFS = REPO_ROOT.parent / "shared" / "eval" / "pdfs"
#: The kinds the comparison holds a parse to (issue 36 item 3).
COMPARED_KINDS = (ElementKind.TABLE, ElementKind.FIGURE, ElementKind.CAPTION)
MIN_IOU = 0.5


def iou(a: BBox, b: BBox) -> float:
    """Intersection over union of two boxes (0 for boxes without area)."""
    inter = a.intersection_area(b)
    union = a.area + b.area - inter
    return inter / union if union > 0 else 0.0


def _label(element: Element) -> str:
    """What a caption check compares: the caption of a table or figure, a caption's own text."""
    return (element.text if element.kind is ElementKind.CAPTION else element.caption or "").strip()


def compare_elements(
    before: Sequence[Element],
    after: Sequence[Element],
    kinds: Iterable[ElementKind] = COMPARED_KINDS,
    min_iou: float = MIN_IOU,
) -> dict[str, Any]:
    """How many of ``before``'s elements of ``kinds`` ``after`` has (module docstring)."""
    kinds = tuple(kinds)
    wanted = [e for e in before if e.kind in kinds]
    candidates = [e for e in after if e.kind in kinds]
    pairs = sorted(
        (
            (iou(b.bbox, a.bbox), i, j)
            for i, b in enumerate(wanted)
            for j, a in enumerate(candidates)
            if b.kind is a.kind and b.page_number == a.page_number and b.bbox and a.bbox
        ),
        reverse=True,
    )
    match: dict[int, int] = {}
    taken: set[int] = set()
    for overlap, i, j in pairs:
        if overlap < min_iou:
            break
        if i not in match and j not in taken:
            match[i] = j
            taken.add(j)
    by_kind: dict[str, dict[str, int]] = {
        kind.value: {"before": 0, "found": 0, "same_caption": 0, "extra_after": 0} for kind in kinds
    }
    misses: list[dict[str, Any]] = []
    for i, element in enumerate(wanted):
        counts = by_kind[element.kind.value]
        counts["before"] += 1
        partner = candidates[match[i]] if i in match else None
        same = partner is not None and _label(partner) == _label(element)
        counts["found"] += partner is not None
        counts["same_caption"] += same
        if not same:
            misses.append(
                {
                    "kind": element.kind.value,
                    "page": element.page_number,
                    "bbox": element.bbox.model_dump() if element.bbox else None,
                    "caption": _label(element)[:120],
                    "after_caption": None if partner is None else _label(partner)[:120],
                    "why": "caption differs" if partner else f"none at IoU >= {min_iou}",
                }
            )
    for j, element in enumerate(candidates):
        if j not in taken:
            by_kind[element.kind.value]["extra_after"] += 1
    return {"by_kind": by_kind, "misses": misses, "holds": not misses}


@contextmanager
def environment(overrides: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``overrides`` set, restored afterwards."""
    saved = {key: os.environ.get(key) for key in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _parser(overrides: dict[str, str], root: Path) -> Any:
    from pagesight.core.settings import Settings
    from pagesight.ingestion.pipeline import DocumentParser
    from pagesight.ingestion.render import PageImageStore

    with environment(overrides):
        settings = Settings(data_dir=root)
    return DocumentParser(settings, PageImageStore(root / "images", settings.render))


def _parse(parser: Any, path: Path) -> tuple[list[Element], int, float]:
    started = time.perf_counter()
    parsed = parser.parse(path)
    return parsed.elements, len(parsed.pages), time.perf_counter() - started


def _overrides(pairs: list[str]) -> dict[str, str]:
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.startswith("PAGESIGHT_"):
            raise SystemExit(f"--after wants PAGESIGHT_NAME=VALUE, got {pair!r}")
        result[key] = value
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, default=DEFAULT_PDFS)
    ap.add_argument("--names", help="comma-separated file names (default: every PDF in --pdfs)")
    ap.add_argument("--after", action="append", default=[], metavar="PAGESIGHT_NAME=VALUE")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    names = (
        [n.strip() for n in args.names.split(",") if n.strip()]
        if args.names
        else sorted(p.name for p in args.pdfs.glob("*.pdf"))
    )
    after_env = _overrides(args.after)
    files: list[dict[str, Any]] = []
    totals = {"before": {"pages": 0, "s": 0.0}, "after": {"pages": 0, "s": 0.0}}
    with tempfile.TemporaryDirectory() as tmp:
        parsers = {
            "before": _parser({}, Path(tmp) / "before"),
            "after": _parser(after_env, Path(tmp) / "after"),
        }
        for parser in parsers.values():  # model loads and first calls stay out of the timing
            _parse(parser, args.pdfs / names[0])
        for number, name in enumerate(names, 1):
            print(f"[{number}/{len(names)}] {name}", file=sys.stderr, flush=True)
            # Alternate which side goes first, so that neither always finds the file cached.
            order = ["before", "after"] if number % 2 else ["after", "before"]
            sides = {side: _parse(parsers[side], args.pdfs / name) for side in order}
            for side, (_, pages, seconds) in sides.items():
                totals[side]["pages"] += pages
                totals[side]["s"] += seconds
            result = compare_elements(sides["before"][0], sides["after"][0])
            files.append({"file": name, **result})
    by_kind: dict[str, dict[str, int]] = {}
    for record in files:
        for kind, counts in record["by_kind"].items():
            into = by_kind.setdefault(kind, dict.fromkeys(counts, 0))
            for key, value in counts.items():
                into[key] += value
    s_per_page = {
        side: round(t["s"] / t["pages"], 4) if t["pages"] else None for side, t in totals.items()
    }
    report = {
        "after": after_env,
        "files": len(files),
        "holds": all(f["holds"] for f in files),
        "by_kind": by_kind,
        "parse_s_per_page": s_per_page,
        "parse_ratio_after_vs_before": (
            round(s_per_page["before"] / s_per_page["after"], 3)
            if s_per_page["before"] and s_per_page["after"]
            else None
        ),
        "misses": [{"file": f["file"], **m} for f in files for m in f["misses"]],
    }
    print(json.dumps({k: v for k, v in report.items() if k != "misses"}, indent=1))
    print(f"{len(report['misses'])} misses", file=sys.stderr)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
