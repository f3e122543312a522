"""Which questions name the document's own structure: the split issue 16 reports by.

Committed before the reference parser exists, so the split cannot be tuned to what the parser
happens to catch. A question "has a structural reference" when it names a page, slide, figure,
table, section, chapter, appendix, note or a position in the document (first/last/second last
page, the cover), in English or Japanese. The patterns are generic forms of how documents refer
to themselves; nothing here names an evaluation document or question.

Measured when committed: 12 of the 212 questions of ../shared/eval/questions.jsonl, none of the
102 Japanese ones.

    .venv/bin/python bench/structural_refs.py ../shared/eval/questions.jsonl \
        ../shared/eval/ja/questions.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

# a number as documents print it: 17, 2.1, 4b; or a roman numeral / letter after a space
_NUMBER = r"(?:\s*\d+(?:\.\d+)*[a-z]?\b|\s+(?:[ivxlc]+|[a-z])\b)"
STRUCTURAL_REFERENCE = re.compile(
    "|".join(
        [
            # page 17, p. 17, pp. 3-5, pages 3 to 5, slide 31
            rf"\b(?:page|pages|pp?\.|slide|slides){_NUMBER}",
            # Figure 3, Fig. 4b, Table 2.1, Section 5, Chapter II, Note 7, Appendix B, Exhibit 10
            rf"\b(?:figure|fig\.|table|section|chapter|note|appendix|exhibit|equation|eq\.)"
            rf"{_NUMBER}",
            # positions: the first/last/second last/final page or slide, the cover, the appendix
            r"\b(?:first|last|final|second(?:[- ]to[- ]|\s)last|next|previous)\s+"
            r"(?:page|slide)s?\b",
            r"\bthe\s+(?:front\s+|back\s+)?cover\b|\bcover\s+(?:page|slide)\b",
            r"\bthe\s+appendix\b",
            # a section named by its title
            r"\bsection\s+(?:titled|called|named|on|about)\b",
            r"\bin\s+the\s+[\"“'][^\"”']{2,80}[\"”']\s+section\b",
            # Japanese: 3ページ, 3頁, 第2章, 第3節, 図3, 表2, 付録, 表紙, 最後のページ
            r"\d+\s*(?:ページ|頁)",
            r"第\s*[\d一二三四五六七八九十]+\s*(?:章|節|部)",
            r"(?:図|表)\s*[\d０-９]+",
            r"付録|表紙|最後のページ|最初のページ",
        ]
    ),
    re.IGNORECASE,
)


def has_structural_reference(question: str) -> bool:
    return STRUCTURAL_REFERENCE.search(question) is not None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("questions", type=Path, nargs="+", help="questions.jsonl files")
    ap.add_argument("--show", type=int, default=0, help="print this many matches per file")
    args = ap.parse_args()
    report = {}
    for path in args.questions:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        with_ref = [r for r in rows if has_structural_reference(r["question"])]
        kinds = Counter(r.get("kind") for r in with_ref)
        report[str(path)] = {"n": len(rows), "with_reference": len(with_ref), "by_kind": kinds}
        for row in with_ref[: args.show]:
            print(f"{path.name}: {row['question'][:140]}")
    print(json.dumps(report, indent=1, default=dict))


if __name__ == "__main__":
    main()
