"""Which route a query takes: ``auto`` picks one per query (DESIGN.md section 4).

Rules, not a model: they must hold on documents nobody tuned them for, and they are cheap
enough to run before every search.
"""

from __future__ import annotations

import re

from pagesight.core.types import RouteName

# Identifiers, codes and quoted strings are found by exact terms, not by meaning.
_CODE_TOKEN = re.compile(
    r"\b(?=[A-Za-z0-9_./-]*\d)(?=[A-Za-z0-9_./-]*[A-Za-z])[A-Za-z0-9_./-]{4,}\b"
)
_QUOTED = re.compile(r"\"[^\"]{2,}\"|「[^」]{2,}」")
# Questions about how a page looks, or about numbers in charts and tables, lean visual.
_VISUAL_WORDS = re.compile(
    r"\b(chart|graph|plot|figure|fig\.|diagram|table|slide|image|picture|photo|map|logo|"
    r"axis|legend|bar|pie|trend|percent(age)?|share)s?\b|%|グラフ|図|表|写真|スライド",
    re.IGNORECASE,
)


def choose_route(query: str, visual_available: bool) -> RouteName:
    """``auto``: codes, ids and quoted phrases -> keyword; chart/table/figure words and
    percentages -> hybrid (when a page model is configured); everything else -> text."""
    words = query.split()
    if _QUOTED.search(query) or (_CODE_TOKEN.search(query) and len(words) <= 4):
        return RouteName.KEYWORD
    if visual_available and _VISUAL_WORDS.search(query):
        return RouteName.HYBRID
    return RouteName.TEXT
