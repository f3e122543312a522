"""Job claims as the ingest worker uses them: leases renewed while a job runs, released after,
and claims of exited workers on this host released at start-up."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from pagesight.core.types import JobState
from pagesight.ingestion.claims import (
    claimed_job,
    is_dead_local_worker,
    new_worker_id,
    release_dead_local_claims,
)
from pagesight.store.catalog import Catalog


def _catalog(tmp_path: Path) -> Catalog:
    return Catalog(tmp_path / "catalog.sqlite3")


def _queue(catalog: Catalog, doc_id: str = "d") -> str:
    job = catalog.new_job(
        tenant="t", source_uri=f"upload:{doc_id}", path="/x", doc_id=doc_id, acl=[]
    )
    return job.job_id


def _exited_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(proc.stdout)


def test_worker_liveness_is_judged_on_this_host_only() -> None:
    me = new_worker_id()
    host = socket.gethostname()
    assert not is_dead_local_worker(me, me)
    assert not is_dead_local_worker(f"{host}:{os.getppid()}:abcd", me)  # alive
    assert is_dead_local_worker(f"{host}:{_exited_pid()}:abcd", me)
    # our pid, another nonce: a predecessor in a restarted container
    assert is_dead_local_worker(f"{host}:{os.getpid()}:other", me)
    assert not is_dead_local_worker(f"elsewhere:{_exited_pid()}:abcd", me)  # its lease decides
    assert not is_dead_local_worker("garbage", me)


def test_a_claim_is_renewed_while_the_job_runs_and_released_after(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    job_id = _queue(catalog)
    with claimed_job(catalog, "w1", 0.3, job_id) as job:
        assert job is not None and job.job_id == job_id
        time.sleep(0.8)  # longer than the lease: only renewal keeps another worker out
        assert catalog.claim_job("w2", 0.3, job_id) is None
        assert catalog.claim_job("w2", 0.3) is None
    assert catalog.job_claims() == []
    with claimed_job(catalog, "w2", 5, job_id) as job:
        assert job is not None
    catalog.close()


def test_nothing_to_claim_yields_none(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    job_id = _queue(catalog)
    catalog.advance(catalog.job(job_id), JobState.READY)  # type: ignore[arg-type]
    with claimed_job(catalog, "w1", 5, job_id) as job:
        assert job is None
    with claimed_job(catalog, "w1", 5) as job:
        assert job is None
    catalog.close()


def test_claims_of_exited_local_workers_are_released(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    host = socket.gethostname()
    dead, alive, remote = (_queue(catalog, d) for d in ("a", "b", "c"))
    assert catalog.claim_job(f"{host}:{_exited_pid()}:n1", 3600, dead)
    assert catalog.claim_job(f"{host}:{os.getppid()}:n2", 3600, alive)
    assert catalog.claim_job("other-host:1:n3", 3600, remote)
    me = new_worker_id()
    assert release_dead_local_claims(catalog, me) == 1
    assert {job_id for job_id, _ in catalog.job_claims()} == {alive, remote}
    assert catalog.claim_job(me, 60) is not None  # the released job is claimable at once
    catalog.close()
