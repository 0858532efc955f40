"""UploadPartCopy: an UploadPart (``x-amz-copy-source``) whose bytes are read from the
source key's ready document, all of it or ``x-amz-copy-source-range: bytes=first-last``,
checked against the source's ``x-amz-copy-source-if-*`` conditions first (as CopyObject's).

The part is one of the upload's parts like any other: staged in the store under the
upload's blob, then recorded (a part copied again under its number replaces it); its ETag is
its MD5. The source is read whole, its SHA-256 compared with the one recorded for it before
the part is staged (a part never holds bytes the ledger did not verify), so a copied part
holds at most the largest part (64 MiB) and its source at most the largest object."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from starlette.responses import Response

from blobledger import failpoints
from blobledger.errors import NotFound
from blobledger.protocol.transitions.records import UploadRecord
from blobledger.s3api.call import Call
from blobledger.s3api.copy import _check_source, _source_key
from blobledger.s3api.errors import S3Error
from blobledger.s3api.lookup import find
from blobledger.s3api.rows import Part, record_part
from blobledger.s3api.xmlbody import NAMESPACE, iso, xml_response

RANGE = re.compile(r"^bytes=(\d+)-(\d+)$")


def _range(text: str | None, size: int) -> tuple[int, int]:
    """``x-amz-copy-source-range`` as (start, end exclusive); none: the whole source."""
    if text is None:
        return 0, size
    found = RANGE.match(text.strip())
    if found is None or int(found.group(1)) > int(found.group(2)) or int(found.group(2)) >= size:
        raise S3Error("InvalidArgument", f"the range {text!r} is not valid for a source of "
                      f"{size} bytes (bytes=first-last, within the source)")
    return int(found.group(1)), int(found.group(2)) + 1


async def upload_part_copy(call: Call, upload: UploadRecord, number: int,
                           max_part: int) -> Response:
    """The part ``number`` of ``upload``, copied from the source key's ready document."""
    ledger = call.ledger
    try:
        source = await find(call, _source_key(call))
    except NotFound:
        raise S3Error("NoSuchKey", "The specified key does not exist.") from None
    _check_source(call, source)
    size = source.size or 0
    start, end = _range(call.request.headers.get("x-amz-copy-source-range"), size)
    if end - start > max_part:
        raise S3Error("EntityTooLarge", f"a part holds at most {max_part} bytes here")
    whole = hashlib.sha256()
    body = bytearray()
    offset = 0
    opened, reader = await ledger.open(source.id)
    try:
        if opened.blob != source.blob:  # replaced meanwhile: not the version checked
            raise S3Error("OperationAborted", "the source was replaced while it was read: "
                          "retry")
        async for chunk in reader:
            whole.update(chunk)
            body += chunk[max(0, start - offset):max(0, end - offset)]
            offset += len(chunk)
    finally:
        await reader.aclose()
    if offset != size or whole.hexdigest() != source.sha256:
        raise S3Error("InternalError", "the source's stored bytes are not those recorded for "
                      "it: nothing was copied")
    md5 = hashlib.md5(body, usedforsecurity=False).hexdigest()
    part = await ledger.store.stage(upload.blob_name, upload.handle, number, bytes(body))
    await failpoints.hit("multipart.after_stage")
    now = datetime.now(UTC)
    await record_part(ledger, upload.id,
                      Part(number, part, len(body), md5, now.replace(tzinfo=None)))
    return xml_response(
        f'<CopyPartResult xmlns="{NAMESPACE}"><LastModified>{iso(now)}</LastModified>'
        f'<ETag>"{md5}"</ETag></CopyPartResult>', call)
