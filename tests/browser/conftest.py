"""The web UI in a real browser: Debian's Chromium driven by Playwright for Python.

One index service (tenants A and B, an LLM that is the scripted OpenAI-compatible stub) behind
the gateway, served by uvicorn on a free port; one headless Chromium for the module. Playwright
drives the system browser (``executable_path``): ``playwright install`` downloads browsers,
which this project never does. Both come from ``make setup`` (Debian's ``chromium`` and
``fonts-noto-cjk``, the pinned ``playwright`` wheel); without them the tests are skipped.

axe-core, the accessibility checker, comes from the pinned ``axe-playwright-python`` dev wheel (its
``axe.min.js``) and is put into the page only by the tests, never served by the gateway.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pagesight.core.settings import AnswerOptions, GatewayOptions, LlmOptions, Settings
from pagesight.gateway.auth import new_key
from pagesight.services.index_service import IndexService
from tests.asgi_server import serving
from tests.conftest import REPO_ROOT
from tests.openai_stub import Script, scripted_server
from tests.serving import gateway_app, warm_service

KEY_A, RECORD_A = new_key("ui-key-a", "tenant-a")
KEY_B, RECORD_B = new_key("ui-key-b", "tenant-b")
SCREENSHOTS = REPO_ROOT / "var" / "screenshots"
CHROMIUM = os.environ.get("PAGESIGHT_CHROMIUM", "/usr/bin/chromium")
DESKTOP = {"width": 1280, "height": 800}
NARROW = {"width": 390, "height": 800}


def _axe_source() -> str | None:
    try:
        import axe_playwright_python
    except ImportError:
        return None
    found = sorted(Path(axe_playwright_python.__file__).parent.rglob("axe.min.js"))
    return found[0].read_text(encoding="utf-8") if found else None


@pytest.fixture(scope="session")
def axe_source() -> str:
    source = _axe_source()
    if source is None:
        pytest.skip("axe.min.js not found (the axe-playwright-python dev wheel): run make setup")
    return source


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """Headless Debian Chromium under Playwright (skipped where either is missing)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: run make setup")
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM}: run make setup (Debian package chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def llm() -> Iterator[tuple[str, Script]]:
    with scripted_server() as server:
        yield server


@pytest.fixture(scope="session")
def service(
    tmp_path_factory: pytest.TempPathFactory, llm: tuple[str, Script]
) -> Iterator[IndexService]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("ui") / "var",
        gateway=GatewayOptions(api_keys=[RECORD_A, RECORD_B]),
        # the streamed answer is what these tests look at, not the calibrated threshold
        answer=AnswerOptions(abstain_threshold=0.0),
        llm=LlmOptions(base_url=llm[0], model="stub-model", max_retries=0, timeout_s=20),
    )
    with warm_service(settings) as svc:
        yield svc


@pytest.fixture(scope="session")
def base_url(service: IndexService) -> Iterator[str]:
    with serving(gateway_app(service)) as url:
        yield url


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
