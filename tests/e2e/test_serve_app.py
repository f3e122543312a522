"""The whole Ray Serve application over HTTP, driven by the Python client."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest
from PIL import Image

from pagesight.core.types import AnswerResponse, AnswerToken, JobState
from pagesight.gateway.client import ApiError
from pagesight.ingestion import samples
from pagesight.query.generation import render_cited
from tests.e2e.conftest import MAX_UPLOAD, RunningApp

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_upload_search_page_image_delete(serve_app: RunningApp, tmp_path: Path) -> None:
    with serve_app.client() as client:
        accepted = client.upload(samples.text_pdf(tmp_path / "northwind.pdf"))
        job = client.wait_for_job(accepted.job_id, timeout_s=180)
        assert job.state == JobState.READY, job.error_message
        assert job.pages == 1 and job.chunks > 0

        found = client.search("How many parcels did Northwind move?", route="text", top_k=3)
        assert found.hits[0].doc_id == accepted.doc_id and found.hits[0].page_number == 1
        assert client.trace(found.trace_id).route.value == "text"

        png = client.page_image(accepted.doc_id, 1, highlight=found.hits[0].evidence or None)
        assert Image.open(io.BytesIO(png)).format == "PNG"

        _assert_state_in_postgres(serve_app, accepted.doc_id, job.job_id)

        assert client.delete(accepted.doc_id).deleted
        with pytest.raises(ApiError) as err:
            client.document(accepted.doc_id)
        assert err.value.status == 404
        assert client.search("How many parcels did Northwind move?", route="text").hits == []
        with pytest.raises(ApiError) as err:
            client.trace(found.trace_id)
        assert err.value.status == 404


def _assert_state_in_postgres(app: RunningApp, doc_id: str, job_id: str) -> None:
    """The replicas wrote the catalog to PostgreSQL, not to SQLite files under data_dir."""
    from pagesight.core.settings import Settings
    from pagesight.store.catalog import open_catalog

    catalog = open_catalog(Settings(data_dir=app.data_dir, database_url=app.database_url))
    try:
        assert catalog.document("tenant-a", doc_id) is not None
        job = catalog.job(job_id)
        assert job is not None and job.state == JobState.READY
        assert catalog.job_claims() == []
    finally:
        catalog.close()
    assert not list(app.data_dir.glob("*.sqlite3"))


def test_tenants_are_isolated(serve_app: RunningApp, tmp_path: Path) -> None:
    with serve_app.client() as owner, serve_app.client(serve_app.key_b) as other:
        accepted = owner.upload(samples.table_pdf(tmp_path / "table.pdf"))
        assert owner.wait_for_job(accepted.job_id, timeout_s=180).state == JobState.READY
        with pytest.raises(ApiError) as err:
            other.document(accepted.doc_id)
        assert (err.value.status, err.value.code) == (404, "NOT_FOUND")
        with pytest.raises(ApiError) as err:
            other.page_image(accepted.doc_id, 1)
        assert err.value.status == 404
        assert other.search("revenue by region", route="keyword").hits == []
        assert owner.search("revenue by region", route="keyword").hits
        owner.delete(accepted.doc_id)


def test_unauthenticated_is_401(serve_app: RunningApp) -> None:
    response = httpx.post(f"{serve_app.url}/v1/search", json={"query": "x"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHORIZED"


def test_too_large_upload_is_413(serve_app: RunningApp, tmp_path: Path) -> None:
    with serve_app.client() as client, pytest.raises(ApiError) as err:
        client.upload(tmp_path / "big.pdf", data=b"%PDF-1.7\n" + b"0" * (MAX_UPLOAD + 1))
    assert (err.value.status, err.value.code) == (413, "TOO_LARGE")


def test_malformed_request_is_422(serve_app: RunningApp) -> None:
    response = httpx.post(
        f"{serve_app.url}/v1/search",
        json={"query": "x", "top_k": "ten"},
        headers={"Authorization": f"Bearer {serve_app.key_a}"},
    )
    assert response.status_code == 422
    assert "top_k" in response.json()["error"]["message"]


def test_over_concurrency_is_429_with_retry_after(serve_app: RunningApp) -> None:
    """The limited key may have one request in flight: a burst gets some 429s, no errors."""

    def one(_: int) -> httpx.Response:
        return httpx.post(
            f"{serve_app.url}/v1/search",
            json={"query": "revenue by region and quarter", "route": "text"},
            headers={"Authorization": f"Bearer {serve_app.key_limited}"},
            timeout=60,
        )

    with ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(one, range(32)))
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 429} and 429 in statuses and 200 in statuses
    limited = next(r for r in responses if r.status_code == 429)
    assert limited.headers["retry-after"] == "1"
    assert limited.json()["error"]["code"] == "RATE_LIMITED"


def test_ops_endpoints(serve_app: RunningApp) -> None:
    assert httpx.get(f"{serve_app.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{serve_app.url}/readyz").status_code == 200
    metrics = httpx.get(f"{serve_app.url}/metrics").text
    assert "pagesight_http_requests_total" in metrics
    assert "pagesight_ingest_queue_depth" in metrics
    assert httpx.get(f"{serve_app.url}/docs").status_code == 200


def test_answers_stream_across_the_handle(serve_app: RunningApp, tmp_path: Path) -> None:
    """A streamed answer crosses the Ray handle (``handle.options(stream=True)`` over the
    index service's generator method): tokens, then the checked answer; the official openai
    client streams the same answer through /v1/chat/completions. No LLM here: extractive."""
    question = "How many parcels did Northwind Logistics move in 2024?"
    with serve_app.client() as client:
        accepted = client.upload(samples.text_pdf(tmp_path / "annual.pdf"))
        assert client.wait_for_job(accepted.job_id, timeout_s=180).state == JobState.READY
        try:
            *tokens, final = client.answer_stream(question, route="text")
            assert isinstance(final, AnswerResponse) and final.mode == "extractive"
            assert not final.abstained and "4.2 million parcels" in final.answer
            assert tokens and all(isinstance(t, AnswerToken) for t in tokens)
            assert "".join(t.text for t in tokens if isinstance(t, AnswerToken)) == render_cited(
                final
            )
            assert [c.doc_id for c in final.citations] == [accepted.doc_id]

            official = openai.OpenAI(
                base_url=f"{serve_app.url}/v1", api_key=serve_app.key_a, max_retries=0
            )
            with official:
                chunks = list(
                    official.chat.completions.create(
                        model="pagesight",
                        messages=[{"role": "user", "content": question}],
                        stream=True,
                        extra_body={"pagesight": {"route": "text"}},
                    )
                )
            content = "".join(c.choices[0].delta.content or "" for c in chunks)
            assert content == render_cited(final)
            assert chunks[-1].choices[0].finish_reason == "stop"
            assert chunks[-1].model_extra is not None
            cited = chunks[-1].model_extra["pagesight"]["citations"]
            assert [c["doc_id"] for c in cited] == [accepted.doc_id]
        finally:
            client.delete(accepted.doc_id)
