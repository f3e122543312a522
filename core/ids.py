"""Deterministic ids (DESIGN.md section 2).

Re-ingesting the same bytes must yield the same ids, and two tenants ingesting the same bytes
must never share a point, so every id is derived from (tenant, doc_id, version, position).
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

#: Fixed namespace for every uuid5 PageSight derives; changing it re-keys every index.
PAGESIGHT_NAMESPACE = uuid.UUID("6f2b8c1e-4d7a-5b3e-9c0f-1a2b3c4d5e6f")

_VERSION_PREFIX = 16  # hex chars of the content hash kept inside element/chunk ids


def content_version(data: bytes) -> str:
    """The document version: sha256 of its bytes."""
    return hashlib.sha256(data).hexdigest()


def file_version(path: Path, block_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(block_size):
            digest.update(block)
    return digest.hexdigest()


def make_doc_id(tenant: str, source_uri: str) -> str:
    """Stable across edits of the file: derived from where it came from, not from its bytes."""
    return str(uuid.uuid5(PAGESIGHT_NAMESPACE, f"doc\x00{tenant}\x00{source_uri}"))


def element_id(doc_id: str, version: str, page_number: int, seq: int) -> str:
    return f"{doc_id}/{version[:_VERSION_PREFIX]}/p{page_number}/e{seq}"


def chunk_id(doc_id: str, version: str, seq: int) -> str:
    return f"{doc_id}/{version[:_VERSION_PREFIX]}/c{seq}"


def point_id(tenant: str, key: str) -> str:
    """A UUID (what Qdrant accepts) for an element, chunk or page key, scoped to the tenant."""
    return str(uuid.uuid5(PAGESIGHT_NAMESPACE, f"point\x00{tenant}\x00{key}"))
