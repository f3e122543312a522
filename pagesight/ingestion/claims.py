"""Who runs an ingest job: a worker claims it in the catalog first, so that two workers (two
replicas of the index service, a server and a command line, on one database) never run the
same job.

A claim is a lease: it holds for ``database.job_lease_s`` and is renewed while the job runs
(every third of the lease), so a worker that dies frees its jobs within one lease without
anyone having to notice. A restarted process on the same machine need not wait that long:
claims of workers on this host whose process is gone are released at once
(:func:`release_dead_local_claims`), which is what makes ``kill -9`` then re-run immediate.

Worker ids are ``host:pid:nonce``: the host and pid say where to look for liveness, the nonce
tells a restarted process (same host, often the same pid in a container) from its predecessor.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pagesight.core.protocols import CatalogRepository
from pagesight.core.types import IngestJob

log = logging.getLogger(__name__)


def new_worker_id() -> str:
    """This process's worker id: ``host:pid:nonce``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def is_dead_local_worker(worker: str, me: str) -> bool:
    """``worker`` ran on this host and is gone: its process has exited, or its pid is ours
    and it is not us (a restarted container reuses pids)."""
    host, _, rest = worker.partition(":")
    pid_text, _, _ = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit() or worker == me:
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def release_dead_local_claims(catalog: CatalogRepository, me: str) -> int:
    """Release the claims of dead workers on this host; return how many."""
    released = 0
    for job_id, worker in catalog.job_claims():
        if is_dead_local_worker(worker, me):
            catalog.release_job(job_id, worker)
            released += 1
    if released:
        log.info("released %d job claim(s) of exited workers on this host", released)
    return released


@contextmanager
def claimed_job(
    catalog: CatalogRepository, worker: str, lease_s: float, job_id: str | None = None
) -> Iterator[IngestJob | None]:
    """Claim ``job_id`` (or the oldest claimable job) for the block, renewing the lease while
    it runs and releasing it after; yields None when there is nothing to claim (finished, or
    another live worker holds it)."""
    job = catalog.claim_job(worker, lease_s, job_id)
    if job is None:
        yield None
        return
    try:
        with _renewing(lambda: catalog.claim_job(worker, lease_s, job.job_id), lease_s):
            yield job
    finally:
        catalog.release_job(job.job_id, worker)


@contextmanager
def held_claims(catalog: CatalogRepository, worker: str, lease_s: float) -> Iterator[None]:
    """Keep every claim ``worker`` takes during the block alive (one renewal statement every
    third of the lease, however many jobs), and release the unfinished ones after: a bulk run
    claims its jobs as it plans them and holds them until its pipeline has written them."""
    try:
        with _renewing(lambda: catalog.renew_claims(worker, lease_s), lease_s):
            yield
    finally:
        for job_id, holder in catalog.job_claims():
            if holder == worker:
                catalog.release_job(job_id, worker)


@contextmanager
def _renewing(renew: Callable[[], object], lease_s: float) -> Iterator[None]:
    """Call ``renew`` every third of the lease on a thread until the block ends (or ``renew``
    returns None: the job finished meanwhile, terminal jobs are not claimable)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(lease_s / 3):
            try:
                if renew() is None:
                    return
            except Exception:  # a database hiccup: the next renewal may succeed
                log.warning("could not renew job claims", exc_info=True)

    renewer = threading.Thread(target=loop, name="claim-renewal", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join()
