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

The commands live beside this module, by what they do: :mod:`~pagesight.entrypoints.cli_index`
(parse, sync, bulk, reindex, rollback), :mod:`~pagesight.entrypoints.cli_admin` (keys, db,
serve); here are the app, its session, and the commands that go through it (ingest, jobs, delete,
search, answer, demo). :mod:`~pagesight.entrypoints.cli_common` holds what they share,
:mod:`~pagesight.entrypoints.cli_print` the human form of hits and answers.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import Settings
from pagesight.core.tracing import redact_secrets
from pagesight.core.types import JobState, JobStatus, RouteName
from pagesight.entrypoints.cli_admin import _key_store, db_app, keys_app, serve
from pagesight.entrypoints.cli_common import (
    EXIT_FAILED,
    Acl,
    ApiKey,
    Json,
    Password,
    Principal,
    Server,
    Tenant,
    _api_error_type,
    _emit_json,
    _exit_for,
    _expand,
    _job_line,
    _print_jobs,
    describe_error,
    err,
    out,
)
from pagesight.entrypoints.cli_index import bulk, parse, reindex, rollback, sync
from pagesight.entrypoints.cli_print import _cited_names, _print_answer, _print_hits

#: ``--doc ID|FILE``, repeatable: search or answer in those documents only.
Doc = Annotated[
    list[str] | None,
    typer.Option(
        "--doc",
        help="only this document: its id, or the file it was ingested from (path or file "
        "name); repeat for several",
        show_default=False,
    ),
]

if TYPE_CHECKING:
    from pagesight.api.models import Submitted
    from pagesight.core.types import Document


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
        line = f"{record.levelname.lower()}: {redact_secrets(record.getMessage())}"
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


# -- ingest, jobs, delete ------------------------------------------------------------------


def ingest(  # noqa: PLR0913  # a Typer command: each parameter is one CLI option
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


# -- search and answer ---------------------------------------------------------------------


def search(  # noqa: PLR0913  # a Typer command: each parameter is one CLI option
    query: Annotated[str, typer.Argument(help="the question or keywords")],
    top_k: Annotated[int, typer.Option(help="pages to return", min=1, max=100)] = 10,
    route: Annotated[RouteName, typer.Option(help="retrieval route")] = RouteName.AUTO,
    tenant: Tenant = None,
    principal: Principal = None,
    doc: Doc = None,
    as_json: Json = False,
    server: Server = None,
    api_key: ApiKey = None,
) -> None:
    """Search the index and print ranked pages with doc, page and snippet; --doc searches in
    those documents only (a document id, or a file: its document, by path or file name).

    --json: the API's search response {trace_id, route, hits: [{doc_id, page_number, rank,
    score, route_scores, snippet, title, source_uri, kinds, chunk_ids, element_ids, evidence,
    page_image_url}], elapsed_ms}."""
    from pagesight.api.models import SearchRequest
    from pagesight.core.tracing import new_trace_id

    with _session(server, api_key, tenant, principal) as session:
        filters = {"doc_ids": _scope(session, doc)} if doc else {}
        request = SearchRequest.model_validate(
            {"query": query, "route": route, "top_k": top_k, "filters": filters}
        )
        response = session.backend.search(session.caller, request, new_trace_id())
    if as_json:
        sys.stdout.write(response.model_dump_json(indent=1) + "\n")
    else:
        _print_hits(response)


def answer(  # noqa: PLR0913  # a Typer command: each parameter is one CLI option
    question: Annotated[str, typer.Argument(help="the question")],
    route: Annotated[RouteName, typer.Option(help="retrieval route")] = RouteName.AUTO,
    policy: Annotated[
        str,
        typer.Option(help="standard, or strict: uncited sentences dropped, weak evidence abstains"),
    ] = "standard",
    tenant: Tenant = None,
    principal: Principal = None,
    doc: Doc = None,
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

    with _session(server, api_key, tenant, principal) as session:
        filters = {"doc_ids": _scope(session, doc)} if doc else {}
        request = AnswerRequest.model_validate(
            {"query": question, "route": route, "policy": policy, "filters": filters}
        )
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


def _scope(session: Any, given: list[str]) -> list[str]:
    """The document ids of ``--doc`` values, among the documents the session's caller may
    read (the backend applies tenant and ACL): an id as it is; a file by its path (the
    document ingested from it), else by its file name when exactly one document has it. An
    unknown or ambiguous value is an error naming it, never an unscoped search."""
    documents: list[Document] = session.backend.documents(session.caller)
    by_id = {d.doc_id for d in documents}
    found: list[str] = []
    for value in given:
        if value in by_id:
            found.append(value)
            continue
        path = Path(value).expanduser()
        uri = path.resolve().as_uri() if path.exists() else None
        located = [d for d in documents if uri is not None and d.source_uri == uri]
        named = located or [d for d in documents if d.source_name == path.name]
        if len(named) > 1:
            ids = ", ".join(sorted(d.doc_id for d in named)[:5])
            raise PageSightError(
                ErrorCode.INVALID_REQUEST,
                Stage.INPUT,
                f"--doc {value}: {len(named)} documents are named {path.name} ({ids}); "
                "give the document id",
            )
        if not named:
            raise PageSightError(
                ErrorCode.NOT_FOUND,
                Stage.INPUT,
                f"--doc {value}: no document with this id or file that you may read "
                "(see `pagesight search` or `pagesight jobs` for ids)",
            )
        found.append(named[0].doc_id)
    return list(dict.fromkeys(found))


# -- demo -----------------------------------------------------------------------------------


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


# -- the commands, in the order `pagesight --help` lists them -------------------------------

app.command()(parse)
app.command()(ingest)
app.command()(sync)
app.command()(bulk)
app.command()(reindex)
app.command()(rollback)
app.command()(jobs)
app.command()(delete)
app.command()(search)
app.command()(answer)
app.command()(serve)
app.command()(demo)
app.add_typer(keys_app, name="keys")
app.add_typer(db_app, name="db")


def main() -> None:  # pragma: no cover - console script entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
