"""Who may read what: the access filter applied inside every candidate query (never after
retrieval), and to every record read outside the index."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from pagesight.core.document import Document

#: The ACL principal that lets every principal of the tenant read a document.
EVERYONE = "*"


class AccessFilter(BaseModel):
    """Who is asking: applied inside every candidate query, never after retrieval.

    A point is visible when its ``tenant`` matches, its ``acl`` shares a principal with
    ``principals`` (or contains :data:`EVERYONE`), and its ``valid_until`` is unset or not
    before ``now``. ``principals=None`` skips the ACL check (tenant administrators, batch jobs),
    never the tenant check.
    """

    tenant: str
    principals: list[str] | None = None
    now: datetime | None = None
    doc_ids: list[str] | None = None

    def admits(self, tenant: str, acl: list[str], valid_until: datetime | None) -> bool:
        """The same rule for a record read outside the index (a catalog document, a job, an
        audit entry) as the index applies to points: tenant, ACL (an empty ``acl`` is
        :data:`EVERYONE`, as ingestion writes it), validity at ``now``."""
        if tenant != self.tenant:
            return False
        if self.principals is not None:
            allowed = set(acl) or {EVERYONE}
            if EVERYONE not in allowed and not allowed.intersection(self.principals):
                return False
        if valid_until is not None:
            now = self.now or datetime.now(valid_until.tzinfo)
            if valid_until.timestamp() < now.timestamp():
                return False
        return True

    def admits_document(self, document: Document) -> bool:
        return self.admits(document.tenant, document.acl, document.valid_until)
