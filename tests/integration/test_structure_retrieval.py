"""Retrieval that follows the document (issue 16), end to end on a generated report.

The report numbers its pages in the footer from its third sheet on (printed "1" is page 3),
has an outline, a captioned figure, a statement table and a financial-statement note; the tests
ingest it for real and check that "page 4", "Figure 2", "Note 7", a section's title and a single
table line item find the right sheet, that a page that does not exist is reported rather than
guessed, and that the structure API shows labels, sections and numbered items.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest
from fastapi.testclient import TestClient

from pagesight.core.ids import point_id
from pagesight.core.settings import GatewayOptions, Settings
from pagesight.core.types import AccessFilter, RouteName, SearchResult
from pagesight.gateway.auth import new_key
from pagesight.services.stack import LocalStack
from tests.serving import gateway_app, warm_service

pytestmark = pytest.mark.integration

FILLER = (
    "The group continued to invest in its people and its plants during the year, and the "
    "board reviewed the progress of every programme at each of its meetings. "
)

#: (outline title or None, body lines) per sheet; sheet 1 is the cover, sheet 2 the contents.
SHEETS: list[tuple[str | None, list[str]]] = [
    ("Cover", ["Northwind Holdings", "Annual Report 2020"]),
    ("Contents", ["Contents", "Chairman's letter 1", "Leadership program 2"]),
    ("Chairman's letter", ["Chairman's letter", FILLER * 3]),
    ("Leadership program", ["Leadership program", "Mentoring circles met monthly. " + FILLER]),
    (None, ["Graduates rotated through four plants. " + FILLER]),
    ("Operations review", ["Operations review", FILLER * 2]),
    (None, ["Figure 2: Tonnes shipped by region", FILLER]),
    ("Financial statements", ["Consolidated statement of income", FILLER]),
    (None, []),  # the statement table goes here (sheet 9)
    ("Notes to the financial statements", ["Notes to the financial statements", FILLER]),
    (None, ["Note 7 — Income taxes", "The effective tax rate was 21.4 percent. " + FILLER]),
    (None, ["Auditor's report", FILLER]),
]

TABLE_ROWS = [
    ["", "2019", "2020"],
    ["Net revenue", "1,204", "1,377"],
    ["Cost of sales", "(702)", "(781)"],
    ["Gross margin", "502", "596"],
    ["Freight rebates", "41", "38"],
    ["Operating income", "233", "291"],
]


def _report(path: Path) -> Path:
    with pymupdf.open() as pdf:
        toc = []
        for index, (title, lines) in enumerate(SHEETS, start=1):
            page = pdf.new_page(width=612, height=792)
            y = 72.0
            for line in lines:
                box = pymupdf.Rect(72, y, 540, y + 200)
                page.insert_textbox(box, line, fontsize=11 if y > 72 else 16)
                y += 40 + 14 * (len(line) // 80)
            if index == 7:  # a drawn chart above its caption
                page.draw_rect(
                    pymupdf.Rect(72, 300, 400, 520), color=(0, 0, 0), fill=(0.5, 0.6, 0.8)
                )
            if index == 9:
                for r, row in enumerate(TABLE_ROWS):
                    for c, cell in enumerate(row):
                        page.insert_text((72 + c * 150, 120 + r * 22), cell, fontsize=10)
                page.insert_text((72, 100), "Statement of income (in millions)", fontsize=11)
            if index >= 3:  # printed folios start at 1 on the third sheet
                page.insert_text((300, 770), str(index - 2), fontsize=9)
            if title:
                toc.append([1, title, index])
        pdf.set_toc(toc)
        pdf.save(path)
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalStack, str]]:
    root = tmp_path_factory.mktemp("structure")
    settings = Settings(data_dir=root / "var")
    # Both off by default (measured: README); the mechanisms are tested here.
    settings.chunk.table_rows = True
    settings.retrieval.weights["section"] = 0.5
    with LocalStack(settings) as local:
        (job,) = local.ingestor.ingest([local.request(_report(root / "report.pdf"))])
        assert job.state.value == "READY", job.error_message
        yield local, job.doc_id


def _search(local: LocalStack, query: str, doc_id: str | None = None) -> SearchResult:
    access = AccessFilter(tenant="default", doc_ids=[doc_id] if doc_id else None)
    return local.search(query, access, RouteName.TEXT, 5)


def test_printed_page_number_resolves_to_its_sheet(stack: tuple[LocalStack, str]) -> None:
    local, doc_id = stack
    result = _search(local, "What does page 3 of the annual report say about graduates?")
    assert result.hits[0].page_number == 5 and result.hits[0].page_label == "3"
    (resolved,) = result.trace.references
    assert resolved.reference.kind == "page" and resolved.pages == [(doc_id, 5)]
    assert "reference" in result.hits[0].route_scores


def test_a_page_that_does_not_exist_is_reported(stack: tuple[LocalStack, str]) -> None:
    local, _ = stack
    result = _search(local, "What is on page 300 of the annual report?")
    (resolved,) = result.trace.references
    assert resolved.pages == [] and resolved.unresolved and "300" in resolved.unresolved
    assert all("reference" not in hit.route_scores for hit in result.hits)


def test_figure_and_note_numbers_resolve(stack: tuple[LocalStack, str]) -> None:
    local, doc_id = stack
    figure = _search(local, "Which regions appear in Figure 2?", doc_id)
    assert figure.hits[0].page_number == 7
    note = _search(local, "What does Note 7 say?", doc_id)
    assert note.hits[0].page_number == 11


def test_section_titles_select_their_pages(stack: tuple[LocalStack, str]) -> None:
    local, _ = stack
    result = _search(local, "How did the leadership program develop graduates?")
    section = next(t for t in result.trace.routes if t.route == "section")
    pages = {item for item, _ in section.candidates}
    assert any(item.endswith("#4") for item in pages) and any(item.endswith("#5") for item in pages)
    assert {hit.page_number for hit in result.hits[:2]} <= {4, 5}


def test_a_table_line_item_is_found_by_its_row(stack: tuple[LocalStack, str]) -> None:
    local, _ = stack
    result = _search(local, "freight rebates in 2020")
    assert result.hits[0].page_number == 9
    ids = [point_id("default", chunk_id) for chunk_id in result.hits[0].chunk_ids]
    payloads = local.store.retrieve(ids, AccessFilter(tenant="default"))
    rows = [p for p in payloads.values() if p.get("unit") == "table_row"]
    assert any("Freight rebates" in p["text"] and "2020" in p["text"] for p in rows)


def test_structure_api_shows_labels_sections_and_items(tmp_path: Path) -> None:
    key, record = new_key("structure", "tenant-structure")
    settings = Settings(data_dir=tmp_path / "var", gateway=GatewayOptions(api_keys=[record]))
    auth = {"Authorization": f"Bearer {key}"}
    with warm_service(settings) as service, TestClient(gateway_app(service)) as http:
        path = _report(tmp_path / "report.pdf")
        accepted = http.post(
            "/v1/documents",
            files={"file": ("report.pdf", path.read_bytes(), "application/pdf")},
            headers=auth,
        )
        assert accepted.status_code == 202, accepted.text
        doc_id = accepted.json()["doc_id"]
        assert service.wait_idle(180)
        response = http.get(f"/v1/documents/{doc_id}/structure", headers=auth)
        assert response.status_code == 200, response.text
        structure = response.json()
    labels = {p["page_number"]: p["label"] for p in structure["pages"]}
    assert labels[3] == "1" and labels[12] == "10" and labels[1] is None
    titles = {s["title"]: (s["page_start"], s["page_end"]) for s in structure["sections"]}
    assert titles["Leadership program"] == (4, 5)
    items = {(i["kind"], i["number"]): i["page_number"] for i in structure["items"]}
    assert items.get(("figure", "2")) == 7
