"""One batch ahead: start the next batch's work before the caller consumes this one's.

The page embedder prepares the next batch of page images while the model runs the current
one, and the page embed stage decodes the next batch of stored images the same way: both
are :func:`one_batch_ahead` with their own ``start`` (submit the work) and ``finish`` (wait
for it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

Batch = TypeVar("Batch")
Started = TypeVar("Started")
Ready = TypeVar("Ready")


def one_batch_ahead(
    batches: Sequence[Batch],
    start: Callable[[Batch], Started],
    finish: Callable[[Started], Ready],
) -> Iterator[tuple[Batch, Ready]]:
    """Each batch with its finished work, in order; the next batch is started before this one
    is yielded, so its work runs while the caller uses this one's. At most two batches' work
    is held at once."""
    if not batches:
        return
    pending = start(batches[0])
    for number, batch in enumerate(batches):
        ready = finish(pending)
        if number + 1 < len(batches):
            pending = start(batches[number + 1])
        yield batch, ready
