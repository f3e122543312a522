"""Per-key concurrency limits: a client over its share gets a 429 with Retry-After at once.

Rejecting instead of queueing keeps one busy client from filling the gateway's event loop and
everyone's latency with it; the client's retry carries the backpressure. Counters live in the
replica (each gateway replica admits up to the limit), which is what a per-replica CPU budget
wants; a cluster-wide quota belongs in the API gateway in front.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pagesight.core.errors import ErrorCode, PageSightError, Stage


class ConcurrencyLimiter:
    def __init__(self, default_limit: int, retry_after_s: int = 1) -> None:
        self.default_limit = default_limit
        self.retry_after_s = retry_after_s
        self._in_flight: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def slot(self, key_id: str, limit: int | None = None) -> Iterator[None]:
        """Hold one of ``key_id``'s slots for the duration, or raise RATE_LIMITED."""
        allowed = limit or self.default_limit
        with self._lock:
            used = self._in_flight.get(key_id, 0)
            if used >= allowed:
                raise RateLimited(
                    f"API key {key_id!r} already has {allowed} requests in flight; retry later",
                    self.retry_after_s,
                )
            self._in_flight[key_id] = used + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._in_flight[key_id] - 1
                if left:
                    self._in_flight[key_id] = left
                else:
                    del self._in_flight[key_id]

    def in_flight(self, key_id: str) -> int:
        with self._lock:
            return self._in_flight.get(key_id, 0)


class RateLimited(PageSightError):
    """RATE_LIMITED, with the seconds the client should wait (the 429's Retry-After)."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(ErrorCode.RATE_LIMITED, Stage.GATEWAY, message)
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[type[RateLimited], tuple[str, int]]:  # type: ignore[override]
        return (type(self), (self.message, self.retry_after_s))
