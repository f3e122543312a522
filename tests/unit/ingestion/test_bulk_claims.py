"""A bulk run claims the jobs it plans, so an index service polling the same catalog never runs
them too, and leaves alone an unfinished job another live worker holds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

from pagesight.core.types import IngestJob, JobState
from pagesight.ingestion.bulk import BulkItem, BulkPlanner
from pagesight.ingestion.claims import held_claims
from pagesight.store.catalog import Catalog


class _NothingIndexed:
    """The planner asks the writer only whether a version is already indexed: never, here."""

    def already_indexed(self, job: IngestJob, version: str) -> bool:
        return False


def test_planned_jobs_are_claimed_and_held_ones_left_alone(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog.sqlite3")
    files = []
    for name in ("a.pdf", "b.pdf"):
        path = tmp_path / name
        path.write_bytes(b"%PDF-1.4 " + name.encode())
        files.append(path)
    # b.pdf's document has an unfinished job a live worker elsewhere is running
    busy = catalog.new_job(
        tenant="t", source_uri=files[1].as_uri(), path=str(files[1]), doc_id="doc-b", acl=[]
    )
    assert catalog.claim_job("other-host:7:n", 3600, busy.job_id) is not None

    planner = BulkPlanner(catalog, cast(Any, _NothingIndexed()), worker="bulk-run", lease_s=0.3)
    items = [
        BulkItem(uri=files[0].as_uri(), tenant="t", doc_id="doc-a"),
        BulkItem(uri=files[1].as_uri(), tenant="t", doc_id="doc-b"),
    ]
    with held_claims(catalog, "bulk-run", 0.3):
        plan = planner.plan(items)
        assert [t.job.doc_id for t in plan.tasks] == ["doc-a"] and plan.held == ["doc-b"]
        assert plan.tasks[0].job.state == JobState.PARSING
        time.sleep(0.8)  # past the lease: only the run's renewal keeps a poller out
        assert catalog.claim_job("poller", 60) is None
    # the run ended without finishing doc-a: its claim is released for whoever resumes it
    assert dict(catalog.job_claims()) == {busy.job_id: "other-host:7:n"}
    assert catalog.claim_job("poller", 60) is not None
    catalog.close()
