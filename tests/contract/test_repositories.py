"""Contract tests every catalog and trace repository backend must pass: SQLite (the embedded
default) and PostgreSQL (the cluster profile, on a real server: ``tests/postgres.py``).

Besides behaviour, the rules that matter most: no method returns a row of another tenant, and
no job is claimed by two workers at once.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pagesight.core.errors import ErrorCode
from pagesight.core.protocols import CatalogRepository, TraceRepository
from pagesight.core.settings import Settings
from pagesight.core.types import (
    AuditEntry,
    Document,
    DocumentStructure,
    JobState,
    Page,
    RetrievalTrace,
    RouteName,
    StructurePage,
)
from pagesight.store.catalog import open_catalog
from pagesight.store.traces import open_traces

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """SQLite: the defaults. PostgreSQL: a fresh migrated database of the session's server
    (requested only for this parameter, so SQLite runs start no server)."""
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        return Settings(data_dir=tmp_path / "var", database_url=url)
    assert request.param == "sqlite"
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


def test_the_backend_is_the_one_named(settings: Settings, catalog: CatalogRepository) -> None:
    """Guards the rest: a PostgreSQL run that quietly fell back to SQLite would pass them all."""
    from pagesight.store.catalog import Catalog
    from pagesight.store.traces import TraceStore

    postgres = settings.database_url is not None
    assert isinstance(catalog, Catalog) is not postgres
    traces = open_traces(settings)
    try:
        assert isinstance(traces, TraceStore) is not postgres
    finally:
        traces.close()


def test_page_reads_one_page_of_one_tenant(catalog: CatalogRepository) -> None:
    catalog.put_document(_doc("a", "d"), _pages("d", 3))
    catalog.put_document(_doc("b", "d"), _pages("d", 1, "other"))
    page = catalog.page("a", "d", 2)
    assert page is not None and (page.page_number, page.image_ref) == (2, "img-2")
    assert catalog.page("a", "d", 4) is None and catalog.page("a", "nope", 1) is None
    for beyond in (0, -1, 2**31, 10**30):  # any integer a URL can carry: no page, no error
        assert catalog.page("a", "d", beyond) is None
    assert catalog.page("b", "d", 2) is None and catalog.page("c", "d", 1) is None
    other = catalog.page("b", "d", 1)
    assert other is not None and other.image_ref == "other-1"
    catalog.put_document(_doc("a", "d", "v2"), _pages("d", 1, "new"))
    assert catalog.page("a", "d", 2) is None and catalog.page("a", "d", 1).image_ref == "new-1"


def test_structure_is_the_stored_versions_else_the_pages(catalog: CatalogRepository) -> None:
    stored = DocumentStructure(
        doc_id="d",
        version="v1",
        pages=[StructurePage(page_number=1, label="iv", width=1, height=2)],
    )
    catalog.put_document(_doc("a", "d"), _pages("d", 2), stored)
    assert catalog.structure(_doc("a", "d")) == stored
    # another version of the document (the stored structure is v1's): its pages only
    fallback = catalog.structure(_doc("a", "d", "v9"))
    assert [(p.page_number, p.label) for p in fallback.pages] == [(1, None), (2, None)]
    assert catalog.structure(_doc("b", "d")).pages == []  # another tenant's: nothing


def test_nul_characters_do_not_break_a_write(
    catalog: CatalogRepository, traces: TraceRepository
) -> None:
    """PostgreSQL's text cannot hold NUL; a PDF title or a query can. Dropping it is the one
    change a backend may make."""
    doc = _doc("a", "d").model_copy(update={"title": "a\x00b"})
    page = _pages("d", 1)[0].model_copy(update={"margin_text": ["x\x00y"]})
    catalog.put_document(doc, [page])
    assert catalog.document("a", "d").title in ("a\x00b", "ab")
    assert catalog.page("a", "d", 1).margin_text[0] in ("x\x00y", "xy")
    trace = RetrievalTrace(
        trace_id="t", query="q\x00", requested_route=RouteName.TEXT, route=RouteName.TEXT
    )
    traces.put("a", trace, {"d"})
    got = traces.get("a", "t")
    assert got is not None and got[0].query in ("q\x00", "q")


# -- claims ------------------------------------------------------------------------------------


def test_claims(catalog: CatalogRepository) -> None:
    first, second = _job(catalog, "a", "d1"), _job(catalog, "b", "d2")
    held = catalog.claim_job("w1", 30, second)
    assert held is not None and held.job_id == second
    assert catalog.claim_job("w2", 30, second) is None  # another worker's live lease
    assert catalog.claim_job("w1", 30, second) is not None  # its holder renews it
    nxt = catalog.claim_job("w1", 30)  # the oldest claimable: not the one w1 already holds
    assert nxt is not None and nxt.job_id == first
    assert catalog.claim_job("w3", 30) is None and catalog.claim_job("w3", 30, "nope") is None
    assert sorted(catalog.job_claims()) == sorted([(first, "w1"), (second, "w1")])

    catalog.release_job(first, "w2")  # not the holder: the claim stays
    assert catalog.claim_job("w2", 30, first) is None
    catalog.release_job(first, "w1")
    assert catalog.claim_job("w2", 30).job_id == first

    # saving a job keeps its claim; finishing it drops the claim, and it is never claimable
    job = catalog.advance(catalog.job(second), JobState.PARSING, version="v1")
    assert catalog.claim_job("w2", 30, second) is None and (second, "w1") in catalog.job_claims()
    catalog.advance(job, JobState.READY)
    assert [c for c in catalog.job_claims() if c[0] == second] == []
    assert catalog.claim_job("w1", 30, second) is None
    failed = catalog.fail(catalog.job(first), ErrorCode.CORRUPT, "parse", "bad")
    assert failed.state is JobState.FAILED and catalog.job_claims() == []
    assert catalog.claim_job("w1", 30) is None

    # an expired lease frees the job for anyone
    third = _job(catalog, "a", "d3")
    assert catalog.claim_job("w1", 0.2, third) is not None
    assert catalog.claim_job("w2", 30) is None
    time.sleep(0.4)
    taken = catalog.claim_job("w2", 30)
    assert taken is not None and taken.job_id == third
    assert catalog.job_claims() == [(third, "w2")]


def test_renew_claims_extends_every_unfinished_job_of_one_worker(
    catalog: CatalogRepository,
) -> None:
    jobs = [_job(catalog, "a", f"d{i}") for i in range(3)]
    for job_id in jobs:
        assert catalog.claim_job("w1", 0.2, job_id) is not None
    other = _job(catalog, "b", "x")
    assert catalog.claim_job("w2", 0.2, other) is not None
    catalog.advance(catalog.job(jobs[2]), JobState.READY)  # finished: nothing to renew
    assert catalog.renew_claims("w1", 30) == 2
    time.sleep(0.4)  # w2's lease ran out, w1's were renewed
    taken = catalog.claim_job("w3", 30)
    assert taken is not None and taken.job_id == other
    assert catalog.claim_job("w3", 30) is None
    assert catalog.renew_claims("nobody", 30) == 0


def test_claims_take_the_queue_in_order(catalog: CatalogRepository) -> None:
    for i in range(6):
        _job(catalog, f"t{i % 2}", f"d{i}")
    queue = [j.job_id for j in catalog.unfinished_jobs()]
    taken = [catalog.claim_job("w", 30) for _ in range(6)]
    assert [j.job_id for j in taken if j is not None] == queue
    assert catalog.claim_job("w", 30) is None


def test_concurrent_workers_never_claim_one_job_twice(
    settings: Settings, catalog: CatalogRepository
) -> None:
    """Four workers, each with its own repository (as separate processes would have), drain
    one queue: every job is claimed, none twice."""
    jobs = {_job(catalog, f"t{i % 3}", f"d{i}") for i in range(40)}
    claimed: list[tuple[str, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def work(worker: str) -> None:
        repo = open_catalog(settings)
        try:
            start.wait()
            while (job := repo.claim_job(worker, 60)) is not None:
                with lock:
                    claimed.append((job.job_id, worker))
        except BaseException as exc:
            errors.append(exc)
        finally:
            repo.close()

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    counts = Counter(job_id for job_id, _ in claimed)
    assert set(counts) == jobs and max(counts.values()) == 1
    assert sorted(catalog.job_claims()) == sorted(claimed)


def test_sqlite_catalog_gains_claim_columns(tmp_path: Path) -> None:
    """A catalog file written before claims existed opens, keeps its jobs and claims them."""
    import sqlite3

    from pagesight.store.catalog import Catalog

    path = tmp_path / "catalog.sqlite3"
    old = Catalog(path)
    job_id = _job(old, "a", "d")
    old.close()
    with sqlite3.connect(path) as db:  # back to a file of the code before claims (and Alembic)
        db.execute("DROP TABLE alembic_version")
        db.execute("ALTER TABLE jobs DROP COLUMN claimed_by")
        db.execute("ALTER TABLE jobs DROP COLUMN lease_until")
    catalog = Catalog(path)
    try:
        claimed = catalog.claim_job("w", 30)
        assert claimed is not None and claimed.job_id == job_id
        assert catalog.job_claims() == [(job_id, "w")]
    finally:
        catalog.close()


# -- tenancy -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_no_method_returns_another_tenants_rows(
    catalog: CatalogRepository, traces: TraceRepository, seed: int
) -> None:
    """Random writes, deletes and purges by three tenants over the same document and trace
    ids, checked against a model of what each tenant wrote: every read returns exactly its
    tenant's rows (so a read that leaked, or lost, rows fails, not only one that mixed them)."""
    rng = random.Random(seed)  # noqa: S311  # seeded test data, not a secret
    tenants = ["a", "b", "c"]
    docs: dict[tuple[str, str], tuple[int, int, bool]] = {}  # -> (n, pages, structure stored)
    audits: Counter[tuple[str, str]] = Counter()
    jobs: dict[str, set[str]] = {t: set() for t in tenants}
    trace_model: dict[tuple[str, str], tuple[str, str]] = {}  # -> (query, doc id)

    def refs(tenant: str, skip: str | None = None) -> set[str]:
        return {
            f"img-{k}"
            for (t, d), (_, pages, _) in docs.items()
            if t == tenant and d != skip
            for k in range(1, pages + 1)
        }

    for n in range(40):
        tenant = rng.choice(tenants)
        doc_id = f"doc-{rng.randrange(6)}"  # the same ids recur across tenants
        if rng.random() < 0.2:
            known = (tenant, doc_id) in docs
            expected = sorted(refs(tenant) - refs(tenant, skip=doc_id)) if known else None
            assert catalog.delete_document(tenant, doc_id) == expected
            docs.pop((tenant, doc_id), None)
            purged = {k for k, (_, d) in trace_model.items() if k[0] == tenant and d == doc_id}
            assert traces.purge_document(tenant, doc_id) == len(purged)
            for key in purged:
                del trace_model[key]
            continue
        n_pages, with_structure = rng.randint(1, 3), rng.random() < 0.5
        pages = [
            Page(doc_id=doc_id, page_number=k, width=600 + n, height=792, image_ref=f"img-{k}")
            for k in range(1, n_pages + 1)
        ]
        structure = (
            DocumentStructure(
                doc_id=doc_id,
                version=f"v{n}",
                pages=[StructurePage(page_number=1, label=f"{tenant}{n}", width=1, height=1)],
            )
            if with_structure
            else None
        )
        before = refs(tenant)
        docs[(tenant, doc_id)] = (n, n_pages, with_structure)
        orphans = catalog.put_document(_doc(tenant, doc_id, f"v{n}"), pages, structure)
        assert orphans == sorted(before - refs(tenant))
        jobs[tenant].add(_job(catalog, tenant, doc_id))
        catalog.audit(
            AuditEntry(
                at=datetime.now(UTC), tenant=tenant, actor="k", action="replace", doc_id=doc_id
            )
        )
        audits[(tenant, doc_id)] += 1
        trace_id = f"t{rng.randrange(4)}"
        traces.put(
            tenant,
            RetrievalTrace(
                trace_id=trace_id,
                query=f"{tenant}{n}",
                requested_route=RouteName.TEXT,
                route=RouteName.TEXT,
            ),
            {doc_id},
        )
        trace_model[(tenant, trace_id)] = (f"{tenant}{n}", doc_id)

    assert catalog.tenants() == sorted({t for t, _ in docs})
    assert catalog.audit_tenants() == sorted({t for t, _ in audits})
    for tenant in [*tenants, "nobody"]:
        mine = {d: v for (t, d), v in docs.items() if t == tenant}
        assert [(d.tenant, d.doc_id) for d in catalog.documents(tenant)] == [
            (tenant, d) for d in sorted(mine)
        ]
        for i in range(6):
            _assert_tenant_document(catalog, tenant, f"doc-{i}", mine.get(f"doc-{i}"))
        entries = catalog.audit_entries(tenant, limit=1000)
        assert Counter(e.doc_id for e in entries) == Counter(
            {d: c for (t, d), c in audits.items() if t == tenant}
        )
        assert all(e.tenant == tenant for e in entries)
        for i in range(6):
            doc_id = f"doc-{i}"
            of_doc = catalog.audit_entries(tenant, doc_id=doc_id, limit=1000)
            assert len(of_doc) == audits[(tenant, doc_id)]
            assert all((e.tenant, e.doc_id) == (tenant, doc_id) for e in of_doc)
        assert {j.job_id for j in catalog.jobs(tenant, limit=1000)} == jobs.get(tenant, set())
        pending = catalog.jobs(tenant, [JobState.PENDING], limit=1000)
        assert {j.job_id for j in pending} == jobs.get(tenant, set())
        for i in range(4):
            found = traces.get(tenant, f"t{i}")
            expected = trace_model.get((tenant, f"t{i}"))
            if expected is None:
                assert found is None
            else:
                assert found is not None and (found[0].query, found[1]) == (
                    expected[0],
                    {expected[1]},
                )


def _assert_tenant_document(
    catalog: CatalogRepository,
    tenant: str,
    doc_id: str,
    written: tuple[int, int, bool] | None,
) -> None:
    """``tenant``'s ``doc_id`` reads back as the model says it was last written (``written``:
    the write's number, its page count, whether a structure was stored; None: no document)."""
    document = catalog.document(tenant, doc_id)
    if written is None:
        assert document is None and catalog.pages(tenant, doc_id) == []
        assert catalog.page(tenant, doc_id, 1) is None
        return
    n, n_pages, with_structure = written
    assert document is not None and (document.tenant, document.version) == (tenant, f"v{n}")
    pages = catalog.pages(tenant, doc_id)
    assert [(p.page_number, p.width) for p in pages] == [
        (k, 600 + n) for k in range(1, n_pages + 1)
    ]
    for k in range(1, 5):
        page = catalog.page(tenant, doc_id, k)
        assert (page is None) is (k > n_pages)
        assert page is None or (page.doc_id, page.width) == (doc_id, 600 + n)
    structure = catalog.structure(document)
    labels = [p.label for p in structure.pages]
    assert labels == ([f"{tenant}{n}"] if with_structure else [None] * n_pages)
