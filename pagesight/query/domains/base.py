"""What a domain pack is (:mod:`pagesight.query.domains`): the protocol and what it resolves to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from pagesight.core.types import DocumentStructure, StructuralReference

PackMode = Literal["auto", "on", "off"]


@dataclass(frozen=True)
class DomainResolution:
    """Where a pack's reference leads in one document: pages best first, each with its
    confidence (0-1), or why nowhere."""

    pages: list[int]
    confidences: list[float]
    reason: str | None = None


class DomainPack(Protocol):
    """One domain pack (module doc)."""

    @property
    def name(self) -> str:
        """As structures, settings and references spell it ('finance')."""
        ...

    @property
    def route(self) -> str:
        """The route its inferred references rank pages in ('statement'), as traces and
        ``RetrievalOptions.weights`` spell it."""
        ...

    def references(self, query: str) -> list[StructuralReference]:
        """What the query names or implies in this domain (kind ``domain``, ``domain`` the
        pack's name); ``inferred`` ones go to :attr:`route`, named ones to ``reference``."""
        ...

    def resolve(
        self, reference: StructuralReference, structure: DocumentStructure
    ) -> DomainResolution: ...
