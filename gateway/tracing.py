"""Trace ids and structured logs.

Every request gets a trace id: the trace-id part of a W3C ``traceparent`` header when the
caller sends one, else ``X-Request-ID``, else a fresh one. It is set in a context variable for
the request, passed as an argument across Ray deployments (which set it again on their side),
returned in ``X-Trace-Id`` and in search responses, and written into every log line by
:class:`JsonLogFormatter`, so one id finds a request's lines in every replica's logs.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
import uuid
from typing import Any

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

current_trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "pagesight_trace_id", default=None
)


def new_trace_id() -> str:
    return uuid.uuid4().hex


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


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, trace_id, and any ``extra``."""

    _STANDARD = frozenset(
        logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys() | {"message", "asctime"}
    )

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": current_trace_id.get(),
        }
        for key, value in record.__dict__.items():
            if key not in self._STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def configure_json_logging(level: int = logging.INFO) -> None:
    """Route the root logger (and so every PageSight logger) to JSON lines on stderr."""
    root = logging.getLogger()
    if any(isinstance(h.formatter, JsonLogFormatter) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    root.addHandler(handler)
    root.setLevel(level)
