"""bench/eval_retrieval.py's pure parts: neutral names, the ablation map, the fixed halves."""

from __future__ import annotations

import hashlib
from pathlib import Path

from bench.eval_retrieval import STRUCTURE_ROUTES, ablation_map, half_of, neutral_copies


def test_neutral_copies_are_named_by_their_content(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    pdf = source / "ACME_2022_10K.pdf"
    pdf.write_bytes(b"%PDF-1.7 acme")
    copies = neutral_copies({"ACME_2022_10K.pdf": pdf}, tmp_path / "neutral")
    target = copies["ACME_2022_10K.pdf"]
    assert target.name == hashlib.sha256(b"%PDF-1.7 acme").hexdigest() + ".pdf"
    assert target.read_bytes() == pdf.read_bytes()
    assert "ACME" not in str(target)
    assert neutral_copies({"ACME_2022_10K.pdf": pdf}, tmp_path / "neutral") == copies  # again


def test_structure_ablation_turns_off_every_structure_route() -> None:
    assert ablation_map("structure,document+count") == {
        "structure": STRUCTURE_ROUTES,
        "document+count": ("document", "count"),
    }
    assert {"document", "count", "statement", "reference"} <= set(STRUCTURE_ROUTES)


def test_halves_depend_on_the_name_only() -> None:
    assert half_of("a.pdf") == half_of("a.pdf")
    assert {half_of(f"{n}.pdf") for n in range(20)} == {"a", "b"}
