"""The web UI (``/ui``) as a person uses it, in headless Chromium: key, upload, search, answer,
citations, trace; what it shows, not only which elements exist.

Boxes drawn over a page image must be the API's bbox scaled to the image as rendered (within
2 px); the streamed answer must visibly grow while it is written; a citation's button must
highlight that citation's boxes and no other; text out of a PDF must stay text; each view must
pass axe-core. Screenshots go to ``var/screenshots/`` (the README shows copies).
"""

from __future__ import annotations

import base64
import json
import random
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pagesight.api.caller import Caller
from pagesight.core.types import JobState, RouteName
from pagesight.ingestion import samples
from pagesight.query.generation import ABSTAIN_TEXT
from pagesight.services.index_service import IndexService
from tests.browser.conftest import DESKTOP, KEY_A, KEY_B, NARROW
from tests.conftest import extract_pages
from tests.openai_stub import Script, Step

pytestmark = [pytest.mark.integration, pytest.mark.slow]

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
Browser = playwright_api.Browser
Page = playwright_api.Page

REAL_PDF = "ULTABEAUTY_2023Q4_EARNINGS.pdf"
ULTA_TITLE = "Ulta Beauty Announces Fourth Quarter Fiscal 2022 Results"
#: Answered on page 2 of REAL_PDF, in a passage that starts on page 1.
LEAD_QUESTION = "What was Ulta Beauty's tax rate in the fourth quarter of fiscal 2022?"
#: The release states no dividend: an extractive answer abstains, with related passages.
#: Ulta's release reports fiscal 2022 and 2021: no passage is about fiscal 2009, so the extractive
#: answer abstains and lists the nearest passages.
NO_ANSWER_QUESTION = "What were Ulta Beauty's net sales in fiscal 2009?"
JA_PDF = "keshouhin-standard.pdf"
#: The scripted model's streamed answer: two cited sentences, then one citing a block that was
#: never in the context, which the citation check withholds.
ANSWER_CHUNKS = [
    "Merchandise inventories rose ",
    "by $104.2 million, mostly for ",
    "47 new stores [1]. ",
    "Gross profit reached 39.6% ",
    "of net sales [2]. ",
    "It also owns the Moon [9].",
]
HOSTILE_TITLE = "<img src=x onerror=window.__pwned=1>"
HOSTILE_LINES = [
    "Quarterly zanzibar memo",
    "<script>window.__pwned = 1; alert(1)</script>",
    '<img src=x onerror="window.__pwned=1; alert(2)">',
]
MAX_PX = 2.0
NO_OVERFLOW = "() => document.documentElement.scrollWidth <= window.innerWidth"
#: Uncaught script errors of each open page (by id), checked when it is closed.
PAGE_ERRORS: dict[int, list[str]] = {}
#: Where a script could turn text into markup: the UI uses none of them.
HTML_SINKS = re.compile(r"\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|\beval\(")


# -- helpers ---------------------------------------------------------------------------------------


def open_ui(
    chromium: Browser,
    base_url: str,
    route: str = "#/documents",
    key: str | None = KEY_A,
    viewport: dict[str, int] = DESKTOP,
) -> Page:
    context = chromium.new_context(viewport=viewport)
    page = context.new_page()
    errors: list[str] = []
    PAGE_ERRORS[id(page)] = errors
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{base_url}/ui{route}")
    if key is not None:
        sign_in(page, key)
    return page


def sign_in(page: Page, key: str) -> None:
    page.get_by_label("API key", exact=True).fill(key)
    page.get_by_role("button", name="Use this key").click()
    expect(page.locator("#view-key")).to_be_hidden()


def close(page: Page) -> None:
    """Close the page's context; the UI must have thrown no uncaught error meanwhile."""
    errors = PAGE_ERRORS.pop(id(page), [])
    page.context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def api(base_url: str, key: str = KEY_A) -> httpx.Client:
    return httpx.Client(
        base_url=f"{base_url}/v1", headers={"Authorization": f"Bearer {key}"}, timeout=60
    )


def assert_accessible(page: Page, axe_source: str, view: str) -> None:
    """axe-core over the page as it is now: no violation of any rule it runs by default."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source)  # evaluate is not subject to the page's CSP; a <script> is
    violations = page.evaluate(
        """async () => {
            const result = await axe.run(document, {resultTypes: ["violations"]});
            return result.violations.map((v) => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5),
            }));
        }"""
    )
    assert violations == [], f"axe-core violations on the {view} view: {violations}"


def shoot(page: Page, screenshots: Path, name: str) -> None:
    page.screenshot(path=str(screenshots / f"{name}.png"))


def measure(frame: Any) -> dict[str, Any]:
    """The rendered image's rectangle and each box's, in CSS pixels, as the browser laid them
    out."""
    expect(frame).to_have_attribute("data-state", "ready", timeout=30_000)
    result: dict[str, Any] = frame.evaluate(
        """(f) => {
            const rect = (el) => { const r = el.getBoundingClientRect();
                                   return [r.x, r.y, r.width, r.height]; };
            const img = f.querySelector("img");
            return {img: rect(img), loaded: img.complete && img.naturalWidth > 0,
                    src: img.getAttribute("src"),
                    boxes: [...f.querySelectorAll(".box")].map((b) => ({
                        rect: rect(b), cls: b.className}))};
        }"""
    )
    return result


def assert_boxes(measured: dict[str, Any], bboxes: list[dict[str, float]], size: Any) -> None:
    """The drawn boxes are exactly ``bboxes`` (PDF points) scaled to the rendered image."""
    assert measured["loaded"] and measured["src"].startswith("blob:"), measured
    x, y, width, height = measured["img"]
    sx, sy = width / size["width"], height / size["height"]
    expected = sorted(
        (x + b["x0"] * sx, y + b["y0"] * sy, (b["x1"] - b["x0"]) * sx, (b["y1"] - b["y0"]) * sy)
        for b in bboxes
    )
    drawn = sorted(tuple(box["rect"]) for box in measured["boxes"])
    assert len(drawn) == len(expected), (drawn, expected)
    for got, want in zip(drawn, expected, strict=True):
        assert all(abs(g - w) <= MAX_PX for g, w in zip(got, want, strict=True)), (got, want)


def page_size(base_url: str, doc_id: str, page_number: int) -> dict[str, float]:
    with api(base_url) as client:
        pages = client.get(f"/documents/{doc_id}/structure").raise_for_status().json()["pages"]
    found: dict[str, float] = next(p for p in pages if p["page_number"] == page_number)
    return found


def drop_files(page: Page, files: list[tuple[str, bytes]]) -> None:
    """Drag and drop ``files`` onto the upload zone, as a person dropping them from a file
    manager (a DataTransfer with File objects, dragenter then drop)."""
    payload = [
        {"name": name, "b64": base64.b64encode(data).decode(), "type": "application/pdf"}
        for name, data in files
    ]
    page.evaluate(
        """(files) => {
            const transfer = new DataTransfer();
            for (const f of files) {
                const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
                transfer.items.add(new File([bytes], f.name, {type: f.type}));
            }
            const zone = document.getElementById("drop");
            for (const type of ["dragenter", "dragover", "drop"]) {
                zone.dispatchEvent(new DragEvent(type, {
                    dataTransfer: transfer, bubbles: true, cancelable: true}));
            }
        }""",
        payload,
    )


def ingest(service: IndexService, tenant: str, path: Path) -> str:
    """A document put in directly (not through the UI): its doc id, once READY."""
    caller = Caller(key_id=f"test-{tenant}", tenant=tenant)
    job = service.submit_upload(caller, path.name, path.read_bytes()).job
    assert service.wait_idle(180)
    done = service.job(caller, job.job_id)
    assert done is not None and done.state == JobState.READY, done
    return job.doc_id


def sse_answer(body: str) -> dict[str, Any]:
    """The final ``answer`` event of a streamed /v1/answer body."""
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        if fields.get("event") == "answer":
            answer: dict[str, Any] = json.loads(fields["data"])
            return answer
    raise AssertionError(f"no answer event in {body[:500]!r}")


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture()
def script(llm: tuple[str, Script]) -> Iterator[Script]:
    llm[1].reset()
    yield llm[1]
    llm[1].reset()


@pytest.fixture()
def extractive(service: IndexService, monkeypatch: pytest.MonkeyPatch) -> None:
    """Answers without an LLM for one test, as the embedded default gives them: the service's
    answer pipeline with its model unset (the rest of the module keeps the scripted stub)."""
    pipeline = service.query_service.answers
    assert pipeline is not None
    monkeypatch.setattr(pipeline, "llm", None)


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


@pytest.fixture(scope="module")
def uploaded(
    chromium: Browser, base_url: str, eval_dir: Path, screenshots: Path, service: IndexService
) -> Iterator[dict[str, Any]]:
    """A real PDF of the evaluation set and a broken one, dropped on the upload zone together;
    what the page showed once both jobs ended."""
    real = (eval_dir / "pdfs" / REAL_PDF).read_bytes()
    broken = random.Random(7).randbytes(4096)  # noqa: S311  # test data, not a secret
    page = open_ui(chromium, base_url)
    seen: list[str] = []
    page.expose_function("recordState", lambda state: seen.append(state))
    page.evaluate(
        """() => new MutationObserver(() => {
            for (const li of document.querySelectorAll("li.job[data-state]")) {
                window.recordState(li.dataset.file + ":" + li.dataset.state);
            }
        }).observe(document.getElementById("jobs"),
                   {subtree: true, attributes: true, attributeFilter: ["data-state"]})"""
    )
    drop_files(page, [(REAL_PDF, real), ("broken.pdf", broken)])
    real_job = page.locator(f'li.job[data-file="{REAL_PDF}"]')
    bad_job = page.locator('li.job[data-file="broken.pdf"]')
    expect(real_job).to_have_attribute("data-state", "READY", timeout=240_000)
    expect(bad_job).to_have_attribute("data-state", "FAILED", timeout=60_000)
    shoot(page, screenshots, "documents")
    yield {
        "page": page,
        "doc_id": real_job.get_attribute("data-doc-id"),
        "real_text": real_job.inner_text(),
        "bad_text": bad_job.inner_text(),
        "bad_job_id": bad_job.get_attribute("data-job-id"),
        "states": seen,
    }
    close(page)


# -- the shell: no key in it, a strict CSP ------------------------------------------------------


def test_ui_is_static_and_served_under_a_strict_csp(base_url: str) -> None:
    with httpx.Client(base_url=base_url) as client:
        shell = client.get("/ui")
        assert shell.status_code == 200 and shell.headers["content-type"].startswith("text/html")
        csp = shell.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert shell.headers["x-content-type-options"] == "nosniff"
        assert "<script>" not in shell.text  # only <script type=module src=...>
        script = client.get("/ui/static/app.js")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        sources = "".join(
            client.get(f"/ui/static/{name}").text
            for name in (
                "app.js",
                "api.js",
                "dom.js",
                "documents.js",
                "search.js",
                "answer.js",
                "trace.js",
                "pages.js",
                "scope.js",
            )
        )
        assert not HTML_SINKS.search(sources), HTML_SINKS.search(sources)
        missing = client.get("/ui/static/axe.min.js")  # never shipped: tests inject it
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
        assert client.get("/ui/static/..%2Fapp.py").status_code == 404
        assert client.get("/v1/documents").status_code == 401  # the API still needs a key


def test_the_browser_enforces_the_csp(chromium: Browser, base_url: str) -> None:
    page = open_ui(chromium, base_url, key=None)
    try:
        expect(page.get_by_label("API key", exact=True)).to_be_visible()
        ran = page.evaluate(
            """() => new Promise((resolve) => {
                const s = document.createElement("script");
                s.textContent = "window.__inline = 1";
                document.addEventListener("securitypolicyviolation", () =>
                    resolve({inline: window.__inline === 1, blocked: true}), {once: true});
                document.body.append(s);
                setTimeout(() => resolve({inline: window.__inline === 1, blocked: false}), 2000);
            })"""
        )
        assert ran == {"inline": False, "blocked": True}
    finally:
        close(page)


# -- the key -------------------------------------------------------------------------------------


def test_wrong_key_shows_a_clear_message(
    chromium: Browser, base_url: str, axe_source: str, screenshots: Path
) -> None:
    page = open_ui(chromium, base_url, key=None)
    try:
        assert_accessible(page, axe_source, "API key")
        page.get_by_label("API key", exact=True).fill("ps_not-a-real-key")
        page.get_by_label("API key", exact=True).press("Enter")  # keyboard: Enter submits
        error = page.locator("#key-error")
        expect(error).to_be_visible()
        expect(error).to_contain_text("This API key was not accepted")
        expect(error).to_contain_text("UNAUTHORIZED")
        expect(page.locator("#view-documents")).to_be_hidden()
        assert page.evaluate("() => sessionStorage.length") == 0
        assert "ps_" not in page.url
        shoot(page, screenshots, "wrong-key")
        # the right key then works, and is kept for the tab only (sessionStorage)
        sign_in(page, KEY_A)
        expect(page.locator("#view-documents")).to_be_visible()
        assert KEY_A not in page.url
        page.get_by_role("button", name="Forget key").click()
        expect(page.get_by_label("API key", exact=True)).to_be_visible()
        assert page.evaluate("() => sessionStorage.length") == 0
    finally:
        close(page)


# -- documents -------------------------------------------------------------------------------------


def test_upload_shows_job_progress_and_the_bad_files_error_code(
    uploaded: dict[str, Any], base_url: str, axe_source: str
) -> None:
    assert "READY" in uploaded["real_text"] and "Ready: 9 pages" in uploaded["real_text"]
    assert any(s.startswith(f"{REAL_PDF}:") and not s.endswith("READY") for s in uploaded["states"])
    with api(base_url) as client:
        job = client.get(f"/jobs/{uploaded['bad_job_id']}").raise_for_status().json()
    assert job["state"] == "FAILED" and job["error_code"]
    assert job["error_code"] in uploaded["bad_text"]  # the stage error code, as a person sees it
    assert job["error_message"] in uploaded["bad_text"]
    page: Page = uploaded["page"]
    row = page.locator(f'#documents-table tr[data-doc-id="{uploaded["doc_id"]}"]')
    expect(row).to_be_visible()
    expect(row.locator("td").nth(1)).to_have_text("9")  # pages
    # the title, with the file name next to it
    expect(row.locator("td").first).to_have_text(f"{ULTA_TITLE} — {REAL_PDF}")
    with api(base_url) as client:
        doc = client.get(f"/documents/{uploaded['doc_id']}").raise_for_status().json()
    expect(row.locator("td").nth(2)).to_have_text(doc["document"]["version"][:12] + "…")
    assert_accessible(page, axe_source, "documents")


def test_document_detail_and_delete_with_confirmation(
    chromium: Browser,
    base_url: str,
    uploaded: dict[str, Any],
    service: IndexService,
    tmp_path: Path,
    axe_source: str,
    screenshots: Path,
) -> None:
    doc_id = uploaded["doc_id"]
    page = open_ui(chromium, base_url, f"#/documents/{doc_id}")
    try:
        expect(page.locator("#document-title")).to_have_text(ULTA_TITLE)
        expect(page.locator(".facts")).to_contain_text(REAL_PDF)
        tiles = page.locator("#document-body .page-grid .page-frame")
        expect(tiles).to_have_count(9)
        expect(tiles.first).to_have_attribute("data-state", "ready", timeout=30_000)
        expect(page.locator(".versions li").first).to_contain_text("(current)")
        assert_accessible(page, axe_source, "document")
        shoot(page, screenshots, "document")

        victim = ingest(service, "tenant-a", samples.table_pdf(tmp_path / "to-delete.pdf"))
        page.goto(f"{base_url}/ui#/documents")
        row = page.locator(f'#documents-table tr[data-doc-id="{victim}"]')
        row.get_by_role("button", name="Delete").click()
        dialog = page.locator("#confirm")
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text(victim)
        page.keyboard.press("Escape")  # cancelled: still there
        expect(dialog).to_be_hidden()
        expect(row).to_be_visible()
        row.get_by_role("button", name="Delete").click()
        dialog.get_by_role("button", name="Delete").click()
        expect(row).to_have_count(0)
        expect(page.locator("#notice")).to_contain_text("Deleted")
        with api(base_url) as client:
            assert client.get(f"/documents/{victim}").status_code == 404
    finally:
        close(page)


def test_a_replacement_is_a_new_version_of_the_same_document(
    chromium: Browser, base_url: str, tmp_path: Path
) -> None:
    first = samples.text_pdf(tmp_path / "first.pdf").read_bytes()
    second = samples.table_pdf(tmp_path / "second.pdf").read_bytes()
    page = open_ui(chromium, base_url)
    try:
        upload = page.locator("#upload-input")
        upload.set_input_files(
            {"name": "notes.pdf", "mimeType": "application/pdf", "buffer": first}
        )
        job = page.locator('li.job[data-file="notes.pdf"]').first
        expect(job).to_have_attribute("data-state", "READY", timeout=60_000)
        doc_id = job.get_attribute("data-doc-id")
        page.get_by_label("replaces it").check()
        upload.set_input_files(
            {"name": "notes.pdf", "mimeType": "application/pdf", "buffer": second}
        )
        again = page.locator('li.job[data-file="notes.pdf"]').first  # the newest is on top
        expect(again).to_contain_text("Outcome: replaced")
        expect(again).to_have_attribute("data-state", "READY", timeout=60_000)
        assert again.get_attribute("data-doc-id") == doc_id
        with api(base_url) as client:
            versions = [
                e["version"]
                for e in client.get("/audit", params={"doc_id": doc_id}).json()["entries"]
                if e["action"] == "replace"
            ]
            current = client.get(f"/documents/{doc_id}").json()["document"]["version"]
        page.goto(f"{base_url}/ui#/documents/{doc_id}")
        shown = page.locator(".versions li")
        expect(shown).to_have_count(1 + len(versions))
        expect(shown.first).to_contain_text(f"{current} (current)")
        assert len(versions) == 1
        expect(shown.nth(1)).to_contain_text(versions[0])
        expect(shown.nth(1)).to_contain_text("replaced")
    finally:
        close(page)


def test_another_tenants_document_is_not_found(
    chromium: Browser, base_url: str, service: IndexService, tmp_path: Path
) -> None:
    theirs = ingest(service, "tenant-b", samples.text_pdf(tmp_path / "tenant-b.pdf"))
    with api(base_url, KEY_B) as client:
        assert client.get(f"/documents/{theirs}").status_code == 200  # it exists, for B
    page = open_ui(chromium, base_url, f"#/documents/{theirs}")
    try:
        expect(page.locator("#document-title")).to_have_text("Document not found")
        expect(page.locator("#document-body")).to_contain_text("was not found")
        expect(page.locator("#document-body")).not_to_contain_text("Northwind")
    finally:
        close(page)


# -- search ----------------------------------------------------------------------------------------


def test_search_draws_the_evidence_boxes_on_each_thumbnail_and_large(
    chromium: Browser,
    base_url: str,
    uploaded: dict[str, Any],
    axe_source: str,
    screenshots: Path,
) -> None:
    query = "merchandise inventories increase new stores"
    page = open_ui(chromium, base_url, "#/search")
    view = page.locator("#view-search")
    try:
        options = view.get_by_label("Route").locator("option")
        expect(options).to_have_count(len(RouteName))  # every route the API has, as it grows
        assert options.evaluate_all("(os) => os.map((o) => o.value)") == [
            r.value for r in RouteName
        ]
        view.get_by_label("Query").fill(query)
        view.get_by_label("Route").select_option("text")
        with page.expect_response("**/v1/search") as response_info:
            view.get_by_label("Query").press("Enter")
        found = response_info.value.json()
        assert found["hits"], found
        hits = page.locator("#search-results li.hit")
        expect(hits).to_have_count(len(found["hits"]))
        with_boxes = 0
        for i, hit in enumerate(found["hits"]):
            item = hits.nth(i)
            expect(item.locator(".hit-title")).to_contain_text(f"page {hit['page_number']}")
            if hit["doc_id"] == uploaded["doc_id"]:  # the title, the file name next to it
                expect(item.locator(".hit-title")).to_contain_text(f"{ULTA_TITLE} — {REAL_PDF}")
            if hit["snippet"]:
                expect(item.locator(".snippet")).to_have_text(hit["snippet"])
            for route, score in hit["route_scores"].items():
                expect(item.locator(".scores")).to_contain_text(f"{route} {score:.3f}")
            size = page_size(base_url, hit["doc_id"], hit["page_number"])
            assert_boxes(measure(item.locator(".page-frame")), hit["evidence"], size)
            with_boxes += bool(hit["evidence"])
        assert with_boxes >= 1
        assert_accessible(page, axe_source, "search")
        shoot(page, screenshots, "search")

        # keyboard: Tab from the query field reaches the first result; Enter opens it large
        first = found["hits"][0]
        hits.first.locator("button.thumb").focus()
        page.keyboard.press("Enter")
        viewer = page.locator("#viewer")
        expect(viewer).to_be_visible()
        expect(viewer.locator("#viewer-title")).to_contain_text(f"page {first['page_number']}")
        size = page_size(base_url, first["doc_id"], first["page_number"])
        large = measure(viewer.locator(".page-frame"))
        assert large["img"][2] > 500  # large, not the thumbnail
        assert_boxes(large, first["evidence"], size)
        assert_accessible(page, axe_source, "page viewer")
        shoot(page, screenshots, "viewer")
        page.keyboard.press("Escape")
        expect(viewer).to_be_hidden()
        expect(hits.first.locator("button.thumb")).to_be_focused()
    finally:
        close(page)


def test_agentic_search_trace_shows_the_steps(
    chromium: Browser,
    base_url: str,
    uploaded: dict[str, Any],
    script: Script,
    screenshots: Path,
) -> None:
    """The trace of a multi-step search: its plan and each step (the planner's LLM is the
    stub, which answers nothing here: the rule planner takes over)."""
    page = open_ui(chromium, base_url, "#/search")
    view = page.locator("#view-search")
    try:
        view.get_by_label("Query").fill(
            "What were merchandise inventories, and how much stock was repurchased?"
        )
        view.get_by_label("Route").select_option("agentic")
        with page.expect_response("**/v1/search") as response_info:
            view.get_by_role("button", name="Search").click()
        found = response_info.value.json()
        expect(view.locator("li.hit")).to_have_count(len(found["hits"]))
        view.locator("#search-status a").click()
        trace_view = page.locator("#trace-body")
        expect(trace_view.get_by_role("heading", name="Multi-step search")).to_be_visible()
        with api(base_url) as client:
            trace = client.get(f"/traces/{found['trace_id']}").json()["trace"]
        assert trace["multistep"]["steps"], trace["multistep"]
        steps = trace_view.locator("section", has=page.get_by_role("heading", name="Multi-step"))
        expect(steps.locator("tbody tr")).to_have_count(len(trace["multistep"]["steps"]))
        expect(steps).to_contain_text(trace["multistep"]["stop_reason"])
        steps.scroll_into_view_if_needed()
        shoot(page, screenshots, "trace-multistep")
    finally:
        close(page)


# -- answers ---------------------------------------------------------------------------------------


def test_streamed_answer_citations_withheld_and_trace(
    chromium: Browser,
    base_url: str,
    uploaded: dict[str, Any],
    script: Script,
    axe_source: str,
    screenshots: Path,
) -> None:
    script.then(Step(chunks=ANSWER_CHUNKS, chunk_delay_s=0.25))
    page = open_ui(chromium, base_url, "#/answer")
    view = page.locator("#view-answer")
    try:
        # every length the streamed text has had, recorded by the page as it changes
        page.evaluate(
            """() => {
                window.__lengths = [];
                new MutationObserver(() => {
                    const s = document.getElementById("answer-stream");
                    if (s && !document.getElementById("answer-final")) {
                        window.__lengths.push(s.textContent.length);
                    }
                }).observe(document.getElementById("answer-output"),
                           {subtree: true, childList: true, characterData: true});
            }"""
        )
        page.get_by_label("Question").fill("What drove the increase in merchandise inventories?")
        view.get_by_label("Route").select_option("text")
        page.get_by_label("Policy").select_option("standard")
        with page.expect_response("**/v1/answer") as response_info:
            page.get_by_role("button", name="Ask").click()
        expect(page.locator("#answer-final")).to_be_visible(timeout=60_000)
        response = response_info.value
        assert json.loads(response.request.post_data or "{}")["policy"] == "standard"
        answer = sse_answer(response.text())

        lengths = page.evaluate("() => window.__lengths")
        growth = [b for a, b in zip([0, *lengths], lengths, strict=False) if b > a]
        assert len(growth) >= 3, f"the streamed text grew only {len(growth)} times: {lengths}"

        final = page.locator("#answer-final")
        assert not answer["abstained"] and len(answer["citations"]) >= 2, answer
        for sentence in answer["sentences"]:
            expect(final).to_contain_text(sentence["text"])
        expect(final).not_to_contain_text("Moon")
        withheld = page.locator(".withheld")
        expect(withheld).to_contain_text("It also owns the Moon.")
        expect(withheld).to_contain_text("withheld")
        expect(page.locator(".answer-meta a")).to_have_text(f"trace {answer['trace_id']}")
        assert_accessible(page, axe_source, "answer")
        shoot(page, screenshots, "answer")

        viewer = page.locator("#viewer")
        for citation in answer["citations"][:2]:
            n = citation["n"]
            final.locator(f'button.cite[data-n="{n}"]').click()
            expect(viewer).to_be_visible()
            expect(viewer.locator("#viewer-title")).to_contain_text(f"[{n}]")
            frame = viewer.locator(".page-frame")
            measured = measure(frame)
            size = page_size(base_url, citation["doc_id"], citation["page_number"])
            assert_boxes(measured, citation["bboxes"], size)  # these boxes, and no other
            assert all(f"cite-{n}" in box["cls"].split() for box in measured["boxes"])
            expect(viewer.locator("#viewer-caption")).to_have_text(citation["quote"])
            if n == 1:
                assert_accessible(page, axe_source, "citation")
                shoot(page, screenshots, "citation")
            page.get_by_role("button", name="Close").click()
            expect(viewer).to_be_hidden()

        page.locator(".answer-meta a").click()
        trace = page.locator("#trace-body")
        for heading in ("Summary", "Timings", "Route candidates", "Fused order", "Rerank"):
            expect(trace.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        expect(trace.get_by_role("heading", name="LLM attempts (1)")).to_be_visible()
        expect(trace).to_contain_text(answer["trace_id"])
        assert_accessible(page, axe_source, "trace")
        shoot(page, screenshots, "trace")
    finally:
        close(page)


def test_abstention_and_strict_policy(
    chromium: Browser, base_url: str, uploaded: dict[str, Any], script: Script
) -> None:
    script.then(Step(chunks=[ABSTAIN_TEXT], chunk_delay_s=0.05))
    page = open_ui(chromium, base_url, "#/answer")
    view = page.locator("#view-answer")
    try:
        page.get_by_label("Question").fill("Who won the 1930 football world cup?")
        view.get_by_label("Route").select_option("text")
        page.get_by_label("Policy").select_option("strict")
        with page.expect_request("**/v1/answer") as request_info:
            page.get_by_role("button", name="Ask").click()
        assert json.loads(request_info.value.post_data or "{}")["policy"] == "strict"
        shown = page.locator("#answer-final")
        expect(shown).to_have_attribute("data-abstained", "true", timeout=60_000)
        expect(shown).to_contain_text("Abstained")
        expect(page.locator("#answer-status")).to_have_text("No answer.")
        expect(shown.locator("button.cite")).to_have_count(0)
    finally:
        close(page)


def test_the_leads_citation_opens_the_page_its_quote_is_printed_on(
    chromium: Browser,
    base_url: str,
    uploaded: dict[str, Any],
    extractive: None,
    eval_dir: Path,
    axe_source: str,
    screenshots: Path,
) -> None:
    """Extractive: the direct answer first, its value marked; its [n] opens the page its
    quote's characters are printed on (``parts[0]``, not the passage's first page), with boxes
    around exactly that part; a quote across a page break continues on the next page."""
    import pymupdf

    page = open_ui(chromium, base_url, "#/answer")
    view = page.locator("#view-answer")
    try:
        page.get_by_label("Question").fill(LEAD_QUESTION)
        view.get_by_label("Route").select_option("text")
        with page.expect_response("**/v1/answer") as response_info:
            page.get_by_role("button", name="Ask").click()
        expect(page.locator("#answer-final")).to_be_visible(timeout=60_000)
        answer = sse_answer(response_info.value.text())
        assert answer["mode"] == "extractive" and not answer["abstained"], answer
        lead = answer["lead"]
        assert lead is not None and lead["citations"], answer
        by_n = {c["n"]: c for c in answer["citations"]}
        cited = by_n[lead["citations"][0]]
        assert cited["n"] == 1  # numbered by first appearance: the lead's first
        assert cited["doc_id"] == uploaded["doc_id"] and cited["parts"], cited
        part = cited["parts"][0]
        assert part["bboxes"], part

        # the lead, first and prominent, with its value marked and where it is printed
        shown = page.locator("#answer-lead")
        expect(shown).to_contain_text(lead["text"])
        if lead["value"] and lead["value"] in lead["text"]:
            expect(shown.locator("mark.value")).to_have_text(lead["value"])
        pages = sorted({p["page_number"] for p in cited["parts"]})
        where = f"p. {pages[0]}" if len(pages) == 1 else f"pp. {pages[0]}–{pages[-1]}"
        expect(page.locator(".lead-source")).to_contain_text(f"{ULTA_TITLE} — {REAL_PDF}, {where}")
        if answer["supporting"]:  # collapsed
            supporting = page.locator("#answer-supporting")
            expect(supporting.locator("summary")).to_have_text(
                f"Supporting quotes ({len(answer['supporting'])})"
            )
            assert supporting.get_attribute("open") is None
            expect(supporting.locator("li").first).to_be_hidden()
        # the citations: title — file name, page (never a bare id)
        first = page.locator("ol.citations li").first
        expect(first).to_contain_text(f"{ULTA_TITLE} — {REAL_PDF}, {where}")
        assert_accessible(page, axe_source, "answer (lead)")
        shoot(page, screenshots, "answer-lead")

        # the lead's [n]: the page its quote is printed on, boxes around exactly the quote
        with pymupdf.open(eval_dir / "pdfs" / REAL_PDF) as pdf:
            printed = [pdf[p["page_number"] - 1].get_text() for p in cited["parts"]]
        viewer = page.locator("#viewer")
        shown.locator(f'button.cite[data-n="{cited["n"]}"]').click()
        expect(viewer).to_be_visible()
        _assert_quote_pages(page, base_url, cited, printed, screenshots)
        page.get_by_role("button", name="Close").click()
        expect(viewer).to_be_hidden()
    finally:
        close(page)


def _assert_quote_pages(
    page: Page, base_url: str, cited: dict[str, Any], printed: list[str], screenshots: Path
) -> None:
    """The open viewer shows each part of ``cited``'s quote on the page it is printed on
    (``printed``: those pages' text), boxes around exactly that part, following the quote
    across a page break."""
    viewer = page.locator("#viewer")
    for i, quoted in enumerate(cited["parts"]):
        number = quoted["page_number"]
        assert words(quoted["text"]) <= words(printed[i]), (quoted, number)
        expect(viewer.locator("#viewer-title")).to_contain_text(f"[{cited['n']}]")
        expect(viewer.locator("#viewer-title")).to_contain_text(re.compile(rf"\bpage {number}\b"))
        frame = viewer.locator(".page-frame")
        expect(frame).to_have_attribute("data-page", str(number))
        measured = measure(frame)
        assert_boxes(measured, quoted["bboxes"], page_size(base_url, cited["doc_id"], number))
        assert all(f"cite-{cited['n']}" in box["cls"].split() for box in measured["boxes"])
        if i == 0:
            shoot(page, screenshots, "citation-lead")
        if i + 1 < len(cited["parts"]):  # a quote across a page break: the next page
            following = cited["parts"][i + 1]["page_number"]
            viewer.get_by_role("button", name=f"continues on page {following}").click()
            expect(frame).to_have_attribute("data-page", str(following))


def test_an_extractive_abstention_lists_the_nearest_passages(
    chromium: Browser, base_url: str, uploaded: dict[str, Any], extractive: None
) -> None:
    page = open_ui(chromium, base_url, "#/answer")
    view = page.locator("#view-answer")
    try:
        page.get_by_label("Question").fill(NO_ANSWER_QUESTION)
        view.get_by_label("Route").select_option("text")
        with page.expect_response("**/v1/answer") as response_info:
            page.get_by_role("button", name="Ask").click()
        shown = page.locator("#answer-final")
        expect(shown).to_have_attribute("data-abstained", "true", timeout=60_000)
        answer = sse_answer(response_info.value.text())
        assert answer["abstained"] and answer["related"], answer
        expect(shown).to_contain_text(f"Why: {answer['reason']}")
        links = page.locator(".related li")
        expect(links).to_have_count(len(answer["related"]))
        nearest = answer["related"][0]
        part = (nearest["parts"] or [nearest])[0]
        # title · file name · p. N: a link that opens the page with the passage's boxes
        link = links.first.locator("button.related-link")
        expect(link).to_contain_text(f"{REAL_PDF} · p")
        link.click()
        frame = page.locator("#viewer .page-frame")
        expect(frame).to_have_attribute("data-page", str(part["page_number"]))
        size = page_size(base_url, nearest["doc_id"], part["page_number"])
        assert_boxes(measure(frame), part["bboxes"], size)
    finally:
        close(page)


# -- hostile document text -------------------------------------------------------------------------


def test_document_text_is_shown_as_text_and_runs_nothing(
    chromium: Browser, base_url: str, tmp_path: Path, screenshots: Path
) -> None:
    import pymupdf

    path = tmp_path / "hostile.pdf"
    with pymupdf.open() as doc:
        pdf_page = doc.new_page()
        for i, line in enumerate(HOSTILE_LINES):
            pdf_page.insert_text((72, 100 + 24 * i), line, fontsize=12)
        doc.set_metadata({"title": HOSTILE_TITLE})
        doc.save(path)
    page = open_ui(chromium, base_url)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.locator("#upload-input").set_input_files(
            {"name": "<b>memo</b>.pdf", "mimeType": "application/pdf", "buffer": path.read_bytes()}
        )
        job = page.locator('li.job[data-file="<b>memo</b>.pdf"]')
        expect(job).to_have_attribute("data-state", "READY", timeout=120_000)
        expect(job.locator("strong").first).to_have_text("<b>memo</b>.pdf")
        # the title the service chose (the metadata's, or the page's largest lines: markup
        # either way), shown as text
        with api(base_url) as client:
            docs = client.get("/documents").raise_for_status().json()["documents"]
        title = next(d for d in docs if d["doc_id"] == job.get_attribute("data-doc-id"))["title"]
        assert "<img src=x onerror=" in title, title
        expect(page.locator("#documents-table")).to_contain_text(title)

        page.goto(f"{base_url}/ui#/search")
        view = page.locator("#view-search")
        view.get_by_label("Query").fill("zanzibar memo")
        view.get_by_label("Route").select_option("keyword")
        page.get_by_role("button", name="Search").click()
        hit = page.locator("#search-results li.hit").first
        expect(hit.locator(".hit-title")).to_contain_text(title)
        expect(hit.locator(".snippet")).to_contain_text("<script>")
        hit.locator("button.thumb").click()
        expect(page.locator("#viewer-caption")).to_contain_text("onerror")
        shoot(page, screenshots, "hostile-text")
        page.wait_for_timeout(300)

        assert dialogs == []
        assert page.evaluate("() => window.__pwned") is None
        injected = page.evaluate(
            """() => ({
                scripts: [...document.scripts].filter((s) => !s.src).length,
                stray: document.querySelectorAll('img[src="x"], b').length,
                onerror: document.querySelectorAll("[onerror]").length,
            })"""
        )
        assert injected == {"scripts": 0, "stray": 0, "onerror": 0}
    finally:
        close(page)


# -- Japanese, and a narrow window -----------------------------------------------------------------


def test_japanese_document_and_query_in_a_narrow_window(
    chromium: Browser,
    base_url: str,
    eval_dir: Path,
    service: IndexService,
    tmp_path: Path,
    screenshots: Path,
    axe_source: str,
) -> None:
    source = eval_dir / "ja" / "pdfs" / JA_PDF
    if not source.is_file():
        pytest.skip(f"{JA_PDF} is not in the evaluation corpus")
    ja = ingest(service, "tenant-a", extract_pages(source, [1, 2], tmp_path / JA_PDF))
    page = open_ui(chromium, base_url, "#/search", viewport=NARROW)
    view = page.locator("#view-search")
    try:
        view.get_by_label("Query").fill("化粧品に配合される防腐剤")
        view.get_by_label("Route").select_option("text")
        page.get_by_role("button", name="Search").click()
        hit = page.locator(f'#search-results li.hit[data-doc-id="{ja}"]').first
        expect(hit.locator(".snippet")).to_contain_text("化粧品")
        expect(hit.locator(".page-frame")).to_have_attribute("data-state", "ready")
        # readable: nothing wider than the window, Japanese set in a CJK font
        assert page.evaluate(NO_OVERFLOW)
        families = page.evaluate(
            """() => getComputedStyle(document.querySelector(".snippet")).fontFamily"""
        )
        assert "Noto Sans CJK JP" in families
        installed = subprocess.run(
            ["fc-list", ":lang=ja", "family"],  # noqa: S607  # fc-list as make setup installs it
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "Noto Sans CJK JP" in installed, "fonts-noto-cjk is missing: run make setup"
        assert_accessible(page, axe_source, "search (narrow)")
        shoot(page, screenshots, "japanese-narrow")
        for route, ready in (("#/documents", "#documents-table"), ("#/answer", "#answer-form")):
            page.goto(f"{base_url}/ui{route}")
            expect(page.locator(ready)).to_be_visible()
            assert page.evaluate(NO_OVERFLOW), f"{route} is wider than a narrow window"
        shoot(page, screenshots, "answer-narrow")
    finally:
        close(page)


# -- search in one document ------------------------------------------------------------------------


def test_search_in_this_document_from_its_page_and_from_a_result(
    chromium: Browser,
    base_url: str,
    uploaded: dict[str, Any],
    service: IndexService,
    tmp_path: Path,
    axe_source: str,
) -> None:
    """The "Search in this document" links of a document's page and of each result scope the
    search (the API's filters.doc_ids) and say so; "search all documents" lifts it."""
    ulta = uploaded["doc_id"]
    other = ingest(service, "tenant-a", samples.table_pdf(tmp_path / "regions.pdf"))
    page = open_ui(chromium, base_url, f"#/documents/{ulta}")
    view = page.locator("#view-search")
    try:
        page.get_by_role("link", name="Search in this document").click()
        expect(page).to_have_url(re.compile(rf"#/search/{ulta}$"))
        expect(page.locator("#search-scope")).to_contain_text(f"Only in {ULTA_TITLE}")
        view.get_by_label("Query").fill("net sales")
        with page.expect_request("**/v1/search") as sent:
            view.get_by_label("Query").press("Enter")
        assert sent.value.post_data_json["filters"] == {"doc_ids": [ulta]}
        hits = page.locator("#search-results li.hit")
        expect(hits.first).to_be_visible()
        assert set(hits.evaluate_all("(hs) => hs.map((h) => h.dataset.docId)")) == {ulta}
        expect(page.locator("#search-results .search-in")).to_have_count(0)
        assert_accessible(page, axe_source, "search in one document")

        page.get_by_role("link", name="search all documents").click()
        expect(page.locator("#search-scope")).to_be_hidden()
        view.get_by_label("Query").fill("revenue by region")
        with page.expect_request("**/v1/search") as sent:
            view.get_by_label("Query").press("Enter")
        assert "filters" not in sent.value.post_data_json
        result = page.locator(f'#search-results li.hit[data-doc-id="{other}"]').first
        with page.expect_request("**/v1/search") as sent:  # the typed search runs again
            result.get_by_role("link", name=re.compile("Search in .* only")).click()
        assert sent.value.post_data_json["filters"] == {"doc_ids": [other]}
        expect(page).to_have_url(re.compile(rf"#/search/{other}$"))

        page.goto(f"{base_url}/ui#/documents/{ulta}")
        page.get_by_role("link", name="Ask this document").click()
        expect(page.locator("#answer-scope")).to_contain_text(ULTA_TITLE)
        page.locator("#answer-query").fill("What were net sales?")
        with page.expect_request("**/v1/answer") as sent:
            page.get_by_role("button", name="Ask").click()
        assert sent.value.post_data_json["filters"] == {"doc_ids": [ulta]}
    finally:
        close(page)
