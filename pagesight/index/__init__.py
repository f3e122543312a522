"""The vector index layer: one store interface, two Qdrant backends, versioned collections.

- :mod:`pagesight.index.base`: :class:`~pagesight.index.base.VectorStore` (upsert, per-document
  delete, dense /
  sparse / multi-vector queries and the two-stage page query (pooled first stage, exact MaxSim
  rerank) with the access filter inside the query, scrolls for sync),
  the payload contract, and :class:`~pagesight.index.base.IndexSchema`
  (:mod:`pagesight.index.schema`), the facts (vector names, dims, distances, model ids, id scheme)
  stamped into every index and checked on every open; points and selections in
  :mod:`pagesight.index.points`.
- :mod:`pagesight.index.edge`: the embedded default, Qdrant's engine in-process (qdrant_edge), one
  shard directory per index version, one process at a time.
- :mod:`pagesight.index.qdrant_server`: a Qdrant server collection through qdrant-client (selected
  by ``PAGESIGHT_QDRANT_URL``); its local mode runs the same contract tests.
- :mod:`pagesight.index.factory`: backend selection from settings and zero-downtime re-indexing:
  versions ``<name>__<utc time>`` behind an alias ``<name>``, promote / rollback / drop_old.

The layer depends on :mod:`pagesight.core` only. It stores and ranks; fusing routes, reranking and
grounding belong to the callers, which trace every route's raw scores.
"""
