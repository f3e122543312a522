"""The pages a bulk run has ahead, counted in a child process: PDFs and images are counted,
other formats and broken or locked files are unknown, and nothing stops the count early."""

from __future__ import annotations

import secrets
from pathlib import Path

import pymupdf

from pagesight.ingestion.page_count import PageCounter, count_pages


def _pdf(path: Path, pages: int, locked: bool = False) -> Path:
    with pymupdf.open() as pdf:
        for n in range(pages):
            pdf.new_page().insert_text((72, 72), f"page {n + 1}")
        if locked:
            aes = pymupdf.PDF_ENCRYPT_AES_256  # type: ignore[attr-defined]
            pdf.save(path, encryption=aes, user_pw=secrets.token_hex(8))
        else:
            pdf.save(path)
    return path


def test_pages_are_counted_in_a_child_in_order(tmp_path: Path) -> None:
    files = [
        _pdf(tmp_path / "three.pdf", 3),
        tmp_path / "notes.md",
        _pdf(tmp_path / "locked.pdf", 2, locked=True),
        tmp_path / "broken.pdf",
        _pdf(tmp_path / "one.pdf", 1),
    ]
    files[1].write_text("# notes\n")
    files[3].write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 8)
    counted: list[int | None] = []
    with PageCounter([str(f) for f in files], counted.append, memory_mb=2048) as counter:
        counter._thread.join(timeout=120)
    assert counted == [3, None, None, None, 1]
    assert count_pages(files[0]) == 3 and count_pages(tmp_path / "gone.pdf") is None


def test_stop_ends_the_count_and_its_child(tmp_path: Path) -> None:
    files = [str(_pdf(tmp_path / f"{n}.pdf", 1)) for n in range(3)]
    counted: list[int | None] = []
    counter = PageCounter(files, counted.append, memory_mb=2048)
    counter.stop()  # before it started: nothing runs
    assert counted == [] and counter._proc is None
    counter = PageCounter(files, counted.append, memory_mb=2048).start()
    counter.stop()
    assert not counter._thread.is_alive()
    assert counter._proc is None or counter._proc.poll() is not None
