"""The Ray Serve application: deployments wired from plain classes, decorators applied here only.

    HTTP ─ Gateway (FastAPI ingress, N replicas) ─┬─ IndexService (1 replica: owns the index,
                                                  │   catalog, traces, ingest worker)
                                                  │     ├─ Parser (CPU: render, layout, OCR)
                                                  │     ├─ TextEmbedder (ingestion batches)
                                                  │     └─ PageEmbedder (GPU, @serve.batch)
                                                  └─ (visual queries reach PageEmbedder via
                                                      IndexService)

A search costs one handle hop (gateway → index service): the query's text embedding runs in
the index service itself, cheaper than another hop (~9 ms each here). Putting the index
service inside the gateway replica (``index_placement: colocated``) saves that hop but makes
HTTP handling and search share one interpreter lock, which measured slower on two cores.
Ingestion is queued by the index service and runs on its worker thread, calling the parser and
the embedders.

Every class below is a thin shell: the logic is in :class:`services.index_service.IndexService`,
:func:`gateway.app.build_app`, the parser and the embedders, all testable without Ray.
``build_app`` is the import path the Serve config files name (``services/serve/*.yaml``);
:func:`run_local` is what ``pagesight serve`` calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field

from core.protocols import PageEmbedding
from core.settings import Settings
from core.types import ParsedDocument
from gateway.app import build_app as build_gateway
from gateway.auth import KeyRing
from gateway.backend import ServiceClient
from gateway.tracing import configure_json_logging
from ingestion.isolation import parse_isolated
from ingestion.pipeline import SourceInfo
from services.index_service import IndexService
from services.remote import RemotePageEmbedder, RemoteParser, RemoteTextEmbedder

log = logging.getLogger(__name__)

APP_NAME = "pagesight"
_CALL_TIMEOUT_S = 600.0  # an embedding call may wait for a replica that is (re)loading weights


class DeploymentResources(BaseModel):
    model_config = ConfigDict(extra="forbid")

    num_cpus: float = Field(default=0.5, ge=0)
    num_gpus: float = Field(default=0, ge=0)
    replicas: int = Field(default=1, ge=1)
    max_ongoing_requests: int = Field(default=32, ge=1)


class AppArgs(BaseModel):
    """Typed builder arguments (the ``args:`` of a Serve config's application)."""

    model_config = ConfigDict(extra="forbid")

    settings: dict[str, Any] = Field(
        default_factory=dict, description="Settings fields over the PAGESIGHT_* environment"
    )
    # The defaults are services/serve/local.yaml's: all five fit two cores.
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
    index_placement: Literal["colocated", "separate"] = Field(
        default="separate",
        description=(
            "separate: the index service is its own deployment behind N gateway replicas (one "
            "handle hop per call); colocated: it runs inside the single gateway replica (no "
            "hop, but HTTP and search then share one interpreter lock: 30 vs 35 req/s on two "
            "cores, bench/bench_gateway.py)"
        ),
    )
    page_batch_size: int = Field(default=16, ge=1, description="pages per @serve.batch call")
    page_batch_wait_s: float = Field(default=0.05, ge=0)

    def resolved_settings(self) -> Settings:
        return Settings(**self.settings)


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
        from models.text_embedder import SentenceTransformerEmbedder

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
        from models.colqwen import ColQwen2Embedder

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
    page_info = await page_embedder.describe.remote() if page_embedder is not None else None
    return {
        "parse": RemoteParser(parser, timeout_s=settings.limits.parse_timeout_s + 60),
        "ingest_embedder": RemoteTextEmbedder(text_embedder, text_info, _CALL_TIMEOUT_S),
        "page_embedder": (
            RemotePageEmbedder(page_embedder, page_info, _CALL_TIMEOUT_S)
            if page_embedder is not None and page_info is not None
            else None
        ),
    }


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

    def check_health(self) -> None:
        """Serve's health check: a dead ingest worker or a closed index restarts the replica."""
        _check(self)


class GatewayReplica:
    """The FastAPI ingress over the index service's deployment (one handle hop per call)."""

    def __init__(self, settings: Settings, index: Any) -> None:
        configure_json_logging()

        async def invoke(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            return await getattr(index, name).remote(*args, **kwargs)

        streaming = index.options(stream=True)

        async def stream(
            name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> AsyncIterator[Any]:
            # A generator method of the index service (IndexService.answer_stream: Serve runs
            # a sync generator on its thread pool), its items streamed back one by one.
            responses = getattr(streaming, name).remote(*args, **kwargs)
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
            ServiceClient(invoke, stream), settings.gateway, keyring, on_shutdown=keyring.close
        )

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

    def __serve_build_asgi_app__(self) -> Any:
        return self._app

    def check_health(self) -> None:
        _check(self.service)


def _check(service: IndexService) -> None:
    ready = service.readiness()
    if not ready.ready:
        raise RuntimeError(f"index service unhealthy: {ready.checks} {ready.detail}")


# -- builders ------------------------------------------------------------------------------------


def _options(resources: DeploymentResources) -> dict[str, Any]:
    return {
        "num_replicas": resources.replicas,
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
        options = _options(args.gateway) | {"num_replicas": 1, "health_check_period_s": 10}
        return serve.deployment(name="Gateway", **options)(
            serve.ingress()(GatewayIndexReplica)
        ).bind(*engines)
    index = serve.deployment(name="IndexService", health_check_period_s=10, **_options(args.index))(
        IndexReplica
    ).bind(*engines)
    gateway = serve.deployment(name="Gateway", **_options(args.gateway))(
        serve.ingress()(GatewayReplica)
    )
    return gateway.bind(settings, index)


def run_local(
    args: AppArgs,
    *,
    host: str,
    port: int,
    num_cpus: int | None,
    object_store_mb: int,
    timeout_s: float,
    log_to_driver: bool = True,
) -> None:
    """Start Ray on this machine and run the app; return once it answers (or raise).

    Serve's per-request access log is off: two lines per request per replica cost CPU that
    the gateway's metrics already account for; our own logs are JSON lines with trace ids.
    """
    import ray
    from ray import serve
    from ray.serve.schema import LoggingConfig

    ray.init(
        num_cpus=num_cpus,
        object_store_memory=object_store_mb * 1024 * 1024,
        include_dashboard=False,
        configure_logging=False,
        log_to_driver=log_to_driver,
    )
    serve.start(http_options={"host": host, "port": port})
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
        if status is not None and status.status == "RUNNING":
            return
        if status is not None and status.status in ("DEPLOY_FAILED", "UNHEALTHY"):
            raise RuntimeError(f"the application failed to start: {status.message}")
        time.sleep(0.5)
    raise TimeoutError(
        f"the application was not RUNNING after {timeout_s:g} s (do the replicas fit the CPUs?)"
    )


def shutdown_local() -> None:
    import ray
    from ray import serve

    try:
        serve.shutdown()
    finally:
        ray.shutdown()
