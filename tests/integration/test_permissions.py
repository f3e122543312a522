"""A permission matrix over every route of the gateway's OpenAPI schema.

The routes come from ``app.openapi()["paths"]``; :data:`ROUTES` says how to call each one (its
path parameters, a valid body or query, whether it needs the ``write`` scope). A route of the
schema that the table does not cover fails :func:`test_every_schema_route_is_in_the_table`
(and the matrix), so a new route cannot be forgotten.

Callers: a key of tenant A in the visible document's ACL (``fin``), one of tenant A outside it
(``hr``), a read-only key of tenant A in the ACL (``ro``), a key of tenant B (``other``), no key
and an unknown key. Documents (each with marker words of its own in its title and text):

* ``visible``: tenant A, ACL admits ``fin`` and ``ro``;
* ``hidden``: tenant A, ACL admits only a group none of the callers has;
* ``expired``: tenant A, ACL admits ``fin``; indexed, searched (a trace names it) and then
  replaced with the same bytes and a ``valid_until`` in the past, all through the API;
* ``foreign``: tenant B (``other`` may read it);
* ``missing``: an id nobody has.

Each is replaced once (an audit entry, two jobs) and each has a trace; the jobs of the first
versions are in the matrix too (``visible@v1`` ...): a job or audit entry of an earlier version
must not show a document that now reads as missing (the expired one was readable then).

For every route with an id, every caller x id gets the expected answer: 401 without a valid
key, 403 for the read-only key on write routes, the document's data where the caller may read
it, and otherwise exactly the answer of the missing id (status and body, apart from the trace
id and the id itself).
Uploading with the explicit ``doc_id`` of a same-tenant document the caller cannot read is
409 CONFLICT, with nothing of that document but its id.

:func:`test_nothing_of_an_unreadable_document_in_any_response` asks every route that searches
or lists with the unreadable documents' marker words, and looks for their ids, titles and words
in every response. :func:`test_random_acls_match_access_filter` draws documents and keys at
random (seeded) and checks listing, fetching and keyword search against
:meth:`pagesight.core.types.AccessFilter.admits`; a larger draw is marked ``slow``.
"""

from __future__ import annotations

import json
import random
import secrets
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeAlias

import pytest
from fastapi.testclient import TestClient
from starlette import testclient

from pagesight.core.settings import ApiKeyRecord, GatewayOptions, KeyScope, Settings
from pagesight.core.types import AccessFilter
from pagesight.gateway.auth import new_key
from pagesight.services.index_service import IndexService
from tests.serving import gateway_app, warm_service

pytestmark = pytest.mark.integration

#: What TestClient answers with (httpx2's Response, or httpx's where httpx2 is missing).
Response: TypeAlias = testclient.httpx.Response

TENANT_A, TENANT_B = "perm-a", "perm-b"
FINANCE, LEGAL, HR = "group:finance", "group:legal", "group:hr"
#: Groups no caller of the matrix holds (a replacement changes the ACL to re-index).
BOARD, OPS = "group:board", "group:ops"


# -- callers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Who:
    """A caller: its key (None: no Authorization header), tenant, principals and scopes."""

    name: str
    key: str | None
    tenant: str = ""
    principals: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    @property
    def authenticated(self) -> bool:
        return bool(self.tenant)

    @property
    def can_write(self) -> bool:
        return "write" in self.scopes

    def admits(self, tenant: str, acl: list[str], valid_until: datetime | None) -> bool:
        access = AccessFilter(tenant=self.tenant, principals=list(self.principals))
        return self.authenticated and access.admits(tenant, acl, valid_until)


RECORDS: list[ApiKeyRecord] = []


def _key(
    name: str,
    tenant: str,
    principals: list[str],
    scopes: tuple[KeyScope, ...] = ("read", "write"),
) -> Who:
    key, record = new_key(f"perm-{name}", tenant, principals, scopes=scopes)
    RECORDS.append(record)
    return Who(name, key, tenant, tuple(principals), tuple(scopes))


FIN = _key("fin", TENANT_A, [FINANCE])
HR_KEY = _key("hr", TENANT_A, [HR])
RO = _key("ro", TENANT_A, [FINANCE], scopes=("read",))
OTHER = _key("other", TENANT_B, [FINANCE])
NO_KEY = Who("no_key", None)
BAD_KEY = Who("bad_key", "ps_" + secrets.token_urlsafe(32))  # well formed, never issued
CALLERS = (FIN, HR_KEY, RO, OTHER, NO_KEY, BAD_KEY)
#: Who uploads, replaces and searches to set the documents up (not callers of the matrix).
OWNER_A = _key("owner-a", TENANT_A, [FINANCE, LEGAL])
OWNER_B = _key("owner-b", TENANT_B, [FINANCE])


# -- documents ------------------------------------------------------------------------------------


class Words:
    """Made-up words, unique within a run and never a substring of one another."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)  # noqa: S311  # seeded test data, not a secret
        self.used: set[str] = set()

    def __call__(self) -> str:
        while True:
            word = "".join(
                self.rng.choice("bdfgklmnprstvz") + self.rng.choice("aeiou") for _ in range(5)
            )
            if not any(word in u or u in word for u in self.used):
                self.used.add(word)
                return word


WORDS = Words(20261201)
#: In every document of the matrix: a query that every reader finds something for.
COMMON = WORDS()


def _pdf(title: str, lines: list[str]) -> bytes:
    import pymupdf

    with pymupdf.open() as doc:
        page = doc.new_page()
        page.insert_text((72, 72), title, fontsize=16)
        for n, line in enumerate(lines):
            page.insert_text((72, 110 + 20 * n), line, fontsize=11)
        doc.set_metadata({"title": title})
        return doc.tobytes()


@dataclass
class Doc:
    """A document of the matrix and everything the test did to it."""

    name: str
    owner: Who
    acl_v1: list[str]
    acl: list[str]
    seen_by: frozenset[str]
    replaced: bool = True
    expire: bool = False
    query_words: list[str] = field(default_factory=list)
    secret_words: list[str] = field(default_factory=list)
    title: str = ""
    text: str = ""
    pdf: bytes = b""
    doc_id: str = ""
    version: str = ""
    valid_until: datetime | None = None
    job_ids: list[str] = field(default_factory=list)
    trace_id: str = ""
    deleted: bool = False

    def __post_init__(self) -> None:
        #: words a caller may put in a query; secret words are never sent by anyone
        self.query_words = [WORDS(), WORDS()]
        self.secret_words = [WORDS(), WORDS(), WORDS()]
        q, s = self.query_words, self.secret_words
        self.title = f"{q[0].capitalize()} {s[0].capitalize()} Memo"
        self.text = f"{COMMON} {q[0]} {q[1]} {s[1]} {s[2]} ledger notes"
        self.pdf = _pdf(self.title, [self.text])

    @property
    def tenant(self) -> str:
        return self.owner.tenant

    @property
    def query(self) -> str:
        return " ".join(self.query_words)

    @property
    def audit_actions(self) -> set[str]:
        return ({"replace"} if self.replaced else set()) | ({"delete"} if self.deleted else set())

    def forbidden(self) -> list[str]:
        """What must not show in a response to a caller that may not read this document."""
        return [self.doc_id, self.title, self.text, *self.secret_words]


def _fixed_docs() -> dict[str, Doc]:
    fin_ro = frozenset({FIN.name, RO.name})
    docs = [
        Doc("visible", OWNER_A, [FINANCE], [FINANCE, BOARD], fin_ro),
        Doc("hidden", OWNER_A, [LEGAL], [LEGAL, OPS], frozenset()),
        Doc("expired", OWNER_A, [FINANCE], [FINANCE], frozenset(), expire=True),
        Doc("foreign", OWNER_B, [FINANCE], [FINANCE, BOARD], frozenset({OTHER.name})),
        # deleted by the matrix (DELETE needs documents it may destroy)
        Doc("victim_visible", OWNER_A, [FINANCE], [FINANCE], fin_ro, replaced=False),
        Doc("victim_foreign", OWNER_B, [FINANCE], [FINANCE], frozenset({OTHER.name}), False),
    ]
    return {d.name: d for d in docs}


#: Ids nobody has (valid ids, so the edge lets them through).
MISSING_DOC = f"perm-missing-{uuid.uuid4()}"
MISSING_JOB = str(uuid.uuid4())
MISSING_TRACE = uuid.uuid4().hex
#: What the matrix uploads with an explicit doc_id: accepted, then fails in the worker, so it
#: never creates or changes a document.
NOT_A_PDF = b"this is not a PDF at all, the ingest job fails on it\n" * 4

IdFamily = Literal["doc", "structure", "delete", "upload", "audit", "job", "trace"]


@dataclass
class Corpus:
    docs: dict[str, Doc]
    #: job ids each caller created with the matrix's uploads (its own jobs, visible to it)
    own_jobs: dict[str, set[str]] = field(default_factory=dict)

    def ids(self, family: IdFamily) -> dict[str, tuple[Doc | None, str]]:
        """The ids a route is called with: name -> (the document, or None: missing; id)."""
        d = self.docs
        if family == "job":
            ids: dict[str, tuple[Doc | None, str]] = {}
            for name in ("visible", "hidden", "expired", "foreign"):
                ids[name] = (d[name], d[name].job_ids[-1])
                ids[f"{name}@v1"] = (d[name], d[name].job_ids[0])
            return {**ids, "missing": (None, MISSING_JOB)}
        if family == "trace":
            return {
                **{n: (d[n], d[n].trace_id) for n in ("visible", "hidden", "expired", "foreign")},
                "missing": (None, MISSING_TRACE),
            }
        names = {n: n for n in ("visible", "hidden", "expired", "foreign")}
        if family == "delete":  # the documents a permitted DELETE may destroy
            names.update(visible="victim_visible", foreign="victim_foreign")
        return {
            **{n: (d[m], d[m].doc_id) for n, m in names.items()},
            "missing": (None, MISSING_DOC),
        }


# -- the route table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    method: str
    url: str
    params: dict[str, str] | None = None
    json: Any = None
    files: Any = None
    data: dict[str, str] | None = None

    def send(self, http: TestClient, who: Who) -> Response:
        return http.request(
            self.method,
            self.url,
            params=self.params,
            json=self.json,
            files=self.files,
            data=self.data,
            headers=who.headers,
        )


@dataclass(frozen=True)
class Route:
    """How to call one route: ``access`` public/read/write; ``family`` the ids it is called
    with (None: no id; ``audit`` is also called without one)."""

    access: Literal["public", "read", "write"]
    build: Callable[[Who, str | None], Call]
    family: IdFamily | None = None


def _chat(question: str, stream: bool = False) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": question}], "stream": stream}


def _upload_call(who: Who, doc_id: str | None) -> Call:
    return Call(
        "POST",
        "/v1/documents",
        files={"file": ("probe.pdf", NOT_A_PDF, "application/pdf")},
        # an ACL of the caller's own, so its probe jobs are nobody else's to see
        data={"doc_id": doc_id or "", "acl": f"group:probe-{who.name}"},
    )


ROUTES: dict[tuple[str, str], Route] = {
    ("GET", "/v1/documents"): Route("read", lambda w, i: Call("GET", "/v1/documents")),
    ("POST", "/v1/documents"): Route("write", _upload_call, "upload"),
    ("GET", "/v1/documents/{doc_id}"): Route(
        "read", lambda w, i: Call("GET", f"/v1/documents/{i}"), "doc"
    ),
    ("GET", "/v1/documents/{doc_id}/structure"): Route(
        "read", lambda w, i: Call("GET", f"/v1/documents/{i}/structure"), "structure"
    ),
    ("DELETE", "/v1/documents/{doc_id}"): Route(
        "write", lambda w, i: Call("DELETE", f"/v1/documents/{i}"), "delete"
    ),
    ("GET", "/v1/documents/{doc_id}/pages/{page_number}/image"): Route(
        "read", lambda w, i: Call("GET", f"/v1/documents/{i}/pages/1/image"), "doc"
    ),
    ("GET", "/v1/jobs"): Route("read", lambda w, i: Call("GET", "/v1/jobs")),
    ("GET", "/v1/jobs/{job_id}"): Route("read", lambda w, i: Call("GET", f"/v1/jobs/{i}"), "job"),
    ("GET", "/v1/audit"): Route(
        "read",
        lambda w, i: Call("GET", "/v1/audit", params={"doc_id": i} if i else None),
        "audit",
    ),
    ("POST", "/v1/search"): Route(
        "read",
        lambda w, i: Call("POST", "/v1/search", json={"query": COMMON, "route": "keyword"}),
    ),
    ("POST", "/v1/answer"): Route(
        "read", lambda w, i: Call("POST", "/v1/answer", json={"query": f"{COMMON} ledger"})
    ),
    ("POST", "/v1/chat/completions"): Route(
        "read", lambda w, i: Call("POST", "/v1/chat/completions", json=_chat(COMMON))
    ),
    ("GET", "/v1/models"): Route("read", lambda w, i: Call("GET", "/v1/models")),
    ("GET", "/v1/traces/{trace_id}"): Route(
        "read", lambda w, i: Call("GET", f"/v1/traces/{i}"), "trace"
    ),
    # operations: public by design
    ("GET", "/healthz"): Route("public", lambda w, i: Call("GET", "/healthz")),
    ("GET", "/readyz"): Route("public", lambda w, i: Call("GET", "/readyz")),
    ("GET", "/metrics"): Route("public", lambda w, i: Call("GET", "/metrics")),
}
#: Public pages outside the schema (API docs and the schema itself).
PUBLIC_UNLISTED = ("/openapi.json", "/docs", "/redoc")
_METHODS = {"get", "post", "put", "patch", "delete", "head", "options", "trace"}


def _schema_routes(app: Any) -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
        if method in _METHODS
    ]


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexService]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("permissions") / "var",
        gateway=GatewayOptions(api_keys=list(RECORDS), max_upload_bytes=2_000_000),
    )
    with warm_service(settings) as svc:
        yield svc


@pytest.fixture(scope="module")
def http(service: IndexService) -> Iterator[TestClient]:
    """One client: every request carries its caller's headers (none are set on the client)."""
    app = gateway_app(service)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _upload(
    http: TestClient,
    who: Who,
    filename: str,
    pdf: bytes,
    acl: list[str],
    doc_id: str | None = None,
    valid_until: datetime | None = None,
) -> dict[str, Any]:
    data = {"acl": ",".join(acl)}
    if doc_id:
        data["doc_id"] = doc_id
    if valid_until:
        data["valid_until"] = valid_until.isoformat()
    response = http.post(
        "/v1/documents",
        files={"file": (filename, pdf, "application/pdf")},
        data=data,
        headers=who.headers,
    )
    assert response.status_code == 202, response.text
    accepted: dict[str, Any] = response.json()
    return accepted


def _wait_ready(http: TestClient, service: IndexService, jobs: list[tuple[Who, str]]) -> None:
    assert service.wait_idle(300)
    for who, job_id in jobs:
        job = http.get(f"/v1/jobs/{job_id}", headers=who.headers).json()
        assert job["state"] == "READY", job


def _search(
    http: TestClient, who: Who, query: str, route: str = "keyword", **extra: Any
) -> dict[str, Any]:
    body = {"query": query, "route": route, "top_k": 50, **extra}
    response = http.post("/v1/search", json=body, headers=who.headers)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


@pytest.fixture(scope="module")
def corpus(http: TestClient, service: IndexService) -> Corpus:
    """The matrix's documents, set up through the API only (see the module doc)."""
    docs = _fixed_docs()
    jobs = []
    for doc in docs.values():
        accepted = _upload(http, doc.owner, f"{doc.name}.pdf", doc.pdf, doc.acl_v1)
        assert accepted["outcome"] == "created", accepted
        doc.doc_id = accepted["doc_id"]
        doc.job_ids.append(accepted["job_id"])
        jobs.append((doc.owner, accepted["job_id"]))
    _wait_ready(http, service, jobs)

    # A trace naming each document, made while its maker may read it.
    makers = {"visible": FIN, "hidden": OWNER_A, "expired": FIN, "foreign": OWNER_B}
    for name, maker in makers.items():
        doc = docs[name]
        found = _search(http, maker, doc.query)
        assert [h["doc_id"] for h in found["hits"]] == [doc.doc_id], (name, found)
        doc.trace_id = found["trace_id"]
        trace = http.get(f"/v1/traces/{doc.trace_id}", headers=maker.headers).json()["trace"]
        assert trace["doc_ids"] == [doc.doc_id], (name, trace)

    # Replacements: the same bytes with a new ACL (or validity) re-index and are audited.
    jobs = []
    past = datetime.now(UTC) - timedelta(days=1)
    for doc in docs.values():
        if not doc.replaced:
            continue
        doc.valid_until = past if doc.expire else None
        accepted = _upload(
            http, doc.owner, f"{doc.name}.pdf", doc.pdf, doc.acl, doc.doc_id, doc.valid_until
        )
        assert (accepted["outcome"], accepted["doc_id"]) == ("replaced", doc.doc_id), accepted
        doc.job_ids.append(accepted["job_id"])
        jobs.append((doc.owner, accepted["job_id"]))
    _wait_ready(http, service, jobs)

    for doc in docs.values():
        # the table of who may read what agrees with the rule the service applies
        readers = {c.name for c in CALLERS if c.admits(doc.tenant, doc.acl, doc.valid_until)}
        assert readers == doc.seen_by, (doc.name, readers)
        if doc.expire:
            continue
        detail = http.get(f"/v1/documents/{doc.doc_id}", headers=doc.owner.headers).json()
        assert detail["document"]["title"] == doc.title, detail
        assert sorted(detail["document"]["acl"]) == sorted(doc.acl), detail
        doc.version = detail["document"]["version"]
    return Corpus(docs)


# -- 1. every route is in the table ---------------------------------------------------------------


def test_every_schema_route_is_in_the_table(http: TestClient) -> None:
    schema = set(_schema_routes(http.app))
    uncovered = sorted(schema - set(ROUTES))
    assert not uncovered, f"routes of the OpenAPI schema missing from ROUTES: {uncovered}"
    stale = sorted(set(ROUTES) - schema)
    assert not stale, f"ROUTES lists routes the schema no longer has: {stale}"
    for path in PUBLIC_UNLISTED:
        assert ("GET", path) not in schema, f"{path} is in the schema: give it a ROUTES entry"
        assert http.get(path).status_code == 200, path


# -- 2. the matrix --------------------------------------------------------------------------------


def _normalized(response: Response, *ids: str) -> tuple[int, str]:
    """Status and body, with the error's trace id blanked and ``ids`` (and a job id the body
    names) replaced by a placeholder."""
    try:
        body = response.json()
    except ValueError:
        return response.status_code, response.text
    if isinstance(body, dict):
        if isinstance(body.get("error"), dict):
            body["error"]["trace_id"] = None
        if isinstance(body.get("job_id"), str):
            ids = (*ids, body["job_id"])
    text = json.dumps(body, sort_keys=True)
    for value in ids:
        if value:
            text = text.replace(value, "<id>")
    return response.status_code, text


def _error_code(response: Response) -> str | None:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


def _check_readable(
    family: IdFamily | None, response: Response, doc: Doc | None, value: str | None
) -> str | None:
    """What is wrong with the answer to a caller that may read ``doc`` (None: fine)."""
    expected_status = 202 if family == "upload" else 200
    if response.status_code != expected_status:
        return f"status {response.status_code}, expected {expected_status}: {response.text[:300]}"
    if family is None or value is None or doc is None:
        return None
    if family == "doc" and response.headers["content-type"].startswith("image/"):
        return None if response.content.startswith(b"\x89PNG") else "not a PNG"
    body = response.json()
    checks = {
        "doc": lambda: (
            body["document"]["doc_id"] == value and body["document"]["title"] == doc.title
        ),
        "structure": lambda: (
            (body["doc_id"], body["version"]) == (value, doc.version)
            and [p["page_number"] for p in body["pages"]] == [1]
        ),
        "delete": lambda: body == {"doc_id": value, "deleted": True},
        "upload": lambda: (body["outcome"], body["doc_id"]) == ("replaced", value),
        "audit": lambda: (
            bool(body["entries"]) and all(e["doc_id"] == value for e in body["entries"])
        ),
        "job": lambda: (body["job_id"], body["doc_id"]) == (value, doc.doc_id),
        "trace": lambda: (
            body["trace"]["trace_id"] == value and body["trace"]["doc_ids"] == [doc.doc_id]
        ),
    }
    return None if checks[family]() else f"unexpected body {response.text[:300]}"


def _expect(route: Route, who: Who, doc: Doc | None, id_name: str | None) -> str:
    """ok | 401 | 403 | conflict | missing (the answer of the missing id)."""
    if route.access == "public":
        return "ok"
    if not who.authenticated:
        return "401"
    if route.access == "write" and not who.can_write:
        return "403"
    if id_name is None:
        return "ok"
    if doc is not None and who.name in doc.seen_by:
        return "ok"
    if route.family == "upload" and doc is not None and doc.tenant == who.tenant:
        return "conflict"  # the id is taken within the caller's tenant
    return "missing"


#: A deletion the caller may make, run after every other cell of its route: (caller, id name,
#: document, id value).
_Deferred: TypeAlias = tuple[Who, str | None, Doc | None, str | None]


@dataclass
class _Matrix:
    """Walks the permission matrix route by route: every caller x every kind of id, each
    response judged by :func:`_judge`; counts the cells and keeps what was wrong."""

    http: TestClient
    corpus: Corpus
    failures: list[str] = field(default_factory=list)
    cells: int = 0

    def check_route(self, route: Route, label: str) -> None:
        ids: dict[str | None, tuple[Doc | None, str | None]] = {None: (None, None)}
        if route.family is not None:
            if route.family != "audit":  # audit is also called without a doc_id
                del ids[None]
            ids.update(self.corpus.ids(route.family))
        deferred: list[_Deferred] = []
        for who in CALLERS:
            deferred += self._check_caller(route, label, who, ids)
        for who, id_name, doc, value in deferred:
            self.cells += 1
            response = route.build(who, value).send(self.http, who)
            problem = _judge(route, who, "ok", doc, value, response, None)
            if problem:
                self.failures.append(f"{label} [{who.name} x {id_name}]: {problem}")
            elif doc is not None:
                doc.deleted = True

    def _check_caller(
        self,
        route: Route,
        label: str,
        who: Who,
        ids: dict[str | None, tuple[Doc | None, str | None]],
    ) -> list[_Deferred]:
        """``who`` on ``route`` with every id; the deletions it may make are returned, to run
        last (they destroy the document)."""
        deferred: list[_Deferred] = []
        reference = None
        if route.family is not None:
            missing_value = ids["missing"][1]
            reference_response = route.build(who, missing_value).send(self.http, who)
            _track_jobs(self.corpus, who, reference_response)
            reference = _normalized(reference_response, missing_value or "")
        conflict: tuple[int, str] | None = None
        for id_name, (doc, value) in ids.items():
            expect = _expect(route, who, doc, id_name)
            if route.family == "delete" and expect == "ok":
                deferred.append((who, id_name, doc, value))  # destroys it: last
                continue
            self.cells += 1
            response = route.build(who, value).send(self.http, who)
            _track_jobs(self.corpus, who, response)
            problem = _judge(route, who, expect, doc, value, response, reference)
            if expect == "conflict" and problem is None:
                seen = _normalized(response, value or "")
                if conflict is not None and seen != conflict:
                    problem = f"409 bodies differ between ids: {seen} vs {conflict}"
                conflict = seen
            if problem:
                self.failures.append(f"{label} [{who.name} x {id_name}]: {problem}")
        return deferred


def test_permission_matrix(http: TestClient, service: IndexService, corpus: Corpus) -> None:
    matrix = _Matrix(http, corpus)
    for method, path in _schema_routes(http.app):
        route = ROUTES.get((method, path))
        if route is None:
            matrix.failures.append(f"{method} {path}: not in ROUTES")
            continue
        matrix.check_route(route, f"{method} {path}")
    failures, cells = matrix.failures, matrix.cells
    print(f"permission matrix: {cells} cells")
    assert not failures, f"{len(failures)} of {cells} cells wrong:\n" + "\n".join(failures)

    # Nothing the matrix refused changed anything: the documents are as they were.
    assert service.wait_idle(300)
    docs = corpus.docs
    for doc, who in [(docs["visible"], FIN), (docs["hidden"], OWNER_A), (docs["foreign"], OTHER)]:
        detail = http.get(f"/v1/documents/{doc.doc_id}", headers=who.headers)
        assert detail.status_code == 200, (doc.name, detail.text)
        assert detail.json()["document"]["version"] == doc.version, doc.name
    taken = _upload_call(OWNER_A, docs["expired"].doc_id).send(http, OWNER_A)
    assert taken.status_code == 409, "the expired document must still be there"
    for name in ("victim_visible", "victim_foreign"):
        assert docs[name].deleted, f"{name} was not deleted by the caller allowed to"
    for who in (FIN, HR_KEY, OTHER):  # the probe uploads failed, creating nothing
        for job_id in corpus.own_jobs.get(who.name, set()):
            job = http.get(f"/v1/jobs/{job_id}", headers=who.headers).json()
            assert job["state"] == "FAILED", job


def _track_jobs(corpus: Corpus, who: Who, response: Response) -> None:
    if response.status_code == 202:
        corpus.own_jobs.setdefault(who.name, set()).add(response.json()["job_id"])


def _judge(
    route: Route,
    who: Who,
    expect: str,
    doc: Doc | None,
    value: str | None,
    response: Response,
    reference: tuple[int, str] | None,
) -> str | None:
    """What is wrong with ``response`` (None: as expected)."""
    if expect == "ok":
        return _check_readable(route.family, response, doc, value)
    if expect == "401":
        if (response.status_code, _error_code(response)) != (401, "UNAUTHORIZED"):
            return f"expected 401 UNAUTHORIZED, got {response.status_code} {response.text[:300]}"
        if response.headers.get("www-authenticate") != "Bearer":
            return "401 without WWW-Authenticate: Bearer"
    if expect == "403" and (response.status_code, _error_code(response)) != (403, "FORBIDDEN"):
        return f"expected 403 FORBIDDEN, got {response.status_code} {response.text[:300]}"
    if expect == "conflict":
        if (response.status_code, _error_code(response)) != (409, "CONFLICT"):
            return f"expected 409 CONFLICT, got {response.status_code} {response.text[:300]}"
        assert doc is not None
        text = response.text.replace(doc.doc_id, "<id>").lower()
        leaked = [
            s
            for s in [*doc.forbidden()[1:], *doc.query_words, *doc.acl, doc.version, doc.name]
            if s and s.lower() in text
        ]
        return f"the 409 body shows {leaked}: {response.text}" if leaked else None
    if reference is not None and _normalized(response, value or "") != reference:
        return f"answers unlike the missing id: {_normalized(response, value or '')} vs {reference}"
    return None


# -- 3. nothing of an unreadable document in any response -----------------------------------------


def _leak_requests(doc: Doc, hidden_ids: list[str]) -> list[Call]:
    """Every route that searches or answers, asked with ``doc``'s marker words."""
    q = doc.query
    calls = [
        Call("POST", "/v1/search", json={"query": q, "route": route, "top_k": 50})
        for route in ("keyword", "text")
    ]
    calls.append(
        Call(
            "POST",
            "/v1/search",
            json={"query": f"{COMMON} {q}", "route": "keyword", "filters": {"doc_ids": hidden_ids}},
        )
    )
    for stream in (False, True):
        calls.append(Call("POST", "/v1/answer", json={"query": q, "stream": stream}))
        calls.append(Call("POST", "/v1/chat/completions", json=_chat(q, stream)))
    return calls


def _leaks(text: str, docs: list[Doc], query: str = "") -> list[str]:
    """Which unreadable document shows in ``text`` (the caller's own query words aside)."""
    if query:
        text = text.replace(query, "")
    lowered = text.lower()
    found = []
    for doc in docs:
        for marker in [*doc.forbidden(), *doc.query_words]:
            if marker and marker.lower() in lowered:
                found.append(f"{doc.name}: {marker!r}")
    return found


def test_nothing_of_an_unreadable_document_in_any_response(
    http: TestClient, corpus: Corpus
) -> None:
    failures: list[str] = []
    docs = list(corpus.docs.values())
    for who in CALLERS:
        readable = [d for d in docs if who.name in d.seen_by and not d.deleted]
        unreadable = [d for d in docs if who.name not in d.seen_by]
        readable_ids = {d.doc_id for d in readable}
        hidden_ids = [d.doc_id for d in unreadable]
        for doc in unreadable:
            for call in _leak_requests(doc, hidden_ids):
                failures += _leak_call_failures(http, who, call, doc, unreadable, readable_ids)
        if not who.authenticated:
            continue
        # positive control: the caller's own documents are found by their words
        for doc in readable:
            if not doc.name.startswith("victim"):
                hits = {h["doc_id"] for h in _search(http, who, doc.query)["hits"]}
                if doc.doc_id not in hits:
                    failures.append(f"{who.name}: search does not find its {doc.name}")
        failures += _check_lists(http, corpus, who, readable, unreadable)
    assert not failures, "\n".join(failures)


def _leak_call_failures(
    http: TestClient,
    who: Who,
    call: Call,
    doc: Doc,
    unreadable: list[Doc],
    readable_ids: set[str],
) -> list[str]:
    """What is wrong with the response to ``who``'s ``call`` (asked with ``doc``'s words): a
    status other than 401 (no key) or 200, an unreadable document shown in it, in its hits or
    in the trace of the query."""
    response = call.send(http, who)
    where = f"{who.name}: {call.method} {call.url} {json.dumps(call.json)[:80]}"
    if not who.authenticated:
        return [f"{where}: status {response.status_code}"] if response.status_code != 401 else []
    if response.status_code != 200:
        return [f"{where}: status {response.status_code} {response.text}"]
    query = call.json.get("query", doc.query)
    failures = [f"{where}: shows {leak}" for leak in _leaks(response.text, unreadable, query)]
    if call.url == "/v1/search":
        hits = {h["doc_id"] for h in response.json()["hits"]}
        if not hits <= readable_ids:
            failures.append(f"{where}: hits {hits - readable_ids}")
        if call.json.get("filters") and hits:
            failures.append(f"{where}: filtered to unreadable ids, found {hits}")
    # the trace of the caller's own query names nothing it may not read
    trace_id = response.headers["x-trace-id"]
    trace = http.get(f"/v1/traces/{trace_id}", headers=who.headers)
    failures += [
        f"{where}: its trace shows {leak}" for leak in _leaks(trace.text, unreadable, query)
    ]
    return failures


def _check_lists(
    http: TestClient, corpus: Corpus, who: Who, readable: list[Doc], unreadable: list[Doc]
) -> list[str]:
    """/v1/documents, /v1/jobs and /v1/audit list exactly what ``who`` may see."""
    failures = []
    listed = http.get("/v1/documents", headers=who.headers)
    failures += [f"{who.name}: /v1/documents shows {x}" for x in _leaks(listed.text, unreadable)]
    ids = {d["doc_id"] for d in listed.json()["documents"]}
    if ids != {d.doc_id for d in readable}:
        failures.append(f"{who.name}: /v1/documents lists {len(ids)}, expected {len(readable)}")

    own = corpus.own_jobs.get(who.name, set())
    jobs: list[dict[str, Any]] = http.get("/v1/jobs", headers=who.headers).json()["jobs"]
    # the caller's own probe uploads name whatever id it chose: its own doing, not a leak
    others = json.dumps([j for j in jobs if j["job_id"] not in own])
    failures += [f"{who.name}: /v1/jobs shows {x}" for x in _leaks(others, unreadable)]
    expected_jobs = {j for d in readable for j in d.job_ids} | own
    if {j["job_id"] for j in jobs} != expected_jobs:
        failures.append(
            f"{who.name}: /v1/jobs lists {sorted(j['job_id'] for j in jobs)}, "
            f"expected {sorted(expected_jobs)}"
        )

    audit = http.get("/v1/audit", headers=who.headers)
    failures += [f"{who.name}: /v1/audit shows {x}" for x in _leaks(audit.text, unreadable)]
    entries = {(e["action"], e["doc_id"]) for e in audit.json()["entries"]}
    expected_entries = {
        (action, d.doc_id)
        for d in corpus.docs.values()
        if who.name in d.seen_by
        for action in d.audit_actions
    }
    if entries != expected_entries:
        failures.append(f"{who.name}: /v1/audit lists {entries}, expected {expected_entries}")
    return failures


# -- 4. random ACLs against AccessFilter.admits ---------------------------------------------------


GROUPS = ("group:r0", "group:r1", "group:r2", "group:r3")
Validity = Literal["none", "past", "future"]
#: drawn for documents after the special cases: mostly no validity
VALIDITIES: tuple[Validity, ...] = ("none", "none", "none", "past", "future")


@dataclass
class RandomDoc:
    tenant: str
    acl: list[str]
    validity: Validity
    word: str
    doc_id: str = ""
    valid_until: datetime | None = None


@dataclass
class RandomPlan:
    tag: str
    shared_word: str
    docs: list[RandomDoc]
    keys: list[Who]
    owners: dict[str, Who]


def _random_plan(tag: str, seed: int, n_docs: int, n_keys: int) -> RandomPlan:
    """Documents with random tenants, ACLs (some EVERYONE ``*``, some empty) and validity,
    and keys with random principals; the first few cover the special cases for sure."""
    rng = random.Random(seed)  # noqa: S311  # seeded test data, not a secret
    tenants = [f"perm-rand-{tag}-0", f"perm-rand-{tag}-1"]
    special: list[tuple[list[str], Validity]] = [
        (["*"], "none"),
        ([], "none"),
        ([GROUPS[0]], "past"),
        ([GROUPS[1]], "future"),
    ]
    docs = []
    for n in range(n_docs):
        if n < len(special):
            acl, validity = special[n]
        else:
            draw = rng.random()
            acl = (
                ["*"]
                if draw < 0.12
                else []
                if draw < 0.24
                else rng.sample(GROUPS, rng.randint(1, 2))
            )
            validity = rng.choice(VALIDITIES)
        docs.append(
            RandomDoc(tenants[n % 2 if n < 4 else rng.randrange(2)], acl, validity, WORDS())
        )
    keys = []
    for n in range(n_keys):
        principals = [] if n == 0 else rng.sample(GROUPS, rng.randint(0, 3))
        if rng.random() < 0.1:
            principals.append("*")  # a principal named '*' grants nothing restricted
        keys.append(_key(f"rand-{tag}-{n}", tenants[n % 2], principals, scopes=("read",)))
    owners = {t: _key(f"rand-{tag}-owner-{i}", t, []) for i, t in enumerate(tenants)}
    return RandomPlan(tag, WORDS(), docs, keys, owners)


QUICK_PLAN = _random_plan("quick", 7, n_docs=8, n_keys=8)
LARGE_PLAN = _random_plan("large", 11, n_docs=36, n_keys=20)


@pytest.fixture(scope="module")
def random_corpora(
    http: TestClient, service: IndexService
) -> Callable[[RandomPlan], list[RandomDoc]]:
    """Each plan's documents, ingested once (when a test first asks for them)."""
    built: dict[str, list[RandomDoc]] = {}

    def get(plan: RandomPlan) -> list[RandomDoc]:
        if plan.tag not in built:
            now = datetime.now(UTC)
            jobs = []
            for n, doc in enumerate(plan.docs):
                doc.valid_until = {
                    "none": None,
                    "past": now - timedelta(days=1),
                    "future": now + timedelta(days=1),
                }[doc.validity]
                pdf = _pdf(f"Record {doc.word}", [f"{plan.shared_word} {doc.word} entry {n}"])
                owner = plan.owners[doc.tenant]
                accepted = _upload(
                    http, owner, f"r{n}.pdf", pdf, doc.acl, valid_until=doc.valid_until
                )
                doc.doc_id = accepted["doc_id"]
                jobs.append((owner, accepted["job_id"]))
            _wait_ready(http, service, jobs)
            built[plan.tag] = plan.docs
        return built[plan.tag]

    return get


@pytest.mark.parametrize(
    "plan",
    [
        pytest.param(QUICK_PLAN, id="quick"),
        pytest.param(LARGE_PLAN, id="large", marks=pytest.mark.slow),
    ],
)
def test_random_acls_match_access_filter(
    http: TestClient, random_corpora: Callable[[RandomPlan], list[RandomDoc]], plan: RandomPlan
) -> None:
    docs = random_corpora(plan)
    failures: list[str] = []
    granted = denied = 0
    for key in plan.keys:
        expected = {d.doc_id for d in docs if key.admits(d.tenant, d.acl, d.valid_until)}
        denied += sum(1 for d in docs if d.tenant == key.tenant and d.doc_id not in expected)
        granted += len(expected)
        label = f"{key.name} {key.tenant} {list(key.principals)}"
        listed = {
            d["doc_id"] for d in http.get("/v1/documents", headers=key.headers).json()["documents"]
        }
        if listed != expected:
            failures.append(
                f"{label}: /v1/documents extra {listed - expected}, lacks {expected - listed}"
            )
        found = {h["doc_id"] for h in _search(http, key, plan.shared_word, top_k=100)["hits"]}
        if found != expected:
            failures.append(
                f"{label}: keyword search extra {found - expected}, lacks {expected - found}"
            )
        missing = _normalized(
            http.get(f"/v1/documents/{MISSING_DOC}", headers=key.headers), MISSING_DOC
        )
        for doc in docs:
            response = http.get(f"/v1/documents/{doc.doc_id}", headers=key.headers)
            if doc.doc_id in expected:
                ok = (
                    response.status_code == 200
                    and response.json()["document"]["doc_id"] == doc.doc_id
                )
            else:
                ok = _normalized(response, doc.doc_id) == missing
            if not ok:
                failures.append(
                    f"{label}: GET {doc.doc_id} ({doc.tenant} {doc.acl} {doc.validity}) -> "
                    f"{response.status_code} {response.text[:200]}"
                )
    assert granted and denied, "the draw must both grant and deny"
    assert not failures, "\n".join(failures)
