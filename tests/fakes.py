"""Test doubles shared by the answer and corrective-retrieval tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.types import AccessFilter, Candidates, Passage, RetrievalTrace, RouteName


class TableSearch:
    """The candidate search (:data:`query.answer.CandidateSearch`) answered from a table.

    A call looks up ``(query, route, n)``, then ``(query, route)``, then ``query`` (with its
    whitespace collapsed: a rewritten query may differ from the table's only in spaces), else
    ``default``, and returns the first ``n`` passages with a search trace naming ``version``.
    Every call is recorded: ``(query, route, n)`` in ``calls``, its access filter in
    ``accesses``.
    """

    def __init__(
        self,
        table: dict[Any, Sequence[Passage]] | None = None,
        *,
        default: Sequence[Passage] = (),
        version: str | None = "chunks__v1",
    ) -> None:
        self.table = table or {}
        self.default = list(default)
        self.version = version
        self.calls: list[tuple[str, RouteName, int]] = []
        self.accesses: list[AccessFilter] = []

    def __call__(self, query: str, access: AccessFilter, route: RouteName, n: int) -> Candidates:
        self.calls.append((query, route, n))
        self.accesses.append(access)
        key = " ".join(query.split())
        found = self.table.get(
            (key, route, n), self.table.get((key, route), self.table.get(key, self.default))
        )
        passages = list(found)[:n]
        trace = RetrievalTrace(
            trace_id="search",
            query=query,
            requested_route=route,
            route=route,
            index_version=self.version,
            doc_ids=sorted({p.doc_id for p in passages}),
        )
        return Candidates(passages, trace)
