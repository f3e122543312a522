"""Role protocols (Haystack-style): what an engine must offer, not how it does it.

Engines are cheap to construct and load weights in ``warm_up()`` (or on first use), so that
building a pipeline, a CLI command or a Ray deployment never pays for models it does not call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from core.types import SparseVector


@runtime_checkable
class TextEmbedder(Protocol):
    """Dense text embeddings, L2-normalised, one row per input."""

    @property
    def model_id(self) -> str:
        """Stamped into the index schema: changing it means a re-index."""
        ...

    @property
    def dim(self) -> int: ...

    @property
    def languages(self) -> frozenset[str] | None:
        """ISO 639-1 codes the model was trained for; ``None`` means multilingual."""
        ...

    def warm_up(self) -> None: ...

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]: ...


@runtime_checkable
class SparseEncoder(Protocol):
    """Sparse lexical vectors (BM25 term weights); the index applies IDF at query time."""

    @property
    def model_id(self) -> str:
        """Names the tokenizer and weighting; stamped into the index schema."""
        ...

    def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]: ...

    def encode_query(self, text: str) -> SparseVector: ...
