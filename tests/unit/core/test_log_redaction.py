"""Logs never hold a secret: the JSON formatter redacts keys wherever a client may put them."""

from __future__ import annotations

import json
import logging

import pytest

from pagesight.core.tracing import REDACTED, JsonLogFormatter, redact_secrets

KEY = "ps_" + "Ab3-_x" * 7 + "Q"


@pytest.mark.parametrize(
    "line",
    [
        f'127.0.0.1:1 - "GET /v1/documents?api_key={KEY}&x=1 HTTP/1.1" 401',
        f'127.0.0.1:1 - "GET /v1/search?q=a&KEY={KEY} HTTP/1.1" 401',
        f'"GET /v1/documents?token={KEY}" 401',
        f'"GET /v1/documents?x=1;access_token={KEY}" 401',
        f"Authorization: Bearer {KEY}",
        f"authorization: bearer {KEY[3:]}",
        f"no key named, but the key itself: {KEY}.",
        f'{{"api_key": "{KEY}"}}',
    ],
)
def test_secrets_are_redacted(line: str) -> None:
    redacted = redact_secrets(line)
    assert KEY not in redacted and KEY[3:] not in redacted, redacted
    assert REDACTED in redacted


def test_other_parameters_and_text_are_kept() -> None:
    line = '"GET /v1/documents?limit=5&monkey=1&tokens=7 HTTP/1.1" 200 ps_short'
    assert redact_secrets(line) == line


def test_the_formatter_redacts_message_arguments_extras_and_tracebacks() -> None:
    try:
        raise ValueError(f"bad key {KEY}")
    except ValueError:
        import sys

        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s" %d',
        ("1.2.3.4", f"/?key={KEY}", 401),
        exc_info,
    )
    record.url = f"/v1/x?api_key={KEY}"
    line = JsonLogFormatter().format(record)
    assert KEY not in line
    parsed = json.loads(line)
    assert parsed["message"] == f'1.2.3.4 - "/?key={REDACTED}" 401'
    assert parsed["url"] == f"/v1/x?api_key={REDACTED}"
