"""Running and administering the service: ``pagesight keys`` (API keys), ``pagesight db`` (the
cluster profile's database) and ``pagesight serve`` (registered on the app by
:mod:`pagesight.entrypoints.cli`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import Settings
from pagesight.entrypoints.cli_common import EXIT_FAILED, Json, _emit_json, err, out

if TYPE_CHECKING:
    from pagesight.entrypoints.serve_app import AppArgs
    from pagesight.store.key_stores import KeyStore


# -- keys -----------------------------------------------------------------------------------


keys_app = typer.Typer(help="API keys of the gateway.", no_args_is_help=True)

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


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Option(help="schema revision to reach")] = "head",
    as_json: Json = False,
) -> None:
    """Migrate the database's schema (safe while replicas run: one migrates, the others wait
    and find nothing to do), and on a Qdrant server the live version of every index the
    models need. --json: {"before": ..., "after": ..., "collections": {index: version}}."""
    from pagesight.services.db_migrate import database, upgrade_schema

    settings = Settings()
    # The migrate Job may start before PostgreSQL does: it waits, saying why at each attempt.
    with _one_line_errors(), database(settings, wait_s=settings.database.connect_wait_s) as db:
        result = upgrade_schema(db, revision)
    # On a Qdrant server the collections too, before any replica starts and races to make them.
    from pagesight.services.reindex_job import create_collections

    with _one_line_errors():
        collections = create_collections(settings)
    if as_json:
        _emit_json({**result.model_dump(), "collections": collections})
        return
    if result.changed:
        out.print(f"schema {result.before or 'empty'} -> {result.after}", markup=False)
    else:
        out.print(f"schema already at {result.after}: nothing to do", markup=False)
    for index, version in collections.items():
        out.print(f"{index} index: live version {version}", markup=False)


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


# -- serve ----------------------------------------------------------------------------------


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
    if settings.database_url is not None:
        # A server may start before its database: wait for it (bounded), saying why at each try.
        from pagesight.store.postgres import conninfo, reach

        dsn = conninfo(settings.database_url.get_secret_value(), settings.database)
        reach(dsn, settings.database, wait_s=settings.database.connect_wait_s)
    host = host or settings.serve.host
    port = port or settings.serve.port
    url = f"http://{host}:{port}"
    events = _events_stream() if as_json else None

    def status(event: str, message: str) -> None:
        if events is not None:
            events.write(json.dumps({"event": event, "url": url}) + "\n")
            events.flush()
        else:
            err.print(message, markup=False)

    if no_ray:
        status("starting", f"serving on {url} (uvicorn, no Ray) ...")
        _serve_in_process(settings, host, port, status)
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
            ingress=settings.serve.resolved_ingress,
        )
        # SIGTERM (a container stop, systemd, kill) takes the path Ctrl-C does: Serve and the
        # Ray this process started are shut down, its agents included. Set after Ray started:
        # ray.init installs a handler of its own that exits at once.
        signal.signal(signal.SIGTERM, _interrupt)
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


def _events_stream() -> TextIO:
    """``--json``: standard output carries the status events and nothing else. Everything else
    this process and its children write there (Ray forwards its workers' and raylet's lines to
    the driver's stdout) goes to standard error: file descriptor 1 becomes a copy of 2, and
    the events are written to a duplicate of the original."""
    sys.stdout.flush()
    try:
        out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError):  # io.UnsupportedOperation: streams without descriptors
        return sys.stdout
    events = os.fdopen(os.dup(out_fd), "w", buffering=1, encoding="utf-8")
    os.dup2(err_fd, out_fd)
    return events


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _serve_in_process(
    settings: Settings, host: str, port: int, status: Callable[[str, str], None]
) -> None:
    """The gateway and the service in this process (uvicorn): ``serving`` once it listens,
    ``stopping`` when SIGTERM or SIGINT arrives; requests in flight get ``serve.grace_s``."""
    import uvicorn

    from pagesight.core.tracing import configure_json_logging
    from pagesight.gateway.app import build_app
    from pagesight.gateway.auth import KeyRing
    from pagesight.gateway.backend import ServiceClient
    from pagesight.services.index_service import IndexService

    # The server's log is JSON lines, once: the command line's one-line handler goes.
    configure_json_logging(exclusive=True)
    service = IndexService(settings)
    service.warm_up()
    keyring = KeyRing.from_settings(settings)

    def shutdown() -> None:
        service.close()
        keyring.close()

    gateway = build_app(
        ServiceClient.in_process(service), settings.gateway, keyring, on_shutdown=shutdown
    )
    url = f"http://{host}:{port}"

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                status("serving", f"PageSight is serving on {url} (Ctrl-C stops)")

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if not self.should_exit:
                status("stopping", "stopping ...")
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        gateway,
        host=host,
        port=port,
        log_config=None,
        timeout_graceful_shutdown=max(1, round(settings.serve.grace_s)),
    )
    Server(config).run()
