"""Engines that live in other Ray Serve deployments, behind the local engine protocols.

The index service's ingestor takes a parse function, a
:class:`pagesight.core.protocols.TextEmbedder` and a :class:`pagesight.core.protocols.PageEmbedder`;
these adapters implement them by calling the parser, text-embedder and page-embedder deployments, so
the ingestion code is the same in one process and across a cluster. Calls block on
``DeploymentResponse.result()``: they run on the ingest worker thread (and request threads for
visual queries), never on an event loop.

Page images are sent one call per page so that the page embedder's ``@serve.batch`` can put
pages of different documents (and queries of different requests) in one forward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from pagesight.core.protocols import PageEmbedding
from pagesight.core.settings import Settings
from pagesight.core.types import ParsedDocument
from pagesight.ingestion.pipeline import SourceInfo


class RemoteParser:
    """A :class:`pagesight.ingestion.ingest.DocumentParseFn` served by the parser deployment."""

    def __init__(self, handle: Any, timeout_s: float) -> None:
        self._handle = handle
        self._timeout_s = timeout_s

    def __call__(
        self,
        path: Path,
        settings: Settings,
        source: SourceInfo | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> ParsedDocument:
        # Progress callbacks do not cross processes; the job state says PARSING meanwhile.
        result: ParsedDocument = self._handle.parse.remote(str(path), source).result(
            timeout_s=self._timeout_s
        )
        return result


class _Described:
    """A model deployment and its facts (id, dim, languages: what its ``describe()`` returned,
    awaited by the caller's async constructor, where blocking on a handle is not allowed)."""

    def __init__(self, handle: Any, info: dict[str, Any], timeout_s: float) -> None:
        self._handle = handle
        self._timeout_s = timeout_s
        self._model_id = str(info["model_id"])
        self._dim = int(info["dim"])
        self._info = info

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    def warm_up(self) -> None:
        """The deployment loaded its weights before it reported ready."""


class RemoteTextEmbedder(_Described):
    """A :class:`pagesight.core.protocols.TextEmbedder` served by the text-embedder deployment."""

    @property
    def languages(self) -> frozenset[str] | None:
        languages = self._info.get("languages")
        return None if languages is None else frozenset(languages)

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        result: npt.NDArray[np.float32] = self._handle.embed_documents.remote(list(texts)).result(
            timeout_s=self._timeout_s
        )
        return result

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        result: npt.NDArray[np.float32] = self._handle.embed_query.remote(text).result(
            timeout_s=self._timeout_s
        )
        return result


class RemotePageEmbedder(_Described):
    """A :class:`pagesight.core.protocols.PageEmbedder` served by the (batching) page-embedder
    deployment."""

    def embed_pages(self, images: Sequence[Image.Image]) -> list[PageEmbedding]:
        pending = [self._handle.embed_page.remote(image) for image in images]
        return [p.result(timeout_s=self._timeout_s) for p in pending]

    def embed_queries(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        pending = [self._handle.embed_query.remote(text) for text in texts]
        return [p.result(timeout_s=self._timeout_s) for p in pending]
