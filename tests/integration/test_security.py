"""Regression tests for the security and data-safety defects found by trying PageSight as an
attacker would: one test (or more) per defect, each failing on the code before the fix.

The gateway runs in process over a real index service (as in test_gateway.py); keys of one
tenant with different principals and scopes, and a key of another tenant, call it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from pagesight.core.settings import GatewayOptions, Settings
from pagesight.core.types import JobState
from pagesight.gateway.auth import KeyRing, new_key
from pagesight.gateway.client import ApiError, PageSightClient
from pagesight.ingestion import samples
from pagesight.services.index_service import IndexService
from pagesight.store.key_stores import FileKeyStore
from tests.serving import gateway_app, warm_service

pytestmark = pytest.mark.integration

KEY_FIN, RECORD_FIN = new_key("key-fin", "tenant-a", ["group:finance"])
KEY_HR, RECORD_HR = new_key("key-hr", "tenant-a", ["group:hr"])
KEY_RO, RECORD_RO = new_key("key-ro", "tenant-a", ["group:finance"], scopes=["read"])
KEY_B, RECORD_B = new_key("key-b", "tenant-b", ["group:finance"])


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexService]:
    data_dir = tmp_path_factory.mktemp("security") / "var"
    settings = Settings(
        data_dir=data_dir,
        gateway=GatewayOptions(
            api_keys=[RECORD_FIN, RECORD_HR, RECORD_RO, RECORD_B], max_upload_bytes=2_000_000
        ),
    )
    with warm_service(settings) as svc:
        yield svc


@pytest.fixture(scope="module")
def http(service: IndexService) -> Iterator[TestClient]:
    app = gateway_app(service)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _client(http: TestClient, key: str) -> PageSightClient:
    """A client of its own (headers included) over the same app and service."""
    return PageSightClient(api_key=key, http=TestClient(http.app, raise_server_exceptions=False))


def _ready(client: PageSightClient, service: IndexService, job_id: str) -> None:
    assert service.wait_idle(120)
    job = client.wait_for_job(job_id, timeout_s=5)
    assert job.state == JobState.READY, job.error_message


def _error(call: Any) -> ApiError:
    with pytest.raises(ApiError) as err:
        call()
    return err.value


def _body_without_trace(response: httpx.Response, *ids: str) -> str:
    """The error body with its trace id and the named ids blanked (messages name the id)."""
    body = response.json()
    body["error"]["trace_id"] = None
    text = json.dumps(body, sort_keys=True)
    for value in ids:
        text = text.replace(value, "<id>")
    return text


# -- 1. every read and delete applies tenant + ACL + validity ---------------------------------


def test_acl_applies_to_every_document_route(
    http: TestClient, service: IndexService, tmp_path: Path
) -> None:
    fin = _client(http, KEY_FIN)
    accepted = fin.upload(samples.text_pdf(tmp_path / "ledger.pdf"), acl=["group:finance"])
    _ready(fin, service, accepted.job_id)
    doc_id = accepted.doc_id
    hr = _client(http, KEY_HR)
    assert doc_id not in {d.doc_id for d in hr.documents()}
    assert accepted.job_id not in {j.job_id for j in hr.jobs()}
    missing = "no-such-document"
    auth = {"Authorization": f"Bearer {KEY_HR}"}
    for method, path in [
        ("GET", "/v1/documents/{}"),
        ("GET", "/v1/documents/{}/pages/1/image"),
        ("DELETE", "/v1/documents/{}"),
    ]:
        hidden = http.request(method, path.format(doc_id), headers=auth)
        absent = http.request(method, path.format(missing), headers=auth)
        assert hidden.status_code == absent.status_code == 404, (method, path)
        assert _body_without_trace(hidden, doc_id) == _body_without_trace(absent, missing)
    job = http.get(f"/v1/jobs/{accepted.job_id}", headers=auth)
    assert job.status_code == 404
    assert _body_without_trace(job, accepted.job_id) == _body_without_trace(
        http.get("/v1/jobs/no-such-job", headers=auth), "no-such-job"
    )
    assert fin.document(doc_id).document.doc_id == doc_id, "the HR delete must not delete it"
    found = fin.search("fuel prices cost risk", route="text", top_k=5)
    assert found.hits and found.hits[0].doc_id == doc_id
    assert _error(lambda: hr.trace(found.trace_id)).status == 404  # the trace names the doc


def test_expired_documents_read_as_missing(
    http: TestClient, service: IndexService, tmp_path: Path
) -> None:
    """A document past its valid_until reads as missing everywhere (nothing deletes it). It is
    made valid, then re-uploaded under its id with a valid_until in the past: no clock race
    with ingestion on a loaded machine."""
    fin = _client(http, KEY_FIN)
    pdf = samples.table_pdf(tmp_path / "old.pdf")
    accepted = fin.upload(pdf)
    _ready(fin, service, accepted.job_id)
    assert fin.document(accepted.doc_id).document.doc_id == accepted.doc_id
    expired = fin.upload(
        pdf, doc_id=accepted.doc_id, valid_until=datetime.now(UTC) - timedelta(days=1)
    )
    assert expired.outcome == "replaced"
    assert service.wait_idle(120)
    assert _error(lambda: fin.document(accepted.doc_id)).status == 404
    assert accepted.doc_id not in {d.doc_id for d in fin.documents()}
    assert _error(lambda: fin.page_image(accepted.doc_id, 1)).status == 404
    found = fin.search("revenue by region", route="keyword", top_k=10)
    assert accepted.doc_id not in {h.doc_id for h in found.hits}


def test_read_only_keys_cannot_upload_or_delete(http: TestClient, tmp_path: Path) -> None:
    ro = _client(http, KEY_RO)
    err = _error(lambda: ro.upload(samples.text_pdf(tmp_path / "x.pdf")))
    assert (err.status, err.code) == (403, "FORBIDDEN")
    err = _error(lambda: ro.delete("no-such-document"))
    assert (err.status, err.code) == (403, "FORBIDDEN")
    assert isinstance(ro.documents(), list)  # reading is allowed


def test_keys_reload_without_restart_and_can_be_revoked(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    store = FileKeyStore(keys_file)
    first, record = new_key("first", "t")
    store.add(record)
    ring = KeyRing.from_options(GatewayOptions(api_keys_file=keys_file, keys_reload_s=0))
    assert ring.authenticate(f"Bearer {first}", None).key_id == "first"
    second, record = new_key("second", "t", scopes=["read"])
    store.add(record)
    caller = ring.authenticate(f"Bearer {second}", None)
    assert caller.key_id == "second" and caller.scopes == {"read"}
    assert store.revoke("first")
    with pytest.raises(Exception, match="unknown or revoked"):
        ring.authenticate(f"Bearer {first}", None)
    keys_file.write_text("not json")  # a broken edit keeps the keys that worked
    assert ring.authenticate(f"Bearer {second}", None).key_id == "second"


# -- 3. uploads with the same file name -----------------------------------------------------


def test_same_file_name_never_overwrites_silently(
    http: TestClient, service: IndexService, tmp_path: Path
) -> None:
    fin = _client(http, KEY_FIN)
    for sub in "abc":
        (tmp_path / sub).mkdir()
    first_pdf = samples.text_pdf(tmp_path / "a" / "report.pdf")
    second_pdf = samples.table_pdf(tmp_path / "b" / "report.pdf")
    first = fin.upload(first_pdf)
    second = fin.upload(second_pdf)
    assert (first.outcome, second.outcome) == ("created", "created")
    assert first.doc_id != second.doc_id
    _ready(fin, service, second.job_id)
    _ready(fin, service, first.job_id)
    assert {first.doc_id, second.doc_id} <= {d.doc_id for d in fin.documents()}

    again = fin.upload(first_pdf)
    assert (again.outcome, again.doc_id, again.state) == ("unchanged", first.doc_id, "READY")

    replaced = fin.upload(second_pdf, doc_id=first.doc_id)
    assert (replaced.outcome, replaced.doc_id) == ("replaced", first.doc_id)
    _ready(fin, service, replaced.job_id)
    err = _error(lambda: fin.upload(first_pdf, replace=True))  # two documents are report.pdf
    assert (err.status, err.code) == (409, "CONFLICT")

    unique = fin.upload(samples.chart_pdf(tmp_path / "chart.pdf"))
    _ready(fin, service, unique.job_id)
    swap = fin.upload(samples.text_pdf(tmp_path / "c" / "chart.pdf"), replace=True)
    assert (swap.outcome, swap.doc_id) == ("replaced", unique.doc_id)
    _ready(fin, service, swap.job_id)


def test_hidden_document_ids_are_not_overwritten(
    http: TestClient, service: IndexService, tmp_path: Path
) -> None:
    fin = _client(http, KEY_FIN)
    secret = fin.upload(samples.text_pdf(tmp_path / "s.pdf"), acl=["group:finance"])
    _ready(fin, service, secret.job_id)
    hr = _client(http, KEY_HR)
    err = _error(lambda: hr.upload(samples.table_pdf(tmp_path / "t.pdf"), doc_id=secret.doc_id))
    assert (err.status, err.code) == (409, "CONFLICT")
    assert fin.document(secret.doc_id).document.acl == ["group:finance"]


# -- 4. caller-supplied trace ids ---------------------------------------------------------


def test_a_trace_id_reused_by_another_tenant_replaces_nothing(http: TestClient) -> None:
    body = {"query": "fuel prices", "route": "text", "top_k": 3}
    request_id = {"X-Request-ID": "shared-correlation-id"}
    a = http.post(
        "/v1/search", json=body, headers={**request_id, "Authorization": f"Bearer {KEY_FIN}"}
    )
    b = http.post(
        "/v1/search",
        json={**body, "query": "tenant b asks"},
        headers={**request_id, "Authorization": f"Bearer {KEY_B}"},
    )
    assert a.status_code == b.status_code == 200
    own = http.get(
        "/v1/traces/shared-correlation-id", headers={"Authorization": f"Bearer {KEY_FIN}"}
    )
    assert own.status_code == 200 and own.json()["trace"]["query"] == "fuel prices"
    theirs = http.get(
        "/v1/traces/shared-correlation-id", headers={"Authorization": f"Bearer {KEY_B}"}
    )
    assert theirs.status_code == 200 and theirs.json()["trace"]["query"] == "tenant b asks"


# -- 5/6. error bodies, never a 500 ---------------------------------------------------------


def _assert_error_body(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["stage"] and error["message"] and error["trace_id"]
    assert "detail" not in response.json()


def test_every_error_has_the_documented_body(http: TestClient) -> None:
    auth = {"Authorization": f"Bearer {KEY_FIN}"}
    _assert_error_body(http.get("/v1/no-such-route", headers=auth), 404, "NOT_FOUND")
    _assert_error_body(http.get("/nothing-here"), 404, "NOT_FOUND")
    _assert_error_body(
        http.post(
            "/v1/search",
            content=b'{"query": "\xff\xfe"}',
            headers={**auth, "content-type": "application/json"},
        ),
        400,
        "INVALID_REQUEST",
    )
    _assert_error_body(
        http.post(
            "/v1/documents",
            content=b"--x\r\n",
            headers={**auth, "content-type": "multipart/form-data"},  # no boundary
        ),
        400,
        "INVALID_REQUEST",
    )
    two_files = [("file", ("a.pdf", b"%PDF-1.4", "application/pdf"))] * 2
    _assert_error_body(
        http.post("/v1/documents", files=two_files, headers=auth), 400, "INVALID_REQUEST"
    )
    _assert_error_body(http.put("/v1/search", headers=auth), 405, "INVALID_REQUEST")
    _assert_error_body(
        http.post("/v1/search", json={"query": "x", "route": "visual"}, headers=auth),
        409,
        "ROUTE_UNAVAILABLE",
    )


def test_blank_queries_are_refused(http: TestClient) -> None:
    auth = {"Authorization": f"Bearer {KEY_FIN}"}
    for path in ("/v1/search", "/v1/answer"):
        _assert_error_body(
            http.post(path, json={"query": " \t\n "}, headers=auth), 422, "INVALID_REQUEST"
        )


# -- 7. audit log ---------------------------------------------------------------------------


def test_deletes_and_replacements_are_audited(
    http: TestClient, service: IndexService, tmp_path: Path
) -> None:
    fin = _client(http, KEY_FIN)
    doc = fin.upload(samples.text_pdf(tmp_path / "audit.pdf"), acl=["group:finance"])
    _ready(fin, service, doc.job_id)
    replaced = fin.upload(
        samples.table_pdf(tmp_path / "v2.pdf"), doc_id=doc.doc_id, acl=["group:finance"]
    )
    _ready(fin, service, replaced.job_id)
    assert fin.delete(doc.doc_id).deleted
    entries = fin.audit(doc_id=doc.doc_id)
    assert [(e.action, e.actor, e.via) for e in entries] == [
        ("delete", "key-fin", "api"),
        ("replace", "key-fin", "api"),
    ]
    assert entries[1].new_version == entries[0].version != entries[1].version
    assert entries[0].at >= entries[1].at
    assert _client(http, KEY_HR).audit(doc_id=doc.doc_id) == []  # not its document
    assert _client(http, KEY_B).audit(doc_id=doc.doc_id) == []  # not its tenant


# -- 8. encrypted PDFs through the API ----------------------------------------------------


def test_encrypted_upload_with_password_never_stored(
    http: TestClient, service: IndexService, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import pymupdf

    password = "Zq7-unusual-pdf-secret"  # noqa: S105  # a made-up test password
    plain = samples.text_pdf(tmp_path / "plain.pdf")
    locked_pdf = tmp_path / "locked.pdf"
    with pymupdf.open(plain) as doc:
        doc.save(
            locked_pdf, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw=password, owner_pw=password
        )
    fin = _client(http, KEY_FIN)
    locked = fin.upload(locked_pdf, doc_id="locked-without-password")
    assert service.wait_idle(120)
    job = fin.job(locked.job_id)
    assert (job.state, job.error_code) == (JobState.FAILED, "ENCRYPTED")
    with caplog.at_level(logging.DEBUG):
        opened = fin.upload(locked_pdf, password=password)
        _ready(fin, service, opened.job_id)
        found = fin.search("fuel prices cost risk", route="text", top_k=3)
    assert fin.document(opened.doc_id).pages == 1
    assert password not in caplog.text
    auth = {"Authorization": f"Bearer {KEY_FIN}"}
    assert password not in http.get(f"/v1/jobs/{opened.job_id}", headers=auth).text
    assert password not in http.get(f"/v1/traces/{found.trace_id}", headers=auth).text
    for path in service.settings.data_dir.rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path


# -- 9. document ids are validated at the edge ----------------------------------------------


@pytest.mark.parametrize("bad", ["a/b", "../x", " lead", "x" * 129, "tab\there", ".hidden"])
def test_doc_ids_that_cannot_be_addressed_are_refused(
    http: TestClient, tmp_path: Path, bad: str
) -> None:
    fin = _client(http, KEY_FIN)
    err = _error(lambda: fin.upload(samples.text_pdf(tmp_path / "x.pdf"), doc_id=bad))
    assert (err.status, err.code) == (422, "INVALID_REQUEST")
    response = http.post(
        "/v1/documents",
        json={"uri": "file:///tmp/x.pdf", "doc_id": bad},
        headers={"Authorization": f"Bearer {KEY_FIN}"},
    )
    _assert_error_body(response, 422, "INVALID_REQUEST")


# -- 11. no internal paths in what callers see ----------------------------------------------


def test_jobs_and_errors_show_the_callers_file_name_only(
    http: TestClient, service: IndexService, tmp_path: Path
) -> None:
    import zipfile

    fake = tmp_path / "quarterly.pdf"
    with zipfile.ZipFile(fake, "w") as archive:
        archive.writestr("hello.txt", "not a pdf")
    fin = _client(http, KEY_FIN)
    accepted = fin.upload(fake)
    assert service.wait_idle(120)
    response = http.get(
        f"/v1/jobs/{accepted.job_id}", headers={"Authorization": f"Bearer {KEY_FIN}"}
    )
    job = response.json()
    assert job["state"] == "FAILED" and "path" not in job
    assert "quarterly.pdf" in job["error_message"]
    assert "/uploads/" not in response.text and str(service.settings.data_dir) not in response.text
    assert not re.search(r"[0-9a-f]{32}", job["error_message"])  # the stored copy's name
    listed = http.get("/v1/jobs", headers={"Authorization": f"Bearer {KEY_FIN}"}).json()
    assert all("path" not in j for j in listed["jobs"])


def test_queued_uploads_of_the_same_bytes_do_not_share_a_stored_copy(
    http: TestClient, service: IndexService, tmp_path: Path
) -> None:
    """x, y, x to one doc_id (a client retrying x): each job has its own file, the last wins."""
    fin = _client(http, KEY_FIN)
    x = samples.text_pdf(tmp_path / "x.pdf").read_bytes()
    y = samples.table_pdf(tmp_path / "y.pdf").read_bytes()
    accepted = [fin.upload("r.pdf", data=data, doc_id="retried-doc") for data in (x, y, x)]
    assert service.wait_idle(120)
    assert [fin.job(a.job_id).state for a in accepted] == [JobState.READY] * 3
    assert fin.document("retried-doc").document.version == hashlib.sha256(x).hexdigest()
