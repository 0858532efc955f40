"""S3's errors: an ``<Error>`` document (none for HEAD) with its code, message, resource and
request id; each code's HTTP status as S3 answers it; and the one mapping from the
ledger's errors to them."""

from __future__ import annotations

from xml.sax.saxutils import escape

from sqlalchemy.exc import DBAPIError
from starlette.responses import Response

from blobledger.db import refused_value
from blobledger.errors import (
    BucketForbidden,
    BucketNotEmpty,
    BucketNotFound,
    BucketQuotaExceeded,
    ContentTypeRefused,
    DatabaseUnavailable,
    IntegrityError,
    IntentLost,
    InvalidInput,
    InvalidName,
    NameTaken,
    NotFound,
    PreconditionFailed,
    StoreUnavailable,
    UploadAborted,
    UploadTooLarge,
)

STATUS = {
    "AccessDenied": 403,
    "AuthorizationHeaderMalformed": 400,
    "AuthorizationQueryParametersError": 400,
    "BadDigest": 400,
    "BadRequest": 400,
    "CORSResponse": 403,
    "BucketAlreadyExists": 409,
    "BucketAlreadyOwnedByYou": 409,
    "BucketNotEmpty": 409,
    "InvalidBucketName": 400,
    "QuotaExceeded": 403,
    "EntityTooLarge": 400,
    "EntityTooSmall": 400,
    "IncompleteBody": 400,
    "InternalError": 500,
    "InvalidAccessKeyId": 403,
    "InvalidArgument": 400,
    "InvalidDigest": 400,
    "InvalidPart": 400,
    "InvalidPartOrder": 400,
    "InvalidRange": 416,
    "InvalidRequest": 400,
    "InvalidURI": 400,
    "KeyTooLongError": 400,
    "MalformedXML": 400,
    "MetadataTooLarge": 400,
    "MissingSecurityHeader": 400,
    "MissingContentLength": 411,
    "NoSuchBucket": 404,
    "NoSuchKey": 404,
    "NoSuchUpload": 404,
    "NotImplemented": 501,
    "OperationAborted": 409,
    "PreconditionFailed": 412,
    "RequestTimeout": 400,
    "RequestTimeTooSkewed": 403,
    "ServiceUnavailable": 503,
    "SignatureDoesNotMatch": 403,
    "XAmzContentSHA256Mismatch": 400,
}
XML_TYPE = "application/xml"


class S3Error(Exception):
    """An S3 error answered as its ``<Error>`` document."""

    def __init__(self, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = STATUS[code]
        self.headers = headers or {}


def error_response(error: S3Error, resource: str, request_id: str, method: str) -> Response:
    headers = {"x-amz-request-id": request_id, "x-amz-id-2": request_id, **error.headers}
    if error.status == 503:
        headers["Retry-After"] = "1"
    if method == "HEAD":  # S3 answers a HEAD's error by its status alone
        return Response(status_code=error.status, headers=headers)
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
            f"<Code>{error.code}</Code><Message>{escape(error.message)}</Message>"
            f"<Resource>{escape(resource)}</Resource><RequestId>{request_id}</RequestId>"
            "</Error>")
    return Response(body, status_code=error.status, headers=headers, media_type=XML_TYPE)


def from_ledger(exc: Exception) -> S3Error | None:
    """The S3 error that tells a ledger's error (None: not one of those: a 500)."""
    if isinstance(exc, S3Error):
        return exc
    if isinstance(exc, NameTaken):
        return S3Error("OperationAborted", "a conflicting write of this key is in progress "
                       "or has just finished: try again")
    if isinstance(exc, PreconditionFailed):
        return S3Error("OperationAborted", "the object changed while it was being written "
                       "or deleted: try again")
    if isinstance(exc, BucketNotFound):
        return S3Error("NoSuchBucket", "The specified bucket does not exist")
    if isinstance(exc, BucketForbidden):
        return S3Error("AccessDenied", f"Access Denied: {exc}")
    if isinstance(exc, BucketNotEmpty):
        return S3Error("BucketNotEmpty", "The bucket you tried to delete is not empty")
    if isinstance(exc, BucketQuotaExceeded):
        return S3Error("QuotaExceeded", str(exc))
    if isinstance(exc, ContentTypeRefused):
        return S3Error("InvalidArgument", str(exc))
    if isinstance(exc, NotFound):
        return S3Error("NoSuchKey", "The specified key does not exist.")
    if isinstance(exc, InvalidName):
        return S3Error("InvalidArgument", f"this key cannot name a document: {exc}")
    if isinstance(exc, UploadTooLarge):
        return S3Error("EntityTooLarge", str(exc))
    if isinstance(exc, IntegrityError):
        text = str(exc)
        if text.startswith("SHA-256"):
            return S3Error("XAmzContentSHA256Mismatch", "the provided x-amz-content-sha256 "
                           f"does not match what was computed: {text}")
        return S3Error("BadDigest", f"the Content-MD5 you specified did not match what we "
                       f"received: {text}")
    if isinstance(exc, IntentLost):  # the body was whole: the writer outlived its deadline
        return S3Error("RequestTimeout", "the upload outlived its deadline and was abandoned "
                       "(nothing was stored): retry")
    if isinstance(exc, UploadAborted):
        return S3Error("IncompleteBody", str(exc))
    if isinstance(exc, DatabaseUnavailable | StoreUnavailable):
        return S3Error("ServiceUnavailable", "the service is unavailable: retry")
    if isinstance(exc, InvalidInput):
        return S3Error("InvalidArgument", str(exc))
    if refused_value(exc):  # a value the database refuses to compare or store
        return S3Error("InvalidArgument", "a value in the request is not acceptable")
    if isinstance(exc, DBAPIError | OSError | TimeoutError):  # the connection lost
        return S3Error("ServiceUnavailable", "the database could not be reached: retry")
    return None

