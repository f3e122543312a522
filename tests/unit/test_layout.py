"""The layout rules of DESIGN.md section 3, checked on the source, type-checking imports and
imports inside functions included:

- ``core`` imports none of the other packages;
- ``api`` (what the gateway and the services share) imports only ``core``, pydantic and the
  standard library;
- ``store`` (catalog, traces, keys) imports no package of ours but ``core``;
- the query engine is plain Python: no HTTP, no Ray, never the gateway or the services;
- ``services`` never imports the gateway, except the entry points that mount it or call it
  (:data:`SERVICES_ENTRY_POINTS`, which move to their own package later);
- no module imports another that imports it back;
- no module is over :data:`MAX_MODULE_LINES` lines, except those in :data:`OVERSIZED` (each
  with the reason it is not split yet).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = (
    "core",
    "models",
    "index",
    "store",
    "ingestion",
    "query",
    "api",
    "gateway",
    "services",
)
FORBIDDEN_IN_QUERY = ("fastapi", "starlette", "ray", "uvicorn")
#: What ``api`` may import besides the standard library and itself.
ALLOWED_IN_API = ("core", "pydantic")
#: The modules of ``services`` that may import the gateway: the command line (its server
#: command builds the gateway; its remote mode is the gateway's Python client) and the Ray
#: Serve application builder (it mounts the gateway as the ingress).
SERVICES_ENTRY_POINTS = ("services.cli", "services.cli_session", "services.app")
#: Rooms small enough to read (issue 32, item 7): lines per module, at most.
MAX_MODULE_LINES = 800
#: The modules over that, each with why it is not split yet; one that shrinks leaves the list.
OVERSIZED = {
    "services/cli.py": "the command line; split when the entry points move to their own package",
    "query/answer.py": "the answer pipeline; split after the extractive-answer work under way in "
    "it (query.lead, query.answer_units, query.quotes) lands",
}


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


def _package_imports(package: str) -> list[tuple[str, str]]:
    """(module, imported module) for every import in every module of ``package``."""
    return [
        (_module_name(path), module)
        for path in sorted((REPO / package).rglob("*.py"))
        for module in sorted(_imports(path))
    ]


def _top(module: str) -> str:
    return module.split(".")[0]


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    return {
        name: {m for m in _imports(path) if m in files and m != name}
        for name, path in files.items()
    }


def test_query_engine_imports_no_http_or_ray() -> None:
    for path in (REPO / "query").rglob("*.py"):
        for module in _imports(path):
            assert module.split(".")[0] not in FORBIDDEN_IN_QUERY, (path.name, module)
            assert not module.startswith(("gateway", "services")), (path.name, module)
    # and nothing it pulls in at run time does either
    probe = (
        "import sys, pkgutil, importlib, query\n"
        "for m in pkgutil.iter_modules(query.__path__):\n"
        "    importlib.import_module('query.' + m.name)\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN_IN_QUERY!r}]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=REPO, check=True, timeout=300)


def test_core_imports_no_other_package() -> None:
    others = set(PACKAGES) - {"core"}
    bad = [(m, i) for m, i in _package_imports("core") if _top(i) in others]
    assert not bad, bad


def test_store_imports_only_core() -> None:
    """State sits beside the index: ``core`` below it, every other package above."""
    others = set(PACKAGES) - {"core", "store"}
    bad = [(m, i) for m, i in _package_imports("store") if _top(i) in others]
    assert not bad, bad


def test_api_imports_only_core_and_pydantic() -> None:
    allowed = {"api", "__future__", *ALLOWED_IN_API, *sys.stdlib_module_names}
    bad = [(m, i) for m, i in _package_imports("api") if _top(i) not in allowed]
    assert not bad, bad


def test_services_never_import_the_gateway() -> None:
    bad = [
        (m, i)
        for m, i in _package_imports("services")
        if _top(i) == "gateway" and m not in SERVICES_ENTRY_POINTS
    ]
    assert not bad, bad
    # the exceptions are real (an entry point that stopped importing the gateway leaves the list)
    importing = {m for m, i in _package_imports("services") if _top(i) == "gateway"}
    assert importing == set(SERVICES_ENTRY_POINTS), importing


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
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
    }
    over = {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES}
    unexpected = {path: n for path, n in over.items() if path not in OVERSIZED}
    assert not unexpected, f"over {MAX_MODULE_LINES} lines, split them: {unexpected}"
    # the exceptions are real (a module that got small enough leaves the list)
    assert set(over) == set(OVERSIZED), {p: sizes.get(p) for p in OVERSIZED.keys() - over.keys()}
