"""one_batch_ahead: the next batch is started before the caller gets this one."""

from __future__ import annotations

from pagesight.core.pipelining import one_batch_ahead


def test_the_next_batch_starts_before_this_one_is_used() -> None:
    events: list[str] = []

    def start(batch: str) -> str:
        events.append(f"start {batch}")
        return batch.upper()

    def finish(started: str) -> str:
        events.append(f"finish {started}")
        return started + "!"

    for batch, ready in one_batch_ahead(["a", "b", "c"], start, finish):
        events.append(f"use {batch} {ready}")
    assert events == [
        "start a",
        "finish A",
        "start b",
        "use a A!",
        "finish B",
        "start c",
        "use b B!",
        "finish C",
        "use c C!",
    ]


def test_no_batches_start_nothing() -> None:
    started: list[object] = []
    assert list(one_batch_ahead([], started.append, lambda x: x)) == []
    assert started == []
