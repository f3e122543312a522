"""The gateway's routes, one module per area, each a module-level ``router``.

Handlers translate HTTP to a call and back; they take what they need (the service, the caller,
options, the serving objects) as dependencies from :mod:`pagesight.gateway.dependencies`, which
reads ``app.state`` as :func:`pagesight.gateway.app.build_app` set it up. A new endpoint is one
function here and, behind it, one method of the service
(:class:`pagesight.gateway.backend.ServiceClient`).

Paths are spelled in full (``f"{API_PREFIX}/..."``), not as a router prefix: the route the
request matched is what the metrics label it by (``scope["route"].path``), and FastAPI puts the
router's own route there, whose path a prefix would not be part of.
"""

from __future__ import annotations

from fastapi import APIRouter

from pagesight.gateway.routers import documents, openai, ops, search, ui

#: In the order their routes appear in the OpenAPI schema (the web UI's are not in it).
ROUTERS: tuple[APIRouter, ...] = (
    documents.router,
    search.router,
    openai.router,
    ops.router,
    ui.router,
)
