"""BM25 sparse vectors whose IDF the index applies (Qdrant ``Modifier.IDF``, or the embedded store).

A document vector holds, for each term, BM25's saturated and length-normalised term frequency

    tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avg_len))

and a query vector holds each term's count in the query. The index multiplies query and
document values and weights each term by its IDF computed over the collection at query time, so
the score is classic BM25 without the encoder ever seeing corpus statistics. ``avg_len`` is a
fixed option rather than the corpus mean for the same reason (Qdrant's own BM25 uses 256): a
document's vector must not change when other documents are added. ``doc_len`` counts tokens
after stop-word removal (a Japanese chunk has about one bigram per character, so its length is
larger than an English chunk of the same size; only the ratio between documents of one language
matters to ranking).

Terms map to sparse indices with CRC-32 of their UTF-8 bytes (:func:`term_index`): stable across
processes, machines and Python versions, unlike ``hash()``. Two terms that collide (rare in
2**32 slots) count as one term on both the document and the query side, so scores stay
consistent.

The tokenizer lives in :mod:`pagesight.models.text`; its version and the weighting parameters make
up ``model_id``, so changing either forces a re-index.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Sequence

from pagesight.core.settings import SparseOptions
from pagesight.core.types import SparseVector
from pagesight.models.text import TOKENIZER_VERSION, tokenize


def term_index(term: str) -> int:
    """The sparse-vector index of ``term``: unsigned CRC-32 of its UTF-8 bytes."""
    return zlib.crc32(term.encode("utf-8"))


class Bm25Encoder:
    """:class:`pagesight.core.protocols.SparseEncoder` for BM25 over
    :func:`pagesight.models.text.tokenize` terms.

    Stateless and cheap: nothing to load, safe to share between threads.
    """

    def __init__(self, options: SparseOptions | None = None) -> None:
        self.options = options or SparseOptions()

    @property
    def model_id(self) -> str:
        o = self.options
        stemmer = "snowball_en" if o.stemming else "none"
        return (
            f"pagesight-bm25-v{TOKENIZER_VERSION}:"
            f"k1={o.k1:g},b={o.b:g},avg_len={o.avg_len:g},stem={stemmer}"
        )

    def warm_up(self) -> None:
        """Nothing to load; present so pipelines can warm every engine alike."""

    def tokenize(self, text: str) -> list[str]:
        """The terms this encoder indexes for ``text`` (for debugging and traces)."""
        return tokenize(text, stem=self.options.stemming)

    def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        return [self._encode_document(text) for text in texts]

    def encode_query(self, text: str) -> SparseVector:
        counts = Counter(term_index(term) for term in self.tokenize(text))
        indices = sorted(counts)
        return SparseVector(indices=indices, values=[float(counts[i]) for i in indices])

    def _encode_document(self, text: str) -> SparseVector:
        terms = self.tokenize(text)
        if not terms:
            return SparseVector()
        counts = Counter(term_index(term) for term in terms)
        k1, b = self.options.k1, self.options.b
        length_norm = k1 * (1.0 - b + b * len(terms) / self.options.avg_len)
        indices = sorted(counts)
        values = [counts[i] * (k1 + 1.0) / (counts[i] + length_norm) for i in indices]
        return SparseVector(indices=indices, values=values)
