"""Rendering pages to images, behind an interface.

PyMuPDF is AGPL-3.0: a network service that uses it must offer its source or hold a commercial
licence. Keeping rendering behind :class:`Renderer` lets a permissive engine (pypdfium2) replace
it without touching the stages that consume page images.
"""

from __future__ import annotations

import hashlib
import io
import math
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PIL import Image

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import RenderOptions

if TYPE_CHECKING:
    import pymupdf


def dpi_within_pixel_limit(width_pt: float, height_pt: float, dpi: float, max_pixels: int) -> float:
    """The highest dpi <= ``dpi`` at which a page of this size stays under ``max_pixels``.

    A 200-inch poster at 144 dpi would be ~800 MP; capping the pixel count instead of the dpi
    keeps memory bounded whatever the page geometry (extreme aspect ratios included).
    """
    pixels = (width_pt / 72.0 * dpi) * (height_pt / 72.0 * dpi)
    if pixels <= max_pixels:
        return dpi
    return dpi * math.sqrt(max_pixels / pixels) * 0.999


@dataclass(frozen=True)
class RenderedPage:
    page_number: int
    image: Image.Image
    dpi: float
    width_pt: float
    height_pt: float

    @property
    def scale(self) -> float:
        """Pixels per PDF point; divide pixel coordinates by it to get points."""
        return self.dpi / 72.0


class Renderer(Protocol):
    """Turns page ``n`` of an opened document into an RGB image at (at most) ``dpi``."""

    name: str

    def page_size(self, page_number: int) -> tuple[float, float]:
        """(width, height) in points, as displayed."""
        ...

    def render(self, page_number: int, dpi: float) -> RenderedPage: ...

    def label(self, page_number: int) -> str | None:
        """The page's printed label from the document's page-label table (PDF /PageLabels:
        ``"iv"``, ``"17"``, ``"A-3"``), or None when the document defines none."""
        ...


class PyMuPdfRenderer:
    """Renders pages of an already opened PyMuPDF document, respecting the pixel limit."""

    name = "pymupdf"

    def __init__(self, doc: pymupdf.Document, max_page_pixels: int) -> None:
        self._doc = doc
        self._max_page_pixels = max_page_pixels

    def page_size(self, page_number: int) -> tuple[float, float]:
        rect = self._doc.load_page(page_number - 1).rect
        return rect.width, rect.height

    def label(self, page_number: int) -> str | None:
        if not self._doc.is_pdf:
            return None
        label: str = self._doc.load_page(page_number - 1).get_label()
        return label.strip() or None

    def render(self, page_number: int, dpi: float) -> RenderedPage:
        page = self._doc.load_page(page_number - 1)
        rect = page.rect
        if rect.width <= 0 or rect.height <= 0:
            raise PageSightError(
                ErrorCode.CORRUPT, Stage.RENDER, f"page {page_number} has an empty page box"
            )
        effective_dpi = dpi_within_pixel_limit(rect.width, rect.height, dpi, self._max_page_pixels)
        try:
            pix = page.get_pixmap(dpi=max(1, int(effective_dpi)), alpha=False, colorspace="rgb")
        except (RuntimeError, ValueError) as exc:
            raise PageSightError(
                ErrorCode.CORRUPT, Stage.RENDER, f"page {page_number} cannot be rendered: {exc}"
            ) from exc
        image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
        actual_dpi = pix.width / rect.width * 72.0
        return RenderedPage(page_number, image, actual_dpi, rect.width, rect.height)


class PageImageStore:
    """Content-addressed page images on local disk, namespaced by tenant.

    The address is the sha256 of the encoded bytes, so re-ingesting an unchanged page writes
    nothing new; the tenant prefix keeps one tenant's delete from removing another's image.
    """

    def __init__(self, root: Path, options: RenderOptions) -> None:
        self.root = root
        self.options = options

    def encode(self, image: Image.Image) -> tuple[bytes, str]:
        buf = io.BytesIO()
        if self.options.image_format == "jpeg":
            image.save(buf, format="JPEG", quality=self.options.jpeg_quality)
            return buf.getvalue(), "jpg"
        image.save(buf, format="PNG", compress_level=1)
        return buf.getvalue(), "png"

    def put(self, tenant: str, image: Image.Image) -> str:
        data, ext = self.encode(image)
        digest = hashlib.sha256(data).hexdigest()
        ref = f"{tenant}/{digest[:2]}/{digest}.{ext}"
        target = self.root / ref
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(target.suffix + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
        return ref

    def path(self, ref: str) -> Path:
        resolved = (self.root / ref).resolve()
        if not resolved.is_relative_to(self.root.resolve()):
            raise PageSightError(ErrorCode.NOT_FOUND, Stage.RENDER, f"bad image reference {ref!r}")
        return resolved

    def delete(self, ref: str) -> None:
        self.path(ref).unlink(missing_ok=True)


class BackgroundImageWriter:
    """Stores page images on one background thread while the parse goes on.

    Encoding a 144-dpi page as PNG takes ~45 ms, in zlib, which lets go of the GIL; the layout
    model meanwhile spends much of its time in single-threaded Python. Handing the encode to a
    thread overlaps the two. At most ``max_pending`` images wait, so memory stays bounded when
    encoding is the slower side; a failed write surfaces from :meth:`result`.
    """

    def __init__(self, store: PageImageStore, max_pending: int = 4) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.store = store
        self.max_pending = max_pending
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="page-images")
        self._pending: dict[int, Future[str]] = {}
        self._done: dict[int, str] = {}

    def submit(self, key: int, tenant: str, image: Image.Image) -> None:
        while len(self._pending) >= self.max_pending:
            oldest = next(iter(self._pending))
            self._done[oldest] = self._pending.pop(oldest).result()
        self._pending[key] = self._pool.submit(self.store.put, tenant, image)

    def result(self, key: int) -> str:
        """The stored reference of image ``key``, waiting for it if need be."""
        if key in self._pending:
            self._done[key] = self._pending.pop(key).result()
        return self._done[key]

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> BackgroundImageWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
