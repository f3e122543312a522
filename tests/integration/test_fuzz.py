"""Fuzz tests at the gateway's HTTP edges: every route of the OpenAPI schema, hostile input.

The routes come from ``app.openapi()["paths"]``, so a new route is fuzzed without touching this
file. Two kinds of test drive them:

* **Sweeps** (deterministic): a valid request built from the route's schema, then every field of
  it in turn (every JSON field, nested ones and list items included; every multipart part;
  every path and query parameter) replaced by each hostile value: wrong types, huge and empty
  values, lone surrogates, NULs, control characters, invalid UTF-8, deep nesting (10,000 nested
  arrays), huge numbers; missing, and extra fields. One thing wrong at a time, so that each
  reaches the code behind validation that the rest of the request opens the way to.
* **Random fuzzing** (Hypothesis): combinations of those and more, including bodies under the
  wrong content type, broken multipart framing and unknown routes.

Every response must keep the gateway's contract:

* never a 5xx (a healthy in-process service has no reason for a 503 or 504 either);
* every non-2xx is JSON ``{"error": {"code", "stage", "message", "trace_id"}}`` with a known
  code and stage, and the trace id of the ``X-Trace-Id`` header;
* no body shows a traceback, a Python file path or the service's data directory (unless the
  request itself named it);
* a 2xx JSON body is JSON, and an event stream carries no INTERNAL error event.

Afterwards the service must still answer a normal search and ``/healthz``. The random tests try a
fixed set of examples (``derandomize``: every run tries the same ones, so a failure reproduces);
their ``slow`` variants try many more.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pagesight.api.protocols import IndexBackend
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import GatewayOptions, Settings
from pagesight.core.types import ParsedDocument
from pagesight.gateway.app import build_app
from pagesight.gateway.auth import KeyRing, new_key
from pagesight.gateway.backend import ServiceClient
from pagesight.ingestion import samples
from pagesight.ingestion.isolation import parse_isolated
from pagesight.ingestion.pipeline import SourceInfo
from pagesight.ingestion.sources import detect_format
from pagesight.services.index_service import IndexService
from tests.serving import gateway_app

pytestmark = pytest.mark.integration

KEY, RECORD = new_key("fuzz", "tenant-fuzz")
#: Uploads and URI ingests land in a tenant of their own: they never change what KEY finds.
UPLOAD_KEY, UPLOAD_RECORD = new_key("fuzz-upload", "tenant-fuzz-upload", ["group:fuzz"])
#: Room for the sample PDF (about 120 KB); fuzzed uploads go just under and over it.
MAX_UPLOAD = 200_000
QUESTION = "fuel prices cost risk"
#: What valid uploads and URI ingests carry: no document format, so that each job the fuzzing
#: queues fails at once (UNSUPPORTED_FORMAT) instead of keeping the worker busy parsing.
NOTE = b"Plain text: Northwind moved parcels.\n"

#: Every run tries the same examples, and reports a failure as generated (no shrinking: the
#: failing request is shown whole, and shrinking it would send hundreds more).
PROFILE = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
)
#: Random examples per route and kind of fuzzing: (default run, slow run). A search, answer or
#: chat request that passes validation costs 15-300 ms, so those routes get fewer.
BUDGET = {"cheap": (10, 400), "costly": (8, 200)}
COSTLY = {"/v1/search", "/v1/answer", "/v1/chat/completions", "/v1/documents"}
RUNS = [pytest.param(0, id="quick"), pytest.param(1, id="long", marks=pytest.mark.slow)]
#: Longest parameter, percent-encoded: the test client refuses URLs over 64 KiB.
MAX_PARAM = 20_000


# -- the routes, from the OpenAPI schema -------------------------------------------------------


def _schema() -> dict[str, Any]:
    """The OpenAPI schema, from an app with no service behind it (routes are only declared)."""
    options = GatewayOptions(api_keys=[RECORD])
    service = ServiceClient.in_process(cast(IndexBackend, object()), threads=1)
    return build_app(service, options, KeyRing.from_options(options)).openapi()


SCHEMA = _schema()
COMPONENTS: dict[str, Any] = SCHEMA.get("components", {}).get("schemas", {})


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    spec: dict[str, Any] = field(repr=False)

    @property
    def params(self) -> list[dict[str, Any]]:
        return list(self.spec.get("parameters", []))

    def body_schema(self, media_type: str) -> dict[str, Any] | None:
        content = self.spec.get("requestBody", {}).get("content", {})
        if media_type not in content:
            return None
        return cast(dict[str, Any], content[media_type].get("schema", {}))

    @property
    def key(self) -> str:
        """Ingestion goes to the upload tenant; everything else to the tenant that has data."""
        return UPLOAD_KEY if self.method == "post" and self.path.endswith("/documents") else KEY

    def budget(self, run: int) -> int:
        return BUDGET["costly" if self.path in COSTLY else "cheap"][run]

    def __str__(self) -> str:
        return f"{self.method.upper()} {self.path}"


OPERATIONS = [
    Operation(method, path, spec)
    for path, methods in SCHEMA["paths"].items()
    for method, spec in methods.items()
]
WITH_PARAMS = [op for op in OPERATIONS if op.params]
JSON_BODIES = [op for op in OPERATIONS if op.body_schema("application/json") is not None]
MULTIPART_BODIES = [op for op in OPERATIONS if op.body_schema("multipart/form-data") is not None]
WITH_BODY = [op for op in OPERATIONS if "requestBody" in op.spec]
_TEMPLATES = [
    (re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)) + "$"), set(methods))
    for path, methods in SCHEMA["paths"].items()
]


def _ids(ops: list[Operation]) -> list[str]:
    return [str(op) for op in ops]


# -- the service: one per module, with a small document ------------------------------------------


@dataclass
class Known:
    """Ids that exist, so that fuzzed requests also reach real documents, jobs and traces."""

    doc_id: str
    job_id: str
    trace_id: str
    inbox: Path


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexService]:
    data_dir = tmp_path_factory.mktemp("fuzz") / "var"
    inbox = data_dir.parent / "inbox"
    inbox.mkdir()
    (inbox / "note.txt").write_bytes(NOTE)
    options = GatewayOptions(
        api_keys=[RECORD, UPLOAD_RECORD],
        max_upload_bytes=MAX_UPLOAD,
        uri_allowlist=[inbox.as_uri() + "/"],
    )
    svc = IndexService(Settings(data_dir=data_dir, gateway=options), parse=_parse)
    svc.warm_up()
    # The data directory is the service's business: no response may show it.
    LEAKS.append(re.compile(re.escape(str(data_dir.resolve()))))
    yield svc
    LEAKS.pop()
    svc.wait_idle(120)  # fuzzed uploads may still be parsing
    svc.close()


def _parse(
    path: Path,
    settings: Settings,
    source: SourceInfo | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ParsedDocument:
    """The real parser (in its child process) for the sample document; what the fuzzing uploads
    is only sniffed, then refused, so that each job it queues ends at once instead of keeping
    the worker busy (the parser's own robustness is tests/integration/test_robust_inputs.py's)."""
    if source is not None and source.tenant == UPLOAD_RECORD.tenant:
        detect_format(path)
        raise PageSightError(ErrorCode.UNSUPPORTED_FORMAT, Stage.INPUT, "fuzz: left unparsed")
    return parse_isolated(path, settings, source, progress)


@pytest.fixture(scope="module")
def http(service: IndexService) -> Iterator[TestClient]:
    app = gateway_app(service)
    # A crash must come back as the response it is (a 500), not as an exception in the test.
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def known(
    http: TestClient, service: IndexService, tmp_path_factory: pytest.TempPathFactory
) -> Known:
    pdf = samples.text_pdf(tmp_path_factory.mktemp("fuzz-doc") / "northwind.pdf")
    accepted = http.post(
        "/v1/documents",
        files={"file": ("northwind.pdf", pdf.read_bytes(), "application/pdf")},
        headers=_auth(),
    )
    assert accepted.status_code == 202, accepted.text
    job_id, doc_id = accepted.json()["job_id"], accepted.json()["doc_id"]
    assert service.wait_idle(180)
    job = http.get(f"/v1/jobs/{job_id}", headers=_auth())
    assert job.json()["state"] == "READY", job.text
    found = http.post("/v1/search", json={"query": QUESTION}, headers=_auth())
    assert found.status_code == 200 and found.json()["hits"], found.text
    inbox = Path(service.settings.gateway.uri_allowlist[0].removeprefix("file://"))
    return Known(doc_id, job_id, found.json()["trace_id"], inbox)


def _auth(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# -- the contract every response keeps --------------------------------------------------------

CODES = {code.value for code in ErrorCode}
STAGES = {stage.value for stage in Stage}
LEAKS = [
    re.compile(r"Traceback \(most recent call last\)"),
    re.compile(r"File \"[^\"]+\", line \d+"),
    # a *.py name; a match starts only where a name starts, so a 1 MB echo of "xxx..." is linear
    re.compile(r"(?<![\w/\\.-])[\w/\\.-]+\.py\b"),
    re.compile("site-packages|" + re.escape(str(Path(__file__).resolve().parents[2]))),
]


@dataclass
class Sent:
    """A request: what is sent, what a failure message shows, what tells an echo from a leak."""

    method: str
    url: str
    headers: dict[str, str]
    content: bytes | None = None

    def __str__(self) -> str:
        body = "" if self.content is None else f" content={self.content[:400]!r}"
        if self.content is not None and len(self.content) > 400:
            body += f"... ({len(self.content)} bytes)"
        return f"{self.method.upper()} {self.url[:400]!r} headers={self.headers!r}{body}"

    def mentions(self, pattern: re.Pattern[str]) -> bool:
        text = self.url + repr(self.headers)
        if self.content is not None:
            text += self.content.decode("utf-8", "replace")
        return pattern.search(text) is not None


class Reply(Protocol):
    """What the tests read of a test client response (httpx's or its successor's)."""

    status_code: int

    @property
    def content(self) -> bytes: ...
    @property
    def headers(self) -> Any: ...
    @property
    def text(self) -> str: ...
    @property
    def is_success(self) -> bool: ...
    def json(self) -> Any: ...


def send(http: TestClient, sent: Sent) -> Reply:
    """Send ``sent`` and check the response against the contract (AssertionError if not)."""
    # Header values as bytes: HTTP allows Latin-1 (obs-text), the test client only ASCII text.
    headers = {k.encode(): v.encode("latin-1") for k, v in sent.headers.items()}
    response = http.request(sent.method, sent.url, content=sent.content, headers=headers)
    check(response, sent)
    return response


def check(response: Reply, sent: Sent) -> None:
    where = f"{sent}\n  -> {response.status_code} {response.text[:600]!r}"
    assert response.status_code < 500, f"server error: {where}"
    text = response.text
    for leak in LEAKS:
        if leak.search(text) and not sent.mentions(leak):
            raise AssertionError(f"the body shows internals ({leak.pattern}): {where}")
    media_type = response.headers.get("content-type", "").split(";")[0].strip()
    if not response.is_success:
        check_error(response.content, where, response.headers.get("x-trace-id"))
    elif media_type == "application/json":
        json.loads(response.content)
    elif media_type == "text/event-stream":
        check_events(text, where)


def check_error(content: bytes, where: str, trace_id: str | None) -> None:
    try:
        body = json.loads(content)
    except ValueError:
        raise AssertionError(f"error body is not JSON: {where}") from None
    assert isinstance(body, dict) and set(body) == {"error"}, f"not an error body: {where}"
    error = body["error"]
    assert isinstance(error, dict), where
    assert set(error) == {"code", "stage", "message", "trace_id"}, f"error fields: {where}"
    assert error["code"] in CODES, f"unknown code: {where}"
    assert error["stage"] in STAGES, f"unknown stage: {where}"
    assert isinstance(error["message"], str) and error["message"], where
    if trace_id is not None:
        assert error["trace_id"] == trace_id, f"trace id differs from X-Trace-Id: {where}"


def check_events(text: str, where: str) -> None:
    """Server-sent events: every data line JSON (or ``[DONE]``); an error event is an error
    body, and never INTERNAL."""
    for line in text.split("\n"):  # (not splitlines: U+2028 and the like are not line ends)
        if not line.startswith("data:"):
            continue
        data = line.removeprefix("data:").strip()
        if data == "[DONE]":
            continue
        event = json.loads(data)
        if isinstance(event, dict) and "error" in event:
            check_error(data.encode(), where, None)
            assert event["error"]["code"] != ErrorCode.INTERNAL.value, f"stream: {where}"


class Failures:
    """A sweep's contract violations, collected so that one run reports them all."""

    def __init__(self) -> None:
        self.found: list[str] = []
        self.sent = 0

    def send(self, http: TestClient, sent: Sent, what: str = "") -> None:
        self.sent += 1
        try:
            send(http, sent)
        except AssertionError as exc:
            self.found.append(f"[{what}] {exc}" if what else str(exc))

    def assert_none(self) -> None:
        shown = "\n\n".join(self.found[:15])
        assert not self.found, f"{len(self.found)} of {self.sent} requests failed:\n\n{shown}"


def fuzz(examples: int, body: Callable[[st.DataObject], None]) -> None:
    """Run ``body`` on ``examples`` generated inputs."""
    settings(PROFILE, max_examples=examples)(given(st.data())(body))()


# -- hostile values ----------------------------------------------------------------------------


#: A sweep value: the field left out.
_MISSING = object()

#: JSON (or not quite JSON) no Python value serialises to, by name; a document holds the
#: placeholder _raw(name), swapped for these bytes after json.dumps.
RAW_JSON = {
    "deep arrays": b"[" * 10_000 + b"]" * 10_000,
    "deep objects": b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    "300 arrays": b"[" * 300 + b"]" * 300,
    "5000 digits": b"9" * 5000,
    "-400 digits": b"-" + b"9" * 400,
    "1e400": b"1e400",
    "-1e400": b"-1e400",
    "1e-400": b"1e-400",
    "NaN": b"NaN",
    "-Infinity": b"-Infinity",
    "hex": b"0x10",
    "leading zero": b"01",
    "invalid UTF-8": b'"\xff\xfe"',
    "UTF-8 surrogate": b'"\xed\xa0\x80"',  # CESU-8: invalid UTF-8
    "overlong NUL": b'"\xc0\x80"',
    "raw NUL": b'"a\x00b"',  # control characters must be escaped in JSON
    "short escape": b'"\\u12"',
    "bad escape": b'"\\x41"',
    "tru": b"tru",
}


def _raw(name: str) -> str:
    assert name in RAW_JSON, name
    return f"__fuzz_raw_{name}__"


RAW: dict[str, bytes] = {_raw(name): raw for name, raw in RAW_JSON.items()}
RAW_KEYS = sorted(RAW)
#: Strings where encoding is the problem.
BAD_TEXT = [
    "",
    " ",
    "\t\r\n",
    "\x00",
    "a\x00b",
    "\ud800",
    "fuel \udfff prices",
    "\udc00\ud800",
    "\x01\x08\x1b[31m\x7f",
    "\u0085\u2028\u2029",
    "\ufeff\u200b\u202e",
    "\ufffe\uffff",
    "\U0010ffff",
    "👩‍👩‍👧 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 İı",
]
#: Strings where the meaning is the problem.
ODD_TEXT = [
    "null",
    "-1",
    "1e309",
    "' OR 1=1 --",
    "../../../../etc/passwd",
    "%2F%00",
    "{{7*7}}",
    "<script>",
    "\\",
    '"',
]
HUGE_TEXT = ["x" * 2001, "x" * 1_100_000]
#: What every JSON field is replaced by, in turn (the random tests draw from all of the above).
JSON_SWEEP: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    2**63,
    [],
    {},
    *[text for text in BAD_TEXT if text not in ("\t\r\n", "\udc00\ud800", "\U0010ffff")],
    "null",
    *HUGE_TEXT,
    *map(
        _raw,
        [
            "deep arrays",
            "deep objects",
            "300 arrays",
            "5000 digits",
            "1e400",
            "NaN",
            "invalid UTF-8",
            "UTF-8 surrogate",
            "raw NUL",
            "short escape",
        ],
    ),
]
#: What an object or a list is replaced by (its items get all of JSON_SWEEP).
CONTAINER_SWEEP = [_MISSING, None, 0, "", [], {}, "\ud800"]
CONTAINER_SWEEP += [_raw("deep arrays"), _raw("deep objects"), _raw("300 arrays")]
#: What every object gets as an extra field.
EXTRA_KEYS = ["", "\ud800", "x" * 10_000, "__proto__", "a\x00b"]


def hostile_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(BAD_TEXT + ODD_TEXT + HUGE_TEXT),
        st.text(st.characters(categories=["Cs", "Cc", "Cf", "Zs", "Lu"]), max_size=20),
        st.text(max_size=30),
    )


def hostile_values() -> st.SearchStrategy[Any]:
    """Anything JSON (and some things JSON is not), nested a little."""
    scalars = st.one_of(
        hostile_text(),
        st.sampled_from(JSON_SWEEP).map(copy.deepcopy),
        st.integers(),
        st.floats(),
        st.sampled_from(RAW_KEYS),
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(hostile_text(), inner, max_size=3)
        ),
        max_leaves=6,
    )


# -- JSON requests from a schema ---------------------------------------------------------------


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = COMPONENTS.get(name) or defs.get(name) or {}
    return schema


def valid_example(
    schema: dict[str, Any],
    hints: dict[str, Any],
    defs: dict[str, Any] | None = None,
    name: str | None = None,
) -> Any:
    """One valid value for ``schema``, every optional field present (so that each can be
    spoilt); ``hints`` give values by field name (a real question, a document that exists)."""
    if name in hints:
        return copy.deepcopy(hints[name])
    if schema.get("default") is not None:
        return schema["default"]
    defs = {**(defs or {}), **schema.get("$defs", {})}
    schema = _resolve(schema, defs)
    options = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
    if options:
        usable = [s for s in options if s.get("type") != "null"] or options
        return valid_example(usable[0], hints, defs, name)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    return _valid_of_type(schema, hints, defs)


def _valid_of_type(schema: dict[str, Any], hints: dict[str, Any], defs: dict[str, Any]) -> Any:
    """:func:`valid_example` by the schema's ``type`` (None for a schema without one)."""
    kind = schema.get("type", "object" if "properties" in schema else None)
    if kind == "string":
        return _valid_string(schema)
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0) + 1)
        return min(max(1, low), schema.get("maximum", 10))
    if kind == "boolean":
        return False
    if kind == "array":
        return [valid_example(schema.get("items", {}), hints, defs)]
    if kind == "object":
        return {
            key: valid_example(sub, hints, defs, key)
            for key, sub in schema.get("properties", {}).items()
        }
    return None


def _valid_string(schema: dict[str, Any]) -> str:
    if schema.get("format") == "date-time":
        return "2100-01-01T00:00:00+00:00"
    for text in ("fuzz-doc", "x", "1"):
        if re.fullmatch(schema.get("pattern", ".*"), text):
            return text.ljust(schema.get("minLength", 0), "x")
    return "x"


def strategy_for(
    schema: dict[str, Any], hints: dict[str, Any], defs: dict[str, Any] | None = None
) -> st.SearchStrategy[Any]:
    """Random valid-looking values for a JSON schema; hinted fields often get their hint."""
    defs = {**(defs or {}), **schema.get("$defs", {})}
    schema = _resolve(schema, defs)
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return st.one_of([strategy_for(s, hints, defs) for s in options])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type", "object" if "properties" in schema else None)
    if kind == "string":
        return _string_strategy(schema)
    if kind == "array":
        low = schema.get("minItems", 0)
        items = strategy_for(schema.get("items", {}), hints, defs)
        return st.lists(items, min_size=low, max_size=max(low, 3))
    if kind == "object":
        return _object_strategy(schema, hints, defs)
    return _scalar_strategy(kind, schema)


def _string_strategy(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if schema.get("format") == "date-time":
        return st.datetimes(timezones=st.none() | st.timezones()).map(lambda d: d.isoformat())
    if "pattern" in schema:
        return st.from_regex(schema["pattern"], fullmatch=True)
    low = schema.get("minLength", 0)
    return st.text(min_size=low, max_size=max(low, min(schema.get("maxLength", 20), 20)))


def _object_strategy(
    schema: dict[str, Any], hints: dict[str, Any], defs: dict[str, Any]
) -> st.SearchStrategy[Any]:
    """Required properties always, the others sometimes; hinted ones often get their hint."""
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))

    def prop(key: str) -> st.SearchStrategy[Any]:
        generic = strategy_for(properties[key], hints, defs)
        return st.just(hints[key]).map(copy.deepcopy) | generic if key in hints else generic

    return st.fixed_dictionaries(
        {key: prop(key) for key in properties if key in required},
        optional={key: prop(key) for key in properties if key not in required},
    )


def _scalar_strategy(kind: str | None, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Numbers, booleans and null by ``kind``; anything at all for a schema without a type."""
    if kind == "integer":
        return st.integers(schema.get("minimum", -5), schema.get("maximum", 60))
    if kind == "number":
        return st.floats(schema.get("minimum", -5), schema.get("maximum", 60), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return hostile_values()  # no schema: anything


def json_hints(known: Known) -> dict[str, Any]:
    """Values for fields by name that make a request do real work."""
    return {
        "query": QUESTION,
        "messages": [{"role": "user", "content": QUESTION}],
        "doc_ids": [known.doc_id],
        "uri": (known.inbox / "note.txt").as_uri(),
        "doc_id": "fuzz-uri-doc",
        "acl": ["group:fuzz"],
        "valid_until": None,
        "password": None,
    }


def dumps(doc: Any, ascii_only: bool = True) -> bytes:
    """``doc`` as JSON, RAW placeholders swapped in; a lone surrogate is escaped (ASCII) or
    written as the invalid UTF-8 it makes."""
    content = json.dumps(doc, ensure_ascii=ascii_only, allow_nan=True).encode(
        "utf-8", "surrogatepass"
    )
    if b"__fuzz_raw_" in content:
        for placeholder, raw in RAW.items():
            content = content.replace(json.dumps(placeholder).encode(), raw)
    return content


def _paths(doc: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value inside ``doc`` (object keys and list indexes)."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*at, key)
            yield from _paths(value, (*at, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield (*at, i)
            yield from _paths(value, (*at, i))


def _objects(doc: Any) -> list[tuple[Any, ...]]:
    """The path of every object in ``doc``, ``doc`` itself included."""
    return [path for path in [(), *_paths(doc)] if isinstance(_get(doc, path), dict)]


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _describe(value: Any) -> str:
    if value is _MISSING:
        return "(missing)"
    return f"{RAW[value]!r:.60}" if isinstance(value, str) and value in RAW else f"{value!r:.60}"


def _with(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``doc`` with the value at ``path`` replaced (removed if ``_MISSING``)."""
    if not path:
        return copy.deepcopy(value)
    doc = copy.deepcopy(doc)
    parent = _get(doc, path[:-1])
    if value is _MISSING:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


def sweep_documents(base: Any) -> Iterator[tuple[str, bytes]]:
    """(what was done, body) for every field of ``base`` replaced by each hostile value or
    removed, for every object given each extra field, and the whole body replaced."""
    for path in [(), *_paths(base)]:
        where = "/".join(map(str, path)) or "(body)"
        container = isinstance(_get(base, path), (dict, list))
        for i, value in enumerate([_MISSING, *JSON_SWEEP]):
            if (value is _MISSING and not path) or (container and value not in CONTAINER_SWEEP):
                continue
            doc = _with(base, path, value)
            # every other string goes as the invalid UTF-8 a lone surrogate makes
            yield f"{where} = {_describe(value)}", dumps(doc, ascii_only=i % 2 == 0)
    for path in _objects(base):
        where = "/".join(map(str, path)) or "(body)"
        for key in EXTRA_KEYS:
            doc = copy.deepcopy(base)
            _get(doc, path)[key] = 1
            yield f"{where} + {key!r:.30}", dumps(doc)


def mutate(data: st.DataObject, doc: Any) -> Any:
    """``doc`` with one hostile change: a value replaced (a string spoilt in place), a field
    dropped or added, or the whole document replaced."""
    paths = list(_paths(doc))
    kind = data.draw(st.sampled_from(["spoil", "replace", "drop", "add", "root"]), label="how")
    if kind == "root" or not paths:
        return data.draw(hostile_values(), label="document")
    path = data.draw(st.sampled_from(paths), label="where")
    value = _get(doc, path)
    if kind == "spoil" and isinstance(value, str):
        at = data.draw(st.integers(0, len(value)))
        bad = data.draw(st.sampled_from(BAD_TEXT) | st.sampled_from(RAW_KEYS), label="spoiler")
        return _with(doc, path, bad if bad in RAW else value[:at] + bad + value[at:])
    if kind in ("spoil", "replace"):
        return _with(doc, path, data.draw(hostile_values(), label="value"))
    if kind == "drop":
        return _with(doc, path, _MISSING)
    objects = list(_objects(doc))
    if not objects:
        return doc
    where = data.draw(st.sampled_from(objects))
    doc = copy.deepcopy(doc)
    _get(doc, where)[data.draw(hostile_text(), label="extra")] = data.draw(hostile_values())
    return doc


def spoil_bytes(data: st.DataObject, content: bytes) -> bytes:
    """Sometimes, JSON spoilt as bytes: invalid UTF-8 inserted, truncated, BOM, UTF-16, ..."""
    how = data.draw(
        st.sampled_from(["none"] * 6 + ["insert", "truncate", "bom", "utf16", "trailing"]),
        label="bytes",
    )
    if how == "insert":
        at = data.draw(st.integers(0, len(content)))
        junk = data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\\"]))
        return content[:at] + junk + content[at:]
    if how == "truncate":
        return content[: data.draw(st.integers(0, max(0, len(content) - 1)))]
    if how == "bom":
        return b"\xef\xbb\xbf" + content
    if how == "utf16":
        return content.decode("utf-8", "surrogateescape").encode("utf-16", "surrogatepass")
    if how == "trailing":
        return content + data.draw(st.sampled_from([b"}", b" x", b"\x00", b"{}", b"\n\n[]"]))
    return content


JSON_TYPES = ["application/json"] * 8 + [
    "application/json; charset=utf-8",
    "application/json; charset=latin-1",
    "application/json; charset=utf-16",
    "application/JSON",
    "application/vnd.api+json",
    "application/json;;;",
]
#: Content types for any body, the right one included.
CONTENT_TYPES = [
    "",
    "text/plain",
    "text/plain; charset=utf-8",
    "application/octet-stream",
    "application/x-www-form-urlencoded",
    "application/xml",
    "multipart/form-data",
    "multipart/form-data; boundary=",
    "multipart/form-data; boundary=x",
    'multipart/form-data; boundary="a b"',
    "multipart/mixed; boundary=x",
    "application/json",
    "application/jsonx",
    "json",
    "*/*",
    "application/json; charset=\x7f",
]


# -- path and query parameters -------------------------------------------------------------------

#: What every path and query parameter is set to, in turn (besides its schema's kind of value).
PARAM_SWEEP = [
    *BAD_TEXT,
    *ODD_TEXT,
    "a" * 4000,
    "a" * 20_000,
    "a/b",
    "..",
    ".",
    "%",
    "%zz",
    "0",
    "-1",
    "1.5",
    "nan",
    "inf",
    "9" * 30,
    "9" * 5000,
    "0x10",
    "\u0661",
    "true",
]
#: Values that mean something to one parameter, by name.
PARAM_EXTRA = {
    "highlight": [
        "72,72,300,120",
        "nan,0,1,1",
        "0,nan,1,1",
        "0,0,1e308,1e308",
        "-1e308,-1e308,1e308,1e308",
        "inf,-inf,1,1",
        "0,0,1e309,1",
        "1e-320,0,1,1",
        "0,0,0,0",
        "300,300,72,72",
        "-100,-100,-50,-50",
        "100000,100000,200000,200000",
        "1,2,3",
        "1,2,3,4,5",
        ";;;",
        "72,72,300,120;" * 50,
        "72,72,300,120;" * 51,
        "1_0,2,3,4",
        " 1 , 2 , 3 , 4 ",
    ],
    "format": ["png", "jpeg", "PNG", "jpg", "gif", "png\n", "png,jpeg", "image/png"],
    "page_number": ["1", "01", "+1", "2", "0", str(2**31), str(2**63), "9" * 400],
    "limit": ["1", "1000", "1001", "0", "-1", "1e3", str(2**63)],
}


def good_params(op: Operation, known: Known) -> dict[str, str | None]:
    """A valid value per parameter: an id that exists (a made-up one for a delete: the
    document must outlive the fuzzing), page 1, the schema's default; None leaves it out."""
    real = {
        "doc_id": "fuzz-missing-doc" if op.method == "delete" else known.doc_id,
        "job_id": known.job_id,
        "trace_id": known.trace_id,
        "page_number": "1",
    }
    good: dict[str, str | None] = {}
    for param in op.params:
        default = param.get("schema", {}).get("default")
        good[param["name"]] = real.get(
            param["name"], None if default is None else str(default).lower()
        )
    return good


def build_url(
    op: Operation, values: dict[str, str | None], raw: frozenset[str] = frozenset()
) -> str:
    """The URL for parameter ``values``, percent-encoded as UTF-8 (a lone surrogate becomes the
    bytes no decoder accepts); the names in ``raw`` go as they are, their slashes included."""
    url, query = op.path, []
    for param in op.params:
        value = values.get(param["name"])
        if value is None:
            continue
        text = _quote(value, "/%?#&=;" if param["name"] in raw else "")
        if param["in"] == "path":
            url = url.replace("{" + param["name"] + "}", text)
        else:
            query.append(f"{_quote(param['name'], '')}={text}")
    return url + ("?" + "&".join(query) if query else "")


def _quote(value: str, safe: str) -> str:
    return quote(value.encode("utf-8", "surrogatepass"), safe=safe)


def param_strategy(param: dict[str, Any], good: str | None) -> st.SearchStrategy[str | None]:
    """Random values for one parameter: its valid one, its schema's kind, hostile ones."""
    typed = strategy_for(param.get("schema", {}), {}).map(
        lambda v: None if v is None else v if isinstance(v, str) else json.dumps(v)
    )
    return st.one_of(
        st.just(good),
        typed,
        st.sampled_from(PARAM_SWEEP + PARAM_EXTRA.get(param["name"], [])),
        hostile_text(),
        st.integers().map(str),
    ).filter(lambda v: v is None or len(v) <= MAX_PARAM >= len(_quote(v, "")))


def header_cases(data: st.DataObject, key: str) -> dict[str, str]:
    """Mostly the right key; one request in five a wrong, malformed or missing one; odd trace
    and accept headers."""
    token = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=80)
    valid = st.sampled_from([{"Authorization": f"Bearer {key}"}] * 3 + [{"X-API-Key": key}])
    wrong = st.one_of(
        st.just({}),
        st.builds(lambda t: {"Authorization": f"Bearer {t}"}, token),
        st.builds(lambda t: {"Authorization": t}, token),
        st.builds(lambda t: {"X-API-Key": t}, token),
        st.just({"Authorization": f"bearer  {key} "}),
        st.just({"Authorization": f"Basic {key}"}),
    )
    auth = data.draw(wrong if data.draw(st.integers(0, 4)) == 0 else valid, label="auth")
    extra = data.draw(
        st.dictionaries(st.sampled_from(["traceparent", "X-Request-ID", "Accept"]), token),
        label="headers",
    )
    return {**auth, **extra}


# -- multipart ---------------------------------------------------------------------------------


@dataclass
class Part:
    name: str
    value: bytes
    filename: str | None = None
    content_type: str | None = None
    raw_headers: bytes | None = None  # instead of the ones above

    def encode(self, boundary: bytes) -> bytes:
        if self.raw_headers is not None:
            head = self.raw_headers
        else:
            disposition = f'form-data; name="{self.name}"'
            if self.filename is not None:
                disposition += f'; filename="{self.filename}"'
            head = f"Content-Disposition: {disposition}".encode("utf-8", "surrogatepass")
            if self.content_type is not None:
                head += f"\r\nContent-Type: {self.content_type}".encode("latin-1", "replace")
        return b"--" + boundary + b"\r\n" + head + b"\r\n\r\n" + self.value + b"\r\n"


def multipart(parts: list[Part], boundary: bytes = b"fuzzboundary") -> bytes:
    return b"".join(part.encode(boundary) for part in parts) + b"--" + boundary + b"--\r\n"


def valid_parts(schema: dict[str, Any]) -> list[Part]:
    """Every property of the form schema, with a valid value: a small Markdown file."""
    parts = []
    for name, prop in schema.get("properties", {}).items():
        if prop.get("format") == "binary":
            parts.append(Part(name, NOTE, "note.txt", "text/plain"))
        else:
            hints = {"password": "", "acl": "group:fuzz", "doc_id": "fuzz-upload-doc"}
            value = valid_example(prop, hints, name=name)
            text = json.dumps(value) if not isinstance(value, str) else value
            parts.append(Part(name, text.encode()))
    return parts


#: What every text part is set to, in turn.
PART_SWEEP = [
    *(t.encode("utf-8", "surrogatepass") for t in BAD_TEXT + ODD_TEXT),
    b"\xff\xfe",
    b"\xc0\x80",
    b"x" * 100_000,
    b"a,,b,,," * 200,
    b"true",
    b"1",
    b"9999-99-99",
    b"0001-01-01T00:00:00",
    b"9999-12-31T23:59:59+23:59",
    b"2100-01-01",
]
FILENAMES = [
    "",
    "note",
    ".txt",
    "../../../note.txt",
    "a\\b.txt",
    "a\x00.txt",
    "\ud800.txt",
    "\u202etxt.exe",
    "x" * 5000 + ".txt",
    'a"b.txt',
    "a\r\nb.txt",
    "note.md",
]
FILE_CONTENTS = [
    b"",
    b"\x00" * (MAX_UPLOAD + 1),
    b"%PDF-1.7\n%%EOF",
    b"PK\x03\x04junk",
    b"\x89PNG\r\n\x1a\nxx",
    b"\xff\xfe\x00\x00",
    b"<html>\x00</html>",
]


def sweep_multipart(schema: dict[str, Any]) -> Iterator[tuple[str, list[Part] | bytes, str]]:
    """(what was done, parts or raw body, boundary) for every part spoilt or missing, then
    broken framing."""
    base = valid_parts(schema)
    for i, part in enumerate(base):
        rest = base[:i] + base[i + 1 :]
        yield f"no {part.name}", rest, "fuzzboundary"
        yield f"{part.name} twice", [*base, part], "fuzzboundary"
        if part.filename is not None:
            for filename in FILENAMES:
                spoilt = Part(part.name, part.value, filename, part.content_type)
                yield f"filename {filename!r:.40}", [*rest, spoilt], "fuzzboundary"
            for content in FILE_CONTENTS:
                spoilt = Part(part.name, content, part.filename, part.content_type)
                yield f"file {content[:20]!r}", [*rest, spoilt], "fuzzboundary"
            for ctype in ["", "application/pdf", "x/y; charset=\x7f"]:
                spoilt = Part(part.name, part.value, part.filename, ctype)
                yield f"file type {ctype!r}", [*rest, spoilt], "fuzzboundary"
            yield "file as a field", [*rest, Part(part.name, part.value)], "fuzzboundary"
            continue
        for value in PART_SWEEP:
            yield f"{part.name} = {value[:40]!r}", [*rest, Part(part.name, value)], "fuzzboundary"
        yield f"{part.name} as a file", [*rest, Part(part.name, b"x", "x.md")], "fuzzboundary"
    body = multipart(base)
    many = [Part(f"f{i}", b"x") for i in range(30)]
    yield "30 extra fields", [*base, *many], "fuzzboundary"
    yield "no end", body[: -len(b"--fuzzboundary--\r\n")], "fuzzboundary"
    yield "truncated", body[: len(body) // 2], "fuzzboundary"
    yield "LF only", body.replace(b"\r\n", b"\n"), "fuzzboundary"
    yield "other boundary", body, "otherboundary"
    yield "empty boundary", body, ""
    yield "huge boundary", body, "b" * 5000
    yield "empty body", b"", "fuzzboundary"
    yield "no headers", b"--fuzzboundary\r\n\r\nx\r\n--fuzzboundary--\r\n", "fuzzboundary"
    garbage = Part("x", b"x", raw_headers=b"Content-Disposition: \xff\x00;;;\r\nX: \r\n y")
    yield "garbage headers", [*base, garbage], "fuzzboundary"
    fields = [part for part in base if part.filename is None]
    files = [part for part in base if part.filename is not None]
    for part in files:
        disposition = f"Content-Disposition: form-data; name={part.name}; "
        star = Part(
            part.name, NOTE, raw_headers=disposition.encode() + b"filename*=UTF-8''%ED%A0%80.txt"
        )
        yield "RFC 5987 filename", [*fields, star], "fuzzboundary"


# -- sweeps: one thing wrong at a time ---------------------------------------------------------


@pytest.mark.parametrize("op", WITH_PARAMS, ids=_ids(WITH_PARAMS))
def test_sweep_parameters(http: TestClient, known: Known, op: Operation) -> None:
    """Each path and query parameter set to each hostile value (percent-encoded, and for a
    path parameter also with its slashes as they are), the others valid."""
    good = good_params(op, known)
    failures = Failures()
    valid = send(http, Sent(op.method, build_url(op, good), _auth(op.key)))
    assert valid.is_success or op.method == "delete", f"the base request failed: {valid.text}"
    for param in op.params:
        name = param["name"]
        for value in [*PARAM_SWEEP, *PARAM_EXTRA.get(name, []), None]:
            values = {**good, name: value}
            failures.send(http, Sent(op.method, build_url(op, values), _auth(op.key)))
            if param["in"] == "path" and value is not None and "/" in value:
                url = build_url(op, values, raw=frozenset({name}))
                failures.send(http, Sent(op.method, url, _auth(op.key)))
        if param["in"] == "query":  # twice, the second time hostile
            url = build_url(op, good)
            url += ("&" if "?" in url else "?") + f"{name}=%ED%A0%80&{name}=%00"
            failures.send(http, Sent(op.method, url, _auth(op.key)))
    failures.assert_none()


@pytest.mark.parametrize("op", JSON_BODIES, ids=_ids(JSON_BODIES))
def test_sweep_json_fields(http: TestClient, known: Known, op: Operation) -> None:
    """Each field of a valid JSON body (nested ones and list items too) replaced by each
    hostile value or removed, each object given extra fields, the whole body replaced. A
    route that streams gets every other request with ``stream: true``."""
    schema = op.body_schema("application/json")
    assert schema is not None
    base = valid_example(schema, json_hints(known))
    failures = Failures()
    headers = {**_auth(op.key), "Content-Type": "application/json"}
    valid = send(http, Sent(op.method, op.path, headers, dumps(base)))
    assert valid.is_success, f"the sweep's base request must succeed: {valid.text}"
    streams = isinstance(base, dict) and isinstance(base.get("stream"), bool)
    for i, (what, content) in enumerate(sweep_documents(base)):
        if streams and i % 2 and content.startswith(b"{") and b'"stream": false' in content:
            content = content.replace(b'"stream": false', b'"stream": true', 1)
        failures.send(http, Sent(op.method, op.path, headers, content), what)
    failures.assert_none()


@pytest.mark.parametrize("op", MULTIPART_BODIES, ids=_ids(MULTIPART_BODIES))
def test_sweep_multipart_parts(http: TestClient, op: Operation) -> None:
    """Each part of a valid form missing, repeated or spoilt (hostile text, invalid UTF-8,
    odd file names and contents), then broken framing."""
    schema = op.body_schema("multipart/form-data")
    assert schema is not None
    failures = Failures()
    base = multipart(valid_parts(schema))
    headers = {**_auth(op.key), "Content-Type": "multipart/form-data; boundary=fuzzboundary"}
    valid = send(http, Sent(op.method, op.path, headers, base))
    assert valid.is_success, f"the sweep's base request must succeed: {valid.text}"
    for what, parts, boundary in sweep_multipart(schema):
        content = parts if isinstance(parts, bytes) else multipart(parts)
        ctype = f'multipart/form-data; boundary="{boundary}"'
        sent = Sent(op.method, op.path, {**headers, "Content-Type": ctype}, content)
        failures.send(http, sent, what)
    failures.assert_none()


@pytest.mark.parametrize("op", WITH_BODY, ids=_ids(WITH_BODY))
def test_sweep_content_types(http: TestClient, known: Known, op: Operation) -> None:
    """A valid JSON body, a valid form and some bytes, each under every content type."""
    json_schema = op.body_schema("application/json")
    form_schema = op.body_schema("multipart/form-data")
    bodies = [b"", b"\x00\xff{", b"query=x"]
    if json_schema is not None:
        bodies.append(dumps(valid_example(json_schema, json_hints(known))))
    if form_schema is not None:
        bodies.append(multipart(valid_parts(form_schema)))
    failures = Failures()
    for content in bodies:
        for ctype in CONTENT_TYPES:
            headers = _auth(op.key) | ({"Content-Type": ctype} if ctype else {})
            failures.send(http, Sent(op.method, op.path, headers, content))
    failures.assert_none()


# -- random fuzzing: many things wrong at once -------------------------------------------------


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("op", OPERATIONS, ids=_ids(OPERATIONS))
def test_fuzz_parameters(http: TestClient, known: Known, op: Operation, run: int) -> None:
    """Random path and query parameters (declared and unknown), auth and other headers; a
    route with a JSON body gets a valid one."""
    good = good_params(op, known)
    schema = op.body_schema("application/json")
    hints = json_hints(known)

    def case(data: st.DataObject) -> None:
        values = {
            p["name"]: data.draw(param_strategy(p, good[p["name"]]), label=p["name"])
            for p in op.params
        }
        raw = frozenset(data.draw(st.sets(st.sampled_from(sorted(values) or [""]))))
        url = build_url(op, values, raw)
        extra = data.draw(st.lists(st.tuples(hostile_text(), hostile_text()), max_size=2))
        query = "&".join(f"{_quote(k, '')}={_quote(v, '')}" for k, v in extra if len(k + v) < 999)
        if query:
            url += ("&" if "?" in url else "?") + query
        headers = header_cases(data, op.key)
        content = None
        if schema is not None:
            content = dumps(data.draw(strategy_for(schema, hints), label="body"))
            headers["Content-Type"] = "application/json"
        send(http, Sent(op.method, url, headers, content))

    fuzz(op.budget(run), case)


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("op", JSON_BODIES, ids=_ids(JSON_BODIES))
def test_fuzz_json_bodies(http: TestClient, known: Known, op: Operation, run: int) -> None:
    """Random JSON bodies from the route's schema with up to four hostile changes, sometimes
    spoilt as bytes, under JSON content types."""
    schema = op.body_schema("application/json")
    assert schema is not None
    hints = json_hints(known)

    def case(data: st.DataObject) -> None:
        doc = data.draw(strategy_for(schema, hints), label="valid body")
        for _ in range(data.draw(st.integers(0, 4), label="changes")):
            doc = mutate(data, doc)
        content = spoil_bytes(data, dumps(doc, data.draw(st.booleans(), label="ascii")))
        headers = header_cases(data, op.key)
        headers["Content-Type"] = data.draw(st.sampled_from(JSON_TYPES), label="content type")
        send(http, Sent(op.method, op.path, headers, content))

    fuzz(op.budget(run), case)


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("op", MULTIPART_BODIES, ids=_ids(MULTIPART_BODIES))
def test_fuzz_multipart(http: TestClient, op: Operation, run: int) -> None:
    """Random forms: parts present or not, hostile values and file names, extra and repeated
    parts, random boundaries."""
    schema = op.body_schema("multipart/form-data")
    assert schema is not None
    base = valid_parts(schema)
    text_values = st.one_of(
        st.sampled_from(PART_SWEEP),
        hostile_text().map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.binary(max_size=40),
    )

    def case(data: st.DataObject) -> None:
        parts = []
        for part in base:
            if not data.draw(st.integers(0, 4), label=f"{part.name}?"):
                continue  # left out one time in five
            if part.filename is None:
                value = data.draw(st.just(part.value) | text_values, label=part.name)
                parts.append(Part(part.name, value))
            else:
                filename = data.draw(st.sampled_from([part.filename, *FILENAMES]), label="name")
                content = data.draw(
                    st.sampled_from([part.value, *FILE_CONTENTS]) | st.binary(max_size=64),
                    label="file",
                )
                parts.append(Part(part.name, content, filename, part.content_type))
        extra = data.draw(st.lists(st.tuples(hostile_text(), text_values), max_size=3))
        parts += [Part(name.replace('"', ""), value) for name, value in extra]
        boundary = data.draw(
            st.text("abcdefghijklmnopqrstuvwxyz0123456789'()+_,-./:=? ", min_size=1, max_size=70),
            label="boundary",
        )
        content = multipart(parts, boundary.encode())
        headers = header_cases(data, op.key)
        headers["Content-Type"] = f'multipart/form-data; boundary="{boundary}"'
        send(http, Sent(op.method, op.path, headers, content))

    fuzz(op.budget(run), case)


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("op", WITH_BODY, ids=_ids(WITH_BODY))
def test_fuzz_content_types(http: TestClient, op: Operation, run: int) -> None:
    """Random bytes under random content types (or none)."""

    def case(data: st.DataObject) -> None:
        content = data.draw(
            st.binary(max_size=300) | st.text(max_size=100).map(str.encode), label="body"
        )
        headers = header_cases(data, op.key)
        ctype = data.draw(st.sampled_from(CONTENT_TYPES) | st.text(max_size=30), label="type")
        if ctype and ctype.isascii() and ctype.isprintable():
            headers["Content-Type"] = ctype
        send(http, Sent(op.method, op.path, headers, content))

    fuzz(op.budget(run), case)


@pytest.mark.parametrize("run", RUNS)
def test_fuzz_unknown_routes(http: TestClient, run: int) -> None:
    """Paths and methods the schema does not have: 404 or 405, with the error body."""

    def case(data: st.DataObject) -> None:
        segment = st.sampled_from(["v1", "documents", "search", "..", "", "%2F", "docs"])
        segments = data.draw(
            st.lists(segment | hostile_text().filter(lambda t: len(t) < 2000), min_size=1),
            label="segments",
        )
        raw = data.draw(st.booleans(), label="raw")
        path = "/" + "/".join(_quote(s, "/%" if raw else "") for s in segments[:5])
        method = data.draw(st.sampled_from(["get", "post", "put", "patch", "delete", "options"]))
        if any(t.match(path) and method in methods for t, methods in _TEMPLATES):
            return  # a declared route: the other tests fuzz it
        # absolute: the test client takes a relative "//x" for a host name
        send(http, Sent(method, f"http://testserver{path}", _auth()))

    fuzz(BUDGET["cheap"][run], case)


# -- regressions -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_chat_lone_surrogate_is_422(http: TestClient, stream: bool) -> None:
    """A lone surrogate escape (valid JSON, but no text) anywhere a chat request uses text is
    refused as /v1/answer refuses it; it was a 500 (pydantic's string_unicode error, raised
    while building the answer request, or when echoing the model name)."""
    starts = [
        '{"messages": [{"role": "user", "content": "\\ud800"}]',
        '{"messages": [{"role": "user", "content": "fuel \\udfff prices"}]',
        '{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud800"}]}]',
        '{"model": "\\ud800", "messages": [{"role": "user", "content": "fuel prices"}]',
    ]
    headers = {**_auth(), "Content-Type": "application/json"}
    for start in starts:
        content = f'{start}, "stream": {json.dumps(stream)}}}'.encode()
        sent = Sent("post", "/v1/chat/completions", headers, content)
        response = send(http, sent)
        assert response.status_code == 422, sent
        assert response.json()["error"]["code"] == "INVALID_REQUEST", response.text


@pytest.mark.parametrize("route", ["/v1/search", "/v1/answer", "/v1/chat/completions"])
def test_lone_surrogate_in_doc_ids_filter_is_422(http: TestClient, route: str) -> None:
    """A lone surrogate in ``filters.doc_ids`` is refused at the edge; it reached the index and
    came back as 422 INDEX_FAILED with the index's path and a Rust TypeError in the message."""
    filters = '{"doc_ids": ["\\ud800"]}'
    body = (
        f'{{"messages": [{{"role": "user", "content": "{QUESTION}"}}], '
        f'"pagesight": {{"filters": {filters}}}}}'
        if route.endswith("completions")
        else f'{{"query": "{QUESTION}", "filters": {filters}}}'
    )
    headers = {**_auth(), "Content-Type": "application/json"}
    response = send(http, Sent("post", route, headers, body.encode()))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["stage"]) == ("INVALID_REQUEST", "gateway"), error


@pytest.mark.parametrize(
    "highlight", ["nan,0,1,1", "0,0,1e308,1e308", "inf,-inf,1,1", "0,0,1e19,1", "0,0,1e9,1e9"]
)
def test_highlight_far_outside_the_page_is_refused(
    http: TestClient, known: Known, highlight: str
) -> None:
    """NaN, infinities and huge boxes were a 500 (or minutes of drawing, 1e9): now a 422."""
    url = f"/v1/documents/{known.doc_id}/pages/1/image?highlight={quote(highlight)}"
    response = send(http, Sent("get", url, _auth()))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "INVALID_REQUEST"


@pytest.mark.parametrize("name", ["a\\u0000.txt", "a%00.txt"])
def test_nul_in_file_uri_is_refused(http: TestClient, known: Known, name: str) -> None:
    content = f'{{"uri": "{known.inbox.as_uri()}/{name}"}}'.encode()
    sent = Sent(
        "post", "/v1/documents", {**_auth(UPLOAD_KEY), "Content-Type": "application/json"}, content
    )
    assert send(http, sent).status_code in (403, 404, 422)  # was a 500 (embedded null byte)


def test_still_serves_after_fuzz(http: TestClient, known: Known, service: IndexService) -> None:
    """Run last: whatever came before, the service answers a normal search, an answer and
    /healthz, and no request still holds a concurrency slot."""
    assert http.get("/healthz").json() == {"status": "ok"}
    found = http.post("/v1/search", json={"query": QUESTION}, headers=_auth())
    assert found.status_code == 200, found.text
    assert found.json()["hits"][0]["doc_id"] == known.doc_id
    answer = http.post("/v1/answer", json={"query": QUESTION}, headers=_auth())
    assert answer.status_code == 200 and answer.json()["citations"], answer.text
    limiter = http.app.state.limiter  # type: ignore[attr-defined]
    assert limiter.in_flight(RECORD.key_id) == limiter.in_flight(UPLOAD_RECORD.key_id) == 0
    assert service.wait_idle(60), "the ingest worker is still busy with fuzzed uploads"
