"""The layout model's ONNX sessions as we set them up, and the page images written behind it.

The arena must be on exactly for the fixed-shape models, the tuned model must read pages as
the library's own does, and the background writer must hand back every image's reference and
surface a failed write.
"""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from pagesight.core.settings import RenderOptions
from pagesight.ingestion.parse import layout_model
from pagesight.ingestion.render import BackgroundImageWriter, PageImageStore
from tests.unit.ingestion.test_plain_pages import _report


def _model_file(pattern: str) -> str:
    from pymupdf import layout

    found = sorted((Path(layout.__file__).parent / "resources" / "onnx").glob(pattern))
    assert found, pattern
    return str(found[0])


def test_fixed_shape_models_get_the_arena_and_the_graph_model_does_not() -> None:
    image_model = layout_model.make_session(_model_file("feature_imf*.onnx"), threads=1)
    graph_model = layout_model.make_session(_model_file("layout_*.onnx"), threads=1)
    assert layout_model.fixed_input_shape(image_model)
    assert image_model.get_session_options().enable_cpu_mem_arena
    assert not layout_model.fixed_input_shape(graph_model)
    assert not graph_model.get_session_options().enable_cpu_mem_arena
    assert image_model.get_session_options().intra_op_num_threads == 1


def _layout(doc: pymupdf.Document) -> list[tuple[str, tuple[int, ...]]]:
    from pagesight.ingestion.parse.pdf import LayoutPageParser

    blocks = LayoutPageParser(threads=1).parse(doc, [2])[2]
    return [
        (b.kind.value, tuple(round(v) for v in (b.bbox.x0, b.bbox.y0, b.bbox.x1, b.bbox.y1)))
        for b in blocks
        if b.bbox is not None
    ]


def test_tuned_model_reads_a_page_as_the_library_model_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = pymupdf.open(_report(tmp_path / "report.pdf"))
    library_model = pymupdf._get_layout
    monkeypatch.setattr(layout_model, "_installed_threads", None)
    monkeypatch.setattr(pymupdf, "_get_layout", library_model)
    made: list[str] = []
    real = layout_model.make_session

    def counting(path: str, providers: list[str] | None = None, threads: int = 0) -> object:
        made.append(Path(path).name)
        return real(path, providers, threads)

    monkeypatch.setattr(layout_model, "make_session", counting)
    tuned = _layout(doc)  # installs the tuned model
    assert pymupdf._get_layout is not library_model
    assert len(made) >= 3  # graph, image features, table grid: all through our factory
    monkeypatch.setattr(pymupdf, "_get_layout", library_model)
    monkeypatch.setattr(layout_model, "_installed_threads", 1)  # keep the library's model
    assert _layout(doc) == tuned
    assert any(kind == "table" for kind, _ in tuned)


def test_background_writer_returns_each_reference_and_bounds_what_waits(tmp_path: Path) -> None:
    store = PageImageStore(tmp_path, RenderOptions())
    images = {n: Image.new("RGB", (40, 30), (n * 20, 0, 0)) for n in range(1, 8)}
    with BackgroundImageWriter(store, max_pending=2) as writer:
        for n, image in images.items():
            writer.submit(n, "acme", image)
            assert len(writer._pending) <= 2
        refs = {n: writer.result(n) for n in images}
    assert refs == {n: store.put("acme", image) for n, image in images.items()}
    assert all(store.path(ref).is_file() for ref in refs.values())


def test_background_writer_surfaces_a_failed_write(tmp_path: Path) -> None:
    blocked = tmp_path / "store"
    blocked.write_text("a file where the store's folder should be")
    with BackgroundImageWriter(PageImageStore(blocked, RenderOptions())) as writer:
        writer.submit(1, "acme", Image.new("RGB", (4, 4)))
        with pytest.raises(OSError):
            writer.result(1)
