"""Shared fixtures: where the evaluation corpus lives, and settings that write under tmp_path."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pagesight.core.settings import Settings

if TYPE_CHECKING:
    from pagesight.services.stack import LocalStack

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


@contextlib.contextmanager
def ingested_pages(
    eval_dir: Path, source: str, pages: list[int], root: Path
) -> Iterator[tuple[LocalStack, str]]:
    """A local stack under ``root`` holding ``pages`` of the eval PDF ``source`` (as one new
    document), and its doc id; the test is skipped when the eval corpus lacks the file."""
    from pagesight.services.stack import LocalStack

    path = eval_dir / "pdfs" / source
    if not path.is_file():
        pytest.skip(f"{source} is not in the evaluation corpus")
    pdf = extract_pages(path, pages, root / source)
    with LocalStack(Settings(data_dir=root / "var")) as stack:
        (job,) = stack.ingestor.ingest([stack.request(pdf)])
        assert job.state.value == "READY", job.error_message
        yield stack, job.doc_id


# The PostgreSQL fixtures, for every test; imported after the OMP_* limits are set.
from tests.postgres import postgres_server, postgres_url  # noqa: E402, F401  # fixtures by name
