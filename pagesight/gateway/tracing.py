"""The trace id of an HTTP request, from its headers.

The trace-id part of a W3C ``traceparent`` header when the caller sends one, else
``X-Request-ID``, else a fresh one; the id then travels as
:data:`pagesight.core.tracing.current_trace_id` (see :mod:`pagesight.core.tracing`).
"""

from __future__ import annotations

import re

from pagesight.core.tracing import new_trace_id

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def trace_id_from_headers(traceparent: str | None, request_id: str | None) -> str:
    """The caller's trace id when it sent a valid one, else a new one (never trust junk:
    the id ends up in logs and storage keys)."""
    if traceparent:
        match = _TRACEPARENT.match(traceparent.strip().lower())
        if match and match.group(1) != "0" * 32:
            return match.group(1)
    if request_id and _REQUEST_ID.match(request_id.strip()):
        return request_id.strip()
    return new_trace_id()
