"""Who is calling: what an API key (:mod:`pagesight.gateway.auth`) or the local command line stands
for.

Every method of the index service takes a :class:`Caller` and runs with its tenant, ACL
principals and scopes, whichever way it was reached (HTTP, a Ray handle, the CLI in process).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import KeyScope


@dataclass(frozen=True)
class Caller:
    """An authenticated client: the key's id, its tenant, ACL principals and scopes.

    ``principals=None`` reads every document of the tenant: only the local command line acts
    so (the machine's administrator); an API key always has a list, possibly empty."""

    key_id: str
    tenant: str
    principals: list[str] | None = field(default_factory=list)
    max_concurrency: int | None = None
    scopes: frozenset[str] = frozenset({"read", "write"})

    def require(self, scope: KeyScope) -> None:
        """Raise FORBIDDEN unless the key holds ``scope``."""
        if scope not in self.scopes:
            raise PageSightError(
                ErrorCode.FORBIDDEN, Stage.AUTH, f"this API key lacks the {scope!r} scope"
            )
