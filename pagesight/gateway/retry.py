"""One retry of a read whose replica died under it: the gateway's only retry.

Why here: a Query replica killed (OOM, a node drained, ``kill -9``) fails the requests it was
running, though another replica could answer each of them at once. Ray Serve re-routes a request
only while no replica has accepted it; one that was running when its replica died comes back as
Ray's actor error. Reads (:func:`pagesight.api.protocols.is_read`: searches, answers, document,
job and trace reads) change nothing, so the gateway sends such a read once more, to a live
replica (Serve drops the dead one from routing when it sees the error). A write (upload, delete)
is not sent again: whether the dead replica applied it is unknown, so the caller gets 503
``UNAVAILABLE`` with ``Retry-After`` and decides (an upload sent again is ``unchanged`` if the
first one was stored). A read whose retry meets a dead replica too is also a 503, never a 500.

Streamed answers are not retried: their first events may already be with the client.

What counts as "the replica died" is the caller's (the Ray exception types live in
:mod:`pagesight.entrypoints.serve_app`, which builds the invoker): this module knows no Ray.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pagesight.api.protocols import is_read
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.gateway.backend import Invoker

log = logging.getLogger(__name__)

#: ``exc`` means the replica running the call died or cannot be reached
ReplicaLost = Callable[[BaseException], bool]


def retry_reads_once(invoke: Invoker, lost: ReplicaLost) -> Invoker:
    """``invoke``, with a read sent once more when ``lost(error)`` says its replica died, and
    a lost replica answered as 503 UNAVAILABLE instead of an internal error."""

    async def invoking(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return await invoke(name, args, kwargs)
        except Exception as exc:
            if not lost(exc):
                raise
            if not is_read(name):
                raise _replica_gone(name, exc) from None
            log.warning(
                "the replica running %s died; sending it once more",
                name,
                extra={"method": name, "error": type(exc).__name__},
            )
        try:
            return await invoke(name, args, kwargs)
        except Exception as exc:
            if lost(exc):
                raise _replica_gone(name, exc) from None
            raise

    return invoking


def _replica_gone(name: str, exc: BaseException) -> PageSightError:
    return PageSightError(
        ErrorCode.UNAVAILABLE,
        Stage.GATEWAY,
        f"the replica serving {name} went away ({type(exc).__name__}); try again",
    )
