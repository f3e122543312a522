"""PageSight: visual-document retrieval as a service.

One import root; the rooms and the direction of their imports are in ``docs/architecture.md``
(checked by ``make lint``): core ← models, index, store ← ingestion, query ← api ← services ←
gateway ← entrypoints.
"""
