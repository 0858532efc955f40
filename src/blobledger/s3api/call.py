"""One request to the S3 endpoint, as its operations see it."""

from __future__ import annotations

import hashlib

from starlette.requests import Request

from blobledger.config import Settings
from blobledger.protocol.buckets import Bucket
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import DEFAULT_BUCKET
from blobledger.s3api.access import Access, access
from blobledger.s3api.errors import S3Error
from blobledger.s3api.sigv4 import ANONYMOUS, Signed


def ledger_bucket(name: str, alias: str) -> str:
    """The ledger's bucket an S3 bucket name stands for (``""``: none)."""
    if name == alias:
        return DEFAULT_BUCKET
    return "" if name == DEFAULT_BUCKET else name


def s3_bucket(name: str, alias: str) -> str:
    """The S3 name of a ledger's bucket (``""``: shown under none, its name the alias's)."""
    if name == DEFAULT_BUCKET:
        return alias
    return "" if name == alias else name


class Call:
    """One request to the endpoint: its bucket and key, its query, its signer."""

    def __init__(self, request: Request, settings: Settings, bucket: str, key: str,
                 query: list[tuple[str, str]], signed: Signed, request_id: str) -> None:
        self.request = request
        self.settings = settings
        self.bucket = bucket
        self.key = key
        self.query = query
        self.params = {name: value for name, value in query
                       if not name.startswith("X-Amz-")}
        self.signed = signed
        self.request_id = request_id
        #: the caller's access to the request's bucket (None: no bucket looked up yet)
        self.access: Access | None = None

    @property
    def ledger(self) -> Ledger:
        ledger: Ledger | None = self.request.app.state.ledger
        if ledger is None:
            raise S3Error("ServiceUnavailable", "the service is starting or stopping")
        return ledger

    @property
    def ledger_bucket(self) -> str:
        """The ledger's name of the request's bucket: the default bucket goes by
        ``BLOBLEDGER_S3API_BUCKET`` here (and is not reached by its own name)."""
        return ledger_bucket(self.bucket, self.settings.s3api_bucket)

    @property
    def owner(self) -> str:
        """How the database names the key that signed the request as a document's writer
        (``s3:`` and 16 hex digits of a digest of its id: never a bearer token's digest;
        ``s3:anonymous`` for an unsigned request, which no credential is)."""
        if self.signed.key_id == ANONYMOUS:
            return "s3:anonymous"
        digest = hashlib.sha256(b"blobledger-s3-owner\x00" + self.signed.key_id.encode())
        return "s3:" + digest.hexdigest()[:16]

    def access_to(self, bucket: Bucket) -> Access:
        """The caller's access to ``bucket`` (:mod:`.access`)."""
        return access(self.signed, bucket, self.settings.s3api_accounts)

    def headers(self, **more: str) -> dict[str, str]:
        return {"x-amz-request-id": self.request_id, "x-amz-id-2": self.request_id, **more}

    def need(self, scope: str, *, own: bool = False) -> None:
        """AccessDenied unless the caller may do ``scope`` on the request's bucket (by its
        key's scopes, or by the bucket's ACL; ``own``: by its key's scopes only, on a
        bucket it reaches as its own, :mod:`.access`)."""
        if self.signed.key_id == ANONYMOUS and (self.access is None or own):
            raise S3Error("AccessDenied", "Access Denied: sign the request (SigV4)")
        if self.access is None:
            allowed = self.signed.scopes
        elif own and not self.access.own:
            raise S3Error("AccessDenied", "Access Denied: the bucket belongs to another key")
        else:
            allowed = self.access.scopes
        if scope not in allowed:
            raise S3Error("AccessDenied", f"Access Denied: the key lacks the {scope!r} scope"
                          if self.signed.key_id != ANONYMOUS else "Access Denied")
