"""The ``pagesight`` command line.

Commands are thin: they build settings, call one service, and print. Commands that read or
write the index go through :class:`pagesight.entrypoints.cli_session.CliSession`, the same
:class:`pagesight.api.protocols.IndexBackend` calls in both modes: the local index (default) or a
running gateway (``--server URL --api-key KEY``). Parsing always runs through
:func:`pagesight.ingestion.isolation.parse_isolated`, so a hostile file fails alone, with its stage
error code, while the rest of a batch carries on.

Output contract (README, "Command line"): results on stdout, as text or, with ``--json``, as
one JSON document of a documented shape; progress and errors on stderr. Every failure is one
line ``stage/CODE: message`` (never a traceback), printed in one place (:class:`CliGroup`).
Exit codes: 0 done; 1 failed (an error, or every file failed); 2 a usage error (unknown option,
bad value); 3 partly failed (some files failed, the others are done).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

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
from typer.core import TyperGroup

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import Settings
from pagesight.core.types import IngestJob, JobState, JobStatus, ParsedDocument, RouteName

if TYPE_CHECKING:
    from pagesight.api.models import SearchResponse, Submitted
    from pagesight.core.types import AnswerResponse, AnswerUnit, Citation, Document
    from pagesight.entrypoints.serve_app import AppArgs
    from pagesight.ingestion.bulk import BulkProgress
    from pagesight.ingestion.ingest import IngestProgress
    from pagesight.store.key_stores import KeyStore

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def describe_error(exc: BaseException) -> str:
    """One line ``stage/CODE: message`` for any failure a command can meet."""
    from pydantic import ValidationError

    if isinstance(exc, PageSightError):
        return f"{exc.stage.value}/{exc.code.value}: {exc.message}"
    api_error = _api_error_type()
    if api_error is not None and isinstance(exc, api_error):
        trace = f" (trace {exc.trace_id})" if exc.trace_id else ""
        return f"{exc.stage}/{exc.code}: {exc.message}{trace}"
    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()[:3]
        ]
        return "input/INVALID_REQUEST: " + "; ".join(parts)
    transport = _transport_error_type()
    if transport is not None and isinstance(exc, transport):
        request = getattr(exc, "_request", None)
        where = f" {request.url.scheme}://{request.url.netloc.decode()}" if request else ""
        return f"gateway/UNAVAILABLE: cannot reach the server{where}: {exc}"
    if isinstance(exc, FileNotFoundError):
        return f"input/NOT_FOUND: no such file: {exc.filename}"
    if isinstance(exc, OSError):
        return f"input/INTERNAL: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
    return f"internal/INTERNAL: {type(exc).__name__}: {exc}"


def _api_error_type() -> type[Any] | None:
    if "pagesight.gateway.client" not in sys.modules:  # never imported: no ApiError can exist
        return None
    from pagesight.gateway.client import ApiError

    return ApiError


def _transport_error_type() -> type[Any] | None:
    if "httpx" not in sys.modules:
        return None
    import httpx

    return httpx.TransportError


class CliGroup(TyperGroup):
    """Every command's failures, in one place: one line on stderr and exit code 1 (usage
    errors stay Click's: exit code 2). ``PAGESIGHT_DEBUG=1`` re-raises with the traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            if _is_cli_control(exc) or os.environ.get("PAGESIGHT_DEBUG"):
                raise
            err.print(describe_error(exc), style="red", markup=False)
            raise typer.Exit(EXIT_FAILED) from None


def _is_cli_control(exc: Exception) -> bool:
    """Typer's own exits, aborts and usage errors (its vendored Click's ``ClickException``,
    which typer does not export by name) pass through to typer."""
    return isinstance(exc, typer.Exit | typer.Abort) or any(
        cls.__name__ == "ClickException" for cls in type(exc).__mro__
    )


app = typer.Typer(
    cls=CliGroup,
    help="PageSight: visual-document retrieval.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


class _OneLineFormatter(logging.Formatter):
    """Library warnings as ``warning: message``: the traceback a logger attaches (``exc_info``)
    is dropped unless ``PAGESIGHT_DEBUG`` is set, as for the command's own errors."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and os.environ.get("PAGESIGHT_DEBUG"):
            line += "\n" + self.formatException(record.exc_info)
        return line


class _CliLogHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (a test runner swaps it)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(_OneLineFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


@app.callback()
def _main() -> None:
    """PageSight: visual-document retrieval."""
    root = logging.getLogger()
    if not any(isinstance(h, _CliLogHandler) for h in root.handlers):
        root.addHandler(_CliLogHandler())
        root.setLevel(logging.INFO if os.environ.get("PAGESIGHT_DEBUG") else logging.WARNING)


def _emit_json(data: Any) -> None:
    """One JSON document on stdout (``--json``)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=1, default=str) + "\n")


def _exit_for(failed: int, total: int) -> None:
    """Exit 1 when every item failed, 3 when some did."""
    if failed:
        raise typer.Exit(code=EXIT_FAILED if failed == total else EXIT_PARTIAL)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


# -- options shared by commands ------------------------------------------------------------

Tenant = Annotated[
    str | None,
    typer.Option(help="tenant that owns the documents (local mode; default: 'default')"),
]
Principal = Annotated[
    list[str] | None,
    typer.Option(
        "--principal", help="act with these ACL principals (repeatable); none = every document"
    ),
]
Server = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="PAGESIGHT_SERVER_URL",
        help="a running gateway (e.g. http://127.0.0.1:8000): talk to it instead of the local "
        "index (needed while `pagesight serve` owns the index)",
    ),
]
ApiKey = Annotated[
    str | None, typer.Option("--api-key", envvar="PAGESIGHT_API_KEY", help="key for --server")
]
Acl = Annotated[
    list[str] | None, typer.Option("--acl", help="principal allowed to read (repeatable)")
]
Json = Annotated[bool, typer.Option("--json", help="print the result as JSON (see README)")]
Password = Annotated[str | None, typer.Option(help="password for encrypted PDFs (never stored)")]


def _session(
    server: str | None,
    api_key: str | None,
    tenant: str | None = None,
    principals: list[str] | None = None,
    *,
    ingest: bool = False,
) -> Any:
    from pagesight.entrypoints.cli_session import open_session

    return open_session(
        Settings(),
        server=server,
        api_key=api_key,
        tenant=tenant,
        principals=principals,
        ingest=ingest,
    )


# -- parse ----------------------------------------------------------------------------------


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


@app.command()
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


# -- ingest, sync, jobs, delete -------------------------------------------------------------


def _expand(paths: Sequence[Path]) -> list[Path]:
    """Files named, and the files under folders named (hidden ones skipped); a path that does
    not exist is NOT_FOUND."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(
                sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            )
        elif path.is_file():
            files.append(path)
        else:
            raise PageSightError(ErrorCode.NOT_FOUND, Stage.INPUT, f"no such file: {path}")
    if not files:
        named = ", ".join(str(p) for p in paths)
        raise PageSightError(ErrorCode.NOT_FOUND, Stage.INPUT, f"no files found in {named}")
    return files


def _job_name(job: JobStatus) -> str:
    """The caller's name for a job's file: the upload's name, else the URI's file name."""
    if job.source_uri.startswith("upload:"):
        return job.source_uri.removeprefix("upload:")
    return Path(urlsplit(job.source_uri).path).name or job.source_uri


def _job_line(job: JobStatus) -> str:
    """``STATE  name  doc_id  detail``: one line per job, columns aligned."""
    if job.state == JobState.READY:
        state = "unchanged" if job.unchanged else "READY"
        detail = "" if job.unchanged else f"{job.pages} pages, {job.chunks} chunks"
    elif job.state == JobState.FAILED:
        state = "FAILED"
        detail = f"{job.error_stage}/{job.error_code}: {job.error_message}"
    else:
        state, detail = job.state.value, "in progress"
    return f"{state:<10} {_job_name(job):<32} {job.doc_id:<36}  {detail}".rstrip()


def _print_jobs(jobs: Sequence[JobStatus]) -> None:
    for job in jobs:
        out.print(_job_line(job), markup=False)


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="files or folders")],
    tenant: Tenant = None,
    acl: Acl = None,
    password: Password = None,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="--server: replace the one document of each file's name"),
    ] = False,
    timeout_s: Annotated[
        float, typer.Option("--timeout-s", help="how long to wait for each file", min=1)
    ] = 3600.0,
    as_json: Json = False,
    server: Server = None,
    api_key: ApiKey = None,
) -> None:
    """Parse, chunk, embed and index files (re-running unchanged files does nothing).

    One line per file as it finishes (stdout; with --json on stderr, then {"jobs": [...],
    "refused": [{file, error}]} on stdout: refused are files the gateway turned away before
    they became a job, e.g. empty or too large). Exit 1 when every file failed, 3 when some
    did."""
    files = _expand(paths)
    jobs: list[JobStatus] = []
    refused: list[dict[str, Any]] = []
    with _session(server, api_key, tenant, ingest=True) as session:
        queued: list[tuple[Path, Submitted | str]] = []
        for path in files:  # queue everything first: the server works while we wait
            try:
                submitted = session.submit_file(
                    path, acl=list(acl or []), password=password, replace=replace
                )
            except Exception as exc:
                if not _fails_alone(exc):
                    raise
                queued.append((path, describe_error(exc)))
                refused.append({"file": str(path), "error": _error_dict(exc)})
                continue
            queued.append((path, submitted))
        for number, (path, submitted) in enumerate(queued, 1):
            if isinstance(submitted, str):
                line = f"{'FAILED':<10} {path.name:<32} {'-':<36}  {submitted}"
            else:
                job = submitted.job
                if not job.state.terminal:
                    job = session.wait(job.job_id, timeout_s)
                jobs.append(job)
                line = _job_line(job)
            (err if as_json else out).print(f"[{number}/{len(queued)}] {line}", markup=False)
    if as_json:
        _emit_json({"jobs": [j.model_dump(mode="json") for j in jobs], "refused": refused})
    failed = sum(j.state == JobState.FAILED for j in jobs) + len(refused)
    _exit_for(failed, len(queued))


#: Codes that concern one file: the batch goes on without it.
_FILE_ERRORS = {"CORRUPT", "TOO_LARGE", "UNSUPPORTED_FORMAT", "NOT_FOUND", "ENCRYPTED", "CONFLICT"}


def _fails_alone(exc: Exception) -> bool:
    """A refusal of one file (its bytes, its size, its id), not of the whole command."""
    code = _error_dict(exc).get("code")
    return code in _FILE_ERRORS


def _error_dict(exc: Exception) -> dict[str, str]:
    """{code, stage, message} of a PageSightError or an ApiError (empty for anything else)."""
    if isinstance(exc, PageSightError):
        return exc.to_dict()
    api_error = _api_error_type()
    if api_error is not None and isinstance(exc, api_error):
        return {"code": exc.code, "stage": exc.stage, "message": exc.message}
    return {}


@app.command()
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


@app.command()
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
) -> None:
    """Ingest many files through a Ray Data pipeline (parse tasks, embedder actors, GPU page
    embedder), writing the local index directly (or the Qdrant server: PAGESIGHT_QDRANT_URL).

    Resumable: documents READY at the same version are skipped, so re-running a killed run
    finishes it. A manifest line is {"uri", "tenant", "doc_id"?, "acl"?, "title"?,
    "valid_until"?}. Progress on stderr: a bar on a terminal, JSON lines otherwise. Prints the
    failed files and a summary (--json: the report {source, files, ready, failed, skipped,
    unfinished, pages, wall_s, pages_per_s, failures, stages, aborted, jobs}). Refused while
    `pagesight serve` owns the embedded index. Exit 1 when every file failed or the pipeline
    stopped, 3 when some files failed."""
    from pagesight.services.bulk_job import run_bulk
    from pagesight.services.stack import cli_actor

    settings = Settings()
    # Ray prints worker deaths and retries on stdout: during the run, stdout is stderr, so that
    # stdout keeps only the result.
    with (
        contextlib.redirect_stdout(sys.stderr),
        _bulk_progress(settings.bulk.progress_interval_s) as on_progress,
    ):
        result = run_bulk(
            settings,
            source,
            tenant=tenant,
            acl=list(acl or []),
            actor=cli_actor(),
            on_progress=on_progress,
        )
    if report is not None:
        from pagesight.ingestion.bulk import write_report

        write_report(result, report)
    summary = result.as_dict()
    if as_json:
        _emit_json(summary)
    else:
        _print_jobs([j.status() for j in result.failed])
        out.print(
            f"{summary['ready']} ready, {summary['failed']} failed, {summary['skipped']} "
            f"unchanged, {summary['unfinished']} unfinished; {summary['pages']} pages in "
            f"{summary['wall_s']:.1f} s ({summary['pages_per_s'] or 0:.2f} pages/s)",
            markup=False,
        )
    if result.aborted:
        raise PageSightError(
            ErrorCode.INTERNAL,
            Stage.PARSE,
            f"the pipeline stopped ({result.aborted}); {summary['unfinished']} file(s) left "
            "unfinished: run the same command again to resume",
        )
    _exit_for(summary["failed"], summary["files"] - summary["skipped"])


@contextlib.contextmanager
def _bulk_progress(interval_s: float) -> Iterator[Callable[[BulkProgress], None]]:
    """A bar (files, pages, pages/s) on a terminal; else a JSON line on stderr at most every
    ``interval_s`` seconds, and always the last one."""
    if err.is_terminal:
        with Progress(
            TextColumn("bulk"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files  {task.fields[pages]} pages  {task.fields[rate]:.2f} pages/s"),
            TextColumn("{task.fields[failed]} failed"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task("bulk", total=None, pages=0, rate=0.0, failed=0)

            def draw(p: BulkProgress) -> None:
                bar.update(
                    task,
                    completed=p.files_done,
                    total=p.files_total,
                    pages=p.pages_done,
                    rate=p.pages_per_s,
                    failed=p.failed,
                )

            yield draw
        return
    shown = [0.0]

    def line(p: BulkProgress) -> None:
        now = time.monotonic()
        if now - shown[0] >= interval_s or p.files_done == p.files_total:
            shown[0] = now
            sys.stderr.write(json.dumps(p.as_dict()) + "\n")
            sys.stderr.flush()

    yield line


@app.command()
def reindex(
    allow_missing: Annotated[
        bool,
        typer.Option(
            "--allow-missing",
            help="promote even if some documents' source files are gone or changed (they are "
            "left out of the new version and the catalog; the report names them)",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Rebuild every catalogued document (all tenants) into a new index version with the
    current settings (model, dims, parser, chunker), verify it (points per document, dims),
    then switch the alias atomically; the previous version is kept for `pagesight rollback`.
    Searches keep working throughout: running searchers switch within
    PAGESIGHT_INDEX__ALIAS_CHECK_S. Prints a report (--json: {documents, rebuilt, pages,
    points, indexes, verified, mismatches, failures, missing, left_out, promoted, refused,
    dropped, wall_s}). Exit 1 when refused (missing sources, failed verification): the live
    version is then unchanged."""
    from pagesight.services.reindex_job import run_reindex

    settings = Settings()
    # Ray prints worker deaths and retries on stdout: during the run, stdout is stderr.
    with contextlib.redirect_stdout(sys.stderr):
        result = run_reindex(settings, allow_missing=allow_missing or None)
    summary = result.as_dict()
    if as_json:
        _emit_json(summary)
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


@app.command()
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


@app.command()
def jobs(
    tenant: Tenant = None,
    state: Annotated[JobState | None, typer.Option(help="only this state")] = None,
    limit: Annotated[int, typer.Option(help="newest N jobs", min=1, max=1000)] = 50,
    as_json: Json = False,
    server: Server = None,
    api_key: ApiKey = None,
) -> None:
    """List ingest jobs, newest first (the state filter applies before the limit).

    --json: {"jobs": [{job_id, tenant, source_uri, doc_id, version, acl, state, error_code,
    error_stage, error_message, pages, chunks, unchanged, created_at, updated_at, ...}]}."""
    with _session(server, api_key, tenant) as session:
        found = session.backend.jobs(session.caller, limit, state)
    if as_json:
        _emit_json({"jobs": [j.model_dump(mode="json") for j in found]})
    elif not found:
        err.print("no jobs")
    else:
        _print_jobs(found)


@app.command()
def delete(
    doc_id: Annotated[str, typer.Argument(help="document id (see `pagesight search` or jobs)")],
    tenant: Tenant = None,
    as_json: Json = False,
    server: Server = None,
    api_key: ApiKey = None,
) -> None:
    """Delete a document everywhere: points, catalog rows, page images, its jobs and traces
    (recorded in the audit log). --json: {"doc_id": ..., "deleted": true}."""
    with _session(server, api_key, tenant) as session:
        deleted = session.backend.delete(session.caller, doc_id)
    if not deleted:
        where = f" of tenant {tenant or 'default'}" if not server else ""
        raise PageSightError(ErrorCode.NOT_FOUND, Stage.INPUT, f"no document {doc_id}{where}")
    if as_json:
        _emit_json({"doc_id": doc_id, "deleted": True})
    else:
        out.print(f"deleted {doc_id}", markup=False)


# -- search ---------------------------------------------------------------------------------


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="the question or keywords")],
    top_k: Annotated[int, typer.Option(help="pages to return", min=1, max=100)] = 10,
    route: Annotated[RouteName, typer.Option(help="retrieval route")] = RouteName.AUTO,
    tenant: Tenant = None,
    principal: Principal = None,
    as_json: Json = False,
    server: Server = None,
    api_key: ApiKey = None,
) -> None:
    """Search the index and print ranked pages with doc, page and snippet.

    --json: the API's search response {trace_id, route, hits: [{doc_id, page_number, rank,
    score, route_scores, snippet, title, source_uri, kinds, chunk_ids, element_ids, evidence,
    page_image_url}], elapsed_ms}."""
    from pagesight.api.models import SearchRequest
    from pagesight.core.tracing import new_trace_id

    request = SearchRequest(query=query, route=route, top_k=top_k)
    with _session(server, api_key, tenant, principal) as session:
        response = session.backend.search(session.caller, request, new_trace_id())
    if as_json:
        sys.stdout.write(response.model_dump_json(indent=1) + "\n")
    else:
        _print_hits(response)


def _file_name(source_uri: str | None) -> str:
    """The file name of a document's source: the upload's name, else the URI's or path's last
    segment ("" when there is none)."""
    uri = source_uri or ""
    if uri.startswith("upload:"):
        return uri.removeprefix("upload:")
    return Path(urlsplit(uri).path).name


def _doc_label(doc_id: str, title: str | None, file_name: str | None) -> str:
    """``Title — file.pdf`` (one of them when the other is missing or the same); the id only
    when neither is known."""
    if title and file_name and title != file_name:
        return f"{title} — {file_name}"
    return title or file_name or doc_id


def _print_hits(response: SearchResponse) -> None:
    from rich.markup import escape

    out.print(
        f"[dim]route {response.route.value} — {response.elapsed_ms:.0f} ms — "
        f"trace {response.trace_id}[/dim]"
    )
    if not response.hits:
        out.print("no matching pages")
    for hit in response.hits:
        file_name = getattr(hit, "source_name", None) or _file_name(hit.source_uri)
        name = escape(_doc_label(hit.doc_id, hit.title, file_name))
        kinds = ", ".join(hit.kinds)
        out.print(
            f"[bold]{hit.rank:>2}. {name}  page {hit.page_number}[/bold]  "
            f"score {hit.score:.4f}  {kinds}"
        )
        out.print(f"    {hit.snippet}", markup=False)


@app.command()
def answer(
    question: Annotated[str, typer.Argument(help="the question")],
    route: Annotated[RouteName, typer.Option(help="retrieval route")] = RouteName.AUTO,
    policy: Annotated[
        str,
        typer.Option(help="standard, or strict: uncited sentences dropped, weak evidence abstains"),
    ] = "standard",
    tenant: Tenant = None,
    principal: Principal = None,
    as_json: Json = False,
    server: Server = None,
    api_key: ApiKey = None,
) -> None:
    """A grounded answer with citations (extractive unless an LLM is configured:
    PAGESIGHT_LLM__BASE_URL), or an abstention: the direct answer first with its source, then
    supporting quotes and the citations; an abstention's reason and the nearest passages.

    --json: the API's answer {answer, abstained, reason, sentences, lead: {text, kind, value,
    citations}, supporting, related, citations: [{n, doc_id, page_number, chunk_id, kind,
    element_ids, bboxes, page_image_url, quote, parts: [{page_number, text, bboxes}], title,
    source_name}], confidence, mode, trace_id, withheld}."""
    from pagesight.api.models import AnswerRequest
    from pagesight.core.tracing import new_trace_id

    request = AnswerRequest.model_validate({"query": question, "route": route, "policy": policy})
    with _session(server, api_key, tenant, principal) as session:
        response = session.backend.answer(session.caller, request, new_trace_id())
        if as_json:
            sys.stdout.write(response.model_dump_json(indent=1) + "\n")
            return
        names = _cited_names(session, response)
    _print_answer(response, names)
    err.print(
        f"{response.mode}, confidence {response.confidence:.2f}, trace {response.trace_id}",
        markup=False,
    )


def _cited_names(session: Any, response: AnswerResponse) -> dict[str, tuple[str, str]]:
    """doc id -> (title, file name) of each cited or related document the answer names
    incompletely (a server that fills no ``title``/``source_name``): from the documents list.
    Empty when nothing is missing, or when the list cannot be read (ids are shown then)."""
    quoted = [*response.citations, *response.related]
    if all(c.title and c.source_name for c in quoted):
        return {}
    try:
        documents: list[Document] = session.backend.documents(session.caller)
    except Exception:  # names are a nicety: the answer itself is printed all the same
        return {}
    return {d.doc_id: (d.title or "", _file_name(d.source_uri)) for d in documents}


def _quote_pages(citation: Citation) -> list[int]:
    """The pages the citation's quote is printed on, in reading order."""
    pages = [part.page_number for part in citation.parts] or [citation.page_number]
    return list(dict.fromkeys(pages))


def _citation_source(citation: Citation, names: dict[str, tuple[str, str]]) -> str:
    """``Title — file.pdf, p. 7`` (``pp. 7–8`` for a quote across a page break)."""
    known_title, known_file = names.get(citation.doc_id, ("", ""))
    label = _doc_label(
        citation.doc_id, citation.title or known_title, citation.source_name or known_file
    )
    pages = _quote_pages(citation)
    where = f"p. {pages[0]}" if len(pages) == 1 else f"pp. {pages[0]}–{pages[-1]}"
    return f"{label}, {where}{' (image block)' if citation.kind == 'image' else ''}"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _marked(text: str, citations: Sequence[int]) -> str:
    return f"{text} {''.join(f'[{n}]' for n in citations)}" if citations else text


def _lead_text(lead: AnswerUnit) -> Any:
    """The lead with its citation markers; its value in bold where it is printed in it (a
    terminal shows the style; a pipe or file gets the plain text)."""
    from rich.text import Text

    shown = Text(_marked(lead.text, lead.citations))
    if lead.value:
        find = lead.text.rfind if lead.kind == "table_cell" else lead.text.find
        at = find(lead.value)
        if at >= 0:
            shown.stylize("bold", at, at + len(lead.value))
    return shown


def _print_answer(response: AnswerResponse, names: dict[str, tuple[str, str]]) -> None:
    """The human form of an answer (README, "Command line"):

    - the lead (the direct answer) with its ``[n]``, then ``  [n] Title — file.pdf, p. 7``;
      an LLM's other sentences after it; ``Supporting:`` quotes, shorter and indented; then
      ``Citations:``, one line each;
    - an abstention: its text, ``Why: reason`` and ``Related:`` passages;
    - an answer without a lead (an older server): its sentences with markers, then citations.
    """
    from pagesight.query.generation import render_cited

    by_n = {c.n: c for c in response.citations}
    if response.abstained:
        out.print(response.answer, markup=False)
        if response.reason:
            out.print(f"Why: {response.reason}", markup=False)
        if response.related:
            out.print("\nRelated:")
            for related in response.related:
                quote = _one_line(related.quote, 140)
                where = _citation_source(related, names)
                out.print(f"  - {where}" + (f": “{quote}”" if quote else ""), markup=False)
    elif response.lead is not None:
        lead = response.lead
        out.print(_lead_text(lead))
        for n in lead.citations:
            if n in by_n:
                out.print(f"  [{n}] {_citation_source(by_n[n], names)}", markup=False)
        if response.mode == "llm":
            rest = [s for s in response.sentences if s.text != lead.text]
            if rest:
                shown = " ".join(_marked(s.text, s.citations) for s in rest)
                out.print(f"\n{shown}", markup=False)
        if response.supporting:
            out.print("\nSupporting:")
            for unit in response.supporting:
                out.print(f"  - {_marked(_one_line(unit.text, 160), unit.citations)}", markup=False)
    else:
        out.print(render_cited(response), markup=False)
    if response.citations:
        out.print("\nCitations:")
        for citation in response.citations:
            quote = _one_line(citation.quote, 160) if citation.quote else "(the page image)"
            out.print(
                f"[{citation.n}] {_citation_source(citation, names)}: “{quote}”", markup=False
            )


# -- keys -----------------------------------------------------------------------------------


keys_app = typer.Typer(help="API keys of the gateway.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")

KeysFile = Annotated[
    Path | None,
    typer.Option(
        help="JSON keys file; default: PostgreSQL if PAGESIGHT_DATABASE_URL is set, "
        "else <data_dir>/api-keys.json"
    ),
]


@contextlib.contextmanager
def _key_store(keys_file: Path | None) -> Iterator[KeyStore]:
    """The store the keys commands act on (:func:`pagesight.gateway.auth.open_key_store`), closed
    after."""
    from pagesight.gateway.auth import open_key_store

    store = open_key_store(Settings(), keys_file)
    try:
        yield store
    finally:
        store.close()


@keys_app.command("new")
def keys_new(
    tenant: Annotated[str, typer.Option(help="tenant the key acts for")],
    key_id: Annotated[str | None, typer.Option(help="name shown in logs; default: random")] = None,
    principal: Annotated[
        list[str] | None, typer.Option(help="ACL principal of the key (repeatable)")
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(help="read and/or write (repeatable); default: both"),
    ] = None,
    keys_file: KeysFile = None,
    as_json: Json = False,
) -> None:
    """Create an API key: its hash goes into PostgreSQL (PAGESIGHT_DATABASE_URL set, no
    --keys-file) or the keys file, the key is printed once. A running gateway picks it up within
    PAGESIGHT_GATEWAY__KEYS_RELOAD_S seconds (default 2).

    --json: {key_id, tenant, principals, scopes, keys_file, stored_in, key}; keys_file is null
    when the key went to PostgreSQL, stored_in names the file or the database."""
    import secrets

    from pagesight.core.settings import ALL_SCOPES
    from pagesight.gateway.auth import new_key
    from pagesight.store.key_stores import FileKeyStore

    scopes = scope or list(ALL_SCOPES)
    unknown = sorted(set(scopes) - set(ALL_SCOPES))
    if unknown:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST, Stage.INPUT, f"unknown scope {unknown[0]!r} (read, write)"
        )
    key_id = key_id or f"key-{secrets.token_hex(4)}"
    key, record = new_key(key_id, tenant, principal, [s for s in ALL_SCOPES if s in scopes])
    with _key_store(keys_file) as store:
        store.add(record)
    if as_json:
        shown = record.model_dump(mode="json", include={"key_id", "tenant", "principals", "scopes"})
        path = str(store.path) if isinstance(store, FileKeyStore) else None
        _emit_json({**shown, "keys_file": path, "stored_in": store.location, "key": key})
        return
    err.print(
        f"added {key_id} (tenant {tenant}, {'+'.join(record.scopes)}) to {store.location}; "
        "the key, shown only now:",
        markup=False,
    )
    sys.stdout.write(key + "\n")


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="the key's id (see `pagesight keys list`)")],
    keys_file: KeysFile = None,
    as_json: Json = False,
) -> None:
    """Revoke a key: a running gateway refuses it within the keys reload interval.
    --json: {"key_id": ..., "revoked": true}."""
    with _key_store(keys_file) as store:
        if not store.revoke(key_id):
            raise PageSightError(
                ErrorCode.NOT_FOUND, Stage.AUTH, f"no active key {key_id!r} in {store.location}"
            )
    if as_json:
        _emit_json({"key_id": key_id, "revoked": True})
    else:
        out.print(f"revoked {key_id} in {store.location}", markup=False)


@keys_app.command("list")
def keys_list(keys_file: KeysFile = None, as_json: Json = False) -> None:
    """The keys of the store (PostgreSQL or the keys file, as for `keys new`): id, tenant,
    principals, scopes, revoked (never the key), oldest first.
    --json: {"keys": [{key_id, tenant, principals, scopes, revoked_at}]}."""
    with _key_store(keys_file) as store:
        records = store.records()
    if as_json:
        fields = {"key_id", "tenant", "principals", "scopes", "revoked_at"}
        _emit_json({"keys": [r.model_dump(mode="json", include=fields) for r in records]})
        return
    for record in records:
        revoked = f"  revoked {record.revoked_at:%Y-%m-%d %H:%M}" if record.revoked_at else ""
        out.print(
            f"{record.key_id}  tenant={record.tenant}  scopes={'+'.join(record.scopes)}  "
            f"principals={','.join(record.principals) or '-'}{revoked}",
            markup=False,
        )


# -- db -------------------------------------------------------------------------------------


db_app = typer.Typer(
    help="The cluster profile's PostgreSQL database (PAGESIGHT_DATABASE_URL).",
    no_args_is_help=True,
)
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Option(help="schema revision to reach")] = "head",
    as_json: Json = False,
) -> None:
    """Migrate the database's schema (safe while replicas run: one migrates, the others wait
    and find nothing to do). --json: {"before": ..., "after": ...}."""
    from pagesight.services.db_migrate import database, upgrade_schema

    with _one_line_errors(), database(Settings()) as db:
        result = upgrade_schema(db, revision)
    if as_json:
        _emit_json(result.model_dump())
    elif result.changed:
        out.print(f"schema {result.before or 'empty'} -> {result.after}", markup=False)
    else:
        out.print(f"schema already at {result.after}: nothing to do", markup=False)


@db_app.command("current")
def db_current(as_json: Json = False) -> None:
    """The database's schema revision against this code's; exit 1 when they differ (run
    `pagesight db upgrade`). --json: {"current": ..., "head": ..., "up_to_date": ...}."""
    from pagesight.services.db_migrate import database, schema_status

    with _one_line_errors(), database(Settings()) as db:
        status = schema_status(db)
    if as_json:
        _emit_json({**status.model_dump(), "up_to_date": status.up_to_date})
    elif status.up_to_date:
        out.print(f"{status.current} (head)", markup=False)
    else:
        out.print(
            f"{status.current or 'empty'}, head is {status.head}: run `pagesight db upgrade`",
            markup=False,
        )
    if not status.up_to_date:
        raise typer.Exit(EXIT_FAILED)


@db_app.command("migrate-from-sqlite")
def db_migrate_from_sqlite(
    data_dir: Annotated[
        Path, typer.Argument(help="the embedded installation's data directory (PAGESIGHT_DATA_DIR)")
    ],
    keys_file: Annotated[
        Path | None,
        typer.Option(
            help="API keys file to copy; default: PAGESIGHT_GATEWAY__API_KEYS_FILE if set, "
            "else <DATA_DIR>/api-keys.json if present"
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Copy an embedded installation (catalog, traces, API keys) into the database, in one
    transaction, then check every source row arrived; re-running it changes nothing. The
    schema must be at head (`pagesight db upgrade`); stop the old installation first.

    --json: {data_dir, counts: [{table, tenant, source, written, found}], notes, committed}."""
    from pagesight.services.db_migrate import database, migrate_from_sqlite

    settings = Settings()
    with _one_line_errors(), database(settings) as db:
        report = migrate_from_sqlite(data_dir, db, keys_file or settings.gateway.api_keys_file)
    if as_json:
        _emit_json(report.model_dump())
    else:
        _print_migration(report)
    for note in report.notes:
        err.print(f"note: {note}", markup=False)
    missing = report.mismatches
    if missing:
        where = ", ".join(f"{c.table}/{c.tenant} {c.found} of {c.source}" for c in missing[:5])
        raise PageSightError(
            ErrorCode.CONFLICT,
            Stage.DATABASE,
            f"verification failed, nothing was committed: source rows not found in PostgreSQL "
            f"({where}); rows the database already holds under the same keys differ",
        )
    if not as_json:
        err.print("verified: every source row is in PostgreSQL", markup=False)


def _print_migration(report: Any) -> None:
    from pagesight.services.db_migrate import TABLES

    out.print(f"{'table':<12} {'tenant':<20} {'source':>8} {'written':>8} {'found':>8}")
    for table in TABLES:
        rows = [c for c in report.counts if c.table == table]
        for c in rows:
            flag = "" if c.ok else "  MISSING"
            out.print(
                f"{table:<12} {c.tenant:<20} {c.source:>8} {c.written:>8} {c.found:>8}{flag}",
                markup=False,
            )
        if not rows:
            out.print(f"{table:<12} {'-':<20} {0:>8} {0:>8} {0:>8}", markup=False)


@contextlib.contextmanager
def _one_line_errors() -> Iterator[None]:
    """libpq's messages span lines (a DETAIL, a HINT): the CLI's error line is one line."""
    try:
        yield
    except PageSightError as exc:
        raise PageSightError(exc.code, exc.stage, " ".join(exc.message.split())) from None


# -- serve and demo -------------------------------------------------------------------------


@app.command()
def serve(
    config: Annotated[
        Path | None,
        typer.Option(help="a Serve config (pagesight/entrypoints/serve/*.yaml): its app args"),
    ] = None,
    host: Annotated[str | None, typer.Option(help="listen address")] = None,
    port: Annotated[int | None, typer.Option(help="listen port", min=1, max=65535)] = None,
    no_ray: Annotated[
        bool, typer.Option("--no-ray", help="one process (uvicorn), no Ray: for development")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help='status as JSON lines: {"event": "serving", "url"}')
    ] = False,
) -> None:
    """Run the gateway and the index service on this machine (embedded index by default), or
    deploy them onto a running Ray cluster (PAGESIGHT_SERVE__RAY_ADDRESS)."""
    from pagesight.gateway.auth import default_keys_file

    settings = Settings()
    keys = default_keys_file(settings)
    no_keys_configured = not settings.gateway.api_keys and settings.gateway.api_keys_file is None
    # With a database, keys live there (`pagesight keys new` writes them): nothing to check here.
    if no_keys_configured and settings.database_url is None:
        if not keys.exists():
            raise PageSightError(
                ErrorCode.UNAUTHORIZED,
                Stage.AUTH,
                f"no API keys: create one with `pagesight keys new --tenant <name>` (writes "
                f"{keys}), or set PAGESIGHT_GATEWAY__API_KEYS_FILE",
            )
        settings.gateway.api_keys_file = keys
    host = host or settings.serve.host
    port = port or settings.serve.port
    url = f"http://{host}:{port}"

    def status(event: str, message: str) -> None:
        if as_json:
            sys.stdout.write(json.dumps({"event": event, "url": url}) + "\n")
            sys.stdout.flush()
        else:
            err.print(message, markup=False)

    if no_ray:
        status("starting", f"serving on {url} (uvicorn, no Ray) ...")
        _serve_in_process(settings, host, port)
        return
    from pagesight.entrypoints.serve_app import run_local, shutdown_local

    args = _app_args(config, settings)
    status("starting", f"starting Ray Serve (about 30 s), then {url}/docs ...")
    try:
        run_local(
            args,
            host=host,
            port=port,
            num_cpus=settings.serve.num_cpus,
            object_store_mb=settings.serve.object_store_mb,
            timeout_s=settings.serve.start_timeout_s,
            address=settings.serve.ray_address,
            proxy_location=settings.serve.proxy_location,
        )
        status("serving", f"PageSight is serving on {url} (Ctrl-C stops)")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        status("stopping", "stopping ...")
    finally:
        shutdown_local()


def _app_args(config: Path | None, settings: Settings) -> AppArgs:
    """The app args of a Serve config file's first application, over this process' settings."""
    from pagesight.entrypoints.serve_app import AppArgs

    args = AppArgs()
    if config is not None:
        import yaml

        document = yaml.safe_load(config.read_text())
        args = AppArgs.model_validate(document["applications"][0].get("args") or {})
    merged = settings.model_dump(exclude_unset=False)
    merged.update(args.settings)
    return args.model_copy(update={"settings": merged})


def _serve_in_process(settings: Settings, host: str, port: int) -> None:
    import uvicorn

    from pagesight.core.tracing import configure_json_logging
    from pagesight.gateway.app import build_app
    from pagesight.gateway.auth import KeyRing
    from pagesight.gateway.backend import ServiceClient
    from pagesight.services.index_service import IndexService

    configure_json_logging()
    service = IndexService(settings)
    service.warm_up()
    keyring = KeyRing.from_settings(settings)

    def shutdown() -> None:
        service.close()
        keyring.close()

    gateway = build_app(
        ServiceClient.in_process(service), settings.gateway, keyring, on_shutdown=shutdown
    )
    uvicorn.run(gateway, host=host, port=port, log_config=None)


DEMO_QUERIES = (
    "How many parcels did Northwind move in 2024?",
    "revenue of the East region",
    "When is the next pump station inspection?",
)
#: The key ids `pagesight demo` gives its web UI keys (each demo revokes the previous one's).
DEMO_KEY_PREFIX = "demo-ui-"
DEMO_TENANT = "default"


def _demo_ui_key() -> tuple[str, str, str]:
    """A fresh read+write API key of the demo's tenant for the web UI: (key_id, key, where it
    is stored). Keys are kept as hashes only, so an earlier demo's key cannot be shown again:
    it is revoked and a new one made."""
    import secrets

    from pagesight.gateway.auth import new_key

    with _key_store(None) as store:
        for record in store.records():
            if record.key_id.startswith(DEMO_KEY_PREFIX) and record.revoked_at is None:
                store.revoke(record.key_id)
        key_id = f"{DEMO_KEY_PREFIX}{secrets.token_hex(4)}"
        key, record = new_key(key_id, DEMO_TENANT, [], ["read", "write"])
        store.add(record)
        return key_id, key, store.location


@app.command()
def demo(
    docs: Annotated[
        Path | None, typer.Option(help="folder of documents; default: generated samples")
    ] = None,
    as_json: Json = False,
) -> None:
    """Ingest a folder (or a generated sample set), show what was found, and search it; then
    make an API key for the web UI (tenant 'default', read+write; the previous demo key is
    revoked) and say where the UI is once `pagesight serve` runs.
    --json: {"jobs": [...], "searches": [{"query", "response"}], "ui": {url, key_id, key}}."""
    from pagesight.api.models import SearchRequest
    from pagesight.core.tracing import new_trace_id
    from pagesight.ingestion.samples import write_samples

    settings = Settings()
    if docs is None:
        files = write_samples(settings.data_dir / "samples")
        err.print(f"Generated {len(files)} sample documents in {settings.data_dir / 'samples'}")
    else:
        files = _expand([docs])
    found: list[JobStatus] = []
    searches: list[dict[str, Any]] = []
    with _session(None, None, ingest=True) as session:
        for path in files:
            submitted = session.submit_file(path, acl=[], password=None)
            job = submitted.job
            found.append(job if job.state.terminal else session.wait(job.job_id, 3600))
            (err if as_json else out).print(_job_line(found[-1]), markup=False)
        for query in DEMO_QUERIES if docs is None else ():
            request = SearchRequest(query=query, top_k=3)
            response = session.backend.search(session.caller, request, new_trace_id())
            searches.append({"query": query, "response": response.model_dump(mode="json")})
            if not as_json:
                out.print(f"\n[bold]search:[/bold] {query}")
                _print_hits(response)
    key_id, key, stored_in = _demo_ui_key()
    ui_url = f"http://{settings.serve.host}:{settings.serve.port}/ui"
    if as_json:
        _emit_json(
            {
                "jobs": [j.model_dump(mode="json") for j in found],
                "searches": searches,
                "ui": {"url": ui_url, "key_id": key_id, "key": key},
            }
        )
    else:
        if docs is not None:
            out.print('\nTry: .venv/bin/pagesight search "your question"')
        out.print("\n[bold]Web UI[/bold]")
        out.print(
            "Start the server with `make serve` (or `.venv/bin/pagesight serve`), then open\n"
            f"  {ui_url}\n"
            f"and paste this API key (tenant {DEMO_TENANT}, read+write; stored as a hash in "
            f"{stored_in}; shown only now; the next demo or `pagesight keys revoke {key_id}` "
            "revokes it):",
            markup=False,
        )
        out.print(f"  {key}", markup=False)
    _exit_for(sum(j.state == JobState.FAILED for j in found), len(found))


def main() -> None:  # pragma: no cover - console script entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
