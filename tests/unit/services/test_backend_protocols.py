"""Every way to reach the index service speaks its protocol, parameter for parameter.

The protocols (:mod:`pagesight.api.protocols`) are implemented three times: the service itself
(``IndexService``, and its two sides ``QueryService`` and ``DocumentService``), the gateway's
``ServiceClient`` (made from the protocol, async) and the command line's ``HttpBackend`` (over
the REST API). The type checker proves the return types; these tests prove what it does not see
(the client's methods are made at import time): that each exposes every method with the same
parameter names, kinds and defaults, that the client forwards calls as given, and that the
Serve application sends reads to the Query deployment and everything else to the writers.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any, cast

import pytest

from pagesight.api.protocols import (
    DocumentBackend,
    IndexBackend,
    QueryBackend,
    backend_methods,
    is_read,
    is_streamed,
)
from pagesight.entrypoints.cli_session import HttpBackend
from pagesight.entrypoints.serve_app import QUERY_METHODS, handle_for
from pagesight.gateway.backend import ServiceClient
from pagesight.services.document_service import DocumentService
from pagesight.services.index_service import IndexService
from pagesight.services.query_service import QueryService

IMPLEMENTATIONS: list[tuple[type, type]] = [
    (IndexService, IndexBackend),
    (ServiceClient, IndexBackend),
    (HttpBackend, IndexBackend),
    (QueryService, QueryBackend),
    (DocumentService, DocumentBackend),
]


def _parameters(function: Any) -> list[tuple[str, Any, Any]]:
    """Name, kind and default of each parameter (annotations are the type checker's)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize(
    ("implementation", "protocol"),
    IMPLEMENTATIONS,
    ids=[f"{impl.__name__}-{proto.__name__}" for impl, proto in IMPLEMENTATIONS],
)
def test_every_method_of_the_protocol_with_the_same_parameters(
    implementation: type, protocol: type
) -> None:
    declared = backend_methods(protocol)
    assert declared, protocol
    for name, method in declared.items():
        found = getattr(implementation, name, None)
        assert callable(found), f"{implementation.__name__} lacks {name}"
        assert _parameters(found) == _parameters(method), f"{implementation.__name__}.{name}"


def test_the_roles_split_the_union() -> None:
    """Every method is in exactly one role, or is the service's own (readiness, metrics)."""
    query, documents = set(backend_methods(QueryBackend)), set(backend_methods(DocumentBackend))
    assert not query & documents
    assert set(backend_methods(IndexBackend)) == query | documents | {"readiness", "metrics_text"}
    assert {"search", "answer", "answer_stream", "page_image"} <= query
    assert {"submit_upload", "submit_uri", "delete", "jobs", "audit"} <= documents


def test_the_client_is_async_and_streams_what_the_protocol_marks() -> None:
    for name in backend_methods(IndexBackend):
        method = getattr(ServiceClient, name)
        if is_streamed(name):
            assert inspect.isgeneratorfunction(getattr(IndexService, name)), name  # for Serve
            assert not inspect.iscoroutinefunction(method), name
        else:
            assert inspect.iscoroutinefunction(method), name
    assert [n for n in backend_methods(IndexBackend) if is_streamed(n)] == ["answer_stream"]


def test_the_client_forwards_calls_as_given_and_checks_them() -> None:
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    async def invoke(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        calls.append((name, args, kwargs))
        return name

    client = ServiceClient(invoke)

    async def scenario() -> list[Any]:
        return [
            await client.jobs("caller", 5, None),
            await client.submit_upload("caller", "a.pdf", b"x", acl=["g"], trace_id="t"),
            await client.readiness(),
        ]

    assert asyncio.run(scenario()) == ["jobs", "submit_upload", "readiness"]
    assert calls == [
        ("jobs", ("caller", 5, None), {}),
        ("submit_upload", ("caller", "a.pdf", b"x"), {"acl": ["g"], "trace_id": "t"}),
        ("readiness", (), {}),
    ]
    with pytest.raises(TypeError):
        asyncio.run(client.search("caller"))  # the protocol's signature, checked
    with pytest.raises(TypeError):
        asyncio.run(client.delete("caller", "d", unknown=1))
    assert len(calls) == 3  # neither reached the service
    with pytest.raises(AttributeError):
        client.not_a_method  # noqa: B018  # only the protocol's methods exist


def test_the_in_process_client_runs_the_service_and_its_streams() -> None:
    class Service:
        def job(self, caller: Any, job_id: str) -> str:
            return f"{caller}:{job_id}"

        def answer_stream(self, caller: Any, request: Any, trace_id: str) -> Iterator[str]:
            yield from (caller, request, trace_id)

    client = ServiceClient.in_process(cast(Any, Service()), threads=1)

    async def scenario() -> tuple[str, list[str]]:
        job = await client.job("me", "j1")
        return job, [item async for item in client.answer_stream("me", "q", "t")]

    assert asyncio.run(scenario()) == ("me:j1", ["me", "q", "t"])


def test_without_a_stream_invoker_streams_are_unavailable() -> None:
    async def invoke(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        raise AssertionError(name)

    async def scenario() -> None:
        async for _ in ServiceClient(invoke).answer_stream("caller", "q", "t"):
            pass

    with pytest.raises(Exception, match="cannot stream"):
        asyncio.run(scenario())


def test_reads_go_to_the_query_deployment_the_rest_to_the_writers() -> None:
    index, query = object(), object()
    for name in backend_methods(IndexBackend):
        expected = query if is_read(name) else index
        assert handle_for(name, index, query) is expected, name
        assert handle_for(name, index, None) is index, name
    assert {
        *backend_methods(QueryBackend),
        "job",
        "jobs",
        "audit",
    } == QUERY_METHODS
    assert not QUERY_METHODS & {"submit_upload", "submit_uri", "delete", "readiness"}
