"""Core of PageSight: value types by concern (document, structure, access, jobs, search, traces,
answers; :mod:`pagesight.core.types` re-exports them), settings by package, numbering, errors, ids
and role protocols.

Nothing here imports a heavy library (no torch, no PyMuPDF, no Qdrant), so every other layer can
depend on it cheaply. Dependency direction: core <- models, index <- ingestion <- services;
gateway <- core, models, index.
"""
