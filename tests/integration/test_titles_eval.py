"""Titles chosen at ingest on real shared PDFs: a Pew report whose cover title is an image, one
whose title is printed large, an earnings release with a filer's label as metadata title, an
arXiv paper without one, a slide deck without a text layer (OCR) and a 10-K cover."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight.core.settings import Settings
from pagesight.ingestion.pipeline import DocumentParser

pytestmark = pytest.mark.integration


def first_pages(source: Path, target: Path, count: int = 2) -> Path:
    """The first ``count`` pages of ``source`` with its metadata (what the title is chosen
    from), so the test parses only those."""
    import pymupdf

    with pymupdf.open(source) as src, pymupdf.open() as out:
        out.insert_pdf(src, from_page=0, to_page=min(count, src.page_count) - 1)
        out.set_metadata(src.metadata or {})
        out.save(target)
    return target


@pytest.mark.parametrize(
    ("source", "title"),
    [
        # the cover's title is an image; the printed "Recommended citation" names it
        (
            "PG_2020.03.09_US-Germany_FINAL.pdf",
            "Americans and Germans Differ in Their Views of Each Other and the World",
        ),
        # three 40 pt lines make one title; "FOR RELEASE ..." and the byline are passed over
        (
            "PG_20.07.30_U.S.-Views-China_final.pdf",
            "Americans Fault China for Its Role in the Spread of COVID-19",
        ),
        # metadata title "MGM Exhibit 99.1 Q4 2022 ER" is a filer's label: the headline wins
        (
            "MGMRESORTS_2022Q4_EARNINGS.pdf",
            "MGM RESORTS INTERNATIONAL REPORTS FOURTH QUARTER AND FULL YEAR 2022 FINANCIAL AND "
            "OPERATING RESULTS",
        ),
        # no metadata title; the rotated arXiv stamp is larger than the title
        (
            "STEPBACK.pdf",
            "TAKE A STEP BACK: EVOKING REASONING VIA ABSTRACTION IN LARGE LANGUAGE MODELS",
        ),
        # a slide deck without a text layer: the tallest line OCR read
        (
            "amb-siteaudits-ds15-150204174043-conversion-gate01_95.pdf",
            "Mastering Strategic SEO Audits",
        ),
        # metadata title is an EDGAR accession number; the cover's largest line is the letterhead
        ("AMAZON_2017_10K.pdf", "AMAZON.COM, INC. — Form 10-K"),
    ],
)
def test_title_of_a_shared_pdf(eval_dir: Path, tmp_path: Path, source: str, title: str) -> None:
    path = eval_dir / "pdfs" / source
    if not path.is_file():
        pytest.skip(f"{source} is not in the evaluation corpus")
    parsed = DocumentParser(Settings(data_dir=tmp_path / "var")).parse(
        first_pages(path, tmp_path / source)
    )
    assert parsed.document.title == title
