"""Copy pagesight/entrypoints/serve/gpu-cluster.yaml into k8s/rayservice.yaml's serveConfigV2 (`make
k8s-sync`).

The Serve config lives in one file (`pagesight serve --config` and the image read it), but KubeRay
takes it only inline, as the RayService's `serveConfigV2` string. This rewrites that block scalar
by text, so the rest of rayservice.yaml (comments, anchors, layout) stays as written; a YAML
round trip would lose all three. k8s/validate.py fails while the copy is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "rayservice.yaml"
SERVE_CONFIG = HERE.parent / "pagesight" / "entrypoints" / "serve" / "gpu-cluster.yaml"
KEY = "serveConfigV2:"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def render(manifest: str, config: str) -> str:
    """`manifest` with its serveConfigV2 block replaced by `config`, verbatim.

    The block is the key's line and every following line that is blank or indented deeper than
    the key (trailing blank lines belong to what follows). Raises ValueError when there is no
    such key or when the result would not parse back to exactly `config`.
    """
    lines = manifest.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.lstrip(" ").startswith(KEY)]
    if len(starts) != 1:
        raise ValueError(f"expected one '{KEY}' line, found {len(starts)}")
    start = starts[0]
    indent = _indent(lines[start])
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    # Chomping keeps the file's own ending: one newline (clip), none (-) or several (+).
    chomp = "-" if not config.endswith("\n") else "+" if config.endswith("\n\n") else ""
    body = [
        " " * (indent + 2) + line if line.strip() else "\n"
        for line in config.splitlines(keepends=True)
    ]
    if body and not body[-1].endswith("\n"):
        body[-1] += "\n"
    indicator = "2" if config.startswith(" ") else ""  # needed when the text starts indented
    head = f"{' ' * indent}{KEY} |{indicator}{chomp}\n"
    result = "".join([*lines[:start], head, *body, *lines[end:]])
    if embedded(result) != config:
        raise ValueError("the Serve config cannot be embedded verbatim (whitespace-only lines?)")
    return result


def embedded(manifest: str) -> str | None:
    """The serveConfigV2 string of the RayService in `manifest` (None if there is none)."""
    for doc in yaml.safe_load_all(manifest):
        if isinstance(doc, dict) and doc.get("kind") == "RayService":
            value = (doc.get("spec") or {}).get("serveConfigV2")
            return value if isinstance(value, str) else None
    return None


def main() -> int:
    old = MANIFEST.read_text()
    new = render(old, SERVE_CONFIG.read_text())
    if new == old:
        print(f"{MANIFEST.name}: serveConfigV2 already equals {SERVE_CONFIG.name}")
    else:
        MANIFEST.write_text(new)
        print(f"{MANIFEST.name}: serveConfigV2 rewritten from {SERVE_CONFIG.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
