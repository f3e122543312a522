"""Ingestion: files in, indexed chunks out — idempotent, resumable, one bad file at a time.

Per file: PENDING -> RENDERING -> PARSING (child process) -> EMBEDDING -> INDEXING -> READY, each
state persisted in the catalog before the work it names starts. Point ids derive from
(tenant, doc_id, version, chunk seq), so re-running any step writes the same points again:

- the same bytes twice: the version is already indexed and READY -> nothing is re-done;
- changed bytes: new points are written, then every point of an older version is deleted;
- ``kill -9`` anywhere: ``resume()`` re-runs the unfinished jobs; upserts overwrite, the final
  delete removes what an interrupted run of an older version left, so each document ends up
  indexed exactly once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.identity import first_pages, identity_of
from pagesight.core.ids import check_doc_id, file_version, make_doc_id, point_id
from pagesight.core.pipelining import one_batch_ahead
from pagesight.core.protocols import (
    CatalogRepository,
    PageEmbedder,
    PageEmbedding,
    SparseEncoder,
    TextEmbedder,
)
from pagesight.core.settings import Settings
from pagesight.core.types import (
    EVERYONE,
    AuditEntry,
    Chunk,
    Document,
    DocumentState,
    DocumentStructure,
    IngestJob,
    JobState,
    Page,
    ParsedDocument,
    TextSpan,
)
from pagesight.index.base import IndexPoint, VectorStore
from pagesight.index.vectors import (
    DENSE_VECTOR,
    PAGE_POOLED_VECTOR,
    PAGE_VECTOR,
    SPARSE_VECTOR,
)
from pagesight.ingestion.chunk import Chunker
from pagesight.ingestion.domains import element_page_texts
from pagesight.ingestion.isolation import parse_isolated
from pagesight.ingestion.pipeline import SourceInfo
from pagesight.ingestion.render import PageImageStore

if TYPE_CHECKING:
    from PIL import Image
from pagesight.ingestion.structure import STRUCTURE_VERSION, build_structure

log = logging.getLogger(__name__)

_PAGE_EMBED_BATCH = 16  # pages decoded and embedded at a time: bounds image memory
_DECODE_WORKERS = 4  # threads that decode stored page images (PIL releases the GIL)

#: Called as (job, pages done, pages total) while a file is parsed.
IngestProgress = Callable[[IngestJob, int, int], None]


class DocumentParseFn(Protocol):
    """Parses one file into a document (the default runs it in a child process with limits;
    the Ray application sends it to the parser deployment)."""

    def __call__(
        self,
        path: Path,
        settings: Settings,
        source: SourceInfo | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> ParsedDocument: ...


def chunk_index_text(chunk: Chunk, title: str | None) -> str:
    """What the embedders see: document title and section path, then the chunk.

    A chunk of a 10-K rarely names the company; the title and heading path put that context
    back (a light form of contextual chunk headers) for both the dense and the BM25 vectors.
    """
    context = " > ".join(part for part in [title or "", *chunk.section_path] if part)
    return f"{context}\n{chunk.text}" if context else chunk.text


def span_payload(span: TextSpan) -> list[float]:
    """A :class:`TextSpan` as the payload stores it: ``[start, end, page, x0, y0, x1, y1]``
    (box in PDF points, to a hundredth)."""
    box = span.bbox
    return [
        span.start,
        span.end,
        span.page_number,
        *(round(v, 2) for v in (box.x0, box.y0, box.x1, box.y1)),
    ]


def chunk_payload(
    chunk: Chunk, parsed: ParsedDocument, acl: list[str], labels: dict[int, str] | None = None
) -> dict[str, Any]:
    """What a chunk's point carries. ``labels`` maps page numbers to printed page labels; the
    chunk's own pages' labels travel with it, so a hit can say "printed page 17"."""
    doc = parsed.document
    parsers = sorted({e.parser for e in parsed.elements if e.element_id in set(chunk.element_ids)})
    labels = labels or {}
    return {
        "doc_id": doc.doc_id,
        "version": doc.version,
        "tenant": doc.tenant,
        "acl": acl or [EVERYONE],
        "chunk_id": chunk.chunk_id,
        "seq": chunk.seq,
        "page_numbers": chunk.page_numbers,
        "page_labels": {str(n): labels[n] for n in chunk.page_numbers if n in labels},
        "unit": chunk.unit,
        "kinds": [k.value for k in chunk.kinds],
        "section_path": chunk.section_path,
        "element_ids": chunk.element_ids,
        "text": chunk.text,
        "bboxes": [[page, list(box.as_tuple())] for page, box in chunk.bboxes],
        "spans": [span_payload(span) for span in chunk.spans],
        "valid_until": doc.valid_until.timestamp() if doc.valid_until else None,
        "parser": parsers,
        "source_uri": doc.source_uri,
        "title": doc.title,
    }


#: How page vectors are pooled for the two-stage search's first stage (stamped in the schema).
FIRST_STAGE_POOLING = "mean-blocks-20"


def first_stage_rows(
    vectors: np.ndarray, image_mask: np.ndarray, grid: tuple[int, int]
) -> np.ndarray:
    """20 block means over the patch grid (5 x 4 on portrait pages, 4 x 5 on landscape).

    They serve both cheap stages of the visual query: stage 0 scores them against 3 centroids
    of the query rows over every page, stage 1 against the full query over the pages stage 0
    kept. bench/bench_maxsim.py at 10k pages: ~38x over exact MaxSim at recall@10 0.988
    (prefetch 50); block means without stage 0 ~24x at 0.990; Qdrant's row + column means
    (55 rows) ~11x at 0.82 (prefetch 50) to ~9x at 0.96 (prefetch 200).
    """
    from pagesight.models.pooling import pool_blocks

    rows, cols = grid
    blocks = (5, 4) if rows >= cols else (4, 5)
    return pool_blocks(vectors, image_mask, grid, (min(blocks[0], rows), min(blocks[1], cols)))


def is_current(
    document: Document, version: str, acl: list[str], valid_until: datetime | None
) -> bool:
    """The stored document already is these bytes with this ACL and validity, indexed under
    today's structure rules: ingesting them again changes nothing (a changed ACL or validity
    re-writes the payloads that carry it; an older ``structure_version`` re-parses it). A
    MISSING document (a re-index left it out) is never current: ingesting its file again is
    what brings it back into the index, READY."""
    return (
        document.state == DocumentState.READY
        and document.structure_version == STRUCTURE_VERSION
        and document.version == version
        and sorted(document.acl) == sorted(acl)
        and document.valid_until == valid_until
    )


def with_structure(parsed: ParsedDocument) -> DocumentStructure:
    """Capture ``parsed``'s structure and stamp it on the document: page labels found on the
    page (folios) join the /PageLabels ones on the pages, so payloads and the page API show
    them too."""
    structure = build_structure(parsed)
    structure.identity = identity_of(
        first_pages(element_page_texts(parsed.elements)),
        parsed.document.title,
        parsed.document.source_name,
    )
    labels = {p.page_number: p for p in structure.pages if p.label}
    for page in parsed.pages:
        found = labels.get(page.page_number)
        if page.label is None and found is not None:
            page.label = found.label
    parsed.document.structure_version = STRUCTURE_VERSION
    return structure


def display_name(job: IngestJob) -> str:
    """The caller's name for the job's file: the uploaded file name, else its source URI
    (never where the service stored its copy)."""
    uri = job.source_uri
    return uri.removeprefix("upload:") if uri.startswith("upload:") else uri


def redact_path(message: str, job: IngestJob) -> str:
    """``message`` with the stored copy's path and file name replaced by :func:`display_name`
    (parsers name the file they opened, which for uploads is an internal content address)."""
    path = Path(job.path)
    internal = sorted({str(path.resolve()), str(path), path.name} - {"", "."}, key=len)
    pattern = "|".join(re.escape(name) for name in reversed(internal))  # longest first
    return re.sub(pattern, lambda _m: display_name(job), message) if pattern else message


def _via(actor: str | None) -> str:
    """Where a change came from, for the audit log."""
    if actor is None:
        return ""
    return "cli" if actor.startswith("cli:") else "api"


@dataclass
class IngestRequest:
    path: Path
    tenant: str = "default"
    acl: list[str] = field(default_factory=list)
    password: str | None = None
    doc_id: str | None = None
    source_uri: str | None = None
    valid_until: datetime | None = None
    #: who asked (an API key id, ``cli:<user>``): kept on the job and in the audit log
    actor: str | None = None


@dataclass
class SyncReport:
    ingested: list[IngestJob]
    deleted: list[str]


class Ingestor:
    """Runs ingest jobs against one index and one catalog (the single writer of both)."""

    def __init__(  # noqa: PLR0913  # the ingestor's injected stores, models and parser
        self,
        settings: Settings,
        store: VectorStore,
        catalog: CatalogRepository,
        embedder: TextEmbedder,
        sparse: SparseEncoder,
        embed_batch: int = 64,
        page_store: VectorStore | None = None,
        page_embedder: PageEmbedder | None = None,
        parse: DocumentParseFn = parse_isolated,
    ) -> None:
        self.settings = settings
        self.parse = parse
        self.store = store
        self.catalog = catalog
        self.embedder = embedder
        self.sparse = sparse
        self.page_store = page_store
        self.page_embedder = page_embedder
        self.images = PageImageStore(settings.page_image_dir, settings.render)
        self.chunker = Chunker(settings.chunk)
        self.embed_batch = embed_batch
        self.chunk_points = ChunkPointEmbedder(embedder, sparse, embed_batch)
        self.page_points = (
            PagePointEmbedder(page_embedder, self.images)
            if page_store is not None and page_embedder is not None
            else None
        )
        self.writer = DocumentWriter(store, catalog, self.images, page_store)

    # -- public operations ------------------------------------------------------------------

    def ingest(
        self, requests: Sequence[IngestRequest], progress: IngestProgress | None = None
    ) -> list[IngestJob]:
        """Queue every file first (so a kill leaves a resumable list), then run them in order."""
        queued = [(self.queue(req), req) for req in requests]
        return [self.run(job, req.password, progress) for job, req in queued]

    def resume(self, progress: IngestProgress | None = None) -> list[IngestJob]:
        """Finish the jobs a killed process left unfinished (passwords are never stored)."""
        return [self.run(job, None, progress) for job in self.catalog.unfinished_jobs()]

    def sync(
        self,
        folder: Path,
        tenant: str,
        acl: list[str] | None = None,
        progress: IngestProgress | None = None,
        allow_empty: bool = False,
        actor: str | None = None,
    ) -> SyncReport:
        """Make the tenant's documents from ``folder`` equal the folder's files.

        Only documents whose catalog source URI is a file under ``folder`` can be deleted:
        uploads, other folders' documents and index-only ids with no catalog row are never
        touched. A folder that cannot be listed deletes nothing and raises NOT_FOUND; one that
        lists no files while documents from it are indexed deletes nothing and raises
        INVALID_REQUEST, unless ``allow_empty``.
        """
        root = folder.resolve()
        files = self._list_files(folder)
        if not files and not allow_empty:
            held = self._documents_under(tenant, root)
            if held:
                raise PageSightError(
                    ErrorCode.INVALID_REQUEST,
                    Stage.INPUT,
                    f"{folder} lists no files but {len(held)} document(s) of tenant {tenant} "
                    "were ingested from it; nothing was deleted (pass --allow-empty / "
                    "allow_empty=True to delete them)",
                )
        requests = [
            IngestRequest(path=p, tenant=tenant, acl=list(acl or []), actor=actor) for p in files
        ]
        jobs = self.ingest(requests, progress)
        wanted = {make_doc_id(tenant, p.resolve().as_uri()) for p in files}
        deleted = self.sync_deletions(tenant, root, wanted, actor=actor)
        return SyncReport(ingested=jobs, deleted=deleted)

    def sync_deletions(
        self, tenant: str, root: Path, wanted: set[str], actor: str | None = None
    ) -> list[str]:
        """Delete the tenant's documents from files under ``root`` whose ids are not in
        ``wanted``; return their ids. Documents with no catalog row (no known source), uploads
        and files outside ``root`` are kept."""
        under = self._documents_under(tenant, root.resolve())
        return [
            doc_id
            for doc_id in sorted(set(under) - wanted)
            if self.delete(tenant, doc_id, actor=actor or "system", via="sync")
        ]

    def _documents_under(self, tenant: str, root: Path) -> list[str]:
        """Ids of the tenant's catalogued documents whose source is a file under ``root``."""
        return [
            d.doc_id for d in self.catalog.documents(tenant) if self._file_under(d.source_uri, root)
        ]

    @staticmethod
    def _file_under(source_uri: str, root: Path) -> bool:
        """``source_uri`` is a ``file:`` URI of a path strictly under the resolved ``root``
        (prefix with a trailing separator: ``/data/a`` does not hold ``/data/ab/x.pdf``)."""
        import os
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        parsed = urlparse(source_uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            return False
        path = os.path.normpath(url2pathname(parsed.path))
        prefix = str(root).rstrip(os.sep) + os.sep
        return path.startswith(prefix)

    @staticmethod
    def _list_files(folder: Path) -> list[Path]:
        """Every non-hidden file under ``folder``; raises NOT_FOUND if any part of it cannot be
        listed (a silently skipped subfolder would look like deleted files)."""
        import os

        if not folder.is_dir():
            what = "not a folder" if folder.exists() else "no such folder"
            raise PageSightError(ErrorCode.NOT_FOUND, Stage.INPUT, f"{what}: {folder}")

        def fail(exc: OSError) -> None:
            raise PageSightError(
                ErrorCode.NOT_FOUND,
                Stage.INPUT,
                f"cannot list {exc.filename or folder}: {exc.strerror or exc}; nothing was synced",
            ) from exc

        files = [
            Path(parent) / name
            for parent, _, names in os.walk(folder, onerror=fail)
            for name in names
            if not name.startswith(".")
        ]
        return sorted(p for p in files if p.is_file())

    def delete(self, tenant: str, doc_id: str, *, actor: str = "system", via: str = "") -> bool:
        """Remove a document everywhere: points, catalog rows, page images no page still uses;
        the audit log keeps who deleted what, when."""
        versions = self.store.document_versions(tenant)
        document = self.catalog.document(tenant, doc_id)
        for store in self._stores():
            store.delete_document(tenant, doc_id)
            store.flush()
        orphans = self.catalog.delete_document(tenant, doc_id)
        for ref in orphans or []:
            self.images.delete(ref)
        found = doc_id in versions or orphans is not None
        if found:
            self.catalog.audit(
                AuditEntry(
                    at=datetime.now(UTC),
                    tenant=tenant,
                    actor=actor,
                    action="delete",
                    doc_id=doc_id,
                    version=document.version if document else versions.get(doc_id),
                    source_uri=document.source_uri if document else None,
                    acl=document.acl if document else [],
                    via=via,
                )
            )
        return found

    # -- one job ----------------------------------------------------------------------------

    def queue(self, req: IngestRequest) -> IngestJob:
        """Record a PENDING job for ``req`` (the catalog is the queue: a restart resumes it)."""
        uri = req.source_uri or req.path.resolve().as_uri()
        return self.catalog.new_job(
            tenant=req.tenant,
            source_uri=uri,
            path=str(req.path),
            doc_id=check_doc_id(req.doc_id) if req.doc_id else make_doc_id(req.tenant, uri),
            acl=list(req.acl),
            valid_until=req.valid_until,
            submitted_by=req.actor,
        )

    def unchanged(self, req: IngestRequest, version: str) -> IngestJob:
        """Record that ``req`` brought nothing new (its document already is ``version`` with
        this ACL): a READY job marked unchanged, so the caller has a job to look at."""
        job = self.queue(req)
        return self.catalog.advance(job, JobState.READY, version=version, unchanged=True)

    def run(
        self, job: IngestJob, password: str | None = None, progress: IngestProgress | None = None
    ) -> IngestJob:
        """Take ``job`` to READY or FAILED (never raises for a bad file: the job says why).

        The stages are the public ones ``pagesight.ingestion.bulk`` runs across a Ray cluster:
        :func:`source_of` + ``parse``, :func:`chunk_document`, :class:`ChunkPointEmbedder`,
        :class:`PagePointEmbedder`, :class:`DocumentWriter`; this method adds the job states.
        """
        stage = Stage.INPUT
        try:
            job = self.catalog.advance(job, JobState.RENDERING, attempts=job.attempts + 1)
            path = Path(job.path)
            if not path.is_file():
                raise PageSightError(
                    ErrorCode.NOT_FOUND, Stage.INPUT, f"no such file: {display_name(job)}"
                )
            version = file_version(path)
            if self.writer.already_indexed(job, version):
                return self.catalog.advance(job, JobState.READY, version=version, unchanged=True)
            job = self.catalog.advance(job, JobState.PARSING, version=version)
            stage = Stage.PARSE
            parsed = self.parse(
                path,
                self.settings,
                source_of(job, password),
                progress=(lambda done, total: progress(job, done, total)) if progress else None,
            )
            stage = Stage.CHUNK
            structure, chunks = chunk_document(parsed, self.chunker)
            job = self.catalog.advance(job, JobState.EMBEDDING, **job_counts(parsed, chunks))
            stage = Stage.EMBED
            prepared = PreparedDocument(
                parsed=parsed,
                structure=structure,
                points=self.chunk_points.points(parsed, chunks, job.acl),
                page_points=self.page_points.points(parsed, job.acl) if self.page_points else [],
            )
            job = self.catalog.advance(job, JobState.INDEXING)
            stage = Stage.INDEX
            self.writer.write([prepared], job.submitted_by)
            return self.catalog.advance(job, JobState.READY)
        except Exception as exc:  # a bad file, a bug or an engine failure: the batch goes on
            code, failed_stage, message = failure_of(exc, stage, job)
            return self.catalog.fail(job, code, failed_stage, message)

    def _stores(self) -> list[VectorStore]:
        return self.writer.stores()


# -- the stages, public: the single-process Ingestor and the bulk pipeline share them ---------


def source_of(job: IngestJob, password: str | None = None, title: str | None = None) -> SourceInfo:
    """What the parser needs to know about ``job``'s file besides its bytes."""
    return SourceInfo(
        tenant=job.tenant,
        acl=job.acl,
        source_uri=job.source_uri,
        doc_id=job.doc_id,
        password=password,
        title=title,
        valid_until=job.valid_until,
    )


def chunk_document(
    parsed: ParsedDocument, chunker: Chunker
) -> tuple[DocumentStructure, list[Chunk]]:
    """The chunk stage: capture the structure (stamping page labels on ``parsed``), then chunk."""
    structure = with_structure(parsed)
    return structure, chunker(parsed)


def job_counts(parsed: ParsedDocument, chunks: Sequence[Chunk]) -> dict[str, Any]:
    """The job fields a parsed and chunked document fills in (pages, chunks, warnings)."""
    return {
        "pages": len(parsed.pages),
        "chunks": len(chunks),
        "warnings": [f"{w.code.value}: {w.message}" for w in parsed.warnings],
    }


def failure_of(exc: BaseException, stage: Stage, job: IngestJob) -> tuple[ErrorCode, str, str]:
    """(code, stage, message) a job records for ``exc`` raised in ``stage``: a PageSightError
    keeps its own; anything else is an engine failure of the stage (EMBED_FAILED,
    INDEX_FAILED) or a bug (INTERNAL). Messages never name the service's copy of the file."""
    if isinstance(exc, PageSightError):
        log.warning("ingest failed for %s: %s", job.path, exc)
        return exc.code, exc.stage.value, redact_path(exc.message, job)
    log.error("ingest crashed for %s", job.path, exc_info=exc)
    code = {Stage.EMBED: ErrorCode.EMBED_FAILED, Stage.INDEX: ErrorCode.INDEX_FAILED}.get(
        stage, ErrorCode.INTERNAL
    )
    return code, stage.value, redact_path(f"{type(exc).__name__}: {exc}", job)


@dataclass
class PreparedDocument:
    """One document ready to write: parsed, chunked and embedded."""

    parsed: ParsedDocument
    structure: DocumentStructure
    points: list[IndexPoint]
    page_points: list[IndexPoint]


class ChunkPointEmbedder:
    """The text embed stage: chunks to points with dense and BM25 vectors and their payload."""

    def __init__(self, embedder: TextEmbedder, sparse: SparseEncoder, batch: int = 64) -> None:
        self.embedder = embedder
        self.sparse = sparse
        self.batch = batch

    def points(
        self, parsed: ParsedDocument, chunks: list[Chunk], acl: list[str]
    ) -> list[IndexPoint]:
        title = parsed.document.title
        labels = {p.page_number: p.label for p in parsed.pages if p.label}
        texts = [chunk_index_text(c, title) for c in chunks]
        points: list[IndexPoint] = []
        for start in range(0, len(chunks), self.batch):
            batch = chunks[start : start + self.batch]
            batch_texts = texts[start : start + self.batch]
            dense = self.embedder.embed_documents(batch_texts)
            sparse = self.sparse.encode_documents(batch_texts)
            for chunk, vector, lexical in zip(batch, dense, sparse, strict=True):
                points.append(
                    IndexPoint(
                        id=point_id(parsed.document.tenant, chunk.chunk_id),
                        dense={DENSE_VECTOR: vector.tolist()},
                        sparse={SPARSE_VECTOR: lexical},
                        payload=chunk_payload(chunk, parsed, acl, labels),
                    )
                )
        return points


class PagePointEmbedder:
    """The page embed stage: ColQwen2 multi-vectors (and their pooled first stage) for every
    rendered page. Pages of several documents share a forward pass (:meth:`points_many`), which
    is what keeps a GPU busy when documents are short."""

    def __init__(
        self, page_embedder: PageEmbedder, images: PageImageStore, batch: int = _PAGE_EMBED_BATCH
    ) -> None:
        self.page_embedder = page_embedder
        self.images = images
        self.batch = batch

    def points(self, parsed: ParsedDocument, acl: list[str]) -> list[IndexPoint]:
        return self.points_many([(parsed, acl)])[0]

    def points_many(
        self, documents: Sequence[tuple[ParsedDocument, list[str]]]
    ) -> list[list[IndexPoint]]:
        """One list of page points per document, in order. Page images are decoded ``batch``
        at a time on a few threads, the next batch while the model embeds this one: decoding a
        stored PNG page (~15 ms on one core) costs half of what an H200 spends embedding it
        (~26 ms), so in line it left the GPU idle a third of the time. At most two batches of
        images are held (bounds image memory)."""
        pages = [
            (index, page)
            for index, (parsed, _) in enumerate(documents)
            for page in parsed.pages
            if page.image_ref
        ]
        found: list[list[IndexPoint]] = [[] for _ in documents]
        batches = [pages[start : start + self.batch] for start in range(0, len(pages), self.batch)]
        with ThreadPoolExecutor(_DECODE_WORKERS, thread_name_prefix="page-decode") as pool:
            for batch, images in one_batch_ahead(
                batches,
                lambda batch: [pool.submit(self._decode, page) for _, page in batch],
                lambda pending: [future.result() for future in pending],
            ):
                embedded_pages = self.page_embedder.embed_pages(images)
                for (index, page), embedded in zip(batch, embedded_pages, strict=True):
                    parsed, acl = documents[index]
                    found[index].append(self._point(parsed, acl, page, embedded))
        return found

    def _decode(self, page: Page) -> Image.Image:
        from PIL import Image

        with Image.open(self.images.path(str(page.image_ref))) as img:
            return img.convert("RGB")

    @staticmethod
    def _point(
        parsed: ParsedDocument, acl: list[str], page: Page, embedded: PageEmbedding
    ) -> IndexPoint:
        doc = parsed.document
        image_rows = np.flatnonzero(embedded.image_mask)
        return IndexPoint(
            id=point_id(doc.tenant, f"{doc.doc_id}/{doc.version}/page/{page.page_number}"),
            multivector=page_vectors(embedded),
            payload={
                "doc_id": doc.doc_id,
                "version": doc.version,
                "tenant": doc.tenant,
                "acl": acl or [EVERYONE],
                "valid_until": doc.valid_until.timestamp() if doc.valid_until else None,
                "page_number": page.page_number,
                "label": page.label,
                "width": page.width,
                "height": page.height,
                "grid": list(embedded.grid),
                # Image patches are one contiguous run of rows in ColQwen2's prompt.
                "image_rows": [int(image_rows[0]), len(image_rows)],
                "image_ref": page.image_ref,
                "title": doc.title,
                "source_uri": doc.source_uri,
            },
        )


def page_vectors(embedded: PageEmbedding) -> dict[str, list[list[float]]]:
    """The full rows (exact MaxSim) and their 20 block means (stages 0 and 1)."""
    return {
        PAGE_VECTOR: embedded.vectors.tolist(),
        PAGE_POOLED_VECTOR: first_stage_rows(
            embedded.vectors, embedded.image_mask, embedded.grid
        ).tolist(),
    }


class DocumentWriter:
    """The write stage: points into the index, then the document into the catalog (the
    catalog is what says a document is done, so it is written last).

    :meth:`write` takes several documents so that a bulk run upserts in large batches; each
    document is then finished on its own: older versions' points deleted (only now, so a reader
    never sees a document vanish mid-update), catalog rows written, an audit entry for a
    replaced version.
    """

    def __init__(
        self,
        store: VectorStore,
        catalog: CatalogRepository,
        images: PageImageStore,
        page_store: VectorStore | None = None,
    ) -> None:
        self.store = store
        self.catalog = catalog
        self.images = images
        self.page_store = page_store

    def stores(self) -> list[VectorStore]:
        return [self.store] + ([self.page_store] if self.page_store is not None else [])

    def already_indexed(self, job: IngestJob, version: str) -> bool:
        """This version, with this job's ACL and validity, is in the catalog and in every index
        (a page index added later counts: enabling visual search re-ingests what it has not
        seen; a changed ACL re-writes the payloads that carry it)."""
        doc = self.catalog.document(job.tenant, job.doc_id)
        if doc is None or not is_current(doc, version, job.acl, job.valid_until):
            return False
        for store in self.stores():
            stored = store.document_versions(job.tenant).get(job.doc_id)
            # a file with no text wrote no chunks: the catalog's count says so, not the index
            empty = store is self.store and stored is None and doc.chunk_count == 0
            if stored != version and not empty:
                return False
        return True

    def write(self, documents: Sequence[PreparedDocument], actor: str | None = None) -> None:
        """Write ``documents`` (point ids are deterministic: writing one twice changes nothing)."""
        pairs = [(self.store, [p for d in documents for p in d.points])]
        if self.page_store is not None:
            pairs.append((self.page_store, [p for d in documents for p in d.page_points]))
        for store, points in pairs:
            if points:
                store.upsert(points)
        for document in documents:
            self._finish(document, actor)

    def _finish(self, prepared: PreparedDocument, actor: str | None) -> None:
        doc = prepared.parsed.document
        previous = self.catalog.document(doc.tenant, doc.doc_id)
        kept = ((self.store, prepared.points), (self.page_store, prepared.page_points))
        for store, points in kept:
            if store is None:
                continue
            store.delete_document(doc.tenant, doc.doc_id, keep_version=doc.version)
            if previous is not None and previous.version == doc.version:
                # The same bytes parsed again under newer rules: points of the old parse that
                # the new one did not overwrite (it made fewer chunks) go too.
                store.delete_points(doc.tenant, doc.doc_id, keep={p.id for p in points})
            store.flush()
        doc.chunk_count = len(prepared.points)
        for ref in self.catalog.put_document(doc, prepared.parsed.pages, prepared.structure):
            self.images.delete(ref)
        if previous is not None:
            self.catalog.audit(
                AuditEntry(
                    at=datetime.now(UTC),
                    tenant=doc.tenant,
                    actor=actor or "system",
                    action="replace",
                    doc_id=doc.doc_id,
                    version=previous.version,
                    new_version=doc.version,
                    source_uri=previous.source_uri,
                    acl=previous.acl,
                    via=_via(actor),
                )
            )
