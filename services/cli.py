"""The ``pagesight`` command line.

Each command is thin: it builds settings, calls the stage it names, and prints. Parsing always
runs through :func:`ingestion.isolation.parse_isolated`, so a hostile file fails alone, with its
stage error code, while the rest of a batch carries on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from core.errors import PageSightError
from core.settings import Settings
from core.types import ParsedDocument

app = typer.Typer(help="PageSight: visual-document retrieval.", no_args_is_help=True)
console = Console(stderr=True)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def _parse_files(
    files: list[Path], settings: Settings, password: str | None
) -> list[tuple[Path, ParsedDocument | PageSightError]]:
    from ingestion.isolation import parse_isolated
    from ingestion.pipeline import SourceInfo

    results: list[tuple[Path, ParsedDocument | PageSightError]] = []
    with _progress() as bar:
        for path in files:
            task = bar.add_task(path.name, total=None)

            def report(done: int, total: int, task: TaskID = task) -> None:
                bar.update(task, completed=done, total=total)

            try:
                parsed = parse_isolated(path, settings, SourceInfo(password=password), report)
                results.append((path, parsed))
            except PageSightError as exc:
                results.append((path, exc))
            bar.remove_task(task)
    return results


def _print_parsed(parsed: ParsedDocument, out: Console, max_chars: int = 160) -> None:
    doc = parsed.document
    out.print(
        f"[bold]{doc.title or doc.source_uri}[/bold]  {doc.page_count} pages  "
        f"doc_id={doc.doc_id}  version={doc.version[:12]}"
    )
    for warning in parsed.warnings:
        where = f" page {warning.page_number}" if warning.page_number else ""
        out.print(f"  [yellow]warning {warning.code.value}{where}: {warning.message}[/yellow]")
    by_page: dict[int, list[str]] = {}
    for el in parsed.elements:
        text = " ".join(el.text.split())
        if len(text) > max_chars:
            text = text[: max_chars - 1] + "…"
        caption = f"  [dim](caption: {el.caption[:80]})[/dim]" if el.caption else ""
        by_page.setdefault(el.page_number, []).append(
            f"    [cyan]{el.kind.value:<8}[/cyan] {text}{caption}"
        )
    for page in parsed.pages:
        lines = by_page.get(page.page_number, [])
        source = "text layer" if page.has_text_layer else page.parser
        out.print(f"  [bold]page {page.page_number}[/bold] ({source}, {len(lines)} elements)")
        for line in lines:
            out.print(line, highlight=False, markup=True)


@app.command()
def parse(
    files: Annotated[list[Path], typer.Argument(help="PDF, image, DOCX, HTML or Markdown files")],
    password: Annotated[str | None, typer.Option(help="password for encrypted PDFs")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="dump elements and chunks as JSON")
    ] = False,
) -> None:
    """Parse files into typed page elements (and chunks), printed per page or as JSON."""
    from ingestion.chunk import Chunker

    settings = Settings()
    results = _parse_files(files, settings, password)
    failed = 0
    out = Console(highlight=False, soft_wrap=True)
    dumped: list[dict[str, Any]] = []
    for path, result in results:
        if isinstance(result, PageSightError):
            failed += 1
            console.print(
                f"[red]{path}: {result.stage.value}/{result.code.value}: {result.message}"
            )
            dumped.append({"file": str(path), "error": result.to_dict()})
            continue
        if as_json:
            chunks = Chunker(settings.chunk)(result)
            dumped.append(
                {
                    "file": str(path),
                    **result.model_dump(mode="json"),
                    "chunks": [c.model_dump(mode="json") for c in chunks],
                }
            )
        else:
            _print_parsed(result, out)
    if as_json:
        json.dump(dumped, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    if failed:
        raise typer.Exit(code=1 if failed == len(results) else 2)


@app.command()
def demo(
    docs: Annotated[
        Path | None, typer.Option(help="folder of documents; default: generated samples")
    ] = None,
) -> None:
    """Parse a folder (or a generated sample set) and print what was found."""
    from ingestion.chunk import Chunker
    from ingestion.samples import write_samples

    settings = Settings()
    if docs is None:
        files = write_samples(settings.data_dir / "samples")
        console.print(f"Generated {len(files)} sample documents in {settings.data_dir / 'samples'}")
    else:
        files = sorted(p for p in docs.rglob("*") if p.is_file())
    out = Console(highlight=False, soft_wrap=True)
    total_elements = total_chunks = 0
    for path, result in _parse_files(files, settings, None):
        if isinstance(result, PageSightError):
            out.print(
                f"[red]{path.name}: {result.stage.value}/{result.code.value}: {result.message}"
            )
            continue
        chunks = Chunker(settings.chunk)(result)
        total_elements += len(result.elements)
        total_chunks += len(chunks)
        _print_parsed(result, out, max_chars=110)
        out.print(f"  -> {len(chunks)} chunks\n")
    out.print(f"[bold]{len(files)} files, {total_elements} elements, {total_chunks} chunks[/bold]")


def main() -> None:  # pragma: no cover - console script entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
