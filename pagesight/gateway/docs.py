"""The API docs pages (Swagger UI at ``/docs``, ReDoc at ``/redoc``), served without a CDN.

FastAPI's default pages load Swagger UI / ReDoc JavaScript, CSS and the favicon from public
CDNs, so they stay blank on an air-gapped machine. Here the same pages point at copies served
by the gateway itself under ``/docs/static``: the files ship in the ``fastapi-offline`` wheel
(Swagger UI 5 bundle and CSS, ReDoc 2 standalone, a favicon), of which only the static folder
is used. Build the app with ``docs_url=None, redoc_url=None`` and call
:func:`install_offline_docs` on it. The pages need no API key, like ``/openapi.json``.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
STATIC_URL = "/docs/static"
#: the asset folder of the fastapi-offline wheel
STATIC_DIR = Path(fastapi_offline.__file__).parent / "static"
SWAGGER_JS = "swagger-ui-bundle.js"
SWAGGER_CSS = "swagger-ui.css"
REDOC_JS = "redoc.standalone.js"
FAVICON = "favicon.png"


def install_offline_docs(app: FastAPI) -> None:
    """Serve ``/docs`` (and its OAuth2 redirect) and ``/redoc`` from local assets."""
    missing = [
        name
        for name in (SWAGGER_JS, SWAGGER_CSS, REDOC_JS, FAVICON)
        if not (STATIC_DIR / name).is_file()
    ]
    if missing:
        raise RuntimeError(f"API docs assets missing from {STATIC_DIR}: {', '.join(missing)}")
    app.mount(STATIC_URL, StaticFiles(directory=STATIC_DIR), name="docs-static")
    openapi_url = app.openapi_url or "/openapi.json"
    oauth2_redirect_url = app.swagger_ui_oauth2_redirect_url

    def root(request: Request) -> str:
        # Behind a proxy or a Ray Serve route prefix the pages live under the root path.
        return str(request.scope.get("root_path", "")).rstrip("/")

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        base = root(request)
        return get_swagger_ui_html(
            openapi_url=base + openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=base + oauth2_redirect_url if oauth2_redirect_url else None,
            swagger_js_url=f"{base}{STATIC_URL}/{SWAGGER_JS}",
            swagger_css_url=f"{base}{STATIC_URL}/{SWAGGER_CSS}",
            swagger_favicon_url=f"{base}{STATIC_URL}/{FAVICON}",
            init_oauth=app.swagger_ui_init_oauth,
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    if oauth2_redirect_url:

        @app.get(oauth2_redirect_url, include_in_schema=False)
        async def swagger_ui_redirect() -> HTMLResponse:
            return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        base = root(request)
        return get_redoc_html(
            openapi_url=base + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{base}{STATIC_URL}/{REDOC_JS}",
            redoc_favicon_url=f"{base}{STATIC_URL}/{FAVICON}",
            with_google_fonts=False,
        )
