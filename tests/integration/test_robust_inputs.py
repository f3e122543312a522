"""Hostile and odd PDFs from ../shared/eval/robust: each parses, or fails alone with its code.

Every case goes through ``parse_isolated``, the path the CLI and ingestion use, so the child
process guard is part of what is tested.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.settings import RenderOptions, Settings
from pagesight.core.types import ParsedDocument
from pagesight.ingestion.isolation import parse_isolated
from pagesight.ingestion.pipeline import SourceInfo

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def manifest(eval_dir: Path) -> dict[str, dict[str, object]]:
    lines = (eval_dir / "robust" / "manifest.jsonl").read_text().splitlines()
    return {rec["file"]: rec for rec in map(json.loads, lines)}


def _parse(
    eval_dir: Path, settings: Settings, name: str, password: str | None = None
) -> ParsedDocument:
    return parse_isolated(eval_dir / "robust" / name, settings, SourceInfo(password=password))


def _text(parsed: ParsedDocument) -> str:
    return " ".join(e.text for e in parsed.elements)


@pytest.mark.parametrize(
    "name", ["unstructured__password.pdf", "pdfjs__issue6010_1.pdf", "pdfjs__issue3371.pdf"]
)
def test_encrypted_needs_the_right_password(
    eval_dir: Path, settings: Settings, manifest: dict[str, dict[str, object]], name: str
) -> None:
    password = manifest[name]["password"]
    assert isinstance(password, str)
    parsed = _parse(eval_dir, settings, name, password)
    assert parsed.document.page_count == manifest[name]["pages_after_auth"]
    assert _text(parsed).strip(), "authenticated file should yield text"
    for wrong in (None, "not-the-password"):
        with pytest.raises(PageSightError) as err:
            _parse(eval_dir, settings, name, wrong)
        assert err.value.code == ErrorCode.ENCRYPTED
        assert "password" in err.value.message


def test_password_file_text(eval_dir: Path, settings: Settings) -> None:
    parsed = _parse(eval_dir, settings, "unstructured__password.pdf", "password")
    assert "File with password" in _text(parsed)


def test_owner_password_file_parses_normally(eval_dir: Path, settings: Settings) -> None:
    parsed = _parse(eval_dir, settings, "unstructured__copy-protected.pdf")
    assert parsed.document.page_count == 2
    assert "LayoutParser: A Unified Toolkit" in _text(parsed)
    assert all(p.has_text_layer for p in parsed.pages)


def test_broken_xref_is_repaired(eval_dir: Path, settings: Settings) -> None:
    parsed = _parse(eval_dir, settings, "pdfjs__xref_command_missing.pdf")
    assert "Reduced test-case" in _text(parsed)
    assert any("repaired" in w.message for w in parsed.warnings)


def test_garbage_is_corrupt(tmp_path: Path, settings: Settings) -> None:
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 40)
    with pytest.raises(PageSightError) as err:
        parse_isolated(bad, settings)
    assert err.value.code == ErrorCode.CORRUPT


def test_scan_with_missing_startxref_is_repaired_and_ocred(
    eval_dir: Path, settings: Settings
) -> None:
    parsed = _parse(eval_dir, settings, "pdfjs__scan-bad.pdf")
    assert parsed.pages[0].has_text_layer is False
    assert "pdf.js" in _text(parsed)


@pytest.mark.parametrize("name", ["pdfjs__issue18042.pdf", "pdfjs__large_jpeg_downscale.pdf"])
def test_huge_images_stay_within_pixel_and_memory_limits(
    eval_dir: Path, tmp_path: Path, name: str
) -> None:
    limit = 300_000
    settings = Settings(
        data_dir=tmp_path / "var", render=RenderOptions(dpi=300, max_page_pixels=limit)
    )
    parsed = parse_isolated(eval_dir / "robust" / name, settings, memory_mb=3072)
    assert parsed.pages
    for page in parsed.pages:
        assert page.image_size is not None
        width, height = page.image_size
        assert width * height <= limit
        assert any("pixel limit" in w for w in page.warnings)
        assert (settings.page_image_dir / str(page.image_ref)).is_file()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("docling__ocr_test.pdf", "Docling bundles PDF document conversion"),
        ("docling__ocr_test_rotated_90.pdf", "Docling bundles PDF document conversion"),
        ("docling__sample_with_rotation_mismatch.pdf", "TELEPHONE"),
    ],
)
def test_scans_are_ocred_upright(
    eval_dir: Path, settings: Settings, name: str, expected: str
) -> None:
    parsed = _parse(eval_dir, settings, name)
    page = parsed.pages[0]
    assert not page.has_text_layer
    assert expected in _text(parsed)
    for element in parsed.elements:
        assert element.bbox is not None
        assert 0 <= element.bbox.x0 <= element.bbox.x1 <= page.width + 0.5
        assert 0 <= element.bbox.y0 <= element.bbox.y1 <= page.height + 0.5


def test_bad_colour_space_parses(eval_dir: Path, settings: Settings) -> None:
    parsed = _parse(eval_dir, settings, "unstructured__pdf-bad-color-space.pdf")
    assert "net-zero" in _text(parsed).lower()
    assert parsed.pages[0].image_ref


@pytest.mark.slow
def test_four_hundred_pages_parse(eval_dir: Path, settings: Settings) -> None:
    seen: list[int] = []
    parsed = parse_isolated(
        eval_dir / "robust" / "unstructured__pdf2image-memory-error-test-400p.pdf",
        settings,
        progress=lambda done, total: seen.append(done),
    )
    assert parsed.document.page_count == 400
    assert len(parsed.pages) == 400
    assert len({e.page_number for e in parsed.elements}) > 350
    assert seen[-1] == 400


def test_one_bad_file_does_not_stop_the_next(
    eval_dir: Path, settings: Settings, tmp_path: Path
) -> None:
    bad = tmp_path / "not-a-pdf.pdf"
    bad.write_bytes(b"hello")
    results = []
    for path in (bad, eval_dir / "robust" / "unstructured__copy-protected.pdf"):
        try:
            results.append(parse_isolated(path, settings).document.page_count)
        except PageSightError as exc:
            results.append(exc.code)
    assert results == [ErrorCode.UNSUPPORTED_FORMAT, 2]
