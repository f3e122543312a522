"""The installed environment is the one constraints.txt describes, and none of the known traps.

Traps verified on this machine (STACK-FACTS): PyPI's torchvision is CUDA-linked and breaks any
import next to CPU torch; transformers >= 5.5 imports torchvision in its Qwen2-VL image
processor; the ``docling`` meta-package pulls torch and torchvision (we use ``docling-slim``);
pymupdf4llm refuses a PyMuPDF of another version. Each check here fails loudly instead.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[2]


def _installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _imports_cleanly(module: str) -> tuple[bool, str]:
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=300
    )
    return proc.returncode == 0, proc.stderr[-2000:]


def test_installed_versions_match_constraints() -> None:
    pins = [
        Requirement(line.split("#")[0].strip())
        for line in (REPO_ROOT / "constraints.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    assert pins, "constraints.txt pins nothing"
    mismatched = []
    for req in pins:
        version = _installed(req.name)
        if version is not None and not req.specifier.contains(version, prereleases=True):
            mismatched.append(f"{req.name}: installed {version}, pinned {req.specifier}")
    assert not mismatched, (
        "environment drifted from constraints.txt (run `make setup`):\n" + "\n".join(mismatched)
    )


def test_docling_meta_package_is_not_installed() -> None:
    assert _installed("docling") is None, (
        "the docling meta-package pulls torch+torchvision; use docling-slim"
    )
    assert _installed("docling-slim") is not None


def test_torchvision_absent_or_importable() -> None:
    if _installed("torchvision") is None:
        return
    ok, err = _imports_cleanly("torchvision")
    assert ok, (
        f"torchvision is installed but does not import (CUDA build next to CPU torch?):\n{err}"
    )


def test_transformers_does_not_need_a_broken_torchvision() -> None:
    version = _installed("transformers")
    if version is None or Version(version) < Version("5.5"):
        return
    ok, err = _imports_cleanly("torchvision")
    assert ok, f"transformers {version} imports torchvision for Qwen2-VL, which fails here:\n{err}"


def test_pymupdf4llm_matches_pymupdf() -> None:
    ok, err = _imports_cleanly("pymupdf4llm")
    assert ok, err


def test_tesseract_and_languages_are_installed() -> None:
    binary = shutil.which("tesseract")
    assert binary, "tesseract is missing: run `make setup` (apt package tesseract-ocr)"
    langs = subprocess.run([binary, "--list-langs"], capture_output=True, text=True).stdout.split()
    for lang in ("eng", "jpn", "osd"):
        assert lang in langs, f"tesseract language data '{lang}' is missing"


@pytest.mark.parametrize(
    "package",
    ["pagesight", *(f"pagesight.{room}" for room in ("core", "models", "index", "store"))],
)
def test_project_packages_are_not_shadowed(package: str) -> None:
    """The one import root is this checkout's (an older install of the package, or another
    distribution's ``pagesight``, would shadow it)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    assert Path(spec.origin).resolve().is_relative_to(REPO_ROOT), (
        f"{package} resolves to {spec.origin}"
    )
