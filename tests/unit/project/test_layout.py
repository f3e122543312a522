"""The layout of DESIGN.md section 3, checked on the source.

The direction of imports between the rooms is import-linter's (``[tool.importlinter]`` in
pyproject.toml, run by ``make lint``); here it is proven to bite: the tree keeps the contracts,
and a copy of it with one wrong-way import breaks them. The rest is what import-linter does not
check:

- no module imports another that imports it back (within a room too);
- nothing the query engine pulls in at run time is an HTTP server or Ray;
- no module is over :data:`MAX_MODULE_LINES` lines, except those in :data:`OVERSIZED` (each
  with the reason it is not split yet);
- the rooms README "Layout" and docs/architecture.md name are the tree's packages.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
ROOT = REPO / "pagesight"
#: The rooms, from the bottom up (pyproject.toml's layers contract says which may import which).
ROOMS = (
    "core",
    "models",
    "index",
    "store",
    "ingestion",
    "query",
    "api",
    "services",
    "gateway",
    "entrypoints",
)
FORBIDDEN_IN_QUERY = ("fastapi", "starlette", "ray", "uvicorn")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
#: Rooms small enough to read (issue 32, item 7): lines per module, at most.
MAX_MODULE_LINES = 800
#: The modules over that, each with why it is not split yet; one that shrinks leaves the list.
OVERSIZED: dict[str, str] = {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in the file (TYPE_CHECKING blocks and function
    bodies included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    return {
        name: {m for m in _imports(path) if m in files and m != name}
        for name, path in files.items()
    }


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """import-linter with the project's contracts, on the ``pagesight`` found first under
    ``cwd`` (the tree, or a copy of it)."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_tree_keeps_the_layer_contracts() -> None:
    run = _lint_imports(REPO)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout, run.stdout


@pytest.mark.parametrize(
    ("module", "wrong_import", "contract"),
    [
        ("core/ids.py", "import pagesight.gateway.app", "rooms:"),
        ("query/fusion.py", "import fastapi", "no HTTP server, no Ray"),
        ("services/index_service.py", "import pagesight.gateway.auth", "rooms:"),
        ("api/models.py", "import pagesight.store.tables", "core and pydantic only"),
    ],
)
def test_a_wrong_way_import_breaks_the_contracts(
    tmp_path: Path, module: str, wrong_import: str, contract: str
) -> None:
    shutil.copytree(ROOT, tmp_path / "pagesight", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "pagesight" / module
    target.write_text(target.read_text() + f"\n{wrong_import}  # the wrong way\n")
    run = _lint_imports(tmp_path)
    assert run.returncode != 0, run.stdout
    broken = [line for line in run.stdout.splitlines() if line.endswith("BROKEN")]
    assert broken, run.stdout
    assert contract in run.stdout.split("Contracts:")[0], run.stdout


def test_query_engine_pulls_in_no_http_or_ray_at_run_time() -> None:
    probe = (
        "import sys, pkgutil, importlib, pagesight.query as q\n"
        "for m in pkgutil.iter_modules(q.__path__):\n"
        "    importlib.import_module('pagesight.query.' + m.name)\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN_IN_QUERY!r}]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=REPO, check=True, timeout=300)


def test_no_import_cycles() -> None:
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_no_module_is_over_the_line_limit() -> None:
    sizes = {
        str(path.relative_to(REPO)): len(path.read_text().splitlines())
        for path in sorted(ROOT.rglob("*.py"))
    }
    over = {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES}
    unexpected = {path: n for path, n in over.items() if path not in OVERSIZED}
    assert not unexpected, f"over {MAX_MODULE_LINES} lines, split them: {unexpected}"
    # the exceptions are real (a module that got small enough leaves the list)
    assert set(over) == set(OVERSIZED), {p: sizes.get(p) for p in OVERSIZED.keys() - over.keys()}


def test_unit_tests_are_grouped_by_room() -> None:
    """``tests/unit/<room>/`` for each room's tests, ``bench`` and ``project`` (repository-wide
    checks) beside them; the machine's own checks are in ``tests/environment``."""
    unit = REPO / "tests" / "unit"
    loose = sorted(p.name for p in unit.glob("test_*.py"))
    assert not loose, loose
    folders = {p.name for p in unit.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= {*ROOMS, "bench", "project"}, folders - {*ROOMS, "bench", "project"}


def test_the_rooms_are_the_packages_of_the_tree() -> None:
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages == set(ROOMS), packages ^ set(ROOMS)
    layers = re.findall(r'"(pagesight\.[a-z]+(?:\s*[:|]\s*pagesight\.[a-z]+)*)"', _pyproject())
    named = {m.split(".")[1] for layer in layers for m in re.split(r"\s*[:|]\s*", layer)}
    assert named == set(ROOMS), named ^ set(ROOMS)


@pytest.mark.parametrize("document", ["README.md", "docs/architecture.md"])
def test_the_docs_name_every_room(document: str) -> None:
    """Each room appears in the document's layout as ``pagesight/<room>/``, and no other does."""
    text = (REPO / document).read_text()
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"pagesight/([a-z_]+)/", section))
    assert named == set(ROOMS), named ^ set(ROOMS)


def _pyproject() -> str:
    return (REPO / "pyproject.toml").read_text().split("[tool.importlinter]", 1)[1]
