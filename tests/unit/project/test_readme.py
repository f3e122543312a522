"""The README's promises that a script can check: its links land on its own headings, and every
``make`` target it names exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
README = (REPO / "README.md").read_text()


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _make_targets() -> set[str]:
    makefile = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):", makefile, re.MULTILINE))


def test_every_internal_link_lands_on_a_heading() -> None:
    anchors = {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", README, re.MULTILINE)}
    links = re.findall(r"\]\(#([^)]+)\)", README)
    assert links, "the feature list links to its sections"
    missing = sorted(set(links) - anchors)
    assert not missing, missing


def test_every_make_target_named_exists() -> None:
    named = set(re.findall(r"`make ([a-z][\w-]*)", README))
    named |= set(re.findall(r"^\s+make ([a-z][\w-]*)", README, re.MULTILINE))
    assert {"demo", "test", "setup", "lint"} <= named, named
    missing = sorted(named - _make_targets())
    assert not missing, missing


def test_the_quick_start_commands_are_make_targets() -> None:
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^\s+make (\S+)", quick, re.MULTILINE)
    assert commands, quick
    assert set(commands) <= _make_targets(), set(commands) - _make_targets()
