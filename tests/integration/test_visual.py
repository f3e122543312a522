"""Visual and hybrid routes end to end with a tiny ColQwen2 built offline.

The tiny model is randomly initialised: it tests plumbing (page vectors indexed, two-stage
search, filters inside the first stage, evidence boxes on the page, page hits mapped back to
their chunks), not retrieval quality.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pagesight.core.settings import Settings, VisualEmbedderOptions
from pagesight.core.types import AccessFilter, RouteName
from pagesight.models.testing.tiny_colqwen import build_tiny_colqwen2
from pagesight.services.stack import LocalStack

pytestmark = pytest.mark.integration
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_colqwen2(tmp_path_factory.mktemp("tiny-colqwen2"))


@pytest.fixture()
def stack(tmp_path: Path, tiny_model: Path) -> Iterator[LocalStack]:
    settings = Settings(
        data_dir=tmp_path / "var",
        visual=VisualEmbedderOptions(model=str(tiny_model), device="cpu"),
    )
    with LocalStack(settings) as opened:
        yield opened


def test_visual_route_returns_pages_with_evidence_and_chunks(stack: LocalStack, docs: Path) -> None:
    assert stack.page_store is not None
    jobs = stack.ingestor.ingest([stack.request(p) for p in sorted(docs.iterdir())])
    assert all(j.state.value == "READY" for j in jobs)
    assert stack.page_store.count() == 3
    result = stack.search("revenue by region", AccessFilter(tenant="default"), RouteName.VISUAL, 3)
    assert [h.rank for h in result.hits] == [1, 2, 3]
    assert {t.route for t in result.trace.routes} == {"visual"}
    for hit in result.hits:
        assert "visual" in hit.route_scores
        assert hit.chunk_ids, "a visual page hit maps back to its chunks"
        page = next(
            p
            for p in stack.catalog.pages("default", hit.doc_id)
            if p.page_number == hit.page_number
        )
        assert 1 <= len(hit.bboxes) <= stack.settings.retrieval.evidence_boxes
        for box in hit.bboxes:
            assert 0 <= box.x0 < box.x1 <= page.width + 1e-6
            assert 0 <= box.y0 < box.y1 <= page.height + 1e-6


def test_hybrid_fuses_text_and_visual(stack: LocalStack, docs: Path) -> None:
    stack.ingestor.ingest([stack.request(p) for p in sorted(docs.iterdir())])
    result = stack.search(
        "Northwind parcels 2024", AccessFilter(tenant="default"), RouteName.HYBRID, 3
    )
    assert {"keyword", "dense", "page", "visual"} <= {t.route for t in result.trace.routes}
    assert result.hits[0].source_uri and result.hits[0].source_uri.endswith("report.pdf")
    auto = stack.search("Which chart shows revenue?", AccessFilter(tenant="default"))
    assert auto.trace.route == RouteName.HYBRID


def test_visual_route_filters_inside_the_first_stage(stack: LocalStack, docs: Path) -> None:
    stack.ingestor.ingest([stack.request(docs / "chart.pdf", acl=["alice"])])
    stack.ingestor.ingest([stack.request(docs / "report.pdf", tenant="other")])
    bob = AccessFilter(tenant="default", principals=["bob"])
    assert stack.search("chart", bob, RouteName.VISUAL).hits == []
    alice = AccessFilter(tenant="default", principals=["alice"])
    hits = stack.search("chart", alice, RouteName.VISUAL).hits
    assert len(hits) == 1 and hits[0].source_uri and hits[0].source_uri.endswith("chart.pdf")


def test_replace_and_delete_clean_the_page_index(stack: LocalStack, docs: Path) -> None:
    assert stack.page_store is not None
    path = docs / "report.pdf"
    first = stack.ingestor.ingest([stack.request(path)])[0]
    path.write_bytes((docs / "table.pdf").read_bytes())
    second = stack.ingestor.ingest([stack.request(path)])[0]
    versions = {
        p.payload["version"] for p in stack.page_store.points_of_document("default", first.doc_id)
    }
    assert versions == {second.version}
    stack.ingestor.delete("default", first.doc_id)
    assert stack.page_store.points_of_document("default", first.doc_id) == []


def test_the_stack_stops_the_page_embedder_it_built(tmp_path: Path, tiny_model: Path) -> None:
    """Embedding pages starts the embedder's page-preparing threads; closing the stack that
    built the embedder stops them, while an embedder passed in stays its caller's."""
    from PIL import Image

    from pagesight.models.colqwen import ColQwen2Embedder

    pages = [Image.new("RGB", (300, 400), "white"), Image.new("RGB", (400, 300), "white")]
    options = VisualEmbedderOptions(model=str(tiny_model), device="cpu", prepare_workers=2)
    with LocalStack(Settings(data_dir=tmp_path / "own", visual=options)) as stack:
        built = stack.page_embedder
        assert isinstance(built, ColQwen2Embedder)
        built.embed_pages(pages)
        assert built._prepare_pool is not None
    assert built._prepare_pool is None
    given = ColQwen2Embedder(options)
    given.embed_pages(pages)
    with LocalStack(Settings(data_dir=tmp_path / "given", visual=options), page_embedder=given):
        pass
    assert given._prepare_pool is not None
    given.close()
    assert given._prepare_pool is None
