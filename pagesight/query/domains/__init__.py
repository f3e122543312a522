"""Domain packs: a domain's knowledge, switched on per document (issue 34).

A pack adds what only documents of one domain need: the ``finance`` pack
(:mod:`pagesight.query.domains.finance`) maps analysis terms to the financial statements they
are computed from ("capex": the cash flow statement) and resolves a statement to its pages, as
route ``statement`` at weight 3. Right for a 10-K, wrong for a manual that says "revenue"; so a
pack acts only on the documents its detector marked at ingest
(``DocumentStructure.domains``, :mod:`pagesight.ingestion.domains`), and a setting per pack
(``PAGESIGHT_RETRIEVAL__DOMAINS__FINANCE``) switches it off or forces it on everywhere:

- ``auto``: the pack resolves in the documents whose mark says ``detected``;
- ``on``: in every document (its title-based resolution works without a mark);
- ``off``: never; the pack's references are not even read out of the query.

A pack is an object with the :class:`~pagesight.query.domains.base.DomainPack` protocol,
registered in :data:`PACKS`; its
references are :class:`~pagesight.core.types.StructuralReference` of kind ``domain`` naming the
pack (the core names no domain), resolved by the pack into pages, each with a confidence
(:class:`DomainResolution`): a low one weighs less in fusion.
"""

from __future__ import annotations

from collections.abc import Mapping

from pagesight.core.types import DocumentStructure, StructuralReference
from pagesight.ingestion.domains import detect_domains
from pagesight.query.domains.base import DomainPack, DomainResolution, PackMode
from pagesight.query.domains.finance import FinancePack

__all__ = [
    "PACKS",
    "DomainPack",
    "DomainResolution",
    "PackMode",
    "enabled",
    "marks_of",
    "references_in",
    "register",
    "resolve",
]


#: Every pack, by name.
PACKS: dict[str, DomainPack] = {}


def register(pack: DomainPack) -> None:
    if pack.name in PACKS:
        raise ValueError(f"a domain pack named {pack.name!r} is already registered")
    PACKS[pack.name] = pack


def mode_of(name: str, modes: Mapping[str, str] | None) -> str:
    return (modes or {}).get(name, "auto")


def references_in(query: str, modes: Mapping[str, str] | None = None) -> list[StructuralReference]:
    """The references of every pack not switched off, pack by pack."""
    found: list[StructuralReference] = []
    for name, pack in PACKS.items():
        if mode_of(name, modes) != "off":
            found.extend(pack.references(query))
    return found


def marks_of(structure: DocumentStructure) -> DocumentStructure:
    """``structure`` with its packs' marks: as stored, or (a structure stored before packs
    and no page text to read) detected from its section titles alone."""
    if structure.domains is not None:
        return structure
    return structure.model_copy(update={"domains": detect_domains({}, structure.sections)})


def enabled(name: str, structure: DocumentStructure, modes: Mapping[str, str] | None) -> bool:
    """Whether pack ``name`` acts on ``structure``'s document under ``modes`` (module doc)."""
    mode = mode_of(name, modes)
    if mode == "off" or name not in PACKS:
        return False
    if mode == "on":
        return True
    mark = marks_of(structure).domain(name)
    return mark is not None and mark.detected


def resolve(reference: StructuralReference, structure: DocumentStructure) -> DomainResolution:
    """``reference`` resolved by its pack (whether the pack acts on the document is the
    caller's to check: :func:`enabled`)."""
    pack = PACKS.get(reference.domain or "")
    if pack is None:
        return DomainResolution([], [], f"no domain pack {reference.domain!r}")
    return pack.resolve(reference, structure)


register(FinancePack())
