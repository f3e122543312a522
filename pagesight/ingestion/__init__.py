"""Ingestion: render, parse, chunk (and, from the index issue on, write and jobs).

Stages are plain classes with one call signature each; engines (OCR, layout, Docling) sit
behind small protocols so a stage never knows which engine it drives.
"""
