"""Bulk ingestion: many files through the same stages as ``ingest``, spread over a Ray cluster.

``pagesight bulk SOURCE`` runs list -> plan -> parse (+ chunk) -> text embed -> page embed ->
write. This module holds every stage as a plain class, testable without Ray;
``pagesight.services.bulk_job`` wires them into a Ray Data streaming pipeline (parse as CPU tasks,
the embedders as actor pools, ColQwen2 on GPU actors) whose output the driver writes in batches.

SOURCE is a folder (every non-hidden file under it), a glob (``'scans/**/*.pdf'``), one file,
or a JSONL manifest (``*.jsonl``), one record per line::

    {"uri": "file:///data/a.pdf", "tenant": "acme", "doc_id": "a-1", "acl": ["finance"],
     "title": "Annual report", "valid_until": "2027-01-01T00:00:00Z"}

``uri`` (a ``file:`` URI or a path, relative paths from the manifest's folder) and ``tenant``
are required; ``doc_id`` defaults to the one ``ingest`` gives the same file (uuid5 of tenant
and file URI), ``acl`` to everyone. Passwords never travel in a manifest (nothing stores them).

Exactly once, resumable. The catalog is the source of truth for what is done: the driver is its
only writer, a document is READY only after its points are written, and point ids are
deterministic, so re-running a killed run (driver or worker) writes the same points again and
skips what is READY at the same version. The killed run's unfinished jobs are taken over, not
duplicated. A file that fails is recorded FAILED with its stage error code and the run goes on.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import pickle
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.ids import check_doc_id, file_version, make_doc_id
from pagesight.core.protocols import CatalogRepository
from pagesight.core.settings import BulkOptions, Settings
from pagesight.core.types import Chunk, DocumentStructure, IngestJob, JobState, ParsedDocument
from pagesight.index.base import IndexPoint
from pagesight.ingestion.ingest import (
    DocumentWriter,
    PreparedDocument,
    chunk_document,
    failure_of,
    job_counts,
    source_of,
)

log = logging.getLogger(__name__)

#: The one column of the pipeline's rows: a pickled :class:`InFlight` (opaque bytes keep Ray
#: Data from converting nested documents and vectors to Arrow at every hop).
DOC_COLUMN = "doc"

#: Stage names, in pipeline order, as the report shows them.
STAGES = ("parse", "text_embed", "page_embed", "write")


class BulkItem(BaseModel):
    """One manifest record (a folder or glob gives the same, with the run's tenant and ACL)."""

    model_config = ConfigDict(extra="forbid")

    uri: str = Field(min_length=1, description="file: URI or path of the file")
    tenant: str = Field(min_length=1)
    doc_id: str | None = None
    acl: list[str] = Field(default_factory=list)
    title: str | None = None
    valid_until: datetime | None = None


def list_sources(
    source: str, options: BulkOptions, tenant: str = "default", acl: list[str] | None = None
) -> list[BulkItem]:
    """The files ``source`` names (module doc); INVALID_REQUEST for a bad manifest line or more
    than ``max_files``, NOT_FOUND when nothing matches."""
    path = Path(source)
    if path.is_file() and path.suffix.lower() in (".jsonl", ".ndjson"):
        return read_manifest(path, options)
    if path.is_dir():
        files = _files_under(path)
    elif path.is_file():
        files = [path]
    elif glob.has_magic(source):
        files = sorted(Path(p) for p in glob.glob(source, recursive=True) if Path(p).is_file())
    else:
        raise PageSightError(ErrorCode.NOT_FOUND, Stage.INPUT, f"no such file or folder: {source}")
    if not files:
        raise PageSightError(ErrorCode.NOT_FOUND, Stage.INPUT, f"no files found in {source}")
    _check_count(len(files), options, source)
    return [BulkItem(uri=p.resolve().as_uri(), tenant=tenant, acl=list(acl or [])) for p in files]


def _files_under(folder: Path) -> list[Path]:
    found = [
        Path(parent) / name
        for parent, dirs, names in os.walk(folder)
        for name in names
        if not name.startswith(".") and not any(part.startswith(".") for part in Path(parent).parts)
    ]
    return sorted(p for p in found if p.is_file())


def _check_count(count: int, options: BulkOptions, source: str) -> None:
    if count > options.max_files:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.INPUT,
            f"{source} lists {count} files, more than PAGESIGHT_BULK__MAX_FILES="
            f"{options.max_files}: split the run",
        )


def read_manifest(path: Path, options: BulkOptions) -> list[BulkItem]:
    """The manifest's records; the first bad line refuses the whole run (nothing was queued)."""
    items: list[BulkItem] = []
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            if len(raw) > options.max_manifest_line_bytes:
                raise _manifest_error(
                    path, number, f"longer than {options.max_manifest_line_bytes} bytes"
                )
            if not raw.strip():
                continue
            try:
                item = BulkItem.model_validate_json(raw)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise _manifest_error(
                    path, number, f"{where + ': ' if where else ''}{first['msg']}"
                ) from None
            file = _local_path(item.uri, path.parent)
            if file is None:
                raise _manifest_error(
                    path, number, f"{item.uri!r} is not a local file or file: URI"
                )
            items.append(item.model_copy(update={"uri": file.resolve().as_uri()}))
            _check_count(len(items), options, str(path))
    if not items:
        raise PageSightError(ErrorCode.NOT_FOUND, Stage.INPUT, f"{path} lists no files")
    return items


def _manifest_error(path: Path, line: int, message: str) -> PageSightError:
    return PageSightError(
        ErrorCode.INVALID_REQUEST, Stage.INPUT, f"{path.name} line {line}: {message}"
    )


def _local_path(uri: str, base: Path) -> Path | None:
    parts = urlsplit(uri)
    if parts.scheme == "file" and parts.netloc in ("", "localhost"):
        return Path(url2pathname(parts.path))
    if parts.scheme and len(parts.scheme) > 1:  # http:, s3:, ... (a one-letter one is a drive)
        return None
    path = Path(uri)
    return path if path.is_absolute() else base / path


# -- plan: what the run has to do -----------------------------------------------------------


@dataclass
class BulkTask:
    """One file to take through the pipeline (its job is PARSING in the catalog)."""

    job: IngestJob
    version: str
    title: str | None = None


@dataclass
class BulkPlan:
    tasks: list[BulkTask] = field(default_factory=list)
    #: READY at the same version, ACL and validity: nothing to do
    skipped: list[str] = field(default_factory=list)
    #: failed before the pipeline (missing file, a doc_id listed twice)
    failed: list[IngestJob] = field(default_factory=list)
    #: unfinished jobs another live worker holds (a server replica, another run): left to it
    held: list[str] = field(default_factory=list)


class BulkPlanner:
    """Turns listed items into jobs: skips what is done, takes over a killed run's unfinished
    jobs, queues the rest. Runs in the driver, the catalog's one writer.

    Every job it queues is claimed for ``worker`` (see :mod:`pagesight.ingestion.claims`), so an
    index service polling the same database never runs a bulk run's job too; the caller keeps the
    claims alive for the run (:func:`pagesight.ingestion.claims.held_claims`)."""

    def __init__(
        self,
        catalog: CatalogRepository,
        writer: DocumentWriter,
        actor: str | None = None,
        *,
        worker: str,
        lease_s: float,
    ) -> None:
        self.catalog = catalog
        self.writer = writer
        self.actor = actor
        self.worker = worker
        self.lease_s = lease_s

    def plan(self, items: Iterable[BulkItem]) -> BulkPlan:
        plan = BulkPlan()
        unfinished = {(j.tenant, j.doc_id): j for j in self.catalog.unfinished_jobs()}
        seen: set[tuple[str, str]] = set()
        for item in items:
            job = self._job(item, unfinished)
            key = (job.tenant, job.doc_id)
            try:
                if key in seen:
                    raise PageSightError(
                        ErrorCode.CONFLICT,
                        Stage.INPUT,
                        f"document {job.doc_id} is listed more than once in this run",
                    )
                seen.add(key)
                path = Path(job.path)
                if not path.is_file():
                    raise PageSightError(
                        ErrorCode.NOT_FOUND, Stage.INPUT, f"no such file: {job.source_uri}"
                    )
                version = file_version(path)
            except PageSightError as exc:
                plan.failed.append(self.catalog.fail(self._saved(job), exc.code, *_rest(exc)))
                continue
            if self.writer.already_indexed(job, version):
                if key in unfinished:  # a killed run's job for a document done since
                    self.catalog.advance(job, JobState.READY, version=version, unchanged=True)
                plan.skipped.append(job.doc_id)
                continue
            job = self._saved(job)
            if self.catalog.claim_job(self.worker, self.lease_s, job.job_id) is None:
                plan.held.append(job.doc_id)
                continue
            job = self.catalog.advance(
                job, JobState.PARSING, version=version, attempts=job.attempts + 1
            )
            plan.tasks.append(BulkTask(job=job, version=version, title=item.title))
        return plan

    def _job(self, item: BulkItem, unfinished: dict[tuple[str, str], IngestJob]) -> IngestJob:
        """The killed run's unfinished job for this document, else a new one (not yet saved:
        a skipped document gets no job)."""
        doc_id = check_doc_id(item.doc_id) if item.doc_id else make_doc_id(item.tenant, item.uri)
        old = unfinished.get((item.tenant, doc_id))
        path = _local_path(item.uri, Path.cwd()) or Path(item.uri)
        if old is not None:
            return old.model_copy(
                update={
                    "source_uri": item.uri,
                    "path": str(path),
                    "acl": list(item.acl),
                    "valid_until": item.valid_until,
                }
            )
        now = datetime.now().astimezone()
        return IngestJob(
            job_id="",
            tenant=item.tenant,
            doc_id=doc_id,
            source_uri=item.uri,
            path=str(path),
            acl=list(item.acl),
            valid_until=item.valid_until,
            submitted_by=self.actor,
            created_at=now,
            updated_at=now,
        )

    def _saved(self, job: IngestJob) -> IngestJob:
        if job.job_id:
            return job
        return self.catalog.new_job(
            tenant=job.tenant,
            source_uri=job.source_uri,
            path=job.path,
            doc_id=job.doc_id,
            acl=job.acl,
            valid_until=job.valid_until,
            submitted_by=job.submitted_by,
        )


def _rest(exc: PageSightError) -> tuple[str, str]:
    return exc.stage.value, exc.message


# -- the documents in flight and the stages ------------------------------------------------


@dataclass
class InFlight:
    """One document as it travels the pipeline; a stage that fails sets ``error`` and the
    later stages pass it on untouched, to be recorded by the writer."""

    job: IngestJob
    title: str | None = None
    parsed: ParsedDocument | None = None
    structure: DocumentStructure | None = None
    chunks: list[Chunk] = field(default_factory=list)
    points: list[IndexPoint] = field(default_factory=list)
    page_points: list[IndexPoint] = field(default_factory=list)
    #: (code, stage, message) of the first failure
    error: tuple[ErrorCode, str, str] | None = None
    #: seconds each stage spent on this document
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def pages(self) -> int:
        return len(self.parsed.pages) if self.parsed is not None else 0

    def dumps(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def loads(data: bytes) -> InFlight:
        loaded = pickle.loads(data)  # noqa: S301  # our own InFlight, between our stages
        if not isinstance(loaded, InFlight):  # pragma: no cover - a wiring bug
            raise TypeError(f"expected an InFlight row, got {type(loaded).__name__}")
        return loaded


def task_rows(tasks: Iterable[BulkTask]) -> list[dict[str, bytes]]:
    """The pipeline's input rows."""
    return [{DOC_COLUMN: InFlight(job=t.job, title=t.title).dumps()} for t in tasks]


def _documents(batch: dict[str, Any]) -> list[InFlight]:
    return [InFlight.loads(bytes(row)) for row in batch[DOC_COLUMN]]


def _batch(documents: list[InFlight]) -> dict[str, list[bytes]]:
    return {DOC_COLUMN: [d.dumps() for d in documents]}


class ParseStage:
    """Parse (in a child process with the file's time and memory limit) and chunk.

    A callable over a batch of rows, so that Ray Data can run it as a task; nothing heavy is
    held between calls (each parse runs in its own child).

    Several parse tasks share a machine, one per ``bulk.parse_cpus``: unless
    ``parse.layout_threads`` says otherwise, each task's layout model keeps to that many
    threads instead of one per core, so that tasks do not fight over the cores."""

    def __init__(
        self, settings: Settings, parse: Callable[..., ParsedDocument] | None = None
    ) -> None:
        from pagesight.ingestion.chunk import Chunker
        from pagesight.ingestion.isolation import parse_isolated

        if not settings.parse.layout_threads:
            threads = max(1, round(settings.bulk.parse_cpus))
            settings = settings.model_copy(
                update={"parse": settings.parse.model_copy(update={"layout_threads": threads})}
            )
        self.settings = settings
        self.parse = parse or parse_isolated
        self.chunker = Chunker(settings.chunk)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[bytes]]:
        return _batch([self.one(d) for d in _documents(batch)])

    def one(self, doc: InFlight) -> InFlight:
        started = time.perf_counter()
        stage = Stage.PARSE
        try:
            doc.parsed = self.parse(
                Path(doc.job.path), self.settings, source_of(doc.job, title=doc.title)
            )
            stage = Stage.CHUNK
            doc.structure, doc.chunks = chunk_document(doc.parsed, self.chunker)
        except Exception as exc:
            doc.error = failure_of(exc, stage, doc.job)
        doc.seconds["parse"] = time.perf_counter() - started
        return doc


class _EngineStage:
    """A stage run as a Ray actor: its engine (a model) loads on first use, once per actor."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._engine: Any = None

    def engine(self) -> Any:
        if self._engine is None:
            self._engine = self.build()
        return self._engine

    def build(self) -> Any:  # pragma: no cover - each stage builds its own
        raise NotImplementedError


class TextEmbedStage(_EngineStage):
    """Dense + BM25 vectors for every chunk."""

    def build(self) -> Any:
        from pagesight.ingestion.ingest import ChunkPointEmbedder
        from pagesight.models.sparse import Bm25Encoder
        from pagesight.models.text_embedder import SentenceTransformerEmbedder

        return ChunkPointEmbedder(
            SentenceTransformerEmbedder(self.settings.embedder),
            Bm25Encoder(self.settings.sparse),
        )

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[bytes]]:
        documents = _documents(batch)
        for doc in documents:
            if doc.error is not None or doc.parsed is None:
                continue
            started = time.perf_counter()
            try:
                doc.points = self.engine().points(doc.parsed, doc.chunks, doc.job.acl)
            except Exception as exc:
                doc.error = failure_of(exc, Stage.EMBED, doc.job)
            doc.seconds["text_embed"] = time.perf_counter() - started
        return _batch(documents)


class PageEmbedStage(_EngineStage):
    """ColQwen2 page vectors, on a GPU where there is one. The pages of a batch's documents
    share forward passes (``page_batch_pages`` at a time)."""

    def build(self) -> Any:
        from pagesight.ingestion.ingest import PagePointEmbedder
        from pagesight.ingestion.render import PageImageStore
        from pagesight.models.colqwen import ColQwen2Embedder

        return PagePointEmbedder(
            ColQwen2Embedder(self.settings.visual),
            PageImageStore(self.settings.page_image_dir, self.settings.render),
            batch=self.settings.bulk.page_batch_pages,
        )

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[bytes]]:
        documents = _documents(batch)
        todo = [d for d in documents if d.error is None and d.parsed is not None]
        if todo:
            started = time.perf_counter()
            try:
                found = self.engine().points_many([(d.parsed, d.job.acl) for d in todo])
            except Exception as exc:  # the batch fails together: each document records why
                found = None
                for doc in todo:
                    doc.error = failure_of(exc, Stage.EMBED, doc.job)
            elapsed = time.perf_counter() - started
            pages = sum(d.pages for d in todo) or 1
            for index, doc in enumerate(todo):
                if found is not None:
                    doc.page_points = found[index]
                doc.seconds["page_embed"] = elapsed * doc.pages / pages
        return _batch(documents)


# -- progress and the report ---------------------------------------------------------------


@dataclass
class BulkProgress:
    """Where a run (``bulk`` or ``reindex``) stands. One clock, ``started``, times the whole
    run: the progress lines' ``elapsed_s`` and the report's ``wall_s`` are the same reading.

    ``phase`` goes ``planned`` (the plan is known, nothing started: :meth:`plan_dict`) ->
    ``starting`` (Ray and the first stages starting) -> ``running`` -> ``done``. Pages are
    counted beside the run (:mod:`pagesight.ingestion.page_count`): ``pages_counted`` grows
    until ``files_counted`` reaches ``to_do``."""

    files_total: int
    files_done: int = 0
    pages_done: int = 0
    failed: int = 0
    skipped: int = 0
    elapsed_s: float = 0.0
    last: IngestJob | None = None
    command: str = "bulk"
    phase: str = "planned"
    #: files the pipeline has to take (the rest were done, held, missing or failed before)
    to_do: int = 0
    #: another live worker's unfinished jobs, left to it (counted in ``skipped`` too)
    held: int = 0
    #: re-index: documents whose source file is gone or changed
    missing: int = 0
    pages_counted: int = 0
    files_counted: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def pages_per_s(self) -> float:
        return self.pages_done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def tick(self) -> BulkProgress:
        """Read the clock (until the run is done): ``elapsed_s`` is now's."""
        if self.phase != "done":
            self.elapsed_s = time.perf_counter() - self.started
        return self

    def finish(self) -> float:
        """The run's one wall time (the clock stops here)."""
        self.tick()
        self.phase = "done"
        return self.elapsed_s

    def plan_dict(self) -> dict[str, Any]:
        """The ``plan`` event: what the run found before any work started."""
        return {
            "event": "plan",
            "command": self.command,
            "files": self.files_total,
            "already_done": self.skipped - self.held,
            "held": self.held,
            "missing": self.missing,
            "failed": self.failed,
            "to_do": self.to_do,
        }

    def as_dict(self) -> dict[str, Any]:
        shown = {
            "event": "progress",
            "command": self.command,
            "phase": self.phase,
            "files_total": self.files_total,
            "to_do": self.to_do,
            "files_done": self.files_done,
            "pages_done": self.pages_done,
            "pages_counted": self.pages_counted,
            "files_counted": self.files_counted,
            "pages_per_s": round(self.pages_per_s, 3),
            "failed": self.failed,
            "skipped": self.skipped,
            "elapsed_s": round(self.elapsed_s, 3),
        }
        if self.last is not None:
            shown["last"] = {
                "doc_id": self.last.doc_id,
                "state": self.last.state.value,
                "error_code": self.last.error_code.value if self.last.error_code else None,
            }
        return shown


@dataclass
class StageStats:
    """One stage's share of a run. ``busy_s`` sums the seconds its workers spent on documents;
    ``busy_share`` is that over (wall time x workers): near 1 means the stage is the
    bottleneck, near 0 that it waits on others."""

    workers: int
    busy_s: float = 0.0
    documents: int = 0
    pages: int = 0
    failures: Counter[str] = field(default_factory=Counter)

    def as_dict(self, wall_s: float) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "documents": self.documents,
            "pages": self.pages,
            "busy_s": round(self.busy_s, 3),
            "busy_share": round(self.busy_s / (wall_s * self.workers), 4) if wall_s > 0 else 0.0,
            # one worker's rate while busy: the stage's capacity is this x workers
            "pages_per_busy_s": round(self.pages / self.busy_s, 3) if self.busy_s > 0 else None,
            "failures": dict(sorted(self.failures.items())),
        }


@dataclass
class BulkReport:
    """What ``--report FILE`` writes (JSON) and the command's summary."""

    source: str
    files: int
    stages: dict[str, StageStats]
    jobs: list[IngestJob] = field(default_factory=list)
    skipped: int = 0
    pages: int = 0
    wall_s: float = 0.0
    #: set when the pipeline itself stopped (jobs it had not finished stay resumable)
    aborted: str | None = None

    @property
    def failed(self) -> list[IngestJob]:
        return [j for j in self.jobs if j.state == JobState.FAILED]

    def as_dict(self) -> dict[str, Any]:
        failures = Counter(
            f"{j.error_stage}/{j.error_code.value}" for j in self.failed if j.error_code
        )
        return {
            "source": self.source,
            "files": self.files,
            "ready": sum(j.state == JobState.READY for j in self.jobs),
            "failed": len(self.failed),
            "skipped": self.skipped,
            "unfinished": self.files - self.skipped - len(self.jobs),
            "pages": self.pages,
            "wall_s": round(self.wall_s, 3),
            "pages_per_s": round(self.pages / self.wall_s, 3) if self.wall_s > 0 else None,
            "failures": dict(sorted(failures.items())),
            "stages": {name: s.as_dict(self.wall_s) for name, s in self.stages.items()},
            "aborted": self.aborted,
            "jobs": [j.status().model_dump(mode="json") for j in self.jobs],
        }


# -- write: the driver's end of the pipeline -----------------------------------------------


class BulkWriter:
    """Consumes finished documents: records failures, writes the rest in batches of
    ``write_batch_docs`` and moves their jobs to READY. The catalog's one writer."""

    def __init__(
        self,
        catalog: CatalogRepository,
        writer: DocumentWriter,
        options: BulkOptions,
        report: BulkReport,
        progress: BulkProgress,
        on_progress: Callable[[BulkProgress], None] | None = None,
    ) -> None:
        self.catalog = catalog
        self.writer = writer
        self.options = options
        self.report = report
        self.progress = progress
        self.on_progress = on_progress
        self._pending: list[tuple[IngestJob, InFlight]] = []
        self._last_write = time.perf_counter()

    def consume(self, documents: Iterator[InFlight]) -> None:
        for doc in documents:
            self._account(doc)
            if doc.error is not None or doc.parsed is None:
                code, stage, message = doc.error or (ErrorCode.INTERNAL, "parse", "no result")
                self._done(self.catalog.fail(doc.job, code, stage, message))
                continue
            job = self.catalog.advance(
                doc.job, JobState.INDEXING, **job_counts(doc.parsed, doc.chunks)
            )
            self._pending.append((job, doc))
            if batch_due(len(self._pending), self._last_write, self.options):
                self.flush()
        self.flush()

    def flush(self) -> None:
        """Write what is pending (a failed batch is retried one document at a time, so one
        document the index refuses fails alone)."""
        batch, self._pending = self._pending, []
        if not batch:
            return
        started = time.perf_counter()
        try:
            self.writer.write([_prepared(doc) for _, doc in batch], batch[0][0].submitted_by)
            jobs = [self.catalog.advance(job, JobState.READY) for job, _ in batch]
        except Exception:
            jobs = [self._write_one(job, doc) for job, doc in batch]
        self._last_write = time.perf_counter()
        write = self.report.stages["write"]
        write.busy_s += self._last_write - started
        for job, (_, doc) in zip(jobs, batch, strict=True):
            write.documents += 1
            write.pages += doc.pages
            if job.error_code is not None:
                write.failures[job.error_code.value] += 1
            self._done(job)

    def _write_one(self, job: IngestJob, doc: InFlight) -> IngestJob:
        try:
            self.writer.write([_prepared(doc)], job.submitted_by)
            return self.catalog.advance(job, JobState.READY)
        except Exception as exc:
            return self.catalog.fail(job, *failure_of(exc, Stage.INDEX, job))

    def _account(self, doc: InFlight) -> None:
        for name, seconds in doc.seconds.items():
            stats = self.report.stages[name]
            stats.busy_s += seconds
            stats.documents += 1
            stats.pages += doc.pages
        if doc.error is not None:
            stage = {"chunk": "parse", "embed": _embed_stage(doc)}.get(doc.error[1], doc.error[1])
            self.report.stages.get(stage, self.report.stages["parse"]).failures[
                doc.error[0].value
            ] += 1

    def _done(self, job: IngestJob) -> None:
        self.report.jobs.append(job)
        if job.state == JobState.READY:
            self.report.pages += job.pages or 0
        self.progress.files_done += 1
        if job.state == JobState.READY:
            self.progress.pages_done += job.pages or 0
        self.progress.failed += job.state == JobState.FAILED
        self.progress.tick().last = job
        if self.on_progress is not None:
            self.on_progress(self.progress)


def batch_due(pending: int, last_write: float, options: BulkOptions) -> bool:
    """Write now: a full batch is pending, or the first of a partial one waited too long
    (``last_write`` is a ``time.perf_counter()`` reading)."""
    waited = time.perf_counter() - last_write
    return pending >= options.write_batch_docs or waited >= options.write_max_wait_s


def _embed_stage(doc: InFlight) -> str:
    return "page_embed" if "page_embed" in doc.seconds else "text_embed"


def _prepared(doc: InFlight) -> PreparedDocument:
    assert doc.parsed is not None and doc.structure is not None
    return PreparedDocument(
        parsed=doc.parsed, structure=doc.structure, points=doc.points, page_points=doc.page_points
    )


def write_report(report: BulkReport, path: Path) -> None:
    """``--report FILE``: the report as one JSON document (written whole, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(json.dumps(report.as_dict(), indent=1, ensure_ascii=False) + "\n")
    staged.replace(path)
