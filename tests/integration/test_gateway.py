"""The gateway over the real index service, in one process (no Ray), driven by the client.

The same routers and service run under Ray Serve in tests/e2e; here they run behind Starlette's
test client so that every HTTP contract (auth, tenancy, limits, errors, traces, delete) is
checked quickly and deterministically.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from pagesight.api.caller import Caller
from pagesight.core.settings import GatewayOptions, Settings
from pagesight.core.types import BBox, JobState
from pagesight.gateway.app import build_app
from pagesight.gateway.auth import KeyRing, new_key
from pagesight.gateway.backend import ServiceClient
from pagesight.gateway.client import ApiError, PageSightClient
from pagesight.ingestion import samples
from pagesight.services.index_service import IndexService
from tests.serving import gateway_app, warm_service

pytestmark = pytest.mark.integration

KEY_A, RECORD_A = new_key("key-a", "tenant-a", ["group:finance"])
KEY_B, RECORD_B = new_key("key-b", "tenant-b")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexService]:
    data_dir = tmp_path_factory.mktemp("gateway") / "var"
    inbox = data_dir.parent / "inbox"
    inbox.mkdir()
    settings = Settings(
        data_dir=data_dir,
        gateway=GatewayOptions(
            api_keys=[RECORD_A, RECORD_B],
            max_upload_bytes=200_000,
            uri_allowlist=[inbox.as_uri() + "/"],
        ),
    )
    with warm_service(settings) as svc:
        yield svc


@pytest.fixture(scope="module")
def http(service: IndexService) -> Iterator[TestClient]:
    app = gateway_app(service)
    with TestClient(app) as client:
        yield client


@pytest.fixture()
def client_a(http: TestClient) -> PageSightClient:
    http.headers.clear()
    return PageSightClient(api_key=KEY_A, http=http)


def _client(http: TestClient, key: str | None) -> PageSightClient:
    http.headers.clear()
    return PageSightClient(api_key=key, http=http)


def _ingest(client: PageSightClient, service: IndexService, path: Path) -> str:
    accepted = client.upload(path)
    assert accepted.state == JobState.PENDING.value
    assert service.wait_idle(120)
    job = client.wait_for_job(accepted.job_id, timeout_s=5)
    assert job.state == JobState.READY, job.error_message
    return accepted.doc_id


def test_upload_search_image_trace_delete(
    http: TestClient, service: IndexService, tmp_path: Path
) -> None:
    client = _client(http, KEY_A)
    doc_id = _ingest(client, service, samples.text_pdf(tmp_path / "northwind.pdf"))
    assert [d.doc_id for d in client.documents()] == [doc_id]
    assert client.document(doc_id).pages == 1
    # the title the document prints, and the file name next to it
    listed = http.get("/v1/documents", headers={"X-API-Key": KEY_A}).json()["documents"]
    named = ("Northwind Logistics Annual Report", "northwind.pdf")
    assert [(d["title"], d["source_name"]) for d in listed] == [named]

    found = client.search("fuel prices cost risk", route="text", top_k=5)
    assert found.hits and found.hits[0].doc_id == doc_id and found.hits[0].page_number == 1
    hit = found.hits[0]
    assert (hit.title, hit.source_name) == named
    assert "Fuel" in hit.snippet and hit.route_scores
    assert hit.page_image_url.startswith(f"/v1/documents/{doc_id}/pages/1/image")

    png = client.page_image(doc_id, 1, highlight=[BBox(x0=72, y0=72, x1=300, y1=120)])
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.width > 100
    jpeg = client.page_image(doc_id, 1, image_format="jpeg")
    assert Image.open(io.BytesIO(jpeg)).format == "JPEG"
    assert http.get(hit.page_image_url, headers={"Authorization": f"Bearer {KEY_A}"}).is_success

    trace = client.trace(found.trace_id)
    assert trace.trace_id == found.trace_id and doc_id in trace.doc_ids
    assert {r.route for r in trace.routes} >= {"keyword", "dense"}

    assert client.delete(doc_id).deleted
    for call in (
        lambda: client.document(doc_id),
        lambda: client.page_image(doc_id, 1),
        lambda: client.trace(found.trace_id),  # purged with the document it names
        lambda: client.delete(doc_id),
    ):
        with pytest.raises(ApiError) as err:
            call()
        assert err.value.status == 404 and err.value.code == "NOT_FOUND"
    assert client.search("fuel prices cost risk", route="text").hits == []
    assert not any(service.upload_dir.rglob("*.pdf"))


def test_other_tenant_sees_nothing(http: TestClient, service: IndexService, tmp_path: Path) -> None:
    owner = _client(http, KEY_A)
    doc_id = _ingest(owner, service, samples.table_pdf(tmp_path / "table.pdf"))
    job_id = owner.jobs()[0].job_id
    trace_id = owner.search("quarterly revenue table", route="keyword").trace_id

    other = _client(http, KEY_B)
    missing = _client(http, KEY_B)
    errors = []
    for call in (
        lambda: other.document(doc_id),
        lambda: other.page_image(doc_id, 1),
        lambda: other.job(job_id),
        lambda: other.trace(trace_id),
        lambda: other.delete(doc_id),
        lambda: missing.document("no-such-document"),
    ):
        with pytest.raises(ApiError) as err:
            call()
        errors.append((err.value.status, err.value.code, err.value.message.split(" ")[0]))
    # indistinguishable from a missing id: same status, code and wording
    assert {e[:2] for e in errors} == {(404, "NOT_FOUND")}
    assert other.documents() == []
    assert other.search("quarterly revenue table", route="keyword").hits == []
    owner = _client(http, KEY_A)
    assert owner.document(doc_id).document.doc_id == doc_id  # the failed delete did nothing
    owner.delete(doc_id)


def test_structure_lists_the_pages_and_is_tenant_scoped(
    http: TestClient, service: IndexService, tmp_path: Path
) -> None:
    import pymupdf

    sizes = [(612.0, 792.0), (842.0, 595.0)]  # letter portrait, A4 landscape
    path = tmp_path / "two-pages.pdf"
    with pymupdf.open() as pdf:
        for n, (width, height) in enumerate(sizes, start=1):
            page = pdf.new_page(width=width, height=height)
            page.insert_text((72, 72), f"Structure probe page {n}: freight volumes", fontsize=12)
        pdf.save(path)
    owner = _client(http, KEY_A)
    doc_id = _ingest(owner, service, path)

    structure = owner.structure(doc_id)
    assert (structure.doc_id, structure.version) == (
        doc_id,
        owner.document(doc_id).document.version,
    )
    assert [(p.page_number, p.width, p.height) for p in structure.pages] == [
        (1, *sizes[0]),
        (2, *sizes[1]),
    ]
    assert structure.sections == [] and structure.items == []

    def answer(doc: str) -> tuple[int, str, str]:
        response = http.get(f"/v1/documents/{doc}/structure", headers=other)
        error = response.json()["error"]
        return response.status_code, error["code"], error["message"].replace(doc, "<id>")

    other = {"Authorization": f"Bearer {KEY_B}"}
    assert answer(doc_id) == answer("no-such-document")  # another tenant's: as if missing
    assert answer(doc_id)[:2] == (404, "NOT_FOUND")
    owner.delete(doc_id)


def test_auth_is_required(http: TestClient) -> None:
    http.headers.clear()
    response = http.post("/v1/search", json={"query": "x"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHORIZED"
    assert response.headers["www-authenticate"] == "Bearer"
    for headers in ({"Authorization": "Bearer ps_wrong"}, {"Authorization": "Basic abc"}):
        assert http.post("/v1/search", json={"query": "x"}, headers=headers).status_code == 401
    assert http.get("/v1/documents", headers={"X-API-Key": KEY_A}).status_code == 200


def test_upload_too_large_is_413(http: TestClient, tmp_path: Path) -> None:
    client = _client(http, KEY_A)
    with pytest.raises(ApiError) as err:
        client.upload(tmp_path / "big.pdf", data=b"%PDF-1.7\n" + b"0" * 300_000)
    assert err.value.status == 413 and err.value.code == "TOO_LARGE"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ('{"query": "x", "top_k": "many"}', "top_k"),
        ('{"query": ""}', "query"),
        ('{"query": "x", "route": "psychic"}', "route"),
        ('{"query": "x", "unknown": 1}', "unknown"),
        ('{"query": "x", "top_k": 100000}', "top_k"),
    ],
)
def test_bad_requests_are_422_with_a_message(http: TestClient, body: str, fragment: str) -> None:
    http.headers.clear()
    response = http.post(
        "/v1/search",
        content=body,
        headers={"Authorization": f"Bearer {KEY_A}", "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "INVALID_REQUEST" and fragment.lower() in error["message"].lower()
    assert error["trace_id"] == response.headers["x-trace-id"]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("{not json", "line 1, column 2"),
        ('{\n  "query": "x",\n  "top_k": 5,,\n}', "line 3, column 14"),
    ],
)
def test_malformed_json_is_422_invalid_json_with_line_and_column(
    http: TestClient, body: str, where: str
) -> None:
    """Not "14: JSON decode error": the code says what is wrong, the message where."""
    http.headers.clear()
    response = http.post(
        "/v1/search",
        content=body,
        headers={"Authorization": f"Bearer {KEY_A}", "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["stage"]) == ("INVALID_JSON", "gateway"), error
    assert error["message"].startswith("the request body is not valid JSON: "), error
    assert error["message"].endswith(where), error


def test_bad_highlight_is_422(http: TestClient) -> None:
    http.headers.clear()
    response = http.get(
        "/v1/documents/x/pages/1/image?highlight=1,2,3",
        headers={"Authorization": f"Bearer {KEY_A}"},
    )
    assert response.status_code == 422


def test_uri_ingest_allowlist(http: TestClient, service: IndexService, tmp_path: Path) -> None:
    client = _client(http, KEY_A)
    inbox = service.settings.data_dir.parent / "inbox"
    allowed = samples.chart_pdf(inbox / "chart.pdf")
    accepted = client.ingest_uri(allowed.as_uri())
    assert service.wait_idle(120)
    assert client.wait_for_job(accepted.job_id, timeout_s=5).state == JobState.READY
    assert allowed.exists()  # a file:// source is read in place, never deleted
    outside = samples.chart_pdf(tmp_path / "elsewhere.pdf")
    for uri in (
        outside.as_uri(),
        (inbox / ".." / tmp_path.name / "elsewhere.pdf").as_uri(),
        "http://169.254.169.254/latest/meta-data/",
        "ftp://example.com/a.pdf",
    ):
        with pytest.raises(ApiError) as err:
            client.ingest_uri(uri)
        assert err.value.status == 403 and err.value.code == "SOURCE_NOT_ALLOWED", uri
    client.delete(accepted.doc_id)


def test_trace_id_is_taken_from_traceparent(http: TestClient) -> None:
    client = _client(http, KEY_A)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    found = client.search(
        "anything", route="keyword", headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    )
    assert found.trace_id == trace_id
    assert client.trace(trace_id).query == "anything"


def test_health_ready_metrics(http: TestClient) -> None:
    http.headers.clear()
    assert http.get("/healthz").json() == {"status": "ok"}
    ready = http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    text = http.get("/metrics").text
    for series in (
        "pagesight_http_requests_total",
        "pagesight_http_request_seconds_bucket",
        "pagesight_search_stage_seconds_bucket",
        "pagesight_ingest_pages_total",
        "pagesight_ingest_queue_depth",
        "pagesight_errors_total",
    ):
        assert series in text, series
    assert 'route="/v1/search"' in text
    assert http.get("/openapi.json").json()["paths"]["/v1/search"]


def test_concurrency_limit_is_429_with_retry_after() -> None:
    """A key over its in-flight limit is refused at once; other keys are unaffected."""
    release = asyncio.Event()
    entered = asyncio.Event()

    async def invoke(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name == "documents":
            entered.set()
            await release.wait()
            return []
        assert name == "job"
        return None

    key, record = new_key("slow", "t", [])
    limited = record.model_copy(update={"max_concurrency": 1})
    app = build_app(ServiceClient(invoke), GatewayOptions(), KeyRing([limited, RECORD_B]))

    async def scenario() -> tuple[int, int, str | None, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            auth = {"Authorization": f"Bearer {key}"}
            first = asyncio.create_task(client.get("/v1/documents", headers=auth))
            await asyncio.wait_for(entered.wait(), 10)
            second = await client.get("/v1/documents", headers=auth)
            other = await client.get("/v1/jobs/x", headers={"Authorization": f"Bearer {KEY_B}"})
            release.set()
            done = await first
            return (
                second.status_code,
                done.status_code,
                second.headers.get("retry-after"),
                (other.status_code),
            )

    second, first, retry_after, other = asyncio.run(scenario())
    assert (second, first, retry_after) == (429, 200, "1")
    assert other == 404  # another key's budget is its own


def test_caller_is_picklable() -> None:
    import pickle

    caller = Caller(key_id="k", tenant="t", principals=["p"])
    assert pickle.loads(pickle.dumps(caller)) == caller  # noqa: S301  # our own Caller, as Ray pickles it


def test_answer_quotes_the_document_with_citations(
    http: TestClient, service: IndexService, tmp_path: Path
) -> None:
    """No LLM configured: the answer quotes the ingested page verbatim, cites doc, page and
    elements, and links the page image; another tenant gets an abstention, not the text."""
    owner = _client(http, KEY_A)
    doc_id = _ingest(owner, service, samples.text_pdf(tmp_path / "annual.pdf"))
    answer = owner.answer("How many parcels did Northwind Logistics move in 2024?", route="text")
    assert answer.mode == "extractive" and not answer.abstained
    assert "4.2 million parcels" in answer.answer
    cited = {(c.doc_id, c.page_number) for c in answer.citations}
    assert cited == {(doc_id, 1)}
    citation = answer.citations[0]
    assert citation.quote and citation.quote in answer.answer
    assert citation.page_image_url.startswith(f"/v1/documents/{doc_id}/pages/1/image")
    assert all(s.citations for s in answer.sentences)
    trace = owner.trace(answer.trace_id)
    assert trace.answer is not None and trace.answer.mode == "extractive"
    assert trace.answer.cited == [c.chunk_id for c in answer.citations]
    assert set(trace.answer.cited) <= set(trace.answer.context)
    assert trace.answer.answer == answer.answer and trace.routes  # retrieval half kept too

    other = _client(http, KEY_B)
    nothing = other.answer("How many parcels did Northwind Logistics move in 2024?")
    assert nothing.abstained and nothing.citations == [] and "4.2" not in nothing.answer
    owner = _client(http, KEY_A)
    owner.delete(doc_id)
