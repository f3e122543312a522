"""The write side of the index service: :class:`DocumentService`.

Uploads (written to disk, queued as a job and ingested by the
:class:`pagesight.services.ingest_worker.IngestWorker`, never on the request path), URIs to
fetch, deletes (points, page images, uploads, jobs and the traces that name the document), and
what records those changes: the job listings and the audit log.
:class:`pagesight.api.protocols.DocumentBackend`.

Uploads, replacements and deletes need the key's ``write`` scope, listings ``read``. A job is
seen as the document it makes is (:func:`pagesight.services.query_service.access_of`); a
document of the tenant the caller cannot see is never overwritten (``CONFLICT``) and is not
found for a delete. A plain class: no Ray, no HTTP; methods are synchronous and thread-safe.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from pagesight.api.caller import Caller
from pagesight.api.models import Outcome, Submitted, UriIngest
from pagesight.api.protocols import DocumentBackend
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.ids import check_doc_id, make_doc_id
from pagesight.core.protocols import CatalogRepository
from pagesight.core.settings import Settings
from pagesight.core.tracing import current_trace_id
from pagesight.core.types import AuditEntry, Document, IngestJob, JobState, JobStatus
from pagesight.ingestion.ingest import IngestRequest, is_current
from pagesight.ingestion.url_sources import SourcePolicy
from pagesight.services.ingest_worker import IngestWorker, upload_root
from pagesight.services.query_service import Stores, access_of

log = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:24]


def _sees_job(caller: Caller, job: IngestJob, hidden: Callable[[str], bool]) -> bool:
    """A job is the submitting key's, and visible by its ACL like the document it makes; not
    once that document reads as missing to the caller (a later version's ACL, or expired):
    a job of it would show a document that every other route denies."""
    if job.tenant != caller.tenant:
        return False
    if job.submitted_by == caller.key_id:
        return True
    return access_of(caller).admits(job.tenant, job.acl, job.valid_until) and not hidden(job.doc_id)


def _with_document_states(
    catalog: CatalogRepository, tenant: str, jobs: list[JobStatus]
) -> list[JobStatus]:
    """``jobs`` with the state of each one's document now (``JobStatus.document_state``): a
    READY job whose document a re-index left out shows MISSING, not a searchable document."""
    states = catalog.document_states(tenant, {j.doc_id for j in jobs})
    return [j.model_copy(update={"document_state": states.get(j.doc_id)}) for j in jobs]


class DocumentService:
    """:class:`pagesight.api.protocols.DocumentBackend` over shared :class:`Stores`, queueing
    its jobs on ``worker``."""

    def __init__(
        self, settings: Settings, stores: Stores, worker: IngestWorker, sources: SourcePolicy
    ) -> None:
        self.settings = settings
        self.stores = stores
        self.worker = worker
        self.sources = sources

    @property
    def upload_dir(self) -> Path:
        return upload_root(self.settings)

    # -- ingestion ---------------------------------------------------------------------------

    def submit_upload(  # noqa: PLR0913  # the upload's form fields, as the protocol has them
        self,
        caller: Caller,
        filename: str,
        data: bytes,
        *,
        doc_id: str | None = None,
        acl: list[str] | None = None,
        valid_until: datetime | None = None,
        replace: bool = False,
        password: str | None = None,
        trace_id: str = "",
    ) -> Submitted:
        """Write the uploaded bytes under the data directory and queue their ingestion.

        Which document the bytes become (DESIGN.md section 2): with ``doc_id``, that document
        (created, or replaced when it exists); with ``replace``, the caller's one document of
        the same file name; otherwise the document of this file name *and* these bytes —
        the same upload again is ``unchanged``, different bytes under the same name are a new
        document. ``password`` opens an encrypted PDF; it is handed to the worker in memory,
        never stored, logged or traced.
        """
        current_trace_id.set(trace_id or None)
        caller.require("write")
        limit = self.settings.gateway.max_upload_bytes
        if len(data) > limit:
            raise PageSightError(
                ErrorCode.TOO_LARGE, Stage.INPUT, f"upload is larger than {limit} bytes"
            )
        if not data:
            raise PageSightError(ErrorCode.CORRUPT, Stage.INPUT, "the uploaded file is empty")
        name = _SAFE_NAME.sub("_", Path(filename or "upload").name).strip("._") or "upload"
        source_uri = f"upload:{name}"
        digest = hashlib.sha256(data).hexdigest()
        acl = list(acl or [])
        if doc_id is not None:
            target, existing = check_doc_id(doc_id), self._claim(caller, doc_id)
        elif replace:
            target, existing = self._named_upload(caller, source_uri, digest)
        else:
            target = make_doc_id(caller.tenant, f"{source_uri}\x00{digest}")
            existing = self.stores.catalog().document(caller.tenant, target)
            if existing is not None and not access_of(caller).admits_document(existing):
                # the same name and bytes under an ACL this key cannot see: a copy of its own
                target, existing = str(uuid.uuid4()), None
        outcome: Outcome = "created" if existing is None else "replaced"
        if existing is not None and is_current(existing, digest, acl, valid_until):
            outcome = "unchanged"
        request = IngestRequest(
            path=Path(),
            tenant=caller.tenant,
            acl=acl,
            doc_id=target,
            source_uri=source_uri,
            valid_until=valid_until,
            actor=caller.key_id,
        )
        if outcome == "unchanged":
            job = self.stores.ready().ingestor.unchanged(request, digest)
            return Submitted(job=job.status(), outcome=outcome)
        # one file per upload: two queued uploads of the same bytes must not share (and delete)
        # one stored copy
        stored = f"{digest[:32]}-{uuid.uuid4().hex[:12]}{Path(name).suffix.lower()}"
        path = self._upload_dir(caller.tenant, target) / stored
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        request.path = path
        return Submitted(job=self.worker.queue_job(request, password), outcome=outcome)

    def submit_uri(self, caller: Caller, request: UriIngest, trace_id: str = "") -> Submitted:
        """Check the URI against the allowlist now; fetch it in the worker. A URI is a real
        location: the same URI again replaces its document (or leaves it unchanged)."""
        current_trace_id.set(trace_id or None)
        caller.require("write")
        uri = self.sources.check(request.uri)
        doc_id = check_doc_id(request.doc_id) if request.doc_id else make_doc_id(caller.tenant, uri)
        existing = self._claim(caller, doc_id)
        suffix = Path(urlsplit(uri).path).suffix.lower()[:10]
        path = self._upload_dir(caller.tenant, doc_id) / f"fetched-{_digest(uri)}{suffix}"
        job = self.worker.queue_job(
            IngestRequest(
                path=path,
                tenant=caller.tenant,
                acl=list(request.acl),
                doc_id=doc_id,
                source_uri=uri,
                valid_until=request.valid_until,
                actor=caller.key_id,
            ),
            request.password.get_secret_value() if request.password else None,
        )
        return Submitted(job=job, outcome="created" if existing is None else "replaced")

    # -- jobs --------------------------------------------------------------------------------

    def job(self, caller: Caller, job_id: str) -> JobStatus | None:
        caller.require("read")
        catalog = self.stores.catalog()
        job = catalog.job(job_id)
        if job is None or not _sees_job(caller, job, self.stores.hidden_documents(caller)):
            return None
        return _with_document_states(catalog, caller.tenant, [job.status()])[0]

    def jobs(
        self, caller: Caller, limit: int = 100, state: JobState | None = None
    ) -> list[JobStatus]:
        """The newest ``limit`` jobs the caller may see (of ``state`` only, when given)."""
        caller.require("read")
        catalog, offset, page = self.stores.catalog(), 0, max(limit, 200)
        found: list[JobStatus] = []
        states = [state] if state is not None else None
        hidden = self.stores.hidden_documents(caller)
        while len(found) < limit:
            batch = catalog.jobs(tenant=caller.tenant, states=states, limit=page, offset=offset)
            found += [j.status() for j in batch if _sees_job(caller, j, hidden)]
            if len(batch) < page:
                break
            offset += page
        return _with_document_states(catalog, caller.tenant, found[:limit])

    # -- deletes and their record ------------------------------------------------------------

    def delete(self, caller: Caller, doc_id: str, trace_id: str = "") -> bool:
        """Gone everywhere: points, catalog rows, page images, uploads, jobs, traces; the audit
        log records who deleted it. A document the caller cannot see is not found."""
        current_trace_id.set(trace_id or None)
        caller.require("write")
        stack = self.stores.ready()
        if self.stores.visible_document(caller, doc_id) is None:
            return False
        found = stack.ingestor.delete(caller.tenant, doc_id, actor=caller.key_id, via="api")
        purged = self.stores.trace_store().purge_document(caller.tenant, doc_id)
        jobs = stack.catalog.delete_jobs(caller.tenant, doc_id)
        shutil.rmtree(self._upload_dir(caller.tenant, doc_id), ignore_errors=True)
        log.info(
            "deleted document", extra={"doc_id": doc_id, "traces_purged": purged, "jobs": jobs}
        )
        return found

    def audit(
        self, caller: Caller, doc_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        """The tenant's deletes and replacements, newest first: those of documents whose ACL
        (at the time) admits the caller, except a document that still exists and now reads as
        missing to it (a later ACL, or expired)."""
        caller.require("read")
        access, catalog, page = access_of(caller), self.stores.catalog(), max(limit, 200)
        hidden = self.stores.hidden_documents(caller)
        found: list[AuditEntry] = []
        before: int | None = None
        while len(found) < limit:
            batch = catalog.audit_entries(caller.tenant, doc_id, limit=page, before=before)
            found += [
                e for e in batch if access.admits(e.tenant, e.acl, None) and not hidden(e.doc_id)
            ]
            if len(batch) < page:
                break
            before = batch[-1].seq
        return found[:limit]

    # -- helpers -----------------------------------------------------------------------------

    def _upload_dir(self, tenant: str, doc_id: str) -> Path:
        return self.upload_dir / _digest(tenant) / _digest(doc_id)

    def _claim(self, caller: Caller, doc_id: str) -> Document | None:
        """The document ``doc_id`` a write would replace (None: it would be created). A
        document of the tenant the caller cannot see is not overwritten: CONFLICT (this tells a
        writer of the tenant that the id is taken, and nothing else about it)."""
        existing = self.stores.catalog().document(caller.tenant, doc_id)
        if existing is not None and not access_of(caller).admits_document(existing):
            raise PageSightError(
                ErrorCode.CONFLICT, Stage.INPUT, f"doc_id {doc_id!r} is taken; choose another"
            )
        return existing

    def _named_upload(
        self, caller: Caller, source_uri: str, digest: str
    ) -> tuple[str, Document | None]:
        """``replace=true`` without a doc_id: the caller's one visible upload of this name."""
        access = access_of(caller)
        named = [
            d
            for d in self.stores.catalog().documents(caller.tenant)
            if d.source_uri == source_uri and access.admits_document(d)
        ]
        if len(named) > 1:
            raise PageSightError(
                ErrorCode.CONFLICT,
                Stage.INPUT,
                f"{len(named)} documents are named {source_uri.removeprefix('upload:')!r}: "
                "pass the doc_id of the one to replace",
            )
        if named:
            return named[0].doc_id, named[0]
        return make_doc_id(caller.tenant, f"{source_uri}\x00{digest}"), None


#: DocumentService implements its role of the protocol: the type checker proves it here.
_DOCUMENT_BACKEND: type[DocumentBackend] = DocumentService
