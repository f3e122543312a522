"""The API keys file: a JSON list of :class:`pagesight.core.settings.ApiKeyRecord` (digests, never
keys).

Read and written by the gateway's file key store (:class:`pagesight.store.key_stores.FileKeyStore`,
what ``pagesight keys new`` writes on one machine) and read by ``pagesight db
migrate-from-sqlite`` (:mod:`pagesight.services.db_migrate`), which copies it into PostgreSQL.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from pagesight.core.settings import ApiKeyRecord

_RECORDS = TypeAdapter(list[ApiKeyRecord])


def load_records(path: Path) -> list[ApiKeyRecord]:
    """The records of a keys file: a JSON list of :class:`ApiKeyRecord` objects."""
    try:
        return _RECORDS.validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise ValueError(f"API keys file not found: {path}") from exc
    except ValidationError as exc:
        raise ValueError(f"API keys file {path} is not a list of key records: {exc}") from exc


def save_records(path: Path, records: list[ApiKeyRecord]) -> None:
    """Write ``records`` atomically (temp file + rename), readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps([r.model_dump(mode="json") for r in records], indent=2) + "\n")
    tmp.chmod(0o600)
    os.replace(tmp, path)
