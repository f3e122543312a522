"""The commands that build and change the local index directly: ``parse``, ``sync``, ``bulk``,
``reindex`` and ``rollback`` (registered on the app by :mod:`pagesight.entrypoints.cli`).
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    Progress,
    TaskID,
)

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import Settings
from pagesight.core.types import IngestJob, JobState, ParsedDocument
from pagesight.entrypoints.cli_common import (
    Acl,
    Json,
    Password,
    _emit_json,
    _exit_for,
    _job_name,
    _print_jobs,
    _progress,
    describe_error,
    err,
    out,
)

if TYPE_CHECKING:
    from pagesight.ingestion.ingest import IngestProgress


def _parse_files(
    files: list[Path], settings: Settings, password: str | None
) -> list[tuple[Path, ParsedDocument | PageSightError]]:
    from pagesight.ingestion.isolation import parse_isolated
    from pagesight.ingestion.pipeline import SourceInfo

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


def parse(
    files: Annotated[list[Path], typer.Argument(help="PDF, image, DOCX, HTML or Markdown files")],
    password: Password = None,
    as_json: Json = False,
) -> None:
    """Parse files into typed page elements (and chunks), printed per page or as JSON.

    --json: a list with, per file, {file, document, pages, elements, warnings, chunks} or
    {file, error: {code, stage, message}}."""
    from pagesight.ingestion.chunk import Chunker

    settings = Settings()
    results = _parse_files(files, settings, password)
    failed = 0
    dumped: list[dict[str, Any]] = []
    for path, result in results:
        if isinstance(result, PageSightError):
            failed += 1
            err.print(f"{path}: {describe_error(result)}", style="red", markup=False)
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
        _emit_json(dumped)
    _exit_for(failed, len(results))


def sync(
    folder: Annotated[Path, typer.Argument(help="folder whose files the tenant should have")],
    tenant: Annotated[str, typer.Option(help="tenant that owns the documents")] = "default",
    acl: Acl = None,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty",
            help="let a FOLDER with no files delete every document that came from it",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Ingest new or changed files under FOLDER and delete the tenant's documents that came from
    FOLDER but are no longer in it (uploads and other folders' documents are kept). Local index
    only (the sync writes to it directly).

    A FOLDER that cannot be listed, or an empty one while documents from it are indexed
    (without --allow-empty), deletes nothing and exits with code 1; a failed file exits 1 or 3.
    --json: {"jobs": [...], "deleted": [doc_id, ...]}."""
    from pagesight.services.stack import LocalStack, cli_actor

    settings = Settings()
    with LocalStack(settings) as stack, _progress() as bar:
        report = stack.ingestor.sync(
            folder,
            tenant,
            acl,
            progress=_file_bars(bar),
            allow_empty=allow_empty,
            actor=cli_actor(),
        )
    jobs = [j.status() for j in report.ingested]
    if as_json:
        _emit_json({"jobs": [j.model_dump(mode="json") for j in jobs], "deleted": report.deleted})
    else:
        _print_jobs(jobs)
        for doc_id in report.deleted:
            out.print(f"deleted {doc_id} (no longer in {folder})", markup=False)
    _exit_for(sum(j.state == JobState.FAILED for j in jobs), len(jobs))


def _file_bars(bar: Progress) -> IngestProgress:
    """Per-file progress for :meth:`Ingestor.sync` (a file's bar goes when the next reports)."""
    current: dict[str, TaskID] = {}

    def report(job: IngestJob, done: int, total: int) -> None:
        if job.job_id not in current:
            for task in current.values():
                bar.remove_task(task)
            current.clear()
            current[job.job_id] = bar.add_task(_job_name(job), total=total)
        bar.update(current[job.job_id], completed=done, total=total)

    return report


def bulk(
    source: Annotated[
        str,
        typer.Argument(help="a folder, a glob (quote it: 'scans/**/*.pdf') or a JSONL manifest"),
    ],
    tenant: Annotated[
        str,
        typer.Option(help="tenant of a folder's or glob's files (manifest records name theirs)"),
    ] = "default",
    acl: Acl = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="write the run's report here (JSON)")
    ] = None,
    as_json: Json = False,
    verbose: Verbose = False,
) -> None:
    """Ingest many files through a Ray Data pipeline (parse tasks, embedder actors, GPU page
    embedder), writing the local index directly (or the Qdrant server: PAGESIGHT_QDRANT_URL).

    Resumable: documents READY at the same version are skipped, so re-running a killed run
    finishes it. A manifest line is {"uri", "tenant", "doc_id"?, "acl"?, "title"?,
    "valid_until"?}. The plan (files found, already done, to do) comes first, before Ray
    starts; then progress every PAGESIGHT_BULK__PROGRESS_INTERVAL_S: a bar on a terminal, JSON
    lines on stderr otherwise. Prints the failed files and a summary. --json: stdout is JSON
    lines, {"event": "plan"}, {"event": "progress"}..., then {"event": "done", source, files,
    ready, failed, skipped, unfinished, pages, wall_s, pages_per_s, failures, stages, aborted,
    jobs}. Ray's own log lines go to <data dir>/logs/bulk-ray.log (--verbose: to stderr).
    Refused while `pagesight serve` owns the embedded index. Exit 1 when every file failed or
    the pipeline stopped, 3 when some files failed."""
    from pagesight.entrypoints.cli_progress import run_progress
    from pagesight.services.bulk_job import run_bulk
    from pagesight.services.stack import cli_actor

    settings = Settings()
    interval = settings.bulk.progress_interval_s
    shown = run_progress("bulk", settings.data_dir, interval, as_json=as_json, verbose=verbose)
    with shown as (on_progress, output):
        result = run_bulk(
            settings,
            source,
            tenant=tenant,
            acl=list(acl or []),
            actor=cli_actor(),
            on_progress=on_progress,
            verbose=verbose,
        )
    if report is not None:
        from pagesight.ingestion.bulk import write_report

        write_report(result, report)
    summary = result.as_dict()
    if as_json:
        _emit_event("done", summary)
    else:
        _print_jobs([j.status() for j in result.failed])
        out.print(
            f"{summary['ready']} ready, {summary['failed']} failed, {summary['skipped']} "
            f"unchanged, {summary['unfinished']} unfinished; {summary['pages']} pages in "
            f"{summary['wall_s']:.1f} s ({summary['pages_per_s'] or 0:.2f} pages/s)",
            markup=False,
        )
    if result.aborted:
        where = f"; Ray's log: {output.ray_log}" if output.ray_log else ""
        raise PageSightError(
            ErrorCode.INTERNAL,
            Stage.PARSE,
            f"the pipeline stopped ({result.aborted}); {summary['unfinished']} file(s) left "
            f"unfinished: run the same command again to resume{where}",
        )
    _exit_for(summary["failed"], summary["files"] - summary["skipped"])


def _emit_event(event: str, data: dict[str, Any]) -> None:
    """``--json``: the run's last event, one line (its plan and progress came before)."""
    sys.stdout.write(json.dumps({"event": event, **data}, ensure_ascii=False, default=str) + "\n")


Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose",
        help="show Ray's own log lines (ray.init, raylet, workers, Ray Data's bars) on stderr",
    ),
]


def reindex(
    allow_missing: Annotated[
        bool,
        typer.Option(
            "--allow-missing",
            help="promote even if some documents' source files are gone or changed (they are "
            "left out of the new version and listed as MISSING; the report names them)",
        ),
    ] = False,
    as_json: Json = False,
    verbose: Verbose = False,
) -> None:
    """Rebuild every catalogued document (all tenants) into a new index version with the
    current settings (model, dims, parser, chunker), verify it (points per document, dims),
    then switch the alias atomically; the previous version is kept for `pagesight rollback`.
    Searches keep working throughout: running searchers switch within
    PAGESIGHT_INDEX__ALIAS_CHECK_S. The plan (documents, missing, to do, pages) comes first,
    then progress as `pagesight bulk` shows it. Prints a report (--json: JSON lines, the plan
    and progress events, then {"event": "done", documents, rebuilt, pages, points, indexes,
    verified, mismatches, failures, missing, left_out, promoted, refused, dropped, wall_s}).
    Ray's own log lines go to <data dir>/logs/reindex-ray.log (--verbose: to stderr). Exit 1
    when refused (missing sources, failed verification): the live version is then
    unchanged."""
    from pagesight.entrypoints.cli_progress import run_progress
    from pagesight.services.reindex_job import run_reindex

    settings = Settings()
    interval = settings.bulk.progress_interval_s
    shown = run_progress("reindex", settings.data_dir, interval, as_json=as_json, verbose=verbose)
    with shown as (on_progress, _):
        result = run_reindex(
            settings,
            allow_missing=allow_missing or None,
            on_progress=on_progress,
            verbose=verbose,
        )
    summary = result.as_dict()
    if as_json:
        _emit_event("done", summary)
    else:
        for missing in result.missing:
            where = "left out" if result.left_out else "missing"
            out.print(
                f"{where}: {missing.doc_id} ({missing.reason}) {missing.source_uri}", markup=False
            )
        for mismatch in result.mismatches:
            out.print(f"mismatch: {mismatch.doc_id or '-'}: {mismatch.problem}", markup=False)
        for index, versions in result.indexes.items():
            out.print(
                f"{index}: {versions.name} {versions.previous or '-'} -> {versions.new or '-'} "
                f"({versions.points} points, dims {versions.dims})",
                markup=False,
            )
        out.print(
            f"{summary['rebuilt']} of {summary['documents']} documents rebuilt, "
            f"{summary['pages']} pages in {summary['wall_s']:.1f} s; "
            + ("promoted" if result.promoted else "not promoted"),
            markup=False,
        )
    if result.refused is not None:
        raise result.refused


class IndexChoice(StrEnum):
    """Which index ``pagesight rollback`` switches back (an unknown value: usage error)."""

    ALL = "all"
    TEXT = "text"
    PAGES = "pages"


def rollback(
    index: Annotated[
        IndexChoice,
        typer.Option("--index", help="which index to switch back (all: text and pages)"),
    ] = IndexChoice.ALL,
    as_json: Json = False,
) -> None:
    """Switch the index alias back to the previous version (kept by `pagesight reindex`) and
    restore the catalog rows that were live with it. Running searchers switch as after a
    re-index. --json prints {index: {alias, from, to, catalog_documents}}."""
    from pagesight.services.reindex_job import rollback as roll_back

    result = roll_back(Settings(), index.value)
    if as_json:
        _emit_json(result)
        return
    for name, moved in result.items():
        out.print(f"{name}: {moved['alias']} {moved['from']} -> {moved['to']}", markup=False)
