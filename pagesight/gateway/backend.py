"""The service behind the gateway, as the routers see it: async calls of its protocol.

The routers never know whether the index service runs in this process (tests, the single-
process server) or in Ray Serve deployments: both are reached through :class:`ServiceClient`,
built with an *invoker* that turns ``(method name, args, kwargs)`` into an awaitable. In
process that is a call on a worker thread; under Ray it is ``handle.<method>.remote(...)`` on
the deployment that answers the method (:mod:`pagesight.entrypoints.serve_app`: reads go to
the Query deployment when there is one, by :func:`pagesight.api.protocols.is_read`).
:class:`pagesight.api.protocols.IndexBackend` is the interface the service implements
(``pagesight.services.index_service.IndexService``).

The client's methods are not written out: one is made for each method the protocol declares
(:func:`pagesight.api.protocols.backend_methods`), with the protocol's signature (checked on
every call, so a wrong call fails here, as a typed method's would) and docstring. A method
added to the protocol is a method of the client, with no edit here.

Streamed results (a method marked :func:`pagesight.api.protocols.streamed`: the streamed
answer) go through a *stream invoker* instead, which turns a generator method of the service
into an async iterator: in process, each ``next()`` runs on a worker thread
(:func:`iterate_on`); under Ray, ``handle.options(stream=True).<method>`` streams the items of
the deployment's generator method.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pagesight.api.protocols import IndexBackend, backend_methods, is_streamed
from pagesight.core.errors import ErrorCode, PageSightError, Stage

#: (method name, positional args, keyword args) -> the awaitable result
Invoker = Callable[[str, tuple[Any, ...], dict[str, Any]], Awaitable[Any]]
#: (generator method name, positional args, keyword args) -> its items, asynchronously
StreamInvoker = Callable[[str, tuple[Any, ...], dict[str, Any]], AsyncIterator[Any]]


class ServiceClient:
    """Async calls of an :class:`IndexBackend`, however it is reached: ``await
    client.search(caller, request, trace_id)``; a streamed method returns an async iterator
    whose first item asks the service (``client.answer_stream(...)``). Each method forwards
    its arguments as given, to the invoker (or the stream invoker) under its own name."""

    def __init__(self, invoke: Invoker, stream: StreamInvoker | None = None) -> None:
        self._invoke = invoke
        self._stream = stream or _no_streams

    @classmethod
    def in_process(cls, service: IndexBackend, threads: int = 8) -> ServiceClient:
        """Call ``service`` on a pool of worker threads (its methods block on I/O and models)."""
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pagesight-svc")

        async def invoke(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            method = getattr(service, name)
            return await asyncio.get_running_loop().run_in_executor(
                pool, lambda: method(*args, **kwargs)
            )

        def stream(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AsyncIterator[Any]:
            return iterate_on(pool, functools.partial(getattr(service, name), *args, **kwargs))

        return cls(invoke, stream)

    if TYPE_CHECKING:
        # The methods are made from the protocol below (so the type checker cannot see them):
        # each is ``async`` (a coroutine of the protocol's result), a streamed one returns an
        # async iterator of its items.
        def __getattr__(self, name: str) -> Any: ...


def _forwarding(name: str, declared: Callable[..., Any]) -> Callable[..., Any]:
    """``ServiceClient.<name>``: the protocol's method ``declared``, forwarded."""
    signature = inspect.signature(declared)
    method: Callable[..., Any]
    if is_streamed(name):

        def streaming(self: ServiceClient, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            signature.bind(self, *args, **kwargs)
            return self._stream(name, args, kwargs)

        method, signature = streaming, signature.replace(return_annotation="AsyncIterator[Any]")
    else:

        async def calling(self: ServiceClient, *args: Any, **kwargs: Any) -> Any:
            signature.bind(self, *args, **kwargs)
            return await self._invoke(name, args, kwargs)

        method = calling
    method.__name__ = name
    method.__qualname__ = f"{ServiceClient.__qualname__}.{name}"
    method.__doc__ = declared.__doc__ or f"``IndexBackend.{name}``, awaited."
    method.__signature__ = signature  # type: ignore[union-attr]
    return method


for _name, _declared in backend_methods(IndexBackend).items():
    setattr(ServiceClient, _name, _forwarding(_name, _declared))


_END = object()


async def iterate_on(pool: Executor, start: Callable[[], Iterator[Any]]) -> AsyncIterator[Any]:
    """The items of the blocking iterator ``start()`` returns, each ``next()`` run on ``pool``.

    Steps never overlap (each is awaited before the next is submitted), and all of them run in
    one copied context, so a context variable the generator sets (the trace id) holds across
    its steps whichever worker thread runs them. When this iterator is closed early (the client
    went away, a timeout), the generator is closed on the pool after any step still running,
    never concurrently with it: closing the answer generator closes the LLM's stream.
    """
    context = contextvars.copy_context()
    iterator = context.run(start)
    pending: Future[Any] | None = None
    try:
        while True:
            pending = pool.submit(functools.partial(context.run, _step, iterator))
            item = await asyncio.wrap_future(pending)
            pending = None
            if item is _END:
                return
            yield item
    finally:
        close = functools.partial(pool.submit, context.run, _close, iterator)
        if pending is None:
            close()
        else:  # a step is still running on a worker: close after it, not beside it
            pending.add_done_callback(lambda _done: close())


def _step(iterator: Iterator[Any]) -> Any:
    return next(iterator, _END)


def _close(iterator: Iterator[Any]) -> None:
    closer = getattr(iterator, "close", None)
    if closer is not None:
        closer()


async def _no_streams(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> AsyncIterator[Any]:
    """The stream invoker of a client built without one: streamed calls are unavailable."""
    raise PageSightError(
        ErrorCode.UNAVAILABLE, Stage.GATEWAY, f"this backend cannot stream ({name})"
    )
    yield  # pragma: no cover  (makes this an async generator)
