"""503s worth a retry: Retry-After on every one (a database outage included), and the gateway's
single retry of a read whose replica died under it (:mod:`pagesight.gateway.retry`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pagesight.api.models import API_PREFIX
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import GatewayOptions
from pagesight.gateway.app import build_app
from pagesight.gateway.auth import KeyRing, new_key
from pagesight.gateway.backend import ServiceClient
from pagesight.gateway.retry import retry_reads_once


class ReplicaDied(Exception):
    """Stands for Ray's actor error (the predicate below is the only thing that knows it)."""


def _lost(exc: BaseException) -> bool:
    return isinstance(exc, ReplicaDied)


class Scripted:
    """An invoker answering each call with the next outcome of its script (an exception is
    raised), recording the method names."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[str] = []

    async def __call__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.calls.append(name)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def _run(invoke: Any, name: str) -> Any:
    return asyncio.run(invoke(name, (), {}))


def test_a_read_whose_replica_died_is_sent_once_more() -> None:
    script = Scripted(ReplicaDied("killed"), ["doc"])
    assert _run(retry_reads_once(script, _lost), "documents") == ["doc"]
    assert script.calls == ["documents", "documents"]


def test_a_second_lost_replica_is_a_503_not_a_third_try() -> None:
    script = Scripted(ReplicaDied("killed"), ReplicaDied("again"), ["never"])
    with pytest.raises(PageSightError) as err:
        _run(retry_reads_once(script, _lost), "search")
    assert (err.value.code, err.value.stage) == (ErrorCode.UNAVAILABLE, Stage.GATEWAY)
    assert "went away" in err.value.message
    assert script.calls == ["search", "search"]


def test_a_write_is_never_sent_twice() -> None:
    script = Scripted(ReplicaDied("killed"), "never")
    with pytest.raises(PageSightError) as err:
        _run(retry_reads_once(script, _lost), "delete")
    assert err.value.code == ErrorCode.UNAVAILABLE
    assert script.calls == ["delete"]


def test_other_errors_pass_through_untried() -> None:
    missing = PageSightError(ErrorCode.NOT_FOUND, Stage.QUERY, "no such document")
    script = Scripted(missing)
    with pytest.raises(PageSightError) as err:
        _run(retry_reads_once(script, _lost), "document")
    assert err.value is missing and script.calls == ["document"]


@pytest.mark.parametrize(
    ("code", "stage"),
    [(ErrorCode.DATABASE_UNAVAILABLE, Stage.DATABASE), (ErrorCode.UNAVAILABLE, Stage.GATEWAY)],
)
def test_every_503_says_when_to_retry(code: ErrorCode, stage: Stage) -> None:
    key, record = new_key("k", "tenant-a")
    down = PageSightError(code, stage, "database unreachable: connection refused")
    service = ServiceClient(Scripted(down))
    app = build_app(service, GatewayOptions(retry_after_s=3), KeyRing([record]))
    with TestClient(app) as http:
        response = http.get(f"{API_PREFIX}/documents", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 503
    assert response.headers["retry-after"] == "3"
    error = response.json()["error"]
    assert (error["code"], error["stage"]) == (code.value, stage.value)
    assert "Traceback" not in response.text
