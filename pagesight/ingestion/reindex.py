"""Re-indexing without downtime: every catalogued document rebuilt into a new index version.

``pagesight reindex`` (wired in ``pagesight.services.reindex_job``) rebuilds the whole text index
(and the page index when one is configured) after a change of embedding model, dims, parser, chunker
or schema, while the live version keeps serving::

    plan     catalog documents -> their source files (missing or changed ones reported)
    build    the bulk pipeline's stages (parse + chunk, text embed, page embed) -> points
             upserted into a NEW, unpromoted version (CollectionManager.create_version)
    verify   per document: points == chunks of the new parse, one version, the catalog's;
             page points == rendered pages; the version's dims == the configured models'
    promote  snapshot the catalog rows, switch the alias (atomic), write the new rows

This module holds those steps as plain classes (no Ray); what fails before ``promote`` leaves
the live version and the catalog untouched, and the half-built version is dropped (an
unpromoted version newer than the live one would otherwise become the next rollback target).

**What is rebuilt.** Every document of every tenant in the catalog, from its source: a
``file:`` URI is read where it is; otherwise (uploads, fetched URIs) the newest job's stored
copy, if it still exists. The gateway deletes an upload's copy once it is indexed, so uploaded
documents are reported missing unless their copy was kept. A document whose file is gone, or
whose bytes differ from the indexed version (the catalog's ``version`` hash: rebuilding it would
silently ingest new content), refuses the run unless ``allow_missing``; then it is left out of
the new version and, at promote, stays in the catalog as ``MISSING`` (``DocumentState``: listed
with its jobs, in the API and the UI, without pages or structure, so no route can find it), and
the report names it. Ingesting its file again makes it READY (so does a later re-index that
finds its file back at the indexed version, and a rollback to a version that held it); deleting
it removes it. A document already MISSING whose file is still not there is left out again
without refusing the run (it is in no live version: leaving it out loses nothing). There is no
per-tenant re-index: a version is a whole collection, so rebuilding one tenant into it would
drop every other tenant from search at promote (and copying their points across a change of
model or dims is impossible).

**The catalog follows the live version.** The catalog has no chunk rows (chunks live only as
points); it has documents, pages (image refs, labels) and structures, which a parser change can
change. They are rewritten only at promote time, right after the alias switch, from the new
parse; the rows they replace are first saved to ``<data_dir>/reindex/<alias>__<version>.json``,
the version that was live with them, and ``rollback`` puts them back. When only embeddings
change (a new model or dims: the common case) the new rows equal the old ones. Page images are
content-addressed and never deleted by a re-index, so a rolled-back version's pages still show.
A rollback first deletes, from the version it goes back to, every document deleted since (the
audit log says which) and does not restore its rows: a rollback never brings a deleted document
back. The text and page aliases are switched one after the other (two atomic steps, not one):
for that moment a search may rank text from the new version and pages from the old.

**Concurrent writes.** A server may ingest or delete while a re-index runs (into the live
version). Verification re-reads the catalog: a document added, changed or deleted since the
plan is a mismatch and the run is refused (run it again), never a silently stale version.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from pydantic import BaseModel

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.ids import file_version
from pagesight.core.protocols import CatalogRepository
from pagesight.core.settings import BulkOptions
from pagesight.core.types import (
    Document,
    DocumentState,
    DocumentStructure,
    IngestJob,
    JobState,
    Page,
)
from pagesight.index.base import IndexPoint, IndexSchema, VectorStore
from pagesight.ingestion.bulk import BulkTask, InFlight, batch_due

log = logging.getLogger(__name__)

DocKey = tuple[str, str]
"""(tenant, doc_id)"""


# -- plan ------------------------------------------------------------------------------------


@dataclass
class MissingSource:
    """A document that cannot be rebuilt from its source."""

    tenant: str
    doc_id: str
    source_uri: str
    #: "gone" (no file) or "changed" (the file's bytes are not the indexed version)
    reason: str
    #: the document was MISSING already (left out by an earlier re-index): leaving it out
    #: again takes nothing out of search, so it never refuses a run
    already_missing: bool = False

    def as_dict(self) -> dict[str, str | bool]:
        return {
            "tenant": self.tenant,
            "doc_id": self.doc_id,
            "source_uri": self.source_uri,
            "reason": self.reason,
            "already_missing": self.already_missing,
        }


@dataclass
class ReindexPlan:
    #: every catalogued document at plan time
    documents: dict[DocKey, Document] = field(default_factory=dict)
    tasks: list[BulkTask] = field(default_factory=list)
    missing: list[MissingSource] = field(default_factory=list)


class ReindexPlanner:
    """Catalog documents to pipeline tasks (module doc: "What is rebuilt")."""

    def __init__(self, catalog: CatalogRepository) -> None:
        self.catalog = catalog

    def plan(self, tenants: Iterable[str]) -> ReindexPlan:
        plan = ReindexPlan()
        for tenant in tenants:
            for doc in self.catalog.documents(tenant):
                plan.documents[(doc.tenant, doc.doc_id)] = doc
                path = self.source_path(doc)
                if path is None:
                    plan.missing.append(_missing(doc, "gone"))
                elif file_version(path) != doc.version:
                    plan.missing.append(_missing(doc, "changed"))
                else:
                    plan.tasks.append(
                        BulkTask(job=_job(doc, path), version=doc.version, title=doc.title)
                    )
        return plan

    def source_path(self, doc: Document) -> Path | None:
        """Where ``doc``'s bytes can be read now, or None."""
        local = _file_uri_path(doc.source_uri)
        if local is not None:
            return local if local.is_file() else None
        ready = [
            j
            for j in self.catalog.jobs(tenant=doc.tenant, states=[JobState.READY], limit=1000)
            if j.doc_id == doc.doc_id and j.path
        ]
        for job in sorted(ready, key=lambda j: j.updated_at, reverse=True):
            path = Path(job.path)
            if path.is_file():
                return path
        return None


def _missing(doc: Document, reason: str) -> MissingSource:
    return MissingSource(
        doc.tenant,
        doc.doc_id,
        doc.source_uri,
        reason,
        already_missing=doc.state == DocumentState.MISSING,
    )


def _file_uri_path(uri: str) -> Path | None:
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return Path(url2pathname(parts.path))


def _job(doc: Document, path: Path) -> IngestJob:
    """A job for the pipeline's stages only: never saved (a re-index is not an ingest, and
    the catalog must keep describing the live version until promote)."""
    now = datetime.now(UTC)
    return IngestJob(
        job_id=f"reindex:{doc.doc_id}",
        tenant=doc.tenant,
        source_uri=doc.source_uri,
        doc_id=doc.doc_id,
        version=doc.version,
        acl=list(doc.acl),
        valid_until=doc.valid_until,
        state=JobState.PARSING,
        created_at=now,
        updated_at=now,
        path=str(path),
    )


# -- build -----------------------------------------------------------------------------------


@dataclass
class Rebuilt:
    """One document as the new version holds it, with the catalog rows promote writes."""

    document: Document
    pages: list[Page]
    structure: DocumentStructure
    chunks: int
    page_points: int


@dataclass
class RebuildFailure:
    tenant: str
    doc_id: str
    code: ErrorCode
    stage: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {
            "tenant": self.tenant,
            "doc_id": self.doc_id,
            "code": self.code.value,
            "stage": self.stage,
            "message": self.message,
        }


class VersionWriter:
    """Consumes the pipeline's finished documents: upserts their points into the new version
    in batches of ``write_batch_docs`` and keeps what verification and promote need. Writes
    nothing to the catalog."""

    def __init__(
        self, store: VectorStore, page_store: VectorStore | None, options: BulkOptions
    ) -> None:
        self.store = store
        self.page_store = page_store
        self.options = options
        self.rebuilt: dict[DocKey, Rebuilt] = {}
        self.failures: list[RebuildFailure] = []
        self.pages = 0
        self._pending: list[InFlight] = []
        self._last_write = time.perf_counter()

    def consume(self, documents: Iterator[InFlight]) -> None:
        for doc in documents:
            if doc.error is not None or doc.parsed is None or doc.structure is None:
                code, stage, message = doc.error or (ErrorCode.INTERNAL, "parse", "no result")
                self.failures.append(
                    RebuildFailure(doc.job.tenant, doc.job.doc_id, code, stage, message)
                )
                continue
            self._pending.append(doc)
            if batch_due(len(self._pending), self._last_write, self.options):
                self.flush()
        self.flush()

    def flush(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            self._write(self.store, [p for d in batch for p in d.points])
            if self.page_store is not None:
                self._write(self.page_store, [p for d in batch for p in d.page_points])
        for doc in batch:
            assert doc.parsed is not None and doc.structure is not None
            self.rebuilt[(doc.job.tenant, doc.job.doc_id)] = Rebuilt(
                document=doc.parsed.document,
                pages=doc.parsed.pages,
                structure=doc.structure,
                chunks=len(doc.chunks),
                page_points=len(doc.page_points),
            )
            self.pages += doc.pages
        self._last_write = time.perf_counter()

    @staticmethod
    def _write(store: VectorStore, points: list[IndexPoint]) -> None:
        if points:
            store.upsert(points)


# -- verify ----------------------------------------------------------------------------------


@dataclass
class Mismatch:
    """One reason the new version must not go live."""

    tenant: str | None
    doc_id: str | None
    problem: str

    def as_dict(self) -> dict[str, str | None]:
        return {"tenant": self.tenant, "doc_id": self.doc_id, "problem": self.problem}


def verify(
    plan: ReindexPlan,
    writer: VersionWriter,
    catalog_now: dict[DocKey, Document],
    expected_schemas: dict[str, tuple[VectorStore, IndexSchema]],
    left_out: set[DocKey],
) -> list[Mismatch]:
    """Every reason not to promote (empty: promote). See the module doc for what is checked.

    Dims: each new version's stored schema must equal what the configured models build
    (``expected_schemas``), and every point was checked against that schema when it was
    upserted (a vector of other dims fails its document, which is then a mismatch here)."""
    found: list[Mismatch] = []
    for index, (store, schema) in expected_schemas.items():
        differences = store.schema.differences(schema)
        if differences:
            found.append(Mismatch(None, None, f"{index} index: {'; '.join(differences)}"))
    for (tenant, doc_id), doc in catalog_now.items():
        planned = plan.documents.get((tenant, doc_id))
        if planned is None:
            found.append(Mismatch(tenant, doc_id, "added to the catalog during the re-index"))
        elif planned.version != doc.version:
            found.append(Mismatch(tenant, doc_id, "changed in the catalog during the re-index"))
    for key in plan.documents.keys() - catalog_now.keys():
        found.append(Mismatch(*key, "deleted from the catalog during the re-index"))
    for failure in writer.failures:
        found.append(
            Mismatch(
                failure.tenant,
                failure.doc_id,
                f"not rebuilt: {failure.stage}/{failure.code.value}: {failure.message}",
            )
        )
    for key, rebuilt in writer.rebuilt.items():
        if rebuilt.document.version != plan.documents[key].version:
            found.append(Mismatch(*key, "its file was rebuilt at another version"))
    stores = {"text": writer.store}
    if writer.page_store is not None:
        stores["pages"] = writer.page_store
    for index, store in stores.items():
        found += _check_counts(index, store, writer, left_out)
    return found


def _check_counts(
    index: str, store: VectorStore, writer: VersionWriter, left_out: set[DocKey]
) -> list[Mismatch]:
    found: list[Mismatch] = []
    tenants = {tenant for tenant, _ in writer.rebuilt} | {tenant for tenant, _ in left_out}
    for tenant in sorted(tenants):
        versions = store.document_versions(tenant)
        for doc_id in versions:
            if (tenant, doc_id) not in writer.rebuilt:
                found.append(Mismatch(tenant, doc_id, f"{index} index has points of it"))
    for (tenant, doc_id), rebuilt in writer.rebuilt.items():
        points = store.points_of_document(tenant, doc_id)
        want = rebuilt.chunks if index == "text" else rebuilt.page_points
        if len(points) != want:
            found.append(
                Mismatch(tenant, doc_id, f"{index} index: {len(points)} points, expected {want}")
            )
        stray = {p.payload.get("version") for p in points} - {rebuilt.document.version}
        if stray:
            found.append(Mismatch(tenant, doc_id, f"{index} index: points of versions {stray}"))
    return found


# -- promote: the catalog rows ---------------------------------------------------------------


class _Rows(BaseModel):
    document: Document
    pages: list[Page]
    structure: DocumentStructure


class CatalogSnapshot:
    """The catalog rows that were live with one index version (module doc: "The catalog
    follows the live version"): saved before promote replaces them, put back by rollback."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, alias: str, version: str) -> Path:
        return self.folder / f"{alias}__{version}.json"

    def save(
        self, catalog: CatalogRepository, tenants: Iterable[str], alias: str, version: str
    ) -> Path:
        rows = [
            _Rows(
                document=doc,
                pages=catalog.pages(doc.tenant, doc.doc_id),
                structure=catalog.structure(doc),
            ).model_dump(mode="json")
            for tenant in tenants
            for doc in catalog.documents(tenant)
        ]
        path = self.path(alias, version)
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{path.name}.tmp")
        staged.write_text(json.dumps({"alias": alias, "version": version, "rows": rows}))
        staged.replace(path)
        return path

    def restore(
        self,
        catalog: CatalogRepository,
        alias: str,
        version: str,
        skip: set[DocKey] | None = None,
    ) -> int | None:
        """Make the catalog's documents those saved for ``version``, except ``skip`` (deleted
        since); None when no snapshot was saved for it (a version older than re-indexing: the
        catalog is left as it is)."""
        path = self.path(alias, version)
        if not path.is_file():
            return None
        saved = [_Rows.model_validate(r) for r in json.loads(path.read_text())["rows"]]
        saved = [r for r in saved if (r.document.tenant, r.document.doc_id) not in (skip or set())]
        wanted = {(r.document.tenant, r.document.doc_id) for r in saved}
        tenants = {tenant for tenant, _ in wanted} | set(catalog.tenants())
        for tenant in tenants:
            for doc in catalog.documents(tenant):
                if (doc.tenant, doc.doc_id) not in wanted:
                    catalog.delete_document(doc.tenant, doc.doc_id)
        for rows in saved:
            catalog.put_document(rows.document, rows.pages, rows.structure)
        return len(saved)


def write_rows(
    catalog: CatalogRepository, rebuilt: dict[DocKey, Rebuilt], left_out: Iterable[DocKey]
) -> None:
    """The promoted version's catalog rows: each rebuilt document READY with its new pages and
    structure; each document ``left_out`` MISSING, still listed (deleting it would hide from
    the operator what the re-index lost), with no pages and no structure (they describe a parse
    no live version holds, and a reference or section route reading them would find a
    document that has no points). Image refs an older parse used are kept (their files too):
    a rollback may need them."""
    for item in rebuilt.values():
        catalog.put_document(
            item.document.model_copy(update={"state": DocumentState.READY}),
            item.pages,
            item.structure,
        )
    for tenant, doc_id in left_out:
        document = catalog.document(tenant, doc_id)
        if document is not None:
            catalog.put_document(
                document.model_copy(update={"state": DocumentState.MISSING}), pages=[]
            )


# -- the report ------------------------------------------------------------------------------


@dataclass
class IndexVersions:
    name: str
    previous: str | None
    new: str | None = None
    points: int = 0
    dims: dict[str, int] = field(default_factory=dict)


@dataclass
class ReindexReport:
    """What ``pagesight reindex`` prints (``--json``: :meth:`as_dict`)."""

    documents: int = 0
    rebuilt: int = 0
    pages: int = 0
    missing: list[MissingSource] = field(default_factory=list)
    left_out: list[MissingSource] = field(default_factory=list)
    failures: list[RebuildFailure] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    indexes: dict[str, IndexVersions] = field(default_factory=dict)
    promoted: bool = False
    #: why nothing was promoted (None when promoted or not yet decided)
    refused: PageSightError | None = None
    dropped: dict[str, list[str]] = field(default_factory=dict)
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "rebuilt": self.rebuilt,
            "pages": self.pages,
            "points": {k: v.points for k, v in self.indexes.items()},
            "indexes": {
                k: {"alias": v.name, "previous": v.previous, "new": v.new, "dims": v.dims}
                for k, v in self.indexes.items()
            },
            "verified": not self.mismatches and not self.failures and self.refused is None,
            "mismatches": [m.as_dict() for m in self.mismatches],
            "failures": [f.as_dict() for f in self.failures],
            "missing": [m.as_dict() for m in self.missing],
            "left_out": [m.as_dict() for m in self.left_out],
            "promoted": self.promoted,
            "refused": self.refused.to_dict() if self.refused is not None else None,
            "dropped": self.dropped,
            "wall_s": round(self.wall_s, 3),
        }
