"""Deterministic ids (DESIGN.md section 2).

Re-ingesting the same bytes must yield the same ids, and two tenants ingesting the same bytes
must never share a point, so every id is derived from (tenant, doc_id, version, position).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

from pagesight.core.errors import ErrorCode, PageSightError, Stage

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


#: What a caller-given document id may look like: it becomes part of element, chunk and point
#: keys and of URLs (``/v1/documents/{doc_id}/...``), so no ``/``, no spaces, no control
#: characters; 1-128 characters starting with a letter or digit.
DOC_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
_DOC_ID = re.compile(DOC_ID_PATTERN)


def check_doc_id(doc_id: str) -> str:
    """``doc_id`` if it matches :data:`DOC_ID_PATTERN`, else INVALID_REQUEST."""
    if not _DOC_ID.fullmatch(doc_id):
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.INPUT,
            "doc_id must be 1-128 characters of letters, digits and . _ : @ -, "
            "starting with a letter or digit",
        )
    return doc_id


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
