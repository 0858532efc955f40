"""The S3 endpoint's writers in the explorer: PutObject (a create of a new key, with or
without ``If-None-Match: *``; a replace of an existing one) and DeleteObject, each a signed
request through the service's own app (``create_app`` with the endpoint mounted, as ``serve``
builds it) on the explorer's ledger, in the operation's task: every failpoint the request
passes (C1-C4, R1-R4, the upload's, the delete's) suspends it like any other writer.

The answer is what the S3 client gets: 200 with an ETag (the document it made, read back by
its name at once and its ETag compared), 204 for a delete, or an S3 error, raised as
:class:`S3Refused` (a ``BlobLedgerError``: a clear refusal), except ``InternalError`` (a
500, which the explorer counts as an unclear error)."""

from __future__ import annotations

from typing import Any

import httpx
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from blobledger.config import Settings
from blobledger.config.s3api import parse_access_keys
from blobledger.errors import BlobLedgerError
from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger

KEY_ID, SECRET = "AKIDEXPLORE", "explore-secret-0123456789"
BUCKET = "blobledger"
BASE = "http://127.0.0.1"


class S3Refused(BlobLedgerError):
    """The endpoint answered an S3 error (its code) other than ``InternalError``."""

    def __init__(self, status: int, code: str) -> None:
        super().__init__(f"{status} {code}")
        self.status, self.code = status, code


class S3Endpoint:
    """The endpoint on one ledger, reached in process (httpx's ASGI transport runs the app
    in the calling task, so the failpoints' hook sees the operation's task)."""

    def __init__(self, ledger: Ledger, settings: Settings) -> None:
        from blobledger.api.app import create_app
        from blobledger.s3api import mount

        self.ledger = ledger
        self.settings = settings.with_(
            s3api_keys=parse_access_keys(f"{KEY_ID}:{SECRET}:write"), s3api_bucket=BUCKET)
        app = create_app(ledger, self.settings)
        mount(app, self.settings)
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)

    async def _send(self, method: str, key: str, body: bytes = b"",
                    headers: dict[str, str] | None = None, query: str = "") -> httpx.Response:
        path = f"/s3/{BUCKET}/{key}" + (f"?{query}" if query else "")
        signed = AWSRequest(method=method, url=BASE + path, data=body, headers=headers or {})
        S3SigV4Auth(Credentials(KEY_ID, SECRET), "s3", "us-east-1").add_auth(signed)
        response = await self.http.request(method, path, content=body,
                                           headers=dict(signed.headers.items()))
        if response.status_code >= 300:
            code = _code(response.text)
            if code == "InternalError" or not code:
                raise RuntimeError(f"the S3 endpoint answered {response.status_code} "
                                   f"{code or response.text[:200]}")
            raise S3Refused(response.status_code, code)
        return response

    async def put(self, key: str, data: bytes, *, create_only: bool) -> Document:
        """PutObject; the document it answered for (read back by its name, the ETag
        compared)."""
        from blobledger.s3api.lookup import etag_of

        response = await self._send("PUT", key, data,
                                    {"If-None-Match": "*"} if create_only else None)
        found = await self.ledger.page(prefix=key, limit=1)
        if not found or found[0].name != key:
            raise AssertionError(f"PutObject of {key!r} answered 200, and no document "
                                 "of that name is visible")
        doc = found[0]
        if response.headers.get("etag") != etag_of(doc):
            raise AssertionError(f"PutObject of {key!r} answered ETag "
                                 f"{response.headers.get('etag')}, the document shows "
                                 f"{etag_of(doc)} (v{doc.version})")
        return doc

    async def delete(self, key: str) -> None:
        await self._send("DELETE", key)

    # -- the multipart upload --

    async def create_upload(self, key: str) -> str:
        """CreateMultipartUpload: the upload's id."""
        text = (await self._send("POST", key, query="uploads=")).text
        return text.split("<UploadId>", 1)[1].split("</UploadId>", 1)[0]

    async def upload_part(self, key: str, upload_id: str, number: int, data: bytes) -> str:
        """UploadPart: the part's ETag (quoted)."""
        response = await self._send("PUT", key, data,
                                    query=f"partNumber={number}&uploadId={upload_id}")
        return response.headers["etag"]

    async def complete(self, key: str, upload_id: str, parts: list[tuple[int, str]], *,
                       create_only: bool = False) -> Document:
        """CompleteMultipartUpload of ``parts`` (number, ETag); the document it answered
        for, read back by its name and its ETag compared, as :meth:`put`'s."""
        from blobledger.s3api.lookup import etag_of
        from blobledger.s3api.rows import shape_of

        body = ("<CompleteMultipartUpload>" + "".join(
            f"<Part><PartNumber>{n}</PartNumber><ETag>{tag}</ETag></Part>"
            for n, tag in parts) + "</CompleteMultipartUpload>").encode()
        response = await self._send("POST", key, body,
                                    {"If-None-Match": "*"} if create_only else None,
                                    query=f"uploadId={upload_id}")
        etag = response.text.split("<ETag>", 1)[1].split("</ETag>", 1)[0].replace("&quot;", '"')
        doc = await visible(self.ledger, key)
        # the multipart ETag is the object's shape's, recorded before it became visible
        shown = None if doc is None else etag_of(doc, await shape_of(self.ledger, doc.blob))
        if doc is None or etag != shown:
            raise AssertionError(f"CompleteMultipartUpload of {key!r} answered ETag {etag}, "
                                 f"the key shows {shown}")
        return doc  # type: ignore[no-any-return]

    async def abort(self, key: str, upload_id: str) -> None:
        await self._send("DELETE", key, query=f"uploadId={upload_id}")

    async def close(self) -> None:
        await self.http.aclose()


def _code(text: str) -> str:
    start, end = text.find("<Code>"), text.find("</Code>")
    return text[start + len("<Code>"):end] if 0 <= start < end else ""


async def visible(ledger: Ledger, name: str) -> Any:
    """The ready document named ``name`` (None: none), as the endpoint finds it."""
    found = await ledger.page(prefix=name, limit=1)
    return found[0] if found and found[0].name == name else None
