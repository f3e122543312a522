"""Input checks before any parser touches a file: existence, size, format.

Format is decided from the bytes (magic numbers), with the extension only as a tie-breaker for
text formats, so a renamed file cannot steer a file into the wrong parser.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.types import SourceFormat

_IMAGE_MAGIC: tuple[bytes, ...] = (
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff",  # JPEG
    b"II*\x00",  # TIFF little-endian
    b"MM\x00*",  # TIFF big-endian
)
_MARKDOWN_SUFFIXES = {".md", ".markdown"}
_HTML_SUFFIXES = {".html", ".htm", ".xhtml"}


def check_file(path: Path, max_bytes: int) -> int:
    """Return the file size, or raise NOT_FOUND / TOO_LARGE."""
    if not path.is_file():
        raise PageSightError(ErrorCode.NOT_FOUND, Stage.INPUT, f"no such file: {path}")
    size = path.stat().st_size
    if size == 0:
        raise PageSightError(ErrorCode.CORRUPT, Stage.INPUT, f"{path.name} is empty")
    if size > max_bytes:
        raise PageSightError(
            ErrorCode.TOO_LARGE,
            Stage.INPUT,
            f"{path.name} is {size / 2**20:.1f} MiB, over the limit of {max_bytes / 2**20:.1f} MiB",
        )
    return size


def detect_format(path: Path) -> SourceFormat:
    """Classify a file by its leading bytes; raise UNSUPPORTED_FORMAT for anything else."""
    with path.open("rb") as fh:
        head = fh.read(2048)
    if b"%PDF-" in head[:1024]:
        return SourceFormat.PDF
    if head.startswith(_IMAGE_MAGIC):
        return SourceFormat.IMAGE
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as archive:
                if "word/document.xml" in archive.namelist():
                    return SourceFormat.DOCX
        except zipfile.BadZipFile as exc:
            raise PageSightError(
                ErrorCode.CORRUPT, Stage.INPUT, f"{path.name} is a broken zip archive"
            ) from exc
        raise PageSightError(
            ErrorCode.UNSUPPORTED_FORMAT,
            Stage.INPUT,
            f"{path.name} is a zip archive but not a DOCX document",
        )
    suffix = path.suffix.lower()
    text_head = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if suffix in _HTML_SUFFIXES or text_head.startswith((b"<!doctype html", b"<html")):
        return SourceFormat.HTML
    if suffix in _MARKDOWN_SUFFIXES:
        return SourceFormat.MARKDOWN
    raise PageSightError(
        ErrorCode.UNSUPPORTED_FORMAT,
        Stage.INPUT,
        f"{path.name}: not a PDF, PNG/JPEG/TIFF image, DOCX, HTML or Markdown file",
    )
