"""Shared fixtures: where the evaluation corpus lives, and settings that write under tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.settings import Settings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
EVAL_DIR = Path(os.environ.get("PAGESIGHT_EVAL_DIR", REPO_ROOT.parent / "shared" / "eval"))


@pytest.fixture(scope="session")
def eval_dir() -> Path:
    if not (EVAL_DIR / "pdfs").is_dir():
        pytest.skip(f"evaluation corpus not found at {EVAL_DIR} (set PAGESIGHT_EVAL_DIR)")
    return EVAL_DIR


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "var")


def extract_pages(source: Path, pages: list[int], target: Path) -> Path:
    """Copy 1-based ``pages`` of ``source`` into a new PDF, so a test parses only what it needs."""
    import pymupdf

    with pymupdf.open(source) as src, pymupdf.open() as out:
        for n in pages:
            out.insert_pdf(src, from_page=n - 1, to_page=n - 1)
        out.save(target)
    return target
