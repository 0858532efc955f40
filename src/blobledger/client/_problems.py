"""An error answer as one of blobledger's own exceptions.

The body is checked first (:mod:`._answers`: a problem document, RFC 9457, or nothing); the
exception is chosen by the problem's ``type`` (``urn:blobledger:problem:<kind>``, the
service's one mapping in ``blobledger.api.problems``) and, for a problem of no known kind,
by the status. Its message is the problem's detail and the status, ``"... (HTTP 412)"``.
Anything else is :class:`blobledger.errors.ServiceError`, which holds the status.
"""

from __future__ import annotations

import re

import httpx
from pydantic import ValidationError

from blobledger import errors
from blobledger.client._answers import describe, problem

PREFIX = "urn:blobledger:problem:"

#: the problem kinds the service answers, and the error each one is
KINDS: dict[str, type[errors.BlobLedgerError]] = {
    "invalid-input": errors.InvalidInput,
    "checksum-mismatch": errors.IntegrityError,
    "name-taken": errors.NameTaken,
    "not-found": errors.NotFound,
    "upload-gone": errors.UploadGone,
    "precondition-failed": errors.PreconditionFailed,
    "idempotency-conflict": errors.IdempotencyConflict,
    "idempotency-in-progress": errors.IdempotencyInProgress,
    "offset-mismatch": errors.OffsetMismatch,
    "upload-too-large": errors.UploadTooLarge,
    "upload-abandoned": errors.IntentLost,
    "upload-aborted": errors.UploadAborted,
    "store-unavailable": errors.StoreUnavailable,
    "database-unavailable": errors.DatabaseUnavailable,
    "store-error": errors.StoreError,
    "bucket-not-found": errors.BucketNotFound,
    "bucket-exists": errors.BucketExists,
    "bucket-not-empty": errors.BucketNotEmpty,
    "bucket-quota-exceeded": errors.BucketQuotaExceeded,
    "content-type-refused": errors.ContentTypeRefused,
    "bucket-forbidden": errors.BucketForbidden,
}
#: a problem of no known kind (``about:blank``, a proxy's), by its status
STATUSES: dict[int, type[errors.BlobLedgerError]] = {
    400: errors.InvalidInput, 404: errors.NotFound, 410: errors.UploadGone,
    412: errors.PreconditionFailed, 413: errors.UploadTooLarge,
}


def error_for(response: httpx.Response) -> errors.BlobLedgerError:
    """The exception an error answer stands for (see the module)."""
    message = describe(response)
    status = response.status_code
    try:
        found = problem(response)
    except (ValueError, ValidationError):
        return errors.ServiceError(message, status)
    kind = found.type.removeprefix(PREFIX) if found is not None else ""
    if found is not None and found.type.startswith(PREFIX) and kind.startswith("too-many-"):
        return errors.QuotaExceeded(kind, message)
    cls = KINDS.get(kind) if found is not None and found.type.startswith(PREFIX) else None
    cls = cls or STATUSES.get(status)
    extra = (found.model_extra or {}) if found is not None else {}
    if cls is errors.PreconditionFailed:
        return errors.PreconditionFailed(message, _count(extra.get("current_version")))
    if cls is errors.OffsetMismatch:
        return errors.OffsetMismatch(message, _count(response.headers.get("upload-offset")) or 0)
    if cls is errors.UploadTooLarge:
        limit = re.search(r"limit of (\d{1,19}) bytes", message)
        return errors.UploadTooLarge(int(limit.group(1)) if limit else 0)
    if cls is None:
        return errors.ServiceError(message, status)
    return cls(message)


def _count(value: object) -> int | None:
    """A plain non-negative integer (or its decimal text), else None."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    return None
