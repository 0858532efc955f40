"""DeleteObjects (``POST /BUCKET?delete``): up to 1000 keys in one request, each the
ledger's delete of its document at the version found, each answered on its own (deleted,
or an ``<Error>`` of its own); ``Quiet`` answers the errors only.

The body is untrusted XML, parsed by defusedxml (no entities, no DTDs), and is checked
before any delete: its ``x-amz-content-sha256`` (when signed), its ``Content-MD5`` and its
``x-amz-checksum-*`` must match the bytes received. A key's ``<ETag>`` makes its delete
conditional (S3's conditional delete): another ETag is that key's ``PreconditionFailed``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from xml.etree.ElementTree import Element
from xml.sax.saxutils import escape

from defusedxml import ElementTree
from starlette.responses import Response

from blobledger.errors import DatabaseUnavailable, NotFound, PreconditionFailed, StoreUnavailable
from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error, from_ledger
from blobledger.s3api.lookup import current_etag, find
from blobledger.s3api.objects import _checksums, _md5, read_body
from blobledger.s3api.sigv4 import UNSIGNED_PAYLOAD
from blobledger.s3api.xmlbody import NAMESPACE, xml_response

#: the most keys one request deletes (S3's own)
MAX_OBJECTS = 1000
#: the largest request body read (1000 keys of S3's longest, 1024 bytes, and their markup)
MAX_BODY = 2 * 1024 * 1024
ATTEMPTS = 3


@dataclass(frozen=True)
class Wanted:
    key: str
    etag: str | None
    version: str | None


def _text(element: Element, name: str) -> str | None:
    found = element.find(name)
    if found is None:
        found = element.find(f"{{{NAMESPACE}}}{name}")
    return None if found is None else (found.text or "")


def parse(body: bytes) -> tuple[list[Wanted], bool]:
    """The keys a ``<Delete>`` document names, and whether it asks for quiet answers."""
    try:
        root = ElementTree.fromstring(body)
    except Exception:  # defusedxml's refusals and expat's parse errors alike
        raise S3Error("MalformedXML", "the XML you provided was not well-formed") from None
    if root.tag not in ("Delete", f"{{{NAMESPACE}}}Delete"):
        raise S3Error("MalformedXML", "expected a Delete document")
    quiet = (_text(root, "Quiet") or "").strip().lower() == "true"
    wanted = []
    for item in root:
        if item.tag not in ("Object", f"{{{NAMESPACE}}}Object"):
            continue
        key = _text(item, "Key")
        if not key:
            raise S3Error("MalformedXML", "each Object needs a Key")
        wanted.append(Wanted(key, _text(item, "ETag"), _text(item, "VersionId")))
    if not wanted or len(wanted) > MAX_OBJECTS:
        raise S3Error("MalformedXML", f"a Delete names 1 to {MAX_OBJECTS} objects")
    return wanted, quiet


async def _body(call: Call) -> bytes:
    """The whole body, its signed SHA-256, Content-MD5 and checksums checked."""
    checksums = _checksums(call)
    md5 = _md5(call)
    body = b"".join([chunk async for chunk in read_body(call, MAX_BODY)])
    payload = call.signed.payload
    if payload != UNSIGNED_PAYLOAD and hashlib.sha256(body).hexdigest() != payload:
        raise S3Error("XAmzContentSHA256Mismatch", "the provided x-amz-content-sha256 does "
                      "not match what was computed")
    if md5 is not None and hashlib.md5(body, usedforsecurity=False).hexdigest() != md5:
        raise S3Error("BadDigest", "the Content-MD5 you specified did not match what we "
                      "received")
    for checksum in checksums:
        checksum.update(body)
        checksum.check()
    return body


async def _delete(call: Call, wanted: Wanted) -> None:
    """The ledger's delete of the key's document at the version found (a key naming
    nothing is deleted already, as in S3, unless an ETag was asked for)."""
    if wanted.version not in (None, "null"):
        raise S3Error("NotImplemented", "versioning is not implemented: a VersionId other "
                      "than null names nothing")
    for _ in range(ATTEMPTS):
        try:
            doc = await find(call, wanted.key)
        except NotFound:
            if wanted.etag is not None:
                raise
            return
        if wanted.etag is not None and wanted.etag.strip() not in (
                "*", await current_etag(call, doc)):
            raise S3Error("PreconditionFailed", "At least one of the pre-conditions you "
                          "specified did not hold")
        try:
            await call.ledger.delete(doc.id, expected_version=doc.version)
            return
        except NotFound:
            if wanted.etag is not None:
                raise
            return
        except PreconditionFailed:  # replaced meanwhile: look again
            if wanted.etag is not None:
                raise S3Error("PreconditionFailed", "the object changed while it was "
                              "deleted") from None
            continue
    raise S3Error("OperationAborted", "the object kept changing while it was deleted")


async def delete_objects(call: Call) -> Response:
    call.need("write")
    if "content-md5" not in call.request.headers and not any(
            name.startswith("x-amz-checksum-") and name != "x-amz-checksum-type"
            for name in call.request.headers):
        raise S3Error("InvalidRequest", "Missing required header for this request: "
                      "Content-MD5 or x-amz-checksum-*")
    wanted, quiet = parse(await _body(call))
    parts = [f'<DeleteResult xmlns="{NAMESPACE}">']
    for item in wanted:
        try:
            await _delete(call, item)
        except (DatabaseUnavailable, StoreUnavailable):
            raise  # the whole request: retry it
        except Exception as exc:
            error = from_ledger(exc)
            if error is None:
                raise
            parts.append(f"<Error><Key>{escape(item.key)}</Key><Code>{error.code}</Code>"
                         f"<Message>{escape(error.message)}</Message></Error>")
            continue
        if not quiet:
            parts.append(f"<Deleted><Key>{escape(item.key)}</Key></Deleted>")
    parts.append("</DeleteResult>")
    return xml_response("".join(parts), call)



