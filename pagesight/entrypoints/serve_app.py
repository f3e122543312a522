"""The Ray Serve application: deployments wired from plain classes, decorators applied here only.

    HTTP ─ Gateway (FastAPI ingress, N replicas) ─┬─ IndexService (the writers: uploads, deletes,
                                                  │   the ingest worker; owns the embedded index)
                                                  │     ├─ Parser (CPU: render, layout, OCR)
                                                  │     ├─ TextEmbedder (ingestion batches)
                                                  │     └─ PageEmbedder (GPU, @serve.batch)
                                                  └─ Query (read_path: query; N replicas,
                                                      autoscaled): searches, answers, reads

``read_path`` says where reads run. ``index`` (the default, one machine): everything goes to
the index service. ``query``: searches, answers (with their LLM calls), page images, documents,
jobs and traces run in the Query deployment, which reads PostgreSQL directly (it needs
``PAGESIGHT_DATABASE_URL``) and the index: a Qdrant server directly, the embedded engine
through the index service, its only owner (:mod:`pagesight.index.forwarded`). Uploads and deletes
stay with the index service; with a Qdrant server and PostgreSQL it may have any number of replicas
(jobs are claimed in the database), on the embedded engine exactly one.

A search costs one handle hop (gateway → index service or query): the query's text embedding
runs where the search runs, cheaper than another hop (~9 ms each here). Putting the index
service inside the gateway replica (``index_placement: colocated``, the one-machine profile)
saves that hop; HTTP handling and search then share one interpreter lock, which measured slower
behind Serve's proxy but fastest with direct ingress (:func:`direct_ingress_environment`).
Ingestion is queued by the index service and runs on its worker thread, calling the parser and
the embedders.

Every class below is a thin shell: the logic is in
:class:`pagesight.services.index_service.IndexService` (the composition of
:class:`~pagesight.services.query_service.QueryService`,
:class:`~pagesight.services.document_service.DocumentService` and
:class:`~pagesight.services.ingest_worker.IngestWorker`),
:func:`pagesight.gateway.app.build_app`, the parser and the embedders, all testable without Ray.
The gateway's :class:`pagesight.gateway.backend.ServiceClient` is made from the protocol
(:mod:`pagesight.api.protocols`); :func:`handle_for` sends each of its calls to a deployment by
the same protocol's marks, so a new method of the protocol needs no edit here.
``build_app`` is the import path the Serve config files name
(``pagesight/entrypoints/serve/*.yaml``);
:func:`run_local` is what ``pagesight serve`` calls.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagesight.api.protocols import IndexBackend, backend_methods, is_read
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.protocols import PageEmbedding
from pagesight.core.settings import Settings
from pagesight.core.tracing import configure_json_logging
from pagesight.core.types import ParsedDocument
from pagesight.entrypoints.fleet_metrics import (
    RegistryExport,
    export_replica_metrics,
    node_metrics_urls,
)
from pagesight.gateway.app import build_app as build_gateway
from pagesight.gateway.auth import KeyRing
from pagesight.gateway.backend import ServiceClient
from pagesight.gateway.metrics import FleetScrape, GatewayMetrics
from pagesight.gateway.retry import retry_reads_once
from pagesight.index.base import IndexSchema, VectorStore
from pagesight.index.forwarded import ForwardedVectorStore
from pagesight.ingestion.isolation import parse_isolated
from pagesight.ingestion.pipeline import SourceInfo
from pagesight.services.index_service import IndexService
from pagesight.services.remote import RemotePageEmbedder, RemoteParser, RemoteTextEmbedder
from pagesight.services.stack import StoreOpener

log = logging.getLogger(__name__)

APP_NAME = "pagesight"
_CALL_TIMEOUT_S = 600.0  # an embedding call may wait for a replica that is (re)loading weights


#: the index service's methods a Query deployment answers when ``read_path`` is ``query``: those
#: that only read (:func:`pagesight.api.protocols.is_read`: every ``QueryBackend`` method, and the
#: job and audit listings); uploads and deletes stay with the writers, as do readiness and metrics
QUERY_METHODS = frozenset(name for name in backend_methods(IndexBackend) if is_read(name))


def handle_for(method: str, index: Any, query: Any | None) -> Any:
    """The deployment that answers ``method`` of :class:`pagesight.api.protocols.IndexBackend`: the
    Query deployment for reads when there is one, else the index service."""
    return query if query is not None and method in QUERY_METHODS else index


class Autoscaling(BaseModel):
    """Serve's ``autoscaling_config`` for one deployment: replicas follow ongoing requests."""

    model_config = ConfigDict(extra="forbid")

    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(default=4, ge=1)
    target_ongoing_requests: float = Field(
        default=2.0, gt=0, description="requests in flight per replica that Serve aims for"
    )
    upscale_delay_s: float = Field(default=30.0, ge=0)
    downscale_delay_s: float = Field(default=600.0, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.min_replicas > self.max_replicas:
            raise ValueError("autoscaling.min_replicas is above max_replicas")
        return self


class DeploymentResources(BaseModel):
    model_config = ConfigDict(extra="forbid")

    num_cpus: float = Field(default=0.5, ge=0)
    num_gpus: float = Field(default=0, ge=0)
    replicas: int = Field(default=1, ge=1, description="fixed replica count (no autoscaling)")
    max_ongoing_requests: int = Field(default=32, ge=1)
    autoscaling: Autoscaling | None = Field(
        default=None, description="replicas follow the load within these bounds (not replicas)"
    )

    @property
    def most_replicas(self) -> int:
        return self.autoscaling.max_replicas if self.autoscaling else self.replicas


class AppArgs(BaseModel):
    """Typed builder arguments (the ``args:`` of a Serve config's application)."""

    model_config = ConfigDict(extra="forbid")

    settings: dict[str, Any] = Field(
        default_factory=dict, description="Settings fields over the PAGESIGHT_* environment"
    )
    # The defaults are pagesight/entrypoints/serve/local.yaml's: all five fit two cores.
    gateway: DeploymentResources = Field(default_factory=lambda: DeploymentResources(num_cpus=0.25))
    index: DeploymentResources = Field(
        default_factory=lambda: DeploymentResources(max_ongoing_requests=64)
    )
    parser: DeploymentResources = Field(default_factory=DeploymentResources)
    text_embedder: DeploymentResources = Field(
        default_factory=lambda: DeploymentResources(num_cpus=0.25)
    )
    page_embedder: DeploymentResources = Field(
        default_factory=lambda: DeploymentResources(num_cpus=0.5, num_gpus=0)
    )
    query: DeploymentResources = Field(
        default_factory=DeploymentResources, description="the Query deployment (read_path query)"
    )
    read_path: Literal["index", "query"] = Field(
        default="index",
        description=(
            "index: the index service answers reads too (one machine); query: searches, answers "
            "and other reads run in the Query deployment (needs PAGESIGHT_DATABASE_URL)"
        ),
    )
    index_placement: Literal["colocated", "separate"] = Field(
        default="separate",
        description=(
            "separate: the index service is its own deployment behind N gateway replicas (one "
            "handle hop per call); colocated: it runs inside the single gateway replica (no "
            "hop: with direct ingress the fastest on one machine, 1.2x separate's req/s on "
            "two cores, bench/bench_gateway.py)"
        ),
    )
    page_batch_size: int = Field(default=16, ge=1, description="pages per @serve.batch call")
    page_batch_wait_s: float = Field(default=0.05, ge=0)

    @property
    def most_gateway_replicas(self) -> int:
        """Gateway replicas there can be: one when the index service is colocated in it."""
        return 1 if self.index_placement == "colocated" else self.gateway.most_replicas

    def resolved_settings(self) -> Settings:
        return Settings(**self.settings)

    def check(self, settings: Settings) -> None:
        """Refuse a layout the stores cannot serve (before any replica starts)."""
        from pagesight.index.factory import index_backend

        embedded = index_backend(settings) == "edge"
        if self.read_path == "query":
            if settings.database_url is None:
                raise ValueError(
                    "read_path 'query' needs PAGESIGHT_DATABASE_URL: query replicas and the "
                    "writers share catalog, jobs and traces through PostgreSQL"
                )
            if self.index_placement == "colocated":
                raise ValueError("read_path 'query' needs index_placement 'separate'")
        if self.index.most_replicas > 1 and (embedded or settings.database_url is None):
            raise ValueError(
                "more than one IndexService replica needs a Qdrant server (PAGESIGHT_QDRANT_URL) "
                "and PostgreSQL (PAGESIGHT_DATABASE_URL): the embedded index and SQLite catalog "
                "have one writer"
            )


# -- deployment shells ---------------------------------------------------------------------------


class ParserReplica:
    """Renders and parses one file per call, in a child process with time and memory limits."""

    def __init__(self, settings: Settings) -> None:
        configure_json_logging()
        self.settings = settings

    def parse(self, path: str, source: SourceInfo | None) -> ParsedDocument:
        return parse_isolated(Path(path), self.settings, source)


class TextEmbedderReplica:
    """The dense text model for ingestion batches (queries are embedded in the index service)."""

    def __init__(self, settings: Settings) -> None:
        from pagesight.models.text_embedder import SentenceTransformerEmbedder

        configure_json_logging()
        self.embedder = SentenceTransformerEmbedder(settings.embedder)
        self.embedder.warm_up()

    def describe(self) -> dict[str, Any]:
        languages = self.embedder.languages
        return {
            "model_id": self.embedder.model_id,
            "dim": self.embedder.dim,
            "languages": None if languages is None else sorted(languages),
        }

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return self.embedder.embed_documents(texts)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.embedder.embed_query(text)


class PageEmbedderReplica:
    """ColQwen2 pages and queries; the builder wraps the ``*_batch`` methods in ``serve.batch``
    so single-page calls from many jobs and queries share forward passes."""

    def __init__(self, settings: Settings) -> None:
        from pagesight.models.colqwen import ColQwen2Embedder

        configure_json_logging()
        self.embedder = ColQwen2Embedder(settings.visual)
        self.embedder.warm_up()

    def describe(self) -> dict[str, Any]:
        return {"model_id": self.embedder.model_id, "dim": self.embedder.dim}

    async def embed_page_batch(self, images: list[Image.Image]) -> list[PageEmbedding]:
        return await asyncio.to_thread(self.embedder.embed_pages, images)

    async def embed_query_batch(self, texts: list[str]) -> list[npt.NDArray[np.float32]]:
        return await asyncio.to_thread(self.embedder.embed_queries, texts)


async def _remote_engines(
    settings: Settings, parser: Any, text_embedder: Any, page_embedder: Any | None
) -> dict[str, Any]:
    """The index service's engines as adapters over their deployments' handles.

    Called from a replica's (async) constructor, which runs on the replica's event loop: the
    handles' ``describe()`` are awaited here; the adapters block only later, on worker threads.
    """
    text_info = await text_embedder.describe.remote()
    return {
        "parse": RemoteParser(parser, timeout_s=settings.limits.parse_timeout_s + 60),
        "ingest_embedder": RemoteTextEmbedder(text_embedder, text_info, _CALL_TIMEOUT_S),
        "page_embedder": await _remote_page_embedder(page_embedder),
    }


async def _remote_page_embedder(handle: Any | None) -> RemotePageEmbedder | None:
    """The page embedder deployment behind the local protocol (None: no visual model)."""
    if handle is None:
        return None
    return RemotePageEmbedder(handle, await handle.describe.remote(), _CALL_TIMEOUT_S)


class IndexReplica(IndexService):
    """The index service as its own deployment (``index_placement: separate``)."""

    async def __init__(  # type: ignore[misc]  # Serve awaits an async constructor
        self,
        settings: Settings,
        parser: Any,
        text_embedder: Any,
        page_embedder: Any | None,
    ) -> None:
        configure_json_logging()
        engines = await _remote_engines(settings, parser, text_embedder, page_embedder)
        super().__init__(settings, **engines)
        await asyncio.to_thread(self.warm_up)
        self._metrics_export = export_replica_metrics(self.metrics.registry)

    def check_health(self) -> None:
        """Serve's health check: a dead ingest worker or a closed index restarts the replica."""
        _check(self)


class QueryReplica(IndexService):
    """The read path as its own deployment (``read_path: query``): searches and answers (with
    their rerankers and LLM calls) run here, on N replicas, with no ingest worker. The catalog
    and traces are PostgreSQL's; the index is the Qdrant server's, or on the embedded engine
    the index service's, read through it (:mod:`pagesight.index.forwarded`)."""

    async def __init__(  # type: ignore[misc]  # Serve awaits an async constructor
        self, settings: Settings, index: Any, page_embedder: Any | None
    ) -> None:
        from pagesight.index.factory import index_backend

        configure_json_logging()
        open_store = None
        if index_backend(settings) == "edge":
            open_store = _forwarded_stores(index, await index.index_schemas.remote(), settings)
        super().__init__(
            settings,
            page_embedder=await _remote_page_embedder(page_embedder),
            open_store=open_store,
        )
        await asyncio.to_thread(self.warm_up, False)
        # this replica's search-stage histograms, in the fleet's scrape next to the others'
        self._metrics_export = export_replica_metrics(self.metrics.registry)

    def check_health(self) -> None:
        _check(self)


def _forwarded_stores(
    index: Any, owned: dict[str, tuple[IndexSchema, str]], settings: Settings
) -> StoreOpener:
    """Opens each index as a :class:`ForwardedVectorStore` reading through ``index`` (the
    index service's handle), after checking it has the schema this replica needs."""

    def open_store(name: str, schema: IndexSchema) -> VectorStore:
        if name not in owned:
            raise PageSightError(
                ErrorCode.INDEX_FAILED, Stage.INDEX, f"the index service has no index {name!r}"
            )
        stored, collection = owned[name]
        stored.require_same(schema, collection)

        def call(primitive: str, args: tuple[Any, ...]) -> Any:
            return index.read_index.remote(name, primitive, args).result(timeout_s=_CALL_TIMEOUT_S)

        return ForwardedVectorStore(
            stored,
            call,
            owner="the IndexService deployment",
            collection=collection,
            check_s=settings.index.alias_check_s,
        )

    return open_store


class GatewayReplica:
    """The FastAPI ingress over the index service's deployment, and the Query deployment's for
    reads when there is one (one handle hop per call)."""

    def __init__(self, settings: Settings, index: Any, query: Any | None = None) -> None:
        configure_json_logging()

        def target(name: str) -> Any:
            return handle_for(name, index, query)

        async def invoke(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            return await getattr(target(name), name).remote(*args, **kwargs)

        async def stream(
            name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> AsyncIterator[Any]:
            # A generator method of the index service (IndexService.answer_stream: Serve runs
            # a sync generator on its thread pool), its items streamed back one by one.
            responses = getattr(target(name).options(stream=True), name).remote(*args, **kwargs)
            finished = False
            try:
                async for item in responses:
                    yield item
                finished = True
            finally:
                if not finished:  # the client went away: stop forwarding, ask Ray to cancel
                    responses.cancel()

        keyring = KeyRing.from_settings(settings)
        self._app = build_gateway(
            # a read whose Query replica died under it goes once more to another (gateway.retry)
            ServiceClient(retry_reads_once(invoke, _replica_lost), stream),
            settings.gateway,
            keyring,
            on_shutdown=keyring.close,
        )
        self._metrics_export = _fleet_metrics(self._app)

    def __serve_build_asgi_app__(self) -> Any:
        return self._app


class GatewayIndexReplica:
    """The FastAPI ingress with the index service in its own process (``colocated``): no hop
    on the query path. One replica only: it is the embedded index's single writer."""

    async def __init__(  # type: ignore[misc]  # Serve awaits an async constructor
        self, settings: Settings, parser: Any, text_embedder: Any, page_embedder: Any | None
    ) -> None:
        configure_json_logging()
        engines = await _remote_engines(settings, parser, text_embedder, page_embedder)
        self.service = IndexService(settings, **engines)
        await asyncio.to_thread(self.service.warm_up)
        keyring = KeyRing.from_settings(settings)

        def shutdown() -> None:
            self.service.close()
            keyring.close()

        self._app = build_gateway(
            ServiceClient.in_process(self.service), settings.gateway, keyring, on_shutdown=shutdown
        )
        self._metrics_export = _fleet_metrics(self._app, self.service.metrics.registry)

    def __serve_build_asgi_app__(self) -> Any:
        return self._app

    def check_health(self) -> None:
        _check(self.service)


def _replica_lost(exc: BaseException) -> bool:
    """Ray's word that the replica running a call died or cannot be reached (a kill, a lost
    node), also when it reaches us through the replica that called it."""
    from ray.exceptions import RayActorError

    return isinstance(exc, RayActorError) or isinstance(getattr(exc, "cause", None), RayActorError)


def _fleet_metrics(app: Any, *registries: Any) -> RegistryExport | None:
    """The gateway's ``/metrics`` also reads every Ray node's export (the whole fleet:
    :class:`~pagesight.gateway.metrics.FleetScrape`), and this replica's registries go there."""
    metrics: GatewayMetrics = app.state.metrics
    metrics.fleet = FleetScrape(node_metrics_urls)
    return export_replica_metrics(metrics.registry, *registries)


def _check(service: IndexService) -> None:
    ready = service.readiness()
    if not ready.ready:
        raise RuntimeError(f"index service unhealthy: {ready.checks} {ready.detail}")


# -- builders ------------------------------------------------------------------------------------


#: The gateway replica's environment: Serve runs its handlers on the replica's own event loop
#: (uvloop) instead of a second asyncio loop in a thread of its own. The gateway's handlers never
#: block (the index service and key reloads run on worker threads), and each request then
#: skips two cross-thread hops: ``make bench-gateway`` measured served ÷ in-process 0.94 / 0.95
#: / 0.91 with it against 0.87 / 0.89 / 0.89 without, runs interleaved (README, "Gateway
#: throughput"). Serve reads it when the replica's process starts, hence the runtime_env.
GATEWAY_REPLICA_ENV = {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0"}


def _gateway_options(resources: DeploymentResources) -> dict[str, Any]:
    """:func:`_options` with :data:`GATEWAY_REPLICA_ENV`."""
    options = _options(resources)
    options["ray_actor_options"]["runtime_env"] = {"env_vars": dict(GATEWAY_REPLICA_ENV)}
    return options


def _options(resources: DeploymentResources) -> dict[str, Any]:
    replicas: dict[str, Any] = (
        {"autoscaling_config": resources.autoscaling.model_dump()}
        if resources.autoscaling is not None
        else {"num_replicas": resources.replicas}
    )
    return replicas | {
        "max_ongoing_requests": resources.max_ongoing_requests,
        "ray_actor_options": {"num_cpus": resources.num_cpus, "num_gpus": resources.num_gpus},
    }


def _batched_page_embedder(args: AppArgs) -> type:
    """PageEmbedderReplica with ``embed_page`` / ``embed_query`` as ``@serve.batch`` methods."""
    from ray import serve

    batch = serve.batch(
        max_batch_size=args.page_batch_size, batch_wait_timeout_s=args.page_batch_wait_s
    )

    async def embed_page(self: PageEmbedderReplica, images: list[Image.Image]) -> Any:
        return await self.embed_page_batch(images)

    async def embed_query(self: PageEmbedderReplica, texts: list[str]) -> Any:
        return await self.embed_query_batch(texts)

    return type(
        "PageEmbedder",
        (PageEmbedderReplica,),
        {"embed_page": batch(embed_page), "embed_query": batch(embed_query)},
    )


def build_app(args: AppArgs | dict[str, Any] | None = None) -> Any:
    """The whole application, ready for ``serve.run`` (or a Serve config's ``import_path``)."""
    from ray import serve

    args = args if isinstance(args, AppArgs) else AppArgs.model_validate(args or {})
    settings = args.resolved_settings()
    args.check(settings)
    parser = serve.deployment(name="Parser", **_options(args.parser))(ParserReplica).bind(settings)
    text_embedder = serve.deployment(name="TextEmbedder", **_options(args.text_embedder))(
        TextEmbedderReplica
    ).bind(settings)
    page_embedder = None
    if settings.visual.active:
        page_embedder = serve.deployment(name="PageEmbedder", **_options(args.page_embedder))(
            _batched_page_embedder(args)
        ).bind(settings)
    engines = (settings, parser, text_embedder, page_embedder)
    if args.index_placement == "colocated":
        options = _gateway_options(
            args.gateway.model_copy(update={"autoscaling": None, "replicas": 1})
        )
        options["health_check_period_s"] = 10
        return serve.deployment(name="Gateway", **options)(
            serve.ingress()(GatewayIndexReplica)
        ).bind(*engines)
    index = serve.deployment(name="IndexService", health_check_period_s=10, **_options(args.index))(
        IndexReplica
    ).bind(*engines)
    query = None
    if args.read_path == "query":
        query = serve.deployment(name="Query", health_check_period_s=10, **_options(args.query))(
            QueryReplica
        ).bind(settings, index, page_embedder)
    gateway = serve.deployment(name="Gateway", **_gateway_options(args.gateway))(
        serve.ingress()(GatewayReplica)
    )
    return gateway.bind(settings, index, query)


def run_local(  # noqa: PLR0913  # pagesight serve's options, all keyword-only
    args: AppArgs,
    *,
    host: str,
    port: int,
    num_cpus: int | None,
    object_store_mb: int,
    timeout_s: float,
    log_to_driver: bool = True,
    address: str | None = None,
    proxy_location: str = "HeadOnly",
    ingress: Literal["proxy", "direct"] = "proxy",
) -> None:
    """Start Ray on this machine (or join the cluster at ``address``) and run the app; return
    once it answers (or raise).

    ``ingress="direct"``: the gateway replicas serve HTTP themselves, the first on ``port``
    (:func:`direct_ingress_environment`); it needs the Ray this call starts, as Serve reads
    the switch from the environment of its processes when they start.

    Serve's per-request access log is off: two lines per request per replica cost CPU that
    the gateway's metrics already account for; our own logs are JSON lines with trace ids.
    The replicas get this process's settings (``build_app`` resolves them here and binds
    them), so on a cluster the ``PAGESIGHT_*`` environment of this process is what counts.
    """
    import ray
    from ray import serve
    from ray.serve.schema import LoggingConfig

    if ingress == "direct":
        if address is not None:
            raise ValueError(
                "direct ingress needs a Ray started by this command (not ray_address): "
                "Serve reads it from the environment its processes start with"
            )
        os.environ.update(direct_ingress_environment(port, args.most_gateway_replicas))
    else:  # the setting decides, not what an earlier run in this process left behind
        for name in direct_ingress_environment(port, 1):
            os.environ.pop(name, None)
    if address is not None:
        ray.init(address=address, configure_logging=False, log_to_driver=log_to_driver)
    else:
        ray.init(
            # "local": a Ray of our own even when this machine has a cluster running (ray.init()
            # alone would join the one /tmp/ray/ray_current_cluster names)
            address="local",
            num_cpus=num_cpus,
            object_store_memory=object_store_mb * 1024 * 1024,
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=log_to_driver,
        )
    # Direct ingress: the gateway replicas bind port ...; the proxy Serve still starts on the
    # head node takes the port after theirs.
    proxy_port = port + args.most_gateway_replicas if ingress == "direct" else port
    serve.start(proxy_location=proxy_location, http_options={"host": host, "port": proxy_port})
    started = time.monotonic()
    # run_many can return before the app is RUNNING: serve.run would wait forever for replicas
    # that do not fit the machine, so the deadline below is ours.
    serve.run_many(
        [
            serve.RunTarget(
                target=build_app(args),
                name=APP_NAME,
                route_prefix="/",
                logging_config=LoggingConfig(encoding="JSON", enable_access_log=False),
            )
        ],
        wait_for_applications_running=False,
    )
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        status = serve.status().applications.get(APP_NAME)
        running = status is not None and status.status == "RUNNING"
        # direct: RUNNING can come a moment before the replica's own server listens
        if running and (ingress == "proxy" or _listening(host, port)):
            return
        if status is not None and status.status in ("DEPLOY_FAILED", "UNHEALTHY"):
            raise RuntimeError(f"the application failed to start: {status.message}")
        time.sleep(0.5)
    raise TimeoutError(
        f"the application was not RUNNING after {timeout_s:g} s (do the replicas fit the CPUs?)"
    )


def direct_ingress_environment(port: int, replicas: int) -> dict[str, str]:
    """The environment that turns on Serve's direct ingress (Ray 2.60, experimental) for a
    Ray started with it: ``replicas`` gateway replicas listen on ``port`` … ``port + replicas
    - 1`` (its port range for HTTP), and a stopping replica drains for 1 s instead of 30 s (the
    30 s are for an external load balancer to notice it; on one machine there is none). A port
    a replica released goes straight back to the pool: Serve would keep it out for 150 s (for
    that same load balancer), and as the range holds one port per replica, a gateway replica
    that died could not be replaced for that long. Serve still starts a proxy on the head
    node; :func:`run_local` gives it ``port + replicas``.

    What it saves: Serve's HTTP proxy is a process of its own that parses each request and
    passes it to a gateway replica over Ray; here the replica's own uvicorn does both. On two
    cores, where proxy, gateway, search and clients share the CPU, ``make bench-gateway``
    measured 1.2-1.4x the requests per second with it (README, "Gateway throughput").
    """
    return {
        "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1",
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(port),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(port + replicas),
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "1",
        "RAY_SERVE_PORT_QUARANTINE_S": "0",
    }


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def shutdown_local() -> None:
    import ray
    from ray import serve

    try:
        serve.shutdown()
    finally:
        ray.shutdown()
