"""Operations: liveness, readiness and Prometheus metrics (no API key, by design)."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from pagesight.api.models import Readiness
from pagesight.gateway.dependencies import KeyRingDep, MetricsDep, ServiceDep
from pagesight.gateway.metrics import CONTENT_TYPE

log = logging.getLogger(__name__)

router = APIRouter(tags=["ops"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The gateway process answers (liveness)."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Readiness)
async def readyz(service: ServiceDep, keyring: KeyRingDep) -> JSONResponse:
    """Models loaded, index open, ingest worker alive (readiness)."""
    try:
        ready = await asyncio.wait_for(service.readiness(), 10)
    except Exception as exc:  # the service is not reachable: not ready, say why
        ready = Readiness(
            ready=False,
            checks={"index_service": False},
            detail={"error": f"{type(exc).__name__}: {exc}"},
        )
    # len() may re-read the key stores (a file, the database): not on the event loop
    ready.checks["api_keys_loaded"] = await run_in_threadpool(len, keyring) > 0
    ready.ready = ready.ready and ready.checks["api_keys_loaded"]
    return JSONResponse(ready.model_dump(), status_code=200 if ready.ready else 503)


@router.get("/metrics", response_class=Response)
async def prometheus_metrics(service: ServiceDep, metrics: MetricsDep) -> Response:
    text = metrics.render()
    try:
        text += await asyncio.wait_for(service.metrics_text(), 5)
    except Exception:  # the gateway's own series are still worth scraping
        log.warning("index service metrics unavailable", exc_info=True)
    if metrics.fleet is not None:  # under Ray Serve: every replica of every deployment
        text += await metrics.fleet.render()
    return Response(text, media_type=CONTENT_TYPE)
