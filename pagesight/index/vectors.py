"""Names of the vectors and collections PageSight stores; part of every collection's schema.

Chunk collection: ``text-dense`` (sentence embedding) and ``bm25`` (sparse, IDF by the index).
Page collection: ``page-colqwen`` (late-interaction rows, exact MaxSim) and
``page-colqwen-pooled`` (20 block means of the image patches: the first stage, and stage 0
against a summary of the query, see ``VectorStore.query_two_stage``).
"""

from pagesight.index.base import pooled_vector_name

DENSE_VECTOR = "text-dense"
SPARSE_VECTOR = "bm25"
PAGE_VECTOR = "page-colqwen"
PAGE_POOLED_VECTOR = pooled_vector_name(PAGE_VECTOR)

CHUNK_COLLECTION = "chunks"
PAGE_COLLECTION = "pages"
