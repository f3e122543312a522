"""Local servers for tests: :func:`serving` runs an ASGI app under uvicorn on a free 127.0.0.1
port in a background thread (the gateway in HTTP-level tests, the scripted OpenAI server);
:func:`free_port` names a port for a server a test starts as a process (PostgreSQL, Ray, vLLM,
``pagesight serve``)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal


def free_port() -> int:
    """A 127.0.0.1 port nothing listens on now (the OS's pick; free until someone binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(app: Any, lifespan: Literal["auto", "on", "off"] = "auto") -> Iterator[str]:
    """``app`` served until the block ends; its base URL (``http://127.0.0.1:<port>``)."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        app, log_level="warning", lifespan=lifespan, timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "test server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()
    assert not thread.is_alive(), "test server did not stop"
