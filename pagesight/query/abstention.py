"""The abstention: the answer that says the documents do not answer the question, and why.

Every abstention of the answer step is this response
(:data:`~pagesight.query.generation.ABSTAIN_TEXT` with its reason): the pipeline's (nothing
found, weak evidence, no room in the context), the citation check's
(:mod:`pagesight.query.citations`) and the extractive answers'
(:mod:`pagesight.query.extractive_answer`).
"""

from __future__ import annotations

from typing import Literal

from pagesight.core.types import AnswerResponse
from pagesight.query.generation import ABSTAIN_TEXT


def abstention(
    trace_id: str,
    confidence: float,
    reason: str,
    mode: Literal["llm", "extractive"],
) -> AnswerResponse:
    """The abstention of ``mode`` for ``reason``, at ``confidence`` (no sentence, no citation)."""
    return AnswerResponse(
        answer=ABSTAIN_TEXT,
        abstained=True,
        reason=reason,
        confidence=confidence,
        mode=mode,
        trace_id=trace_id,
    )
