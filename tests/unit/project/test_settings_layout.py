"""The settings split by package (core.settings_*) kept every setting as it was.

``tests/fixtures/settings.json`` holds ``Settings().model_dump(mode="json")`` and
``Settings.model_json_schema()`` (every name, default, type, bound and description) as computed
from ``pagesight/core/settings.py`` before it was split. A deliberate change to a setting rewrites
the fixture: ``python -m tests.unit.project.test_settings_layout --write``, and the diff shows
the change.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import pagesight.core.settings
from pagesight.core.settings import Settings

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "settings.json"
SETTINGS_MODULES = (
    "pagesight.core.settings_ingestion",
    "pagesight.core.settings_models",
    "pagesight.core.settings_query",
    "pagesight.core.settings_index",
    "pagesight.core.settings_serving",
    "pagesight.core.settings_database",
)


def _current() -> dict[str, Any]:
    return {"dump": Settings().model_dump(mode="json"), "schema": Settings.model_json_schema()}


def _differences(want: Any, have: Any, path: str = "") -> list[str]:
    if isinstance(want, dict) and isinstance(have, dict):
        out = [f"{path}/{k}: only in the fixture" for k in want.keys() - have.keys()]
        out += [f"{path}/{k}: new" for k in have.keys() - want.keys()]
        for key in want.keys() & have.keys():
            out += _differences(want[key], have[key], f"{path}/{key}")
        return sorted(out)
    return [] if want == have else [f"{path}: {want!r} -> {have!r}"]


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.upper().startswith("PAGESIGHT_"):
            monkeypatch.delenv(key)


@pytest.mark.usefixtures("clean_environment")
def test_every_setting_name_default_and_schema_is_unchanged() -> None:
    want = json.loads(FIXTURE.read_text())
    have = _current()
    assert not _differences(want, have), "\n".join(_differences(want, have))
    # the order of the fields (what a dump and the docs list) is kept too
    assert json.dumps(have) == json.dumps(want)


def test_every_option_model_lives_beside_its_package_and_is_re_exported() -> None:
    exported = {
        name: getattr(pagesight.core.settings, name) for name in pagesight.core.settings.__all__
    }
    models = {n: v for n, v in exported.items() if isinstance(v, type) and issubclass(v, BaseModel)}
    assert Settings.__module__ == "pagesight.core.settings"
    homes = {cls.__module__ for name, cls in models.items() if name != "Settings"}
    assert homes == set(SETTINGS_MODULES)
    for module in SETTINGS_MODULES:
        public = {
            name
            for name, value in vars(sys.modules[module]).items()
            if isinstance(value, type)
            and issubclass(value, BaseModel)
            and value.__module__ == module
        }
        assert public <= set(pagesight.core.settings.__all__), (
            module,
            public - set(pagesight.core.settings.__all__),
        )


@pytest.mark.usefixtures("clean_environment")
def test_environment_nested_options_and_pickling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGESIGHT_PARSE__OCR__KIND", "tesseract")
    monkeypatch.setenv("PAGESIGHT_ANSWER__CORRECTIVE__ENABLED", "true")
    monkeypatch.setenv("PAGESIGHT_GATEWAY__MAX_TOP_K", "7")
    monkeypatch.setenv("PAGESIGHT_DATABASE__POOL_MAX_SIZE", "3")
    settings = Settings()
    assert settings.parse.ocr.kind == "tesseract"
    assert settings.answer.corrective.enabled is True
    assert settings.gateway.max_top_k == 7
    assert settings.database.pool_max_size == 3
    # Ray ships settings to replicas
    assert pickle.loads(pickle.dumps(settings)) == settings  # noqa: S301  # our settings, as Ray pickles them


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    for name in [k for k in os.environ if k.upper().startswith("PAGESIGHT_")]:
        del os.environ[name]
    FIXTURE.write_text(json.dumps(_current(), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {FIXTURE}")
