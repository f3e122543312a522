"""Who a document is, read from its first pages (pagesight.core.identity): synthetic covers
for each rule, then the real cover pages of shared filings, an earnings release and reports."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from pagesight.core.identity import IDENTITY_PAGES, identity_of, name_tokens

TEN_K_COVER = """UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
FORM 10-K
ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934
For the fiscal year ended January 28, 2023
Commission file number 1-9595
______________________
ACME WIDGETS CO., INC.
(Exact name of registrant as specified in its charter)
Minnesota
Title of each class Trading Symbol Name of each exchange on which registered
Common Stock ACW New York Stock Exchange, Inc.
Large accelerated filer Smaller Reporting Company
"""

RELEASE = """Exhibit 99.1
GLOBEX HOLDINGS REPORTS FOURTH QUARTER AND FULL YEAR 2022 RESULTS
New York (February 1, 2023) - Globex Holdings, Inc. (NYSE: GBX) today announced results.
"""


def test_a_filing_cover_gives_registrant_form_and_fiscal_year() -> None:
    identity = identity_of([TEN_K_COVER])
    assert identity.names == ["ACME WIDGETS CO., INC."]  # no exchange, no filer category
    assert identity.kind == "10-K"
    assert identity.years == [2023]
    assert identity.quarter is None


def test_a_release_gives_name_ticker_quarter_and_year() -> None:
    identity = identity_of([RELEASE])
    assert identity.names[0] == "GLOBEX HOLDINGS"
    assert "Globex Holdings, Inc." in identity.names
    assert identity.aliases == ["GBX"]
    assert identity.kind == "earnings release"
    assert identity.years[0] == 2022
    assert identity.quarter == 4


def test_a_page_with_no_name_gives_none_and_keeps_title_and_file() -> None:
    identity = identity_of(
        ["Abstract\nWe study how people read charts."], "Reading Charts", "paper.pdf"
    )
    assert identity.names == []
    assert identity.aliases == []
    assert identity.kind is None
    assert (identity.title, identity.file_name) == ("Reading Charts", "paper.pdf")


def test_sentences_are_not_names() -> None:
    text = "Annual Report and Accounts of the Company\nThe Company had a good year overall."
    assert identity_of([text]).names == []


@pytest.mark.parametrize(
    ("name", "tokens"),
    [
        ("BEST BUY CO., INC.", ["best", "buy"]),
        ("THE BOEING COMPANY", ["boeing"]),
        ("Amazon.com, Inc.", ["amazon.com"]),
        ("Johnson & Johnson", ["johnson", "johnson"]),
        ("AMCOR PLC", ["amcor"]),
    ],
)
def test_name_tokens_drop_the_legal_form(name: str, tokens: list[str]) -> None:
    assert name_tokens(name) == tokens


# -- real covers -------------------------------------------------------------------------------


def _first_pages(path: Path) -> list[str]:
    with pymupdf.open(path) as pdf:
        return [pdf[i].get_text() for i in range(min(IDENTITY_PAGES, pdf.page_count))]


@pytest.mark.parametrize(
    ("source", "name", "kind", "year"),
    [
        ("AMERICANEXPRESS_2022_10K.pdf", "American Express Company", "10-K", 2022),
        ("BESTBUY_2023_10K.pdf", "BEST BUY CO., INC.", "10-K", 2023),
        ("3M_2018_10K.pdf", "3M COMPANY", "10-K", 2018),
        ("AMCOR_2023_10K.pdf", "AMCOR PLC", "10-K", 2023),
        ("MGMRESORTS_2022Q4_EARNINGS.pdf", "MGM RESORTS INTERNATIONAL", "earnings release", 2022),
        ("JOHNSON_JOHNSON_2022Q4_EARNINGS.pdf", "Johnson & Johnson", "earnings release", 2022),
    ],
)
def test_real_covers(eval_dir: Path, source: str, name: str, kind: str, year: int) -> None:
    path = eval_dir / "pdfs" / source
    if not path.is_file():
        pytest.skip(f"{source} is not in the evaluation corpus")
    identity = identity_of(_first_pages(path))
    assert identity.names[0] == name
    assert identity.kind == kind
    assert identity.years[0] == year


def test_reports_and_papers_name_no_company(eval_dir: Path) -> None:
    """Research reports, papers and manuals carry no issuer: nothing is made up for them."""
    sources = [
        "PG_2020.03.09_US-Germany_FINAL.pdf",
        "2303.05039v2.pdf",
        "STEPBACK.pdf",
        "owners-manual-2170416.pdf",
    ]
    found = [eval_dir / "pdfs" / s for s in sources if (eval_dir / "pdfs" / s).is_file()]
    if not found:
        pytest.skip("the evaluation corpus is absent")
    for path in found:
        assert identity_of(_first_pages(path)).names == [], path.name
