"""Test doubles shared by the answer, corrective-retrieval and planner tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pagesight.core.types import (
    AccessFilter,
    Candidates,
    ChatMessage,
    ChatResult,
    Passage,
    RetrievalTrace,
    RouteName,
)


class ScriptedChat:
    """A :class:`pagesight.core.protocols.ChatModel` that replies from a script: ``pick(messages,
    schema_name)`` gives a parsed JSON reply, an exception to raise, or a callable of the
    messages giving either. Every call is recorded (thread-safe: CRAG grades in parallel)."""

    def __init__(
        self,
        pick: Callable[[Sequence[ChatMessage], str], Any],
        model: str = "scripted",
        tokens: tuple[int | None, int | None] = (None, None),
    ) -> None:
        self.pick = pick
        self.model = model
        self.tokens = tokens
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @classmethod
    def by_schema(cls, **replies: Any) -> ScriptedChat:
        """``replies[schema_name]`` answers each call."""
        return cls(lambda _messages, name: replies[name])

    @classmethod
    def in_order(cls, *replies: Any) -> ScriptedChat:
        """The replies in turn; a call past the last fails the test."""
        queue = list(replies)

        def pick(_messages: Sequence[ChatMessage], _name: str) -> Any:
            if not queue:
                raise AssertionError("the LLM was called more often than scripted")
            return queue.pop(0)

        return cls(pick)

    @classmethod
    def by_question(cls, replies: dict[str, Any], model: str = "scripted") -> ScriptedChat:
        """``replies[question]``, the question being the last message after 'Question: '."""

        def pick(messages: Sequence[ChatMessage], _name: str) -> Any:
            return replies[str(messages[-1].content).removeprefix("Question: ")]

        return cls(pick, model=model, tokens=(50, 20))

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        with self.lock:
            self.calls.append(
                {
                    "messages": list(messages),
                    "schema": json_schema,
                    "json_schema": json_schema,
                    "name": schema_name,
                    "max_tokens": max_tokens,
                }
            )
            reply = self.pick(messages, schema_name)
        if callable(reply):
            reply = reply(messages)
        if isinstance(reply, Exception):
            raise reply
        return ChatResult(
            text=json.dumps(reply),
            parsed=reply,
            finish_reason="stop",
            prompt_tokens=self.tokens[0],
            completion_tokens=self.tokens[1],
            model=self.model,
        )


class TableSearch:
    """The candidate search (:data:`pagesight.query.answer.CandidateSearch`) answered from a table.

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
