"""bench/bench_ocr.py's sample rule and its current-vs-new comparison.

The born-digital sample must be chosen by a rule that never reads what a page says (hash of
file and page, one page per document first, near-empty pages excluded), so that it can grow
without anyone picking pages that flatter an engine.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pymupdf
import pytest

from bench.bench_ocr import (
    CURRENT_RAPID,
    MIN_TRUTH_CHARS,
    PageRef,
    compare,
    pick_known_text_pages,
    rapid_options,
)
from pagesight.core.settings import RapidOcrOptions

_FULL = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 8  # > MIN_TRUTH_CHARS


def _pdf(path: Path, pages: list[str]) -> None:
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        page.insert_textbox(pymupdf.Rect(40, 40, 560, 800), text, fontsize=9)
    doc.save(path)


def _key(name: str, page: int) -> str:
    return hashlib.sha256(f"{name}:{page}".encode()).hexdigest()


def test_pages_are_ranked_by_hash_one_per_document_first(tmp_path: Path) -> None:
    assert len(_FULL.replace(" ", "")) >= MIN_TRUTH_CHARS
    _pdf(tmp_path / "a.pdf", [_FULL, "short", _FULL, _FULL])
    _pdf(tmp_path / "b.pdf", [_FULL, _FULL])
    _pdf(tmp_path / "c.pdf", ["too short to measure a CER on"])

    picked = pick_known_text_pages(tmp_path, ["b.pdf", "a.pdf", "c.pdf"], 3)

    best_a = min((_key("a.pdf", n), n) for n in (1, 3, 4))
    best_b = min((_key("b.pdf", n), n) for n in (1, 2))
    first_layer = sorted([(best_a[0], "a.pdf", best_a[1]), (best_b[0], "b.pdf", best_b[1])])
    assert len(picked) == 3
    # One page per document first, each document's best-ranked page, in hash order.
    assert picked[:2] == [PageRef(doc, page) for _, doc, page in first_layer]
    assert all(ref.page != 2 for ref in picked if ref.doc == "a.pdf")  # near-empty page
    assert all(ref.doc != "c.pdf" for ref in picked)
    # Deterministic, and a larger sample extends the smaller one.
    assert pick_known_text_pages(tmp_path, ["a.pdf", "b.pdf", "c.pdf"], 3) == picked
    assert pick_known_text_pages(tmp_path, ["a.pdf", "b.pdf", "c.pdf"], 6)[:3] == picked
    assert len(pick_known_text_pages(tmp_path, ["a.pdf", "b.pdf", "c.pdf"], 99)) == 5


def test_compare_reports_ratios_and_quality_deltas() -> None:
    engines = {
        "new": {
            "s_per_page_p50": 1.0,
            "image_only_s_p50": 0.8,
            "s_per_page_mean": 1.2,
            "cpu_s_per_page_mean": 1.0,
            "cer_mean": 0.02,
            "ja_cer_mean": 0.05,
            "dictionary_word_rate": 0.6,
        },
        "old": {
            "s_per_page_p50": 2.5,
            "image_only_s_p50": 2.0,
            "s_per_page_mean": 3.0,
            "cpu_s_per_page_mean": 2.0,
            "cer_mean": 0.0,
            "ja_cer_mean": 0.04,
            "dictionary_word_rate": 0.61,
        },
    }
    pages = [
        {"kind": "image-only", "new": {"s": 1.0}, "old": {"s": 4.0}},
        {"kind": "born-digital-en", "new": {"s": 2.0}, "old": {"s": 4.0}},
        {"kind": "born-digital-ja", "new": {"s": 3.0}, "old": {"s": 3.0}},
    ]
    ratios = compare(pages, engines, "new", "old")
    assert ratios["s_per_page_p50_ratio"] == 0.4
    assert ratios["image_only_s_p50_ratio"] == 0.4
    assert ratios["per_page_ratio_median"] == pytest.approx(0.375)
    assert ratios["ja_per_page_ratio_median"] == 1.0
    assert ratios["cer_delta"] == 0.02  # a zero baseline CER still gives a delta
    assert ratios["ja_cer_delta"] == 0.01
    assert ratios["dictionary_word_rate_delta"] == -0.01


def test_current_settings_and_overrides_are_valid_options() -> None:
    current = RapidOcrOptions(**CURRENT_RAPID)
    assert (current.det_limit_type, current.det_limit_side_len) == ("min", 736)
    tuned = rapid_options(["det_limit_side_len=1600", "det_limit_type=max", "threads=1"])
    assert (tuned.det_limit_side_len, tuned.det_limit_type, tuned.threads) == (1600, "max", 1)
    with pytest.raises(SystemExit):
        rapid_options(["no_such_field=1"])
