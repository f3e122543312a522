"""The ``pagesight`` command line.

Each command is thin: it builds settings, calls the stage it names, and prints. Parsing always
runs through :func:`ingestion.isolation.parse_isolated`, so a hostile file fails alone, with its
stage error code, while the rest of a batch carries on.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
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

from core.errors import PageSightError
from core.settings import Settings
from core.types import (
    AccessFilter,
    IngestJob,
    JobState,
    JobStatus,
    ParsedDocument,
    RouteName,
    SearchResult,
)

if TYPE_CHECKING:
    from gateway.client import PageSightClient
    from gateway.protocol import SearchResponse
    from ingestion.ingest import IngestProgress, IngestRequest
    from services.app import AppArgs
    from services.stack import LocalStack

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


def _expand(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(
                sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            )
        else:
            files.append(path)
    return files


def _stack(settings: Settings) -> LocalStack:
    from services.stack import LocalStack

    try:
        return LocalStack(settings)
    except PageSightError as exc:
        console.print(f"[red]{exc.stage.value}/{exc.code.value}: {exc.message}")
        raise typer.Exit(code=1) from exc


def _run_ingest(stack: LocalStack, requests: list[IngestRequest]) -> list[IngestJob]:
    with _progress() as bar:
        overall = bar.add_task("files", total=len(requests))
        current: dict[str, TaskID] = {}

        def report(job: IngestJob, done: int, total: int) -> None:
            if job.job_id not in current:
                current[job.job_id] = bar.add_task(Path(job.path).name, total=total)
            bar.update(current[job.job_id], completed=done, total=total)

        jobs = []
        for request in requests:
            jobs.extend(stack.ingestor.ingest([request], progress=report))
            bar.advance(overall)
            for task in current.values():
                bar.remove_task(task)
            current.clear()
    return jobs


def _print_jobs(jobs: Sequence[JobStatus]) -> None:
    out = Console(highlight=False, soft_wrap=True)
    for job in jobs:
        if job.state == JobState.READY:
            status = "[green]unchanged[/green]" if job.unchanged else "[green]READY[/green]"
            detail = f"{job.pages} pages, {job.chunks} chunks" if not job.unchanged else ""
        else:
            status = f"[red]{job.state.value}[/red]"
            detail = f"{job.error_stage}/{job.error_code}: {job.error_message}"
        name = (
            job.source_uri.removeprefix("upload:")
            if job.source_uri.startswith("upload:")
            else Path(urlsplit(job.source_uri).path).name or job.source_uri
        )
        out.print(f"{status:<22} {name}  doc_id={job.doc_id}  {detail}")


Tenant = Annotated[str, typer.Option(help="tenant that owns the documents")]
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


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="files or folders")],
    tenant: Tenant = "default",
    acl: Acl = None,
    password: Annotated[str | None, typer.Option(help="password for encrypted PDFs")] = None,
    server: Server = None,
    api_key: ApiKey = None,
) -> None:
    """Parse, chunk, embed and index files (re-running unchanged files does nothing)."""
    if server:
        _remote_ingest(server, api_key, _expand(paths), acl or [])
        return
    settings = Settings()
    with _stack(settings) as stack:
        resumed = stack.ingestor.resume()
        if resumed:
            console.print(f"resumed {len(resumed)} unfinished job(s) from an earlier run")
            _print_jobs(resumed)
        requests = [stack.request(p, tenant, acl, password) for p in _expand(paths)]
        jobs = _run_ingest(stack, requests)
    _print_jobs(jobs)
    failed = sum(j.state == JobState.FAILED for j in jobs)
    if failed:
        raise typer.Exit(code=1 if failed == len(jobs) else 2)


@app.command()
def sync(
    folder: Annotated[Path, typer.Argument(help="folder whose files the tenant should have")],
    tenant: Tenant = "default",
    acl: Acl = None,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty",
            help="let a FOLDER with no files delete every document that came from it",
        ),
    ] = False,
) -> None:
    """Ingest new or changed files under FOLDER and delete the tenant's documents that came from
    FOLDER but are no longer in it (uploads and other folders' documents are kept).

    A FOLDER that cannot be listed, or an empty one while documents from it are indexed
    (without --allow-empty), deletes nothing and exits with code 1.
    """
    settings = Settings()
    with _stack(settings) as stack, _progress() as bar:
        try:
            report = stack.ingestor.sync(
                folder, tenant, acl, progress=_file_bars(bar), allow_empty=allow_empty
            )
        except PageSightError as exc:
            # markup=False: a path in the message may contain [brackets].
            console.print(
                f"{exc.stage.value}/{exc.code.value}: {exc.message}",
                style="red",
                markup=False,
                soft_wrap=True,
            )
            raise typer.Exit(code=1) from exc
    _print_jobs(report.ingested)
    out = Console(highlight=False, soft_wrap=True)
    for doc_id in report.deleted:
        out.print(f"deleted {doc_id} (no longer in {folder})", markup=False)
    if any(j.state == JobState.FAILED for j in report.ingested):
        raise typer.Exit(code=1)


def _file_bars(bar: Progress) -> IngestProgress:
    """Per-file progress for :meth:`Ingestor.sync` (a file's bar goes when the next reports)."""
    current: dict[str, TaskID] = {}

    def report(job: IngestJob, done: int, total: int) -> None:
        if job.job_id not in current:
            for task in current.values():
                bar.remove_task(task)
            current.clear()
            current[job.job_id] = bar.add_task(Path(job.path).name, total=total)
        bar.update(current[job.job_id], completed=done, total=total)

    return report


@app.command()
def jobs(
    tenant: Annotated[str | None, typer.Option(help="only this tenant")] = None,
    state: Annotated[JobState | None, typer.Option(help="only this state")] = None,
    limit: Annotated[int, typer.Option(help="newest N jobs")] = 50,
    server: Server = None,
    api_key: ApiKey = None,
) -> None:
    """List ingest jobs, newest first."""
    from ingestion.catalog import Catalog

    if server:
        with _remote(server, api_key) as client:
            _print_jobs(client.jobs(limit, state))
        return
    settings = Settings()
    catalog = Catalog(settings.data_dir / "catalog.sqlite3")
    try:
        _print_jobs(catalog.jobs(tenant, [state] if state else None, limit))
    finally:
        catalog.close()


@app.command()
def delete(
    doc_id: Annotated[str, typer.Argument(help="document id (see `pagesight search` or jobs)")],
    tenant: Tenant = "default",
    server: Server = None,
    api_key: ApiKey = None,
) -> None:
    """Delete a document: its points, catalog rows and page images."""
    if server:
        with _remote(server, api_key) as client:
            client.delete(doc_id)
        console.print(f"deleted {doc_id}")
        return
    settings = Settings()
    with _stack(settings) as stack:
        from services.stack import cli_actor

        found = stack.ingestor.delete(tenant, doc_id, actor=cli_actor(), via="cli")
    if not found:
        console.print(f"[red]input/NOT_FOUND: no document {doc_id} for tenant {tenant}")
        raise typer.Exit(code=1)
    console.print(f"deleted {doc_id}")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="the question or keywords")],
    top_k: Annotated[int, typer.Option(help="pages to return")] = 10,
    route: Annotated[RouteName, typer.Option(help="retrieval route")] = RouteName.AUTO,
    tenant: Tenant = "default",
    principal: Annotated[
        list[str] | None, typer.Option(help="caller's principal (repeatable); none = no ACL")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="hits and trace as JSON")] = False,
    server: Server = None,
    api_key: ApiKey = None,
) -> None:
    """Search the index and print ranked pages with doc, page and snippet."""
    if server:
        with _remote(server, api_key) as client:
            response = client.search(query, route=route, top_k=top_k)
        if as_json:
            sys.stdout.write(response.model_dump_json(indent=1) + "\n")
        else:
            _print_remote_hits(response)
        return
    settings = Settings()
    access = AccessFilter(tenant=tenant, principals=principal)
    with _stack(settings) as stack:
        result = stack.search(query, access, route, top_k)
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=1) + "\n")
        return
    _print_hits(result)


def _print_hits(result: SearchResult) -> None:
    out = Console(highlight=False, soft_wrap=True)
    trace = result.trace
    routes = ", ".join(
        f"{t.route}" + (f" (skipped: {t.skipped})" if t.skipped else f" {len(t.candidates)}")
        for t in trace.routes
    )
    took = f"{trace.elapsed_ms:.0f} ms"
    out.print(f"[dim]route {trace.route.value} — {routes} — {took} — trace {trace.trace_id}[/dim]")
    if not result.hits:
        out.print("no matching pages")
    for hit in result.hits:
        name = Path(hit.source_uri or hit.doc_id).name
        kinds = ", ".join(hit.kinds)
        out.print(
            f"[bold]{hit.rank:>2}. {name}  page {hit.page_number}[/bold]  "
            f"score {hit.score:.4f}  {kinds}"
        )
        out.print(f"    {hit.snippet}")


# -- remote mode (the gateway owns the index) ---------------------------------------------


def _remote(server: str, api_key: str | None) -> PageSightClient:
    from gateway.client import PageSightClient

    if not api_key:
        console.print("[red]auth/UNAUTHORIZED: --api-key (or PAGESIGHT_API_KEY) is required")
        raise typer.Exit(code=1)
    return PageSightClient(server, api_key=api_key)


def _remote_ingest(server: str, api_key: str | None, files: list[Path], acl: list[str]) -> None:
    from gateway.client import ApiError

    failed = 0
    with _remote(server, api_key) as client, _progress() as bar:
        task = bar.add_task("files", total=len(files))
        for path in files:
            try:
                job = client.wait_for_job(client.upload(path, acl=acl).job_id, timeout_s=3600)
            except ApiError as exc:
                console.print(f"[red]{path.name}: {exc.stage}/{exc.code}: {exc.message}")
                failed += 1
            else:
                _print_jobs([job])
                failed += job.state == JobState.FAILED
            bar.advance(task)
    if failed:
        raise typer.Exit(code=1 if failed == len(files) else 2)


def _print_remote_hits(response: SearchResponse) -> None:
    out = Console(highlight=False, soft_wrap=True)
    out.print(
        f"[dim]route {response.route.value} — {response.elapsed_ms:.0f} ms — "
        f"trace {response.trace_id}[/dim]"
    )
    if not response.hits:
        out.print("no matching pages")
    for hit in response.hits:
        name = Path(hit.source_uri or hit.doc_id).name
        out.print(
            f"[bold]{hit.rank:>2}. {name}  page {hit.page_number}[/bold]  score {hit.score:.4f}"
        )
        out.print(f"    {hit.snippet}")


# -- serving ------------------------------------------------------------------------------


keys_app = typer.Typer(help="API keys of the gateway.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")


def _default_keys_file(settings: Settings) -> Path:
    return settings.gateway.api_keys_file or settings.data_dir / "api-keys.json"


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
    keys_file: Annotated[
        Path | None, typer.Option(help="JSON keys file; default: <data_dir>/api-keys.json")
    ] = None,
) -> None:
    """Create an API key: its hash goes into the keys file, the key is printed once. A running
    gateway picks it up within PAGESIGHT_GATEWAY__KEYS_RELOAD_S seconds (default 2)."""
    import secrets

    from core.settings import ALL_SCOPES
    from gateway.auth import FileKeyStore, new_key

    scopes = scope or list(ALL_SCOPES)
    unknown = sorted(set(scopes) - set(ALL_SCOPES))
    if unknown:
        console.print(f"[red]input/INVALID_REQUEST: unknown scope {unknown[0]!r} (read, write)")
        raise typer.Exit(code=1)
    store = FileKeyStore(keys_file or _default_keys_file(Settings()))
    key_id = key_id or f"key-{secrets.token_hex(4)}"
    key, record = new_key(key_id, tenant, principal, [s for s in ALL_SCOPES if s in scopes])
    try:
        store.add(record)
    except PageSightError as exc:
        console.print(f"[red]{exc.stage.value}/{exc.code.value}: {exc.message}")
        raise typer.Exit(code=1) from exc
    console.print(
        f"added {key_id} (tenant {tenant}, {'+'.join(record.scopes)}) to {store.path}; "
        "the key, shown only now:"
    )
    sys.stdout.write(key + "\n")


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="the key's id (see `pagesight keys list`)")],
    keys_file: Annotated[
        Path | None, typer.Option(help="JSON keys file; default: <data_dir>/api-keys.json")
    ] = None,
) -> None:
    """Revoke a key: a running gateway refuses it within the keys reload interval."""
    from gateway.auth import FileKeyStore

    store = FileKeyStore(keys_file or _default_keys_file(Settings()))
    if not store.revoke(key_id):
        console.print(f"[red]auth/NOT_FOUND: no active key {key_id!r} in {store.path}")
        raise typer.Exit(code=1)
    console.print(f"revoked {key_id}")


@keys_app.command("list")
def keys_list(
    keys_file: Annotated[
        Path | None, typer.Option(help="JSON keys file; default: <data_dir>/api-keys.json")
    ] = None,
) -> None:
    """The keys in the keys file: id, tenant, principals, scopes, revoked (never the key)."""
    from gateway.auth import FileKeyStore

    out = Console(highlight=False, soft_wrap=True)
    for record in FileKeyStore(keys_file or _default_keys_file(Settings())).records():
        revoked = f"  revoked {record.revoked_at:%Y-%m-%d %H:%M}" if record.revoked_at else ""
        out.print(
            f"{record.key_id}  tenant={record.tenant}  scopes={'+'.join(record.scopes)}  "
            f"principals={','.join(record.principals) or '-'}{revoked}"
        )


@app.command()
def serve(
    config: Annotated[
        Path | None, typer.Option(help="a Serve config (services/serve/*.yaml): its app args")
    ] = None,
    host: Annotated[str | None, typer.Option(help="listen address")] = None,
    port: Annotated[int | None, typer.Option(help="listen port")] = None,
    no_ray: Annotated[
        bool, typer.Option("--no-ray", help="one process (uvicorn), no Ray: for development")
    ] = False,
) -> None:
    """Run the gateway and the index service on this machine (embedded index by default)."""
    settings = Settings()
    keys = _default_keys_file(settings)
    if not settings.gateway.api_keys and settings.gateway.api_keys_file is None:
        if not keys.exists():
            console.print(
                "[red]no API keys: create one with `pagesight keys new --tenant <name>` "
                f"(writes {keys}), or set PAGESIGHT_GATEWAY__API_KEYS_FILE"
            )
            raise typer.Exit(code=1)
        settings.gateway.api_keys_file = keys
    host = host or settings.serve.host
    port = port or settings.serve.port
    if no_ray:
        _serve_in_process(settings, host, port)
        return
    import time

    from services.app import run_local, shutdown_local

    args = _app_args(config, settings)
    console.print(f"starting Ray Serve (about 30 s), then http://{host}:{port}/docs ...")
    try:
        run_local(
            args,
            host=host,
            port=port,
            num_cpus=settings.serve.num_cpus,
            object_store_mb=settings.serve.object_store_mb,
            timeout_s=settings.serve.start_timeout_s,
        )
        console.print(f"[green]PageSight is serving on http://{host}:{port}[/green] (Ctrl-C stops)")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        console.print("stopping ...")
    finally:
        shutdown_local()


def _app_args(config: Path | None, settings: Settings) -> AppArgs:
    """The app args of a Serve config file's first application, over this process' settings."""
    from services.app import AppArgs

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

    from gateway.app import create_app
    from gateway.auth import KeyRing
    from gateway.backend import ServiceClient
    from gateway.tracing import configure_json_logging
    from services.index_service import IndexService

    configure_json_logging()
    service = IndexService(settings)
    service.warm_up()
    gateway = create_app(
        ServiceClient.in_process(service),
        settings.gateway,
        KeyRing.from_options(settings.gateway),
        on_shutdown=service.close,
    )
    uvicorn.run(gateway, host=host, port=port, log_config=None)


DEMO_QUERIES = (
    "How many parcels did Northwind move in 2024?",
    "revenue of the East region",
    "When is the next pump station inspection?",
)


@app.command()
def demo(
    docs: Annotated[
        Path | None, typer.Option(help="folder of documents; default: generated samples")
    ] = None,
) -> None:
    """Ingest a folder (or a generated sample set), show what was found, and search it."""
    from ingestion.samples import write_samples

    settings = Settings()
    if docs is None:
        files = write_samples(settings.data_dir / "samples")
        console.print(f"Generated {len(files)} sample documents in {settings.data_dir / 'samples'}")
    else:
        files = _expand([docs])
    out = Console(highlight=False, soft_wrap=True)
    with _stack(settings) as stack:
        jobs = _run_ingest(stack, [stack.request(p) for p in files])
        _print_jobs(jobs)
        for job in jobs:
            if job.state != JobState.READY:
                continue
            pages = stack.catalog.pages(job.tenant, job.doc_id)
            kinds = Counter(
                kind
                for point in stack.store.points_of_document(job.tenant, job.doc_id)
                for kind in point.payload.get("kinds", [])
            )
            out.print(
                f"  {Path(job.path).name}: {len(pages)} pages "
                f"({sum(not p.has_text_layer for p in pages)} OCR), chunks by kind: {dict(kinds)}"
            )
        queries = DEMO_QUERIES if docs is None else ()
        for query in queries:
            out.print(f"\n[bold]search:[/bold] {query}")
            _print_hits(stack.search(query, AccessFilter(tenant="default"), top_k=3))
    if docs is not None:
        out.print('\nTry: .venv/bin/pagesight search "your question"')


def main() -> None:  # pragma: no cover - console script entry
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
