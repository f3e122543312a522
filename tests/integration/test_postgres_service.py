"""The index service and the gateway on PostgreSQL (the cluster profile's state), in process:
keys read from the database, jobs claimed and polled from it, catalog, traces and audit log
written to it, tenancy as on SQLite."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pagesight.core.settings import DatabaseOptions, Settings
from pagesight.core.types import JobState
from pagesight.gateway.app import build_app
from pagesight.gateway.auth import KeyRing, new_key
from pagesight.gateway.backend import ServiceClient
from pagesight.gateway.client import ApiError, PageSightClient
from pagesight.ingestion import samples
from pagesight.services.index_service import IndexService
from pagesight.store.catalog import open_catalog
from pagesight.store.key_store_postgres import PostgresKeyStore
from tests.serving import warm_service

pytestmark = pytest.mark.integration


@pytest.fixture()
def settings(tmp_path: Path, postgres_url: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "var",
        database_url=postgres_url,
        database=DatabaseOptions(job_poll_s=0.2),
    )


@pytest.fixture()
def service(settings: Settings) -> Iterator[IndexService]:
    with warm_service(settings) as svc:
        yield svc


def _keys(settings: Settings) -> tuple[str, str]:
    """Two tenants' keys, stored in PostgreSQL as `pagesight keys new` stores them."""
    store = PostgresKeyStore.open(settings)
    try:
        key_a, record_a = new_key("key-a", "tenant-a")
        key_b, record_b = new_key("key-b", "tenant-b")
        store.add(record_a)
        store.add(record_b)
    finally:
        store.close()
    return key_a, key_b


def test_gateway_on_postgres_keys_jobs_traces_audit(
    settings: Settings, service: IndexService, tmp_path: Path
) -> None:
    key_a, key_b = _keys(settings)
    keyring = KeyRing.from_settings(settings)
    app = build_app(ServiceClient.in_process(service), settings.gateway, keyring)
    with TestClient(app) as http:
        owner = PageSightClient(api_key=key_a, http=http)
        accepted = owner.upload(samples.text_pdf(tmp_path / "northwind.pdf"))
        assert service.wait_idle(120)
        job = owner.wait_for_job(accepted.job_id, timeout_s=10)
        assert job.state == JobState.READY, job.error_message
        found = owner.search("fuel prices cost risk", route="text", top_k=3)
        assert found.hits and found.hits[0].doc_id == accepted.doc_id
        assert accepted.doc_id in owner.trace(found.trace_id).doc_ids

        http.headers.clear()
        other = PageSightClient(api_key=key_b, http=http)
        assert other.documents() == [] and other.jobs() == []
        with pytest.raises(ApiError) as err:
            other.trace(found.trace_id)
        assert err.value.status == 404

        http.headers.clear()
        owner = PageSightClient(api_key=key_a, http=http)
        assert owner.delete(accepted.doc_id).deleted
        assert [e.action for e in owner.audit(accepted.doc_id)] == ["delete"]
        with pytest.raises(ApiError) as err:
            owner.trace(found.trace_id)  # purged with the document it named
        assert err.value.status == 404
    keyring.close()


def test_a_job_queued_by_another_replica_is_polled_and_run_once(
    settings: Settings, service: IndexService, tmp_path: Path
) -> None:
    """Another replica (here: another catalog on the same database) queues a job this service
    never heard of: its idle worker finds it, claims it and runs it."""
    pdf = samples.text_pdf(tmp_path / "elsewhere.pdf")
    replica = open_catalog(settings)
    try:
        job = replica.new_job(
            tenant="tenant-a", source_uri=pdf.as_uri(), path=str(pdf), doc_id="elsewhere", acl=[]
        )
        for _ in range(300):
            done = replica.job(job.job_id)
            assert done is not None
            if done.state.terminal:
                break
            time.sleep(0.1)
        assert done.state == JobState.READY, done.error_message
        assert done.attempts == 1  # run once
        assert replica.job_claims() == []  # released after the run
    finally:
        replica.close()
