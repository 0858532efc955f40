"""The S3 endpoint's ASGI application: every request signed (SigV4, :mod:`.sigv4`) or
anonymous (only what a canned ACL grants everyone, :mod:`.access`), then
routed by its path (path-style: ``/``, ``/BUCKET``, ``/BUCKET/KEY``), its method and its
query to an operation, or answered ``NotImplemented``.

It runs mounted inside the service's app (``blobledger serve`` mounts it at
``BLOBLEDGER_S3API_PREFIX``): the ledger is that app's (``scope["app"].state.ledger``), and
its guard (header limits, the upload cap, the minimum body rate) stands in front of it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from blobledger._base.scopes import buckets_of
from blobledger.config import Settings
from blobledger.protocol.buckets import scoped
from blobledger.s3api import (
    acls,
    attributes,
    buckets,
    copy,
    deletes,
    listing,
    multipart,
    objects,
    uploadlists,
)
from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error, error_response, from_ledger
from blobledger.s3api.overrides import RESPONSE_QUERY
from blobledger.s3api.sigv4 import Seen, verify
from blobledger.s3api.usermeta import as_sent

log = logging.getLogger("blobledger.s3api")

#: query parameters an object operation of this endpoint may carry (the presigned URL's
#: own, and ``x-id``, which botocore adds to name the operation); any other is a
#: sub-resource or an option not implemented yet
OBJECT_QUERY = frozenset({"x-id", "uploads", "uploadId", "partNumber", "versionId",
                          "attributes"})
#: ListBuckets' query parameters
LIST_BUCKETS_QUERY = frozenset({"max-buckets", "continuation-token", "prefix",
                                "bucket-region"})
#: ListObjects' (v1) query parameters
LIST_V1_QUERY = frozenset({"prefix", "delimiter", "marker", "max-keys", "encoding-type"})
#: ListObjectVersions' query parameters
VERSIONS_QUERY = frozenset({"versions", "prefix", "delimiter", "key-marker",
                            "version-id-marker", "max-keys", "encoding-type"})
Handler = Callable[[Call], Awaitable[Response]]
#: a multipart upload's operations, by method and the query parameter that names them
MULTIPART: dict[tuple[str, str], Handler] = {
    ("POST", "uploads"): multipart.create_multipart_upload,
    ("PUT", "uploadId"): multipart.upload_part,
    ("POST", "uploadId"): multipart.complete_multipart_upload,
    ("DELETE", "uploadId"): multipart.abort_multipart_upload,
    ("GET", "uploadId"): uploadlists.list_parts,
}


def _query(raw: bytes) -> list[tuple[str, str]]:
    """The query's pairs, percent-decoded (``+`` stays a plus: S3 clients encode a space as
    ``%20``), in order; a name without ``=`` has the empty value."""
    pairs = []
    for item in raw.decode("latin-1").split("&"):
        if item:
            name, _, value = item.partition("=")
            pairs.append((unquote(name, errors="strict"), unquote(value, errors="strict")))
    return pairs


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers as the signer saw them: a value sent as UTF-8 (botocore's
    bytes for a non-ASCII value, e.g. of metadata) decoded as UTF-8, another as Latin-1."""
    found: dict[str, list[str]] = {}
    for name, value in scope.get("headers", []):
        found.setdefault(bytes(name).decode("latin-1").lower(), []).append(
            as_sent(bytes(value).decode("latin-1")))
    return {name: ",".join(values) for name, values in found.items()}


class S3App:
    """The endpoint, mounted at ``settings.s3api_prefix``."""

    def __init__(self, settings: Settings, prefix: str) -> None:
        self.settings = settings
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request_id = uuid.uuid4().hex[:16].upper()
        method = scope["method"]
        path = scope.get("path", "")
        relative = path[len(self.prefix):] if path.startswith(self.prefix) else path
        try:
            response = await self._answer(scope, receive, method, relative, request_id)
        except Exception as exc:
            error = from_ledger(exc)
            if error is None:
                log.exception("S3 %s %s failed", method, relative)
                error = S3Error("InternalError", "we encountered an internal error: retry")
            response = error_response(error, relative, request_id, method)
        await response(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, method: str, relative: str,
                      request_id: str) -> Response:
        try:
            query = _query(bytes(scope.get("query_string", b"")))
        except UnicodeDecodeError:
            raise S3Error("InvalidArgument", "the query string is not valid UTF-8") from None
        raw_path = bytes(scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        headers = _headers(scope)
        if method == "OPTIONS":  # a CORS preflight: no bucket here has a CORS configuration
            if "origin" not in headers:
                raise S3Error("BadRequest", "Insufficient information. Origin request "
                              "header needed.")
            raise S3Error("CORSResponse", "CORS is not enabled for this bucket.")
        seen = Seen(method, headers.get("host", ""), raw_path, query, headers)
        signed = verify(seen, self.settings.s3api_keys, time.time())
        bucket, _, key = relative.lstrip("/").partition("/")
        virtual = scope.get("path_params", {}).get("s3_bucket")
        if virtual is not None:  # BUCKET.host/KEY: the whole path is the key
            bucket, key = virtual, relative.removeprefix("/")
        call = Call(Request(scope, receive), self.settings, bucket, key, query, signed,
                    request_id)
        handler = self._route(call, method)
        # the ledger reaches only the key's buckets for the rest of this request
        with scoped(buckets_of(signed.scopes)):
            if call.bucket and handler is not buckets.create_bucket:
                if not call.ledger_bucket:
                    raise S3Error("NoSuchBucket", "The specified bucket does not exist")
                found = await call.ledger.buckets.lookup(call.ledger_bucket)  # NoSuchBucket
                call.access = call.access_to(found)
            return await handler(call)

    def _route(self, call: Call, method: str) -> Handler:
        params = call.params
        if not call.bucket:
            if method == "GET" and set(params) <= LIST_BUCKETS_QUERY:
                return buckets.list_buckets
            raise S3Error("NotImplemented", "only ListBuckets is implemented on the service")
        if not call.key:
            if method == "HEAD" and not params:
                return buckets.head_bucket
            if method == "GET" and params.get("list-type") == "2":
                return listing.list_objects_v2
            if method == "GET" and "uploads" in params:
                return uploadlists.list_multipart_uploads
            if method == "GET" and "versions" in params and set(params) <= VERSIONS_QUERY:
                return listing.list_object_versions
            if method == "GET" and set(params) == {"versioning"}:
                return listing.get_bucket_versioning
            if method == "GET" and set(params) <= LIST_V1_QUERY:
                return listing.list_objects
            if method == "POST" and set(params) == {"delete"}:
                return deletes.delete_objects
            if method == "PUT" and not params:
                return buckets.create_bucket
            if method == "GET" and set(params) == {"acl"}:
                return acls.get_bucket_acl
            if method == "PUT" and set(params) == {"acl"}:
                return acls.put_bucket_acl
            if method == "DELETE" and not params:
                return buckets.delete_bucket
            raise S3Error("NotImplemented", f"{method} on a bucket with "
                          f"{sorted(params) or 'no parameters'} is not implemented")
        if "acl" in params and set(params) <= {"acl", "versionId", "x-id"} and \
                params.get("versionId", "null") == "null":
            if method == "GET":
                return acls.get_object_acl
            if method == "PUT":
                return acls.put_object_acl
        allowed = OBJECT_QUERY | (RESPONSE_QUERY if method in ("GET", "HEAD") else set())
        if set(params) - allowed:
            raise S3Error("NotImplemented", f"object sub-resources and options "
                          f"{sorted(set(params) - allowed)} are not implemented")
        if params.get("versionId", "null") != "null" or \
                ("versionId" in params and method not in ("GET", "HEAD", "DELETE")):
            # a bucket without versioning: an object's one version is null
            raise S3Error("NotImplemented", "versioning is not implemented: a versionId "
                          "other than null names nothing")
        named = "uploadId" if "uploadId" in params else "uploads" if "uploads" in params else ""
        if named:
            if (method, named) == ("PUT", "uploadId") and copy.is_copy(call):
                return copy.upload_part_copy
            if (method, named) not in MULTIPART:
                raise S3Error("NotImplemented", f"{method} with {named} is not implemented")
            return MULTIPART[(method, named)]
        if method == "PUT" and copy.is_copy(call):
            return copy.copy_object
        if method == "GET" and "attributes" in params:
            return attributes.get_object_attributes
        if method in ("GET", "HEAD"):
            return objects.get_object
        if method == "PUT":
            return objects.put_object
        if method == "DELETE":
            return objects.delete_object
        raise S3Error("NotImplemented", f"{method} on an object is not implemented")
