"""The API docs pages work air-gapped: every script, stylesheet and icon they load is served
by the gateway itself, never by a CDN."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pagesight.core.settings import GatewayOptions
from pagesight.gateway.app import build_app
from pagesight.gateway.auth import KeyRing
from pagesight.gateway.backend import ServiceClient

pytestmark = pytest.mark.integration

# src/href of <script>, <link> and <img> tags, plus the spec URL handed to the page's script
_ASSET = re.compile(r"<(?:script|link|img)\b[^>]*?\b(?:src|href)\s*=\s*[\"']([^\"']+)[\"']", re.I)
_SCRIPT_URL = re.compile(r"""(?:url:|spec-url=)\s*["']([^"']+)["']""")


async def _no_service(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    raise AssertionError(f"the docs pages must not call the service ({name})")


@pytest.fixture(scope="module")
def http() -> Iterator[TestClient]:
    options = GatewayOptions()
    app = build_app(ServiceClient(_no_service), options, KeyRing.from_options(options))
    with TestClient(app) as client:
        yield client


def _assets(html: str) -> list[str]:
    return _ASSET.findall(html)


@pytest.mark.parametrize(
    ("page", "kinds"),
    [("/docs", {"javascript", "css", "image"}), ("/redoc", {"javascript", "image"})],
)
def test_docs_page_loads_nothing_from_outside(http: TestClient, page: str, kinds: set[str]) -> None:
    response = http.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert not re.search(r"https?://", html), "the page names an external URL"
    assets = _assets(html)
    assert assets, "no script or stylesheet found"
    seen = set()
    for url in assets:
        assert url.startswith("/docs/static/"), url
        asset = http.get(url)
        assert asset.status_code == 200, url
        content_type = asset.headers["content-type"]
        kind = next(k for k in ("javascript", "css", "image") if k in content_type)
        seen.add(kind)
        assert len(asset.content) > 1000, url
    assert seen == kinds
    # the page's script fetches the spec from this gateway too
    (spec,) = _SCRIPT_URL.findall(html) or re.findall(r"spec-url=\"([^\"]+)\"", html)
    assert spec == "/openapi.json"


def test_swagger_ui_assets_are_the_bundle_and_its_css(http: TestClient) -> None:
    html = http.get("/docs").text
    assets = _assets(html)
    js = [u for u in assets if u.endswith(".js")]
    css = [u for u in assets if u.endswith(".css")]
    assert len(js) == 1 and len(css) == 1
    assert "SwaggerUIBundle" in http.get(js[0]).text
    assert http.get(css[0]).headers["content-type"].startswith("text/css")
    assert "oauth2RedirectUrl" in html
    redirect = http.get("/docs/oauth2-redirect")
    assert redirect.status_code == 200
    assert not re.search(r"https?://", redirect.text)


def test_openapi_schema_still_served_without_a_key(http: TestClient) -> None:
    response = http.get("/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/v1/search" in paths
    assert not any(p.startswith("/docs") or p == "/redoc" for p in paths)


def test_docs_pages_follow_the_root_path() -> None:
    options = GatewayOptions()
    app = build_app(ServiceClient(_no_service), options, KeyRing.from_options(options))
    with TestClient(app, root_path="/gw") as client:
        html = client.get("/docs").text
        assets = _assets(html)
        assert assets and all(u.startswith("/gw/docs/static/") for u in assets)
        assert "'/gw/openapi.json'" in html
        assert all(client.get(u).status_code == 200 for u in assets)
