"""Local servers for tests: :func:`serving` runs an ASGI app under uvicorn on a free 127.0.0.1
port in a background thread (the gateway in HTTP-level tests, the scripted OpenAI server);
:func:`free_port` names a port for a server a test starts as a process (PostgreSQL, Ray, vLLM);
:func:`free_ports` a run of them for ``pagesight serve`` on Ray."""

from __future__ import annotations

import random
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


#: Where :func:`free_ports` looks: above Ray's worker ports (10002-19999 by default) and below
#: the OS's ephemeral range (32768 up on Linux), which Ray's processes draw from as they start.
QUIET_PORTS = range(20000, 30000)


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive 127.0.0.1 ports nothing listens on now.

    For ``pagesight serve`` on Ray, whose gateway replicas and Serve's proxy bind ``port`` …
    ``port + replicas`` half a minute after the port was chosen, once Ray has started dozens
    of processes: an OS-picked port (:func:`free_port`) comes from the range those processes
    take theirs from, and one may hold it by then."""
    for _ in range(200):
        first = random.randrange(QUIET_PORTS.start, QUIET_PORTS.stop - count)  # noqa: S311
        if all(_bindable(port) for port in range(first, first + count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports in {QUIET_PORTS}")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


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
