"""Documents and their ingest jobs: upload (or URI), jobs, list, detail, structure, delete,
page images, and the audit log of deletes and replacements.

Uploads, replacements and deletes need the key's ``write`` scope (checked before an upload is
read). A document the caller may not read answers exactly like a missing one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from pagesight.api.models import (
    API_PREFIX,
    AuditList,
    Deleted,
    DocumentDetail,
    DocumentList,
    JobAccepted,
    JobList,
    UriIngest,
)
from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.ids import DOC_ID_PATTERN, check_doc_id
from pagesight.core.types import Document, DocumentStructure, JobState, JobStatus
from pagesight.gateway.dependencies import (
    CallerDep,
    DocIdPath,
    OpaqueIdPath,
    OptionsDep,
    ServiceDep,
    TimedDep,
    not_found,
)

router = APIRouter(tags=["documents"])

#: Multipart form limits: text fields (doc_id, acl, valid_until, replace, password).
_MAX_ACL_ENTRIES = 100
_MAX_FIELD_CHARS = 4096
#: The upload's request body as the schema shows it (the handler reads it itself: either form).
_UPLOAD_BODY = {
    "requestBody": {
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "doc_id": {
                            "type": "string",
                            "pattern": DOC_ID_PATTERN,
                            "description": "replace (or create) this document",
                        },
                        "replace": {
                            "type": "boolean",
                            "description": "replace the one document of this file name",
                        },
                        "acl": {"type": "string", "description": "comma-separated"},
                        "valid_until": {"type": "string", "format": "date-time"},
                        "password": {
                            "type": "string",
                            "format": "password",
                            "description": "opens an encrypted PDF; never stored",
                        },
                    },
                }
            },
            "application/json": {"schema": UriIngest.model_json_schema()},
        },
        "required": True,
    }
}


@router.post(
    f"{API_PREFIX}/documents",
    status_code=202,
    response_model=JobAccepted,
    openapi_extra=_UPLOAD_BODY,
)
async def add_document(
    request: Request,
    caller: CallerDep,
    service: ServiceDep,
    options: OptionsDep,
    timed: TimedDep,
) -> JobAccepted:
    """Upload a file (multipart ``file``) or name a URI on the allowlist (JSON ``uri``);
    ingestion runs in the background: poll ``status_url``.

    Needs the ``write`` scope. An upload without ``doc_id`` is a new document unless the
    same file name with the same bytes is already there (``unchanged``); ``doc_id`` (or
    ``replace=true``: the one document of this file name) replaces explicitly."""
    trace_id = request.state.trace_id
    caller.require("write")
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("application/json"):
        uri_request = _parse_json(UriIngest, await request.body())
        done = await timed(service.submit_uri(caller, uri_request, trace_id))
    elif content_type.startswith("multipart/form-data"):
        filename, data, fields = await _read_upload(request, options.max_upload_bytes)
        doc_id = fields.get("doc_id") or None
        done = await timed(
            service.submit_upload(
                caller,
                filename,
                data,
                doc_id=check_doc_id(doc_id) if doc_id is not None else None,
                acl=_parse_acl(fields.get("acl", "")),
                valid_until=_parse_datetime(fields.get("valid_until")),
                replace=_parse_bool("replace", fields.get("replace")),
                password=fields.get("password") or None,
                trace_id=trace_id,
            )
        )
    else:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.GATEWAY,
            "send multipart/form-data with a 'file' field, or JSON with a 'uri'",
        )
    return JobAccepted(
        job_id=done.job.job_id,
        doc_id=done.job.doc_id,
        state=done.job.state.value,
        outcome=done.outcome,
        status_url=f"{API_PREFIX}/jobs/{done.job.job_id}",
    )


@router.get(f"{API_PREFIX}/jobs/{{job_id}}", response_model=JobStatus)
async def get_job(
    job_id: OpaqueIdPath, caller: CallerDep, service: ServiceDep, timed: TimedDep
) -> JobStatus:
    job = await timed(service.job(caller, job_id))
    if job is None:
        raise not_found(f"job {job_id!r}")
    return job


@router.get(f"{API_PREFIX}/jobs", response_model=JobList)
async def list_jobs(
    caller: CallerDep,
    service: ServiceDep,
    timed: TimedDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    state: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
) -> JobList:
    """The newest jobs the key may see: its own, and those whose ACL admits it."""
    return JobList(jobs=await timed(service.jobs(caller, limit, state)))


@router.get(f"{API_PREFIX}/audit", response_model=AuditList)
async def audit_log(
    caller: CallerDep,
    service: ServiceDep,
    timed: TimedDep,
    doc_id: Annotated[str | None, Query(pattern=DOC_ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditList:
    """Deletes and replacements of the tenant's documents, newest first: who (key id),
    what (document, versions), when; entries of documents the key may not read are left
    out."""
    return AuditList(entries=await timed(service.audit(caller, doc_id, limit)))


@router.get(f"{API_PREFIX}/documents", response_model=DocumentList)
async def list_documents(caller: CallerDep, service: ServiceDep, timed: TimedDep) -> DocumentList:
    docs: list[Document] = await timed(service.documents(caller))
    return DocumentList(documents=docs)


@router.get(f"{API_PREFIX}/documents/{{doc_id}}", response_model=DocumentDetail)
async def get_document(
    doc_id: DocIdPath, caller: CallerDep, service: ServiceDep, timed: TimedDep
) -> DocumentDetail:
    detail = await timed(service.document(caller, doc_id))
    if detail is None:
        raise not_found(f"document {doc_id!r}")
    return detail


@router.get(f"{API_PREFIX}/documents/{{doc_id}}/structure", response_model=DocumentStructure)
async def get_structure(
    doc_id: DocIdPath, caller: CallerDep, service: ServiceDep, timed: TimedDep
) -> DocumentStructure:
    """The document as it names itself: its pages (with their printed labels where known),
    sections, and numbered figures, tables and equations. Sections and items are empty until
    ingestion captures them."""
    structure = await timed(service.structure(caller, doc_id))
    if structure is None:
        raise not_found(f"document {doc_id!r}")
    return structure


@router.delete(f"{API_PREFIX}/documents/{{doc_id}}", response_model=Deleted)
async def delete_document(
    doc_id: DocIdPath, request: Request, caller: CallerDep, service: ServiceDep, timed: TimedDep
) -> Deleted:
    """Remove the document everywhere: points, page images, jobs and traces naming it (the
    audit log keeps who did it). Needs the ``write`` scope."""
    caller.require("write")
    if not await timed(service.delete(caller, doc_id, request.state.trace_id)):
        raise not_found(f"document {doc_id!r}")
    return Deleted(doc_id=doc_id, deleted=True)


@router.get(
    f"{API_PREFIX}/documents/{{doc_id}}/pages/{{page_number}}/image",
    response_class=Response,
    responses={200: {"content": {"image/png": {}, "image/jpeg": {}}}},
)
async def page_image(
    doc_id: DocIdPath,
    page_number: Annotated[int, Path(ge=1)],
    caller: CallerDep,
    service: ServiceDep,
    timed: TimedDep,
    highlight: Annotated[
        str | None, Query(description="boxes in PDF points: 'x0,y0,x1,y1;...'")
    ] = None,
    image_format: Annotated[str, Query(alias="format", pattern="^(png|jpeg)$")] = "png",
) -> Response:
    image = await timed(service.page_image(caller, doc_id, page_number, highlight, image_format))
    if image is None:
        raise not_found(f"page {page_number} of document {doc_id!r}")
    return Response(image.data, media_type=image.media_type, headers={"Cache-Control": "private"})


# -- request parsing -------------------------------------------------------------------------------


def _parse_json(model: type[UriIngest], raw: bytes) -> UriIngest:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:  # malformed JSON included: pydantic reports it as one
        raise RequestValidationError(exc.errors()) from exc


def _parse_acl(value: str) -> list[str]:
    """A comma-separated ACL field: at most 100 principals of at most 256 characters."""
    acl = [a.strip() for a in value.split(",") if a.strip()]
    if len(acl) > _MAX_ACL_ENTRIES or any(len(a) > 256 for a in acl):
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.GATEWAY,
            f"acl: at most {_MAX_ACL_ENTRIES} principals of at most 256 characters",
        )
    return acl


def _parse_bool(name: str, value: str | None) -> bool:
    if value is None or value.strip().lower() in ("", "false", "0", "no"):
        return False
    if value.strip().lower() in ("true", "1", "yes"):
        return True
    raise PageSightError(ErrorCode.INVALID_REQUEST, Stage.GATEWAY, f"{name} must be true or false")


def _parse_datetime(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise PageSightError(
            ErrorCode.INVALID_REQUEST,
            Stage.GATEWAY,
            f"valid_until must be an ISO 8601 date-time, got {value!r}",
        ) from exc


async def _read_upload(request: Request, limit: int) -> tuple[str, bytes, dict[str, str]]:
    """The multipart ``file`` (at most ``limit`` bytes, else 413) and the text fields."""
    too_large = PageSightError(
        ErrorCode.TOO_LARGE, Stage.INPUT, f"uploads are limited to {limit} bytes"
    )
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + 64 * 1024:
        raise too_large  # refuse before reading the body
    form = await request.form(max_files=1, max_fields=20)
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise PageSightError(
                ErrorCode.INVALID_REQUEST, Stage.GATEWAY, "multipart field 'file' is required"
            )
        data = await upload.read(limit + 1)
        if len(data) > limit:
            raise too_large
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        if any(len(v) > _MAX_FIELD_CHARS for v in fields.values()):
            raise PageSightError(
                ErrorCode.INVALID_REQUEST,
                Stage.GATEWAY,
                f"form fields are limited to {_MAX_FIELD_CHARS} characters",
            )
        return (upload.filename or "upload")[:255], data, fields
    finally:
        await form.close()
