"""Contract tests every catalog and trace repository backend must pass (SQLite today; a database
backend for the cluster profile joins the ``backend`` parameters and nothing else changes).

Besides behaviour, the rule that matters most: no method returns a row of another tenant.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.errors import ErrorCode
from core.protocols import CatalogRepository, TraceRepository
from core.settings import Settings
from core.types import AuditEntry, Document, JobState, Page, RetrievalTrace, RouteName
from index.traces import open_traces
from ingestion.catalog import open_catalog

BACKENDS = ["sqlite"]


@pytest.fixture(params=BACKENDS)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    assert request.param == "sqlite"  # the only backend so far: its settings are the defaults
    return Settings(data_dir=tmp_path / "var")


@pytest.fixture()
def catalog(settings: Settings) -> Iterator[CatalogRepository]:
    repo = open_catalog(settings)
    yield repo
    repo.close()


@pytest.fixture()
def traces(settings: Settings) -> Iterator[TraceRepository]:
    repo = open_traces(settings)
    yield repo
    repo.close()


def _doc(tenant: str, doc_id: str, version: str = "v1", acl: list[str] | None = None) -> Document:
    return Document(
        doc_id=doc_id, version=version, tenant=tenant, acl=acl or [], source_uri=f"upload:{doc_id}"
    )


def _pages(doc_id: str, n: int, image: str = "img") -> list[Page]:
    return [
        Page(doc_id=doc_id, page_number=i, width=612, height=792, image_ref=f"{image}-{i}")
        for i in range(1, n + 1)
    ]


def _job(catalog: CatalogRepository, tenant: str, doc_id: str) -> str:
    job = catalog.new_job(
        tenant=tenant, source_uri=f"upload:{doc_id}", path="/x", doc_id=doc_id, acl=[]
    )
    return job.job_id


def test_job_state_machine_and_listing(catalog: CatalogRepository) -> None:
    job = catalog.new_job(
        tenant="a", source_uri="upload:r.pdf", path="/x", doc_id="d", acl=["g"], submitted_by="k"
    )
    assert catalog.unfinished_jobs() == [job]
    parsing = catalog.advance(job, JobState.PARSING, version="v1")
    assert catalog.job(job.job_id) == parsing and parsing.submitted_by == "k"
    failed = catalog.fail(parsing, ErrorCode.CORRUPT, "parse", "bad bytes")
    assert (failed.state, failed.error_code) == (JobState.FAILED, ErrorCode.CORRUPT)
    assert catalog.unfinished_jobs() == []
    ready = [
        catalog.advance(catalog.job(_job(catalog, "a", f"r{i}")), JobState.READY) for i in range(3)
    ]
    assert [j.job_id for j in catalog.jobs("a", [JobState.FAILED], limit=1)] == [job.job_id]
    assert {j.job_id for j in catalog.jobs("a", limit=10)} == {
        job.job_id,
        *(r.job_id for r in ready),
    }
    assert len(catalog.jobs("a", limit=2)) == 2 and len(catalog.jobs("a", limit=2, offset=2)) == 2
    assert catalog.delete_jobs("a", "d") == 1 and catalog.job(job.job_id) is None


def test_documents_pages_and_shared_images(catalog: CatalogRepository) -> None:
    assert catalog.put_document(_doc("a", "d1"), _pages("d1", 2, "shared")) == []
    assert catalog.put_document(_doc("a", "d2"), _pages("d2", 1, "shared")) == []
    assert [p.page_number for p in catalog.pages("a", "d1")] == [1, 2]
    # a new version drops page 2's image (no page uses it); page 1's is shared with d2
    assert catalog.put_document(_doc("a", "d1", "v2"), _pages("d1", 1, "new")) == ["shared-2"]
    assert catalog.document("a", "d1").version == "v2"
    structure = catalog.structure(catalog.document("a", "d1"))
    assert [p.page_number for p in structure.pages] == [1] and structure.version == "v2"
    assert catalog.delete_document("a", "d1") == ["new-1"]
    assert catalog.delete_document("a", "d1") is None
    assert [d.doc_id for d in catalog.documents("a")] == ["d2"]


def test_audit_log_is_append_only_and_newest_first(catalog: CatalogRepository) -> None:
    for i in range(5):
        catalog.audit(
            AuditEntry(
                at=datetime.now(UTC), tenant="a", actor="k", action="delete", doc_id=f"d{i % 2}"
            )
        )
    entries = catalog.audit_entries("a")
    assert [e.seq for e in entries] == sorted((e.seq for e in entries), reverse=True)
    assert len(catalog.audit_entries("a", doc_id="d0")) == 3
    page = catalog.audit_entries("a", limit=2)
    assert catalog.audit_entries("a", before=page[-1].seq)[0].seq < page[-1].seq


def test_traces_are_per_tenant_and_purged_with_their_documents(traces: TraceRepository) -> None:
    def trace(query: str) -> RetrievalTrace:
        return RetrievalTrace(
            trace_id="same-id", query=query, requested_route=RouteName.TEXT, route=RouteName.TEXT
        )

    traces.put("a", trace("from a"), {"d1"})
    traces.put("b", trace("from b"), {"d9"})
    got_a, got_b = traces.get("a", "same-id"), traces.get("b", "same-id")
    assert got_a is not None and got_a[0].query == "from a" and got_a[1] == {"d1"}
    assert got_b is not None and got_b[0].query == "from b"
    assert traces.purge_document("a", "d1") == 1
    assert traces.get("a", "same-id") is None and traces.get("b", "same-id") is not None


@pytest.mark.parametrize("seed", range(3))
def test_no_method_returns_another_tenants_rows(
    catalog: CatalogRepository, traces: TraceRepository, seed: int
) -> None:
    rng = random.Random(seed)
    tenants = ["a", "b", "c"]
    for n in range(30):
        tenant = rng.choice(tenants)
        doc_id = f"doc-{rng.randrange(8)}"  # the same ids recur across tenants
        catalog.put_document(_doc(tenant, doc_id, f"v{n}"), _pages(doc_id, rng.randint(1, 3)))
        _job(catalog, tenant, doc_id)
        catalog.audit(
            AuditEntry(
                at=datetime.now(UTC), tenant=tenant, actor="k", action="replace", doc_id=doc_id
            )
        )
        traces.put(
            tenant,
            RetrievalTrace(
                trace_id=f"t{rng.randrange(5)}",
                query=tenant,
                requested_route=RouteName.TEXT,
                route=RouteName.TEXT,
            ),
            {doc_id},
        )
    for tenant in tenants:
        assert all(d.tenant == tenant for d in catalog.documents(tenant))
        for doc in catalog.documents(tenant):
            assert all(p.doc_id == doc.doc_id for p in catalog.pages(tenant, doc.doc_id))
            assert catalog.document(tenant, doc.doc_id).tenant == tenant
        assert all(j.tenant == tenant for j in catalog.jobs(tenant, limit=1000))
        assert all(e.tenant == tenant for e in catalog.audit_entries(tenant, limit=1000))
        for i in range(5):
            found = traces.get(tenant, f"t{i}")
            assert found is None or found[0].query == tenant
