"""The web UI at ``/ui``: static files only (one HTML shell, one stylesheet, ES modules).

The pages hold no data and need no key: the browser asks the person for an API key, keeps it
in ``sessionStorage`` and calls the public ``/v1`` API with ``Authorization: Bearer``, like
any client (page images too, fetched with the key and shown as blob URLs; a key never goes
into a URL). Every response here carries a Content-Security-Policy that allows scripts,
styles and connections from this origin only (no inline script, no ``eval``, no other host),
so text from a document that slipped past the UI's escaping could still run nothing. The
shell names the root path (behind a proxy or a Ray Serve route prefix) in a ``<meta>`` tag,
which the scripts read to find the API.
"""

from __future__ import annotations

import html
from functools import cache
from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from pagesight.gateway.dependencies import not_found

router = APIRouter(tags=["ui"], include_in_schema=False)

STATIC_DIR = Path(__file__).resolve().parent.parent / "ui" / "static"
UI_PATH = "/ui"
#: What the UI's responses may load and run: this origin only; images also as blob:/data:
#: URLs (page images fetched with the key), nothing inline, no framing.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


@cache
def _assets() -> dict[str, tuple[bytes, str]]:
    """The UI's scripts and stylesheet by file name: read once, served from memory."""
    return {
        path.name: (path.read_bytes(), MEDIA_TYPES[path.suffix])
        for path in sorted(STATIC_DIR.iterdir())
        if path.suffix in MEDIA_TYPES
    }


@cache
def _shell_template() -> str:
    return (STATIC_DIR / "index.html").read_text(encoding="utf-8")


@router.get(UI_PATH)
async def ui_shell(request: Request) -> Response:
    """The HTML shell; the views are hash routes (``#/search``, ``#/documents/<id>``, ...)."""
    root = str(request.scope.get("root_path", "")).rstrip("/")
    page = _shell_template().replace("{{root}}", html.escape(root, quote=True))
    headers = {**HEADERS, "Cache-Control": "no-cache"}
    return Response(page, media_type="text/html; charset=utf-8", headers=headers)


@router.get(f"{UI_PATH}/")
async def ui_slash(request: Request) -> Response:
    root = str(request.scope.get("root_path", "")).rstrip("/")
    return RedirectResponse(f"{root}{UI_PATH}", status_code=308)


@router.get(f"{UI_PATH}/static/{{name}}")
async def ui_asset(name: str) -> Response:
    """A script or the stylesheet of the UI (only files of the UI's own folder)."""
    asset = _assets().get(name)
    if asset is None:
        raise not_found(f"UI asset {name!r}")
    body, media_type = asset
    return Response(body, media_type=media_type, headers={**HEADERS, "Cache-Control": "no-cache"})
