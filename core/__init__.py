"""Core of PageSight: types, settings, errors, ids and role protocols.

Nothing here imports a heavy library (no torch, no PyMuPDF, no Qdrant), so every other layer can
depend on it cheaply. Dependency direction: core <- models, index <- ingestion <- services;
gateway <- core, models, index.
"""
