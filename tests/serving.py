"""The gateway over a real index service, in this process: what the HTTP-level tests share."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from core.settings import Settings
from gateway.app import build_app
from gateway.auth import KeyRing
from gateway.backend import ServiceClient
from services.index_service import IndexService


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


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """``app`` under uvicorn on a free port, in a thread; its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "gateway did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()
