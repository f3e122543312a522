"""What the ``pagesight`` commands share: the consoles (results on ``out``, progress and errors
on ``err``), the exit codes, the one-line error (:func:`describe_error`), JSON output, the
options several commands take, and the one line per ingest job.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.types import DocumentState, JobState, JobStatus

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


# -- files and jobs ------------------------------------------------------------------------


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
    """``STATE  name  doc_id  detail``: one line per job, columns aligned. A READY job whose
    document a re-index left out shows the document's state, MISSING: its chunks are in no
    live index, whatever the job once wrote."""
    if job.state == JobState.READY and job.document_state == DocumentState.MISSING:
        state = DocumentState.MISSING.value
        detail = "left out by a re-index (file gone or changed): not searchable; ingest it again"
    elif job.state == JobState.READY:
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
