"""RFC 9457 problem responses, and the one mapping from blobledger errors to HTTP statuses.

Every error the service answers with is ``application/problem+json``::

    {"type": "urn:blobledger:problem:name-taken", "title": "Name taken", "status": 409,
     "detail": "a document named 'a.txt' already exists"}

Tracebacks never reach a client: an unexpected exception is logged and answered with a
plain 500 problem. A storage or database outage is a 503 with ``Retry-After``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import DBAPIError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response

from blobledger.db import refused_value
from blobledger.errors import (
    BlobLedgerError,
    BucketExists,
    BucketForbidden,
    BucketNotEmpty,
    BucketNotFound,
    BucketQuotaExceeded,
    ConfigError,
    ContentTypeRefused,
    DatabaseUnavailable,
    IdempotencyConflict,
    IdempotencyInProgress,
    IntegrityError,
    IntentLost,
    InvalidInput,
    NameTaken,
    NotFound,
    OffsetMismatch,
    PreconditionFailed,
    QuotaExceeded,
    StoreError,
    StoreUnavailable,
    UploadAborted,
    UploadGone,
    UploadTooLarge,
)

log = logging.getLogger("blobledger.api")

MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:blobledger:problem:"
RETRY_AFTER_UNAVAILABLE = 5
RETRY_AFTER_IN_PROGRESS = 1


class Problem(Exception):
    """An HTTP error raised inside the service; answered as a problem document."""

    def __init__(
        self,
        status: int,
        kind: str,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = extra


@dataclass(frozen=True)
class _Mapping:
    status: int
    kind: str
    retry_after: int | None = None


# The one mapping from blobledger errors to HTTP statuses (most specific class first).
ERROR_STATUS: tuple[tuple[type[BlobLedgerError], _Mapping], ...] = (
    (ContentTypeRefused, _Mapping(415, "content-type-refused")),
    (InvalidInput, _Mapping(400, "invalid-input")),
    (NameTaken, _Mapping(409, "name-taken")),
    (BucketQuotaExceeded, _Mapping(413, "bucket-quota-exceeded")),
    (BucketNotFound, _Mapping(404, "bucket-not-found")),
    (BucketExists, _Mapping(409, "bucket-exists")),
    (BucketNotEmpty, _Mapping(409, "bucket-not-empty")),
    (BucketForbidden, _Mapping(403, "bucket-forbidden")),
    (QuotaExceeded, _Mapping(429, "too-many-open-uploads")),
    (UploadGone, _Mapping(410, "upload-gone")),
    (NotFound, _Mapping(404, "not-found")),
    (OffsetMismatch, _Mapping(409, "offset-mismatch")),
    (PreconditionFailed, _Mapping(412, "precondition-failed")),
    (IdempotencyConflict, _Mapping(422, "idempotency-conflict")),
    (IdempotencyInProgress, _Mapping(409, "idempotency-in-progress", RETRY_AFTER_IN_PROGRESS)),
    (IntegrityError, _Mapping(400, "checksum-mismatch")),
    (UploadTooLarge, _Mapping(413, "upload-too-large")),
    (IntentLost, _Mapping(503, "upload-abandoned", RETRY_AFTER_IN_PROGRESS)),
    (UploadAborted, _Mapping(408, "upload-aborted")),
    (StoreUnavailable, _Mapping(503, "store-unavailable", RETRY_AFTER_UNAVAILABLE)),
    (DatabaseUnavailable, _Mapping(503, "database-unavailable", RETRY_AFTER_UNAVAILABLE)),
    (ConfigError, _Mapping(503, "unavailable", RETRY_AFTER_UNAVAILABLE)),
    (StoreError, _Mapping(502, "store-error")),
    (BlobLedgerError, _Mapping(500, "internal-error")),
)


def problem_for(exc: BlobLedgerError) -> Problem:
    """The problem a blobledger error is answered with."""
    mapping = next(m for cls, m in ERROR_STATUS if isinstance(exc, cls))
    headers = {}
    if mapping.retry_after is not None:
        headers["Retry-After"] = str(mapping.retry_after)
    extra: dict[str, Any] = {}
    if isinstance(exc, PreconditionFailed) and exc.current_version is not None:
        extra["current_version"] = exc.current_version
    kind = exc.kind if isinstance(exc, QuotaExceeded) else mapping.kind
    return Problem(mapping.status, kind, str(exc), headers=headers, **extra)


#: statuses of protocols the service speaks that HTTP itself does not name (tus)
EXTRA_PHRASES = {460: "Checksum Mismatch"}


def problem_response(problem: Problem, instance: str | None = None) -> Response:
    phrase = EXTRA_PHRASES.get(problem.status) or HTTPStatus(problem.status).phrase
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + problem.kind if problem.kind != "blank" else "about:blank",
        "title": phrase,
        "status": problem.status,
        "detail": problem.detail,
    }
    if instance:
        body["instance"] = instance
    body.update(problem.extra)
    return JSONResponse(body, status_code=problem.status, headers=problem.headers,
                        media_type=MEDIA_TYPE)


def error_response(exc: BaseException, path: str | None = None) -> Response:
    """Any exception as a problem response (for code paths outside the handlers)."""
    if isinstance(exc, Problem):
        return problem_response(exc, path)
    if isinstance(exc, BlobLedgerError):
        return problem_response(problem_for(exc), path)
    if refused_value(exc):  # a value the database refuses to compare or store
        log.warning("database refused a value: %s", str(exc).splitlines()[0][:200])
        return problem_response(Problem(400, "invalid-input",
                                        "a value in the request is not acceptable"), path)
    if isinstance(exc, (OperationalError, DBAPIError, OSError, TimeoutError)):
        log.warning("database or network failure: %s", str(exc).splitlines()[0][:200])
        return problem_response(Problem(
            503, "database-unavailable", "the database could not be reached; retry later",
            headers={"Retry-After": str(RETRY_AFTER_UNAVAILABLE)}), path)
    log.error("unexpected error", exc_info=exc)
    return problem_response(Problem(500, "internal-error", "internal server error"), path)


def install(app: FastAPI) -> None:
    """Answer the errors raised in ``app``'s routes with problem documents (anything else is
    caught by :class:`blobledger.api.guard.Guard`)."""

    async def on_error(request: Request, exc: Exception) -> Response:
        return error_response(exc, request.url.path)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        headers = dict(exc.headers or {})
        return problem_response(Problem(exc.status_code, "blank", str(exc.detail),
                                        headers=headers), request.url.path)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = [
            {"location": ".".join(str(p) for p in err.get("loc", ())), "message": err.get("msg")}
            for err in exc.errors()
        ]
        detail = "; ".join(f"{e['location']}: {e['message']}" for e in errors)
        return problem_response(Problem(400, "invalid-input", detail or "invalid request",
                                        errors=errors), request.url.path)

    app.add_exception_handler(Problem, on_error)
    app.add_exception_handler(BlobLedgerError, on_error)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
