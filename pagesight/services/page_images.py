"""The rendered page images ingestion stored, read back for a vision model's answer context.

The answer pipeline only asks for pages of passages the candidate search already let the caller
read; the access check is repeated here anyway (tenant, ACL, validity, the same rule as every
other route), so a wiring mistake elsewhere cannot turn into a page image of someone else's
document.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from pagesight.core.errors import PageSightError
from pagesight.core.protocols import CatalogRepository
from pagesight.core.types import AccessFilter, Page
from pagesight.ingestion.render import PageImageStore


class StoredPageImages:
    """:class:`pagesight.core.protocols.PageImageSource` over the catalog and the page image
    store."""

    def __init__(self, catalog: CatalogRepository, images: PageImageStore) -> None:
        self.catalog = catalog
        self.images = images

    def page_image(
        self, access: AccessFilter, doc_id: str, page_number: int
    ) -> tuple[Image.Image, tuple[float, float]] | None:
        document = self.catalog.document(access.tenant, doc_id)
        if document is None or not access.admits(
            document.tenant, document.acl, document.valid_until
        ):
            return None
        if access.doc_ids is not None and doc_id not in access.doc_ids:
            return None
        try:
            found = stored_page(self.catalog, self.images, access.tenant, doc_id, page_number)
            if found is None:
                return None
            page, path = found
            with Image.open(path) as stored:
                image = stored.convert("RGB")
        except (OSError, PageSightError):  # unreadable, a bad reference
            return None
        return image, (page.width, page.height)


def stored_page(
    catalog: CatalogRepository, images: PageImageStore, tenant: str, doc_id: str, page_number: int
) -> tuple[Page, Path] | None:
    """Page ``page_number`` of ``doc_id`` and the file of its rendered image; None when the
    catalog has no such page, it has no image, or the file is gone. No access check: callers
    have made theirs (the page-image route, :class:`StoredPageImages`)."""
    page = catalog.page(tenant, doc_id, page_number)
    if page is None or not page.image_ref:
        return None
    path = images.path(page.image_ref)
    return (page, path) if path.is_file() else None
