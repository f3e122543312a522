"""The page embed stage reading stored page images: every page with an image becomes one point
per document in order, batches keep their size, and decoding ahead changes nothing."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pagesight.core.document import Document, Page, ParsedDocument
from pagesight.core.settings import Settings
from pagesight.ingestion.ingest import PagePointEmbedder
from pagesight.ingestion.render import PageImageStore


@dataclass
class Embedded:
    vectors: np.ndarray
    image_mask: np.ndarray
    grid: tuple[int, int]


class RecordingEmbedder:
    """Encodes each image's mean colour in its rows, and records the batches and the threads
    that called it."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, int, int]]] = []
        self.threads: set[str] = set()

    def embed_pages(self, images: list[Image.Image]) -> list[Embedded]:
        self.threads.add(threading.current_thread().name)
        colours = [tuple(int(c) for c in np.asarray(img).reshape(-1, 3)[0]) for img in images]
        self.batches.append(colours)  # type: ignore[arg-type]
        out = []
        for colour in colours:
            rows = np.zeros((3, 4), dtype=np.float32)
            rows[:, :3] = np.array(colour, dtype=np.float32) + 1
            out.append(Embedded(rows, np.array([False, True, True]), (1, 2)))
        return out


def _documents(store: PageImageStore, pages_per_doc: list[int]) -> list[ParsedDocument]:
    docs = []
    colour = 0
    for d, count in enumerate(pages_per_doc):
        pages = []
        for n in range(1, count + 1):
            colour += 1
            image = Image.new("RGB", (60 + n, 80), (colour, 255 - colour, 7))
            ref = store.put("t", image) if n != 2 else None  # page 2 has no image: skipped
            pages.append(Page(doc_id=f"d{d}", page_number=n, width=60, height=80, image_ref=ref))
        document = Document(doc_id=f"d{d}", version="v" * 64, tenant="t", source_uri=f"f{d}.pdf")
        docs.append(ParsedDocument(document=document, pages=pages, elements=[]))
    return docs


@pytest.mark.parametrize("batch", [1, 3, 16])
def test_points_per_document_in_order_whatever_the_batch(tmp_path: Path, batch: int) -> None:
    settings = Settings(data_dir=tmp_path)
    store = PageImageStore(tmp_path / "images", settings.render)
    documents = _documents(store, [4, 1, 5])
    embedder = RecordingEmbedder()
    points = PagePointEmbedder(embedder, store, batch=batch).points_many(  # type: ignore[arg-type]
        [(parsed, ["team"]) for parsed in documents]
    )
    expected = [[n for n in range(1, count + 1) if n != 2] for count in (4, 1, 5)]
    assert [[p.payload["page_number"] for p in doc] for doc in points] == expected
    assert all(len(b) <= batch for b in embedder.batches)
    assert sum(len(b) for b in embedder.batches) == sum(len(e) for e in expected)
    # each point carries its own page's image: the colour written there
    colours = [colour for b in embedder.batches for colour in b]
    assert len(set(colours)) == len(colours)
    stored = []
    for point in (p for doc in points for p in doc):
        with Image.open(store.path(point.payload["image_ref"])) as image:
            stored.append(tuple(int(c) for c in np.asarray(image.convert("RGB"))[0, 0]))
    assert stored == colours  # and in the order the points were made
    assert embedder.threads == {threading.current_thread().name}  # the model stays on the caller


def test_no_pages_with_images_embed_nothing(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    store = PageImageStore(tmp_path / "images", settings.render)
    parsed = _documents(store, [0])[0]
    embedder = RecordingEmbedder()
    assert PagePointEmbedder(embedder, store).points_many([(parsed, [])]) == [[]]  # type: ignore[arg-type]
    assert embedder.batches == []
