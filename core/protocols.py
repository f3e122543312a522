"""Role protocols (Haystack-style): what an engine must offer, not how it does it.

Engines are cheap to construct and load weights in ``warm_up()`` (or on first use), so that
building a pipeline, a CLI command or a Ray deployment never pays for models it does not call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from core.types import SparseVector

if TYPE_CHECKING:
    from PIL import Image


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


class PageEmbedding(Protocol):
    """A page image as late-interaction vectors.

    ``vectors`` holds every kept token row (padding dropped), L2-normalised; the rows flagged in
    ``image_mask`` are image patches in raster order over a ``grid`` of (rows, cols) cells that
    tile the page image, which is what maps a patch back to a box on the page.
    """

    vectors: npt.NDArray[np.float32]
    image_mask: npt.NDArray[np.bool_]
    grid: tuple[int, int]


@runtime_checkable
class PageEmbedder(Protocol):
    """Late-interaction page/query embedder (ColQwen2, ColPali, ...): MaxSim-comparable rows."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def warm_up(self) -> None: ...

    def embed_pages(self, images: Sequence[Image.Image]) -> list[PageEmbedding]: ...

    def embed_queries(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]: ...
