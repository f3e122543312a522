"""Stage error codes and the one exception type that carries them.

Every failure that reaches a user names the stage it happened in and a stable code, so a client
can tell "your PDF is encrypted" from "our OCR engine crashed" without parsing messages.
"""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    """Where in the ingestion or query flow an error happened."""

    INPUT = "input"
    RENDER = "render"
    PARSE = "parse"
    OCR = "ocr"
    VLM = "vlm"
    CHUNK = "chunk"
    EMBED = "embed"
    INDEX = "index"
    QUERY = "query"
    AUTH = "auth"
    GATEWAY = "gateway"
    DATABASE = "database"


class ErrorCode(StrEnum):
    """Stable, documented error codes (DESIGN.md section 2)."""

    UNSUPPORTED_FORMAT = "UNSUPPORTED_FORMAT"
    NOT_FOUND = "NOT_FOUND"
    ENCRYPTED = "ENCRYPTED"
    CORRUPT = "CORRUPT"
    TOO_LARGE = "TOO_LARGE"
    TIMEOUT = "TIMEOUT"
    OCR_FAILED = "OCR_FAILED"
    VLM_FAILED = "VLM_FAILED"
    EMBED_FAILED = "EMBED_FAILED"
    INDEX_FAILED = "INDEX_FAILED"
    INTERNAL = "INTERNAL"
    # gateway
    UNAUTHORIZED = "UNAUTHORIZED"
    FORBIDDEN = "FORBIDDEN"
    CONFLICT = "CONFLICT"
    ROUTE_UNAVAILABLE = "ROUTE_UNAVAILABLE"
    INVALID_REQUEST = "INVALID_REQUEST"
    #: a request body that is not JSON at all (its line and column are in the message)
    INVALID_JSON = "INVALID_JSON"
    RATE_LIMITED = "RATE_LIMITED"
    SOURCE_NOT_ALLOWED = "SOURCE_NOT_ALLOWED"
    UNAVAILABLE = "UNAVAILABLE"
    #: PostgreSQL stopped answering a running service (it was reachable when the process
    #: started): transient, so the gateway answers 503 with ``Retry-After``
    DATABASE_UNAVAILABLE = "DATABASE_UNAVAILABLE"


class PageSightError(Exception):
    """A failure with a stage and an error code; the message is for the person who sent the file."""

    def __init__(self, code: ErrorCode, stage: Stage, message: str) -> None:
        super().__init__(f"[{stage.value}/{code.value}] {message}")
        self.code = code
        self.stage = stage
        self.message = message

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code.value, "stage": self.stage.value, "message": self.message}

    def __reduce__(self) -> tuple[type[PageSightError], tuple[ErrorCode, Stage, str]]:
        # Keeps the code and stage when the error crosses a process boundary (parse isolation).
        return (type(self), (self.code, self.stage, self.message))
