"""Trace ids and structured logs, for every process of the service.

Every request gets a trace id (the gateway takes it from the request's headers:
:func:`pagesight.gateway.tracing.trace_id_from_headers`). It is set in :data:`current_trace_id` for
the request, passed as an argument across Ray deployments (the index service sets it again on its
side), returned in ``X-Trace-Id`` and in search responses, and written into every log line by
:class:`JsonLogFormatter`, so one id finds a request's lines in every replica's logs.

Logs never hold a secret: every line goes through :func:`redact_secrets` (a client may put its
key in a query string, where an access log would copy it), and no handler logs headers.
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

current_trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "pagesight_trace_id", default=None
)


def new_trace_id() -> str:
    return uuid.uuid4().hex


#: Query-string (or form) parameters whose values are secrets, as clients spell them.
SECRET_PARAMETERS = (
    "api_key",
    "apikey",
    "api-key",
    "key",
    "token",
    "access_token",
    "auth",
    "password",
    "secret",
)
REDACTED = "[redacted]"
_SECRET_PARAMETER = re.compile(
    rf"([?&;](?:{'|'.join(re.escape(p) for p in SECRET_PARAMETERS)})=)[^&;#\s\"']*", re.IGNORECASE
)
#: A PageSight API key anywhere in a line (``ps_`` and 43 URL-safe characters), and a bearer
#: credential after ``Bearer``.
_API_KEY = re.compile(r"\bps_[A-Za-z0-9_\-]{16,}")
_BEARER = re.compile(r"(\bBearer\s+)[^\s\"',;]+", re.IGNORECASE)


def redact_secrets(text: str) -> str:
    """``text`` with secret query parameters, API keys and bearer credentials replaced by
    ``[redacted]``. Cheap enough for every log line (three regular expressions, no parsing)."""
    if "=" in text:
        text = _SECRET_PARAMETER.sub(rf"\1{REDACTED}", text)
    if "ps_" in text:
        text = _API_KEY.sub(REDACTED, text)
    if "earer" in text:
        text = _BEARER.sub(rf"\1{REDACTED}", text)
    return text


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
            "message": redact_secrets(record.getMessage()),
            "trace_id": current_trace_id.get(),
        }
        for key, value in record.__dict__.items():
            if key not in self._STANDARD and not key.startswith("_") and key != "color_message":
                line[key] = redact_secrets(value) if isinstance(value, str) else value
        if record.exc_info:
            line["exc_info"] = redact_secrets(self.formatException(record.exc_info))
        return json.dumps(line, default=str, ensure_ascii=False)


def configure_json_logging(level: int = logging.INFO, *, exclusive: bool = False) -> None:
    """Route the root logger (and so every PageSight logger) to JSON lines on stderr.
    ``exclusive``: the other handlers of the root logger go, so that each line is written once
    (a server started from the command line would otherwise write it in both formats)."""
    root = logging.getLogger()
    if exclusive:
        for handler in [h for h in root.handlers if not isinstance(h.formatter, JsonLogFormatter)]:
            root.removeHandler(handler)
    if any(isinstance(h.formatter, JsonLogFormatter) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    root.addHandler(handler)
    root.setLevel(level)
