"""Fixtures shared by the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight.ingestion import samples


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    """A folder with three generated born-digital PDFs: report, table, chart."""
    folder = tmp_path / "docs"
    folder.mkdir()
    samples.text_pdf(folder / "report.pdf")
    samples.table_pdf(folder / "table.pdf")
    samples.chart_pdf(folder / "chart.pdf")
    return folder
