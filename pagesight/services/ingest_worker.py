"""The ingest worker: queued jobs run here, on one background thread, never on a request path.

:class:`pagesight.services.document_service.DocumentService` queues a job (an upload written to
disk, or a URI to fetch) and returns; :class:`IngestWorker` claims it in the catalog (two
workers, of this process or of other replicas on a shared database, never run one job twice),
fetches a URI source, parses and indexes it, and removes the upload once it is indexed (or
failed). On a shared database it also polls for jobs other replicas queued or a dead worker
left. Passwords of encrypted PDFs stay in this process's memory until the worker takes them.

A plain class (no Ray): :class:`pagesight.services.index_service.IndexService` starts it in the
writers only (a Query replica or a read-only command never ingests).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.settings import Settings
from pagesight.core.types import IngestJob, JobState, JobStatus
from pagesight.ingestion.claims import claimed_job, new_worker_id, release_dead_local_claims
from pagesight.ingestion.ingest import IngestRequest
from pagesight.ingestion.url_sources import SourcePolicy
from pagesight.services.metrics import ServiceMetrics
from pagesight.services.query_service import Stores
from pagesight.services.stack import LocalStack

log = logging.getLogger(__name__)

_STOP = "__stop__"


def upload_root(settings: Settings) -> Path:
    """Where uploads wait for the worker (the document side writes them, the worker removes
    them once indexed)."""
    return settings.data_dir / "uploads"


class IngestWorker:
    """The job queue of this process and the thread that empties it."""

    def __init__(
        self, settings: Settings, stores: Stores, sources: SourcePolicy, metrics: ServiceMetrics
    ) -> None:
        self.settings = settings
        self.stores = stores
        self.sources = sources
        self.metrics = metrics
        self.upload_dir = upload_root(settings)
        #: this process's id in job claims (two workers never run the same job)
        self.worker_id = new_worker_id()
        self._queue: queue.Queue[str] = queue.Queue()
        self._thread: threading.Thread | None = None
        #: passwords of queued jobs, in memory only until the worker takes them
        self._passwords: dict[str, str] = {}
        #: the database is down: said once when that starts and once when it ends
        self._database_down = False

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Re-queue the jobs a previous process left unfinished (releasing the claims of this
        machine's dead workers first) and start the thread."""
        stack = self.stores.ready()
        release_dead_local_claims(stack.catalog, self.worker_id)
        for job in stack.catalog.unfinished_jobs():
            self.enqueue(job.job_id)
        self._thread = threading.Thread(target=self._work, name="ingest-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join(timeout=60)
            self._thread = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def queue_depth(self) -> int:
        return self._queue.qsize()

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Block until every queued job has finished (tests, batch scripts)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.05)
        return False

    # -- queueing ----------------------------------------------------------------------------

    def queue_job(self, request: IngestRequest, password: str | None) -> JobStatus:
        """Record the job in the catalog and queue it (``password``: in memory only)."""
        job = self.stores.ready().ingestor.queue(request)
        if password:
            self._passwords[job.job_id] = password
        self.enqueue(job.job_id)
        log.info("queued ingest job", extra={"job_id": job.job_id, "doc_id": job.doc_id})
        return job.status()

    def enqueue(self, job_id: str) -> None:
        self._queue.put(job_id)
        self.metrics.queue_depth.set(self._queue.qsize())

    # -- the loop ----------------------------------------------------------------------------

    def _work(self) -> None:
        """Run queued jobs; on a shared database, also poll for jobs other replicas queued
        (or a dead worker left), every ``database.job_poll_s``."""
        poll_s = self.settings.database.job_poll_s if self.settings.database_url else None
        while True:
            try:
                job_id: str | None = self._queue.get(timeout=poll_s)
            except queue.Empty:
                job_id = None
            try:
                if job_id == _STOP:
                    return
                while self._run_job(job_id) and job_id is None:
                    pass  # polled one: poll again right away, the queue may be long
                self._database_back()
            except PageSightError as exc:
                if exc.code != ErrorCode.DATABASE_UNAVAILABLE:
                    log.exception("ingest worker failed on job %s", job_id)
                elif not self._database_down:  # an outage: one line, not one per poll
                    self._database_down = True
                    log.warning(
                        "ingest worker paused: the database is unavailable; polling again "
                        "every %s s (queued jobs stay queued in the database)",
                        poll_s,
                        extra={"job_id": job_id, "error_code": exc.code.value},
                    )
            except Exception:  # the worker must outlive any one job
                log.exception("ingest worker failed on job %s", job_id)
            finally:
                if job_id is not None:
                    self._queue.task_done()
                self.metrics.queue_depth.set(self._queue.qsize())

    def _database_back(self) -> None:
        if self._database_down:
            self._database_down = False
            log.info("ingest worker resumed: the database answers again")

    def _run_job(self, job_id: str | None) -> bool:
        """Claim ``job_id`` (None: the oldest claimable job) and run it; False when there was
        nothing to claim (finished, or another worker holds it)."""
        stack = self.stores.ready()
        lease_s = self.settings.database.job_lease_s
        with claimed_job(stack.catalog, self.worker_id, lease_s, job_id) as job:
            if job is None:
                return False
            self._run_claimed(stack, job)
        return True

    def _run_claimed(self, stack: LocalStack, job: IngestJob) -> None:
        job_id = job.job_id
        started = time.perf_counter()
        path = Path(job.path)
        if not path.is_file() and not job.source_uri.startswith("upload:"):
            try:
                fetched = self.sources.fetch(job.source_uri, path)
            except PageSightError as exc:
                self._passwords.pop(job_id, None)
                stack.catalog.fail(job, exc.code, exc.stage.value, exc.message)
                self.metrics.jobs.labels(JobState.FAILED.value, exc.code.value).inc()
                return
            if fetched != path:  # a file:// source is read where it is
                job = stack.catalog.advance(job, job.state, path=str(fetched))
        done = stack.ingestor.run(job, self._passwords.pop(job_id, None))
        self.metrics.ingest_seconds.inc(time.perf_counter() - started)
        self.metrics.jobs.labels(done.state.value, done.error_code or "").inc()
        if done.state == JobState.READY and not done.unchanged:
            self.metrics.ingest_pages.inc(done.pages)
        if path.is_relative_to(self.upload_dir):
            path.unlink(missing_ok=True)  # indexed (or failed): the upload is not needed again
        log.info(
            "ingest job finished",
            extra={"job_id": job_id, "state": done.state.value, "pages": done.pages},
        )
