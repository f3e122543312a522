"""The gateway over a real index service, in this process: what the HTTP-level tests share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import FastAPI

from pagesight.core.settings import Settings
from pagesight.gateway.app import build_app
from pagesight.gateway.auth import KeyRing
from pagesight.gateway.backend import ServiceClient
from pagesight.services.index_service import IndexService


@contextmanager
def warm_service(settings: Settings) -> Iterator[IndexService]:
    """An index service over ``settings``, warmed up (models, index, ingest worker); closed
    after."""
    service = IndexService(settings)
    service.warm_up()
    try:
        yield service
    finally:
        service.close()


def gateway_app(service: IndexService) -> FastAPI:
    """The gateway over ``service``, called in process, with the keys of its settings."""
    gateway = service.settings.gateway
    return build_app(ServiceClient.in_process(service), gateway, KeyRing.from_options(gateway))
