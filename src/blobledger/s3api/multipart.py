"""The multipart upload, as a resumable upload on the ledger's upload rows.

``CreateMultipartUpload`` is C1 under a placeholder name (the pending document and blob row,
leased until the upload expires, and the upload's row, mode ``s3``) and the store's staged
upload: it reserves no key, so several uploads of one key may run at once, as in S3.
``UploadPart`` stages the part's bytes in the store and then records the part (:mod:`.rows`;
a part uploaded again replaces its row). ``CompleteMultipartUpload`` publishes the parts it
names create-only under the intent's blob (still ``pending``), hashes what the store holds,
records the verified SHA-256, and then, for a key that names no ready document, gives the
document its real name in the confirm step (``NameTaken``: another writer's create won; with
``If-None-Match: *`` that is a 412), C3 and C4, the upload done in C4's transaction. For a
key that names a ready document the published bytes become a **replace** of it (R1-R4, at
the version found; ``If-Match`` at the version whose ETag matches), and the upload's own
intent goes to the deletion path. Nothing is visible before the completion commits.

``AbortMultipartUpload`` is the upload's termination (its intent to the deletion path, its
parts dropped); an upload abandoned without one expires and is swept like any other.
"""

from __future__ import annotations

import asyncio
import hashlib
from xml.sax.saxutils import escape

from defusedxml import ElementTree
from starlette.responses import Response

from blobledger import failpoints
from blobledger._base.names import (
    check_content_type,
    check_document_name,
    new_blob_name,
    new_document_id,
)
from blobledger.errors import (
    BlobAlreadyExists,
    BlobNotFound,
    Digests,
    IntentLost,
    NameTaken,
    StoreError,
    StoreUnavailable,
)
from blobledger.protocol.documents import Document
from blobledger.protocol.models import PENDING_TAG as PENDING
from blobledger.protocol.models import BlobKind, UploadMode, UploadState
from blobledger.protocol.transitions.records import Intent, UploadRecord
from blobledger.protocol.transitions.statements import PLACEHOLDER, new_token
from blobledger.s3api.access import canned_acl
from blobledger.s3api.call import Call
from blobledger.s3api.composite import requested
from blobledger.s3api.errors import S3Error
from blobledger.s3api.lookup import etag_of
from blobledger.s3api.objects import (
    DEFAULT_TYPE,
    UNSUPPORTED,
    _checked,
    _checksums,
    _md5,
    read_body,
)
from blobledger.s3api.rows import (
    Part,
    Shape,
    drop_parts,
    forget_orphans,
    kept_of,
    parts_of,
    record_meta,
    record_part,
    record_shape,
    shape_of,
)
from blobledger.s3api.shapes import (
    ALGORITHM,
    algorithm_headers,
    checked_object_checksum,
    checksum_elements,
    shape_for,
    upload_algorithm,
)
from blobledger.s3api.shapes import TYPE as CHECKSUM_TYPE
from blobledger.s3api.sigv4 import UNSIGNED_PAYLOAD
from blobledger.s3api.usermeta import from_headers
from blobledger.s3api.writes import create_only, failed, target, write
from blobledger.s3api.xmlbody import NAMESPACE, xml_response
from blobledger.uploads.resumable import Resumable, record_handle

#: S3's smallest part, but for the last one
MIN_PART = 5 * 1024 * 1024
#: the largest part this endpoint takes (a part is held in memory while it is staged)
MAX_PART = 64 * 1024 * 1024
MAX_PARTS = 10_000
#: the largest CompleteMultipartUpload body read
MAX_XML_BODY = 1024 * 1024
#: the upload row's metadata: the key it completes, the object's content type, and the
#: access key that began it (ListMultipartUploads' and ListParts' Initiator and Owner)
KEY = "s3_key"
TYPE = "content_type"
INITIATOR = "s3_initiator"


def _no_such_upload() -> S3Error:
    return S3Error("NoSuchUpload", "The specified multipart upload does not exist. The "
                   "upload ID may be invalid, or the upload may have been aborted or completed.")


async def open_upload(call: Call, *, open_only: bool = True) -> UploadRecord:
    """The upload named by ``uploadId``, of this key (NoSuchUpload: none, another key's,
    expired, or, with ``open_only``, completed)."""
    found = await call.ledger.transitions.find_upload(call.params.get("uploadId", ""))
    if (found is None or found.mode != UploadMode.S3 or found.meta.get(KEY) != call.key
            or found.expired or (open_only and found.state != UploadState.OPEN)):
        raise _no_such_upload()
    return found


def _intent(upload: UploadRecord) -> Intent:
    """The upload's intent: a creation recorded under a placeholder until completion."""
    return Intent(upload.blob_name, upload.document_id, BlobKind.CREATE, upload.attempt,
                  upload.meta[TYPE], placeholder=PLACEHOLDER + upload.document_id,
                  keyed=False)


async def create_multipart_upload(call: Call) -> Response:
    call.need("write")
    headers = call.request.headers
    for name in headers:
        if name.startswith(UNSUPPORTED):
            raise S3Error("NotImplemented", f"{name} is not implemented on multipart uploads")
    key = check_document_name(call.key)
    content_type = check_content_type(headers.get("content-type") or DEFAULT_TYPE)
    meta = from_headers(headers)
    acl = canned_acl(headers)
    algorithm = requested(headers.get("x-amz-checksum-algorithm"),
                          headers.get("x-amz-checksum-type"))
    recorded = {KEY: key, TYPE: content_type}
    if algorithm is not None:
        recorded.update({ALGORITHM: algorithm.name, CHECKSUM_TYPE: algorithm.type})
    ledger = call.ledger
    await forget_orphans(ledger)
    doc_id, upload_id = new_document_id(), new_document_id()
    intent = Intent(new_blob_name(ledger.settings.blob_prefix, key), doc_id, BlobKind.CREATE,
                    new_token(), content_type, placeholder=PLACEHOLDER + doc_id,
                    owner=call.owner, keyed=False, bucket=call.ledger_bucket)
    await ledger.inserted(intent, ledger.transitions.begin_upload(
        intent, PLACEHOLDER + doc_id, upload_id, int(ledger.settings.max_upload_bytes), "",
        recorded | {INITIATOR: call.signed.key_id}, mode=UploadMode.S3))
    await failpoints.hit("multipart.after_insert")
    try:
        upload = await ledger.transitions.find_upload(upload_id)
        if upload is None:  # swept while this request was paused
            raise _no_such_upload()
        handle = await ledger.store.begin_staged(intent.blob_name, tags=PENDING,
                                                 content_type=content_type)
        if handle:
            await record_handle(ledger, upload, handle)
        await record_meta(ledger, intent.blob_name, meta, acl)
    except BaseException:
        await asyncio.shield(ledger.abandon(intent))  # nothing stored yet
        raise
    return xml_response(
        f'<InitiateMultipartUploadResult xmlns="{NAMESPACE}">'
        f"<Bucket>{escape(call.bucket)}</Bucket><Key>{escape(key)}</Key>"
        f"<UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>", call,
        **algorithm_headers(algorithm))


def part_number(call: Call) -> int:
    text = call.params.get("partNumber", "")
    if not text.isdigit() or not 1 <= int(text) <= MAX_PARTS:
        raise S3Error("InvalidArgument", f"Part number must be an integer between 1 and "
                      f"{MAX_PARTS}, inclusive")
    return int(text)


async def upload_part(call: Call) -> Response:
    """The part's bytes staged in the store (checked against the request's digests first),
    then recorded; the part's ETag is its MD5, as in S3."""
    call.need("write")
    number = part_number(call)
    headers = call.request.headers
    if "aws-chunked" in headers.get("content-encoding", ""):
        raise S3Error("NotImplemented", "aws-chunked payloads are not implemented")
    if "content-length" not in headers:
        raise S3Error("MissingContentLength", "you must provide the Content-Length header")
    upload = await open_upload(call)
    ledger = call.ledger
    body = bytearray()
    md5 = hashlib.md5(usedforsecurity=False)
    sha256 = hashlib.sha256()
    data = _checked(read_body(call, min(MAX_PART, int(ledger.settings.max_upload_bytes))),
                    _checksums(call))
    try:
        async for chunk in data:
            body += chunk
            md5.update(chunk)
            sha256.update(chunk)
    finally:
        await data.aclose()
    payload = call.signed.payload
    if payload != UNSIGNED_PAYLOAD and payload != sha256.hexdigest():
        raise S3Error("XAmzContentSHA256Mismatch", "the provided x-amz-content-sha256 does "
                      "not match what was computed")
    declared_md5 = _md5(call)
    if declared_md5 is not None and declared_md5 != md5.hexdigest():
        raise S3Error("BadDigest", "the Content-MD5 you specified did not match what we "
                      "received")
    algorithm = upload_algorithm(upload.meta)
    checksum = None if algorithm is None else algorithm.digest(bytes(body))
    part = await ledger.store.stage(upload.blob_name, upload.handle, number, bytes(body))
    await failpoints.hit("multipart.after_stage")
    await record_part(ledger, upload.id, Part(number, part, len(body), md5.hexdigest(),
                                              ledger.clock(), checksum))
    answered = {} if algorithm is None or checksum is None else {algorithm.header: checksum}
    return Response(status_code=200, headers=call.headers(ETag=f'"{md5.hexdigest()}"',
                                                          **answered))


def _listed(body: bytes) -> tuple[list[tuple[int, str]], dict[int, str | None]]:
    """The parts a CompleteMultipartUpload names: (number, ETag without quotes), and the
    checksum each names (``Checksum<ALGORITHM>``; None: none), by number."""
    try:
        root = ElementTree.fromstring(body)
    except Exception:  # defusedxml's refusals and expat's parse errors alike
        raise S3Error("MalformedXML", "the XML you provided was not well-formed") from None
    if not root.tag.endswith("CompleteMultipartUpload"):
        raise S3Error("MalformedXML", "expected a CompleteMultipartUpload")
    listed, checksums = [], {}
    for element in root:
        if not element.tag.endswith("Part"):
            continue
        fields = {child.tag.rsplit("}", 1)[-1]: (child.text or "").strip()
                  for child in element}
        number, tag = fields.get("PartNumber", ""), fields.get("ETag")
        if not number.isdigit() or tag is None:
            raise S3Error("MalformedXML", "each Part needs a PartNumber and an ETag")
        listed.append((int(number), tag.replace("&quot;", "").strip('"')))
        checksums[int(number)] = next((value for name, value in fields.items()
                                       if name.startswith("Checksum")), None)
    if not listed:
        raise S3Error("MalformedXML", "the upload names no part")
    return listed, checksums


def _chosen(listed: list[tuple[int, str]], recorded: list[Part]) -> list[Part]:
    """The recorded parts the completion names, checked as S3 checks them. A number named
    again right after itself is the part uploaded again since: its last entry names it
    (as ceph's gateway takes it; the earlier ETag is of a part replaced)."""
    listed = [entry for index, entry in enumerate(listed)
              if index + 1 == len(listed) or listed[index + 1][0] != entry[0]]
    by_number = {part.number: part for part in recorded}
    chosen = []
    for index, (number, tag) in enumerate(listed):
        if index and number <= listed[index - 1][0]:
            raise S3Error("InvalidPartOrder", "The list of parts was not in ascending order. "
                          "The parts list must be specified in order by part number.")
        part = by_number.get(number)
        if part is None or part.md5 != tag.lower():
            raise S3Error("InvalidPart", f"part {number} could not be found, or its ETag "
                          "does not match the part's")
        chosen.append(part)
    for part in chosen[:-1]:
        if part.size < MIN_PART:
            raise S3Error("EntityTooSmall", f"part {part.number} holds {part.size} bytes: "
                          f"every part but the last must hold at least {MIN_PART}")
    return chosen


async def complete_multipart_upload(call: Call) -> Response:
    call.need("write")
    headers = call.request.headers
    upload = await open_upload(call, open_only=False)
    ledger = call.ledger
    body = b"".join([chunk async for chunk in read_body(call, MAX_XML_BODY)])
    if upload.state != UploadState.OPEN:  # a completion again: what the first one made
        made = await ledger.get(upload.document_id)
        return _completed(call, made, await shape_of(ledger, made.blob))
    listed, named = _listed(body)
    chosen = _chosen(listed, await parts_of(ledger, upload.id))
    shape = shape_for(chosen, upload_algorithm(upload.meta), named)
    checked_object_checksum(call, shape)
    size = sum(part.size for part in chosen)
    if size > ledger.settings.max_upload_bytes:
        raise S3Error("EntityTooLarge", f"the object of {size} bytes exceeds the largest "
                      f"object, {ledger.settings.max_upload_bytes} bytes")
    if_none_match, if_match = headers.get("if-none-match"), headers.get("if-match")
    existing = await target(call, call.key, if_none_match, if_match)
    intent = _intent(upload)
    doc = None
    try:
        digests = await _publish(call, upload, intent, chosen)
        if digests.size != size:
            raise S3Error("InvalidPart", "a part changed while the upload was completed: "
                          "retry")
        await record_shape(ledger, intent.blob_name, shape)  # before the object is visible
        if not await ledger.transitions.record_verified(upload, digests.sha256):
            raise IntentLost("the upload's intent was taken (expired and swept)")
        await failpoints.hit("multipart.after_verify")
        if existing is None:
            doc = await _create(call, upload, intent, digests, if_none_match)
        if doc is None:  # the key names a ready document: the published bytes replace it
            doc = await _replace(call, upload, intent, digests, shape, if_none_match,
                                 if_match)
    except (IntentLost, BlobNotFound) as exc:
        # a twin completion finished it first, or the sweeper took it (and deleted the
        # published bytes while this completion was reading them)
        again = await ledger.transitions.find_upload(upload.id)
        if (isinstance(exc, BlobNotFound) and again is not None
                and again.state == UploadState.OPEN and not again.expired):
            raise  # the upload is still this one's to finish: not a lost intent
        if again is None or again.state != UploadState.DONE:
            # swept, or aborted: bytes this completion published after the sweeper or the
            # deletion path removed the intent (Azurite commits the blocks of an upload
            # whose blob was never created) have no row left for either to find: removed
            # here if still ``pending`` and rowless, not left for ``reconcile --fix``
            await asyncio.shield(ledger.drop_lost(intent))
            raise _no_such_upload() from exc
        doc = await ledger.get(again.document_id)
        return await _finished(call, upload, doc, await shape_of(ledger, doc.blob))
    return await _finished(call, upload, doc, shape)


async def _finished(call: Call, upload: UploadRecord, doc: Document,
                    shape: Shape | None) -> Response:
    await failpoints.hit("multipart.after_commit")
    await drop_parts(call.ledger, upload.id)
    return _completed(call, doc, shape)


def _completed(call: Call, doc: Document, shape: Shape | None) -> Response:
    return xml_response(
        f'<CompleteMultipartUploadResult xmlns="{NAMESPACE}">'
        f"<Location>{escape(str(call.request.url.remove_query_params(['uploadId'])))}"
        f"</Location><Bucket>{escape(call.bucket)}</Bucket><Key>{escape(call.key)}</Key>"
        f"<ETag>{escape(etag_of(doc, shape))}</ETag>{checksum_elements(shape)}"
        "</CompleteMultipartUploadResult>", call)


async def _publish(call: Call, upload: UploadRecord, intent: Intent,
                   chosen: list[Part]) -> Digests:
    """The chosen parts published create-only under the intent's blob, still ``pending``
    (a completion tried again after a crash finds them published, and hashes them).

    A publication refused or failed is judged by the upload's row, not by the store's
    answer: an upload swept (or finished) meanwhile is ``BlobNotFound`` whatever the store
    said of a staged upload it no longer has (S3 answers ``NoSuchUpload``, moto a 500, the
    local disk a missing part); an upload still open is a part gone (``InvalidPart``) or,
    if the store did not answer, ``StoreUnavailable`` (the completion may be sent again)."""
    store = call.ledger.store
    try:
        await store.stat(intent.blob_name)
    except BlobNotFound:
        try:
            return await store.commit_staged(
                intent.blob_name, upload.handle, [part.part for part in chosen],
                tags=PENDING, content_type=intent.content_type)
        except BlobAlreadyExists:
            pass  # a concurrent completion of the same upload published it
        except (StoreError, StoreUnavailable) as exc:
            again = await call.ledger.transitions.find_upload(upload.id)
            if again is None or again.state != UploadState.OPEN or again.expired:
                raise BlobNotFound(intent.blob_name) from exc  # swept meanwhile
            if isinstance(exc, StoreUnavailable):
                raise
            raise S3Error("InvalidPart", f"a part is no longer stored ({exc}): upload it "
                          "again") from None
    return await store.digest_stored(intent.blob_name)


async def _create(call: Call, upload: UploadRecord, intent: Intent, digests: Digests,
                  if_none_match: str | None) -> Document | None:
    """Confirm under the key's name, C3, C4; None when another writer's document took the
    name first and no ``If-None-Match`` forbids replacing it."""
    ledger = call.ledger
    try:
        await ledger.confirm(intent, call.key)
    except NameTaken:
        if create_only(if_none_match):
            raise failed("If-None-Match", "the key names an object") from None
        return None
    await failpoints.hit("multipart.after_confirm")
    if not ledger.transitions.deferred:
        await ledger.tag_committed(intent)  # C3
        await failpoints.hit("multipart.after_tag")
    return await ledger.commit_create(intent, digests, upload.id)  # C4, the upload done


async def _replace(call: Call, upload: UploadRecord, intent: Intent, digests: Digests,
                   shape: Shape, if_none_match: str | None, if_match: str | None
                   ) -> Document:
    """The published bytes written as a replace of the key's document (R1-R4), then the
    upload's own intent to the deletion path."""
    ledger = call.ledger
    reader = await ledger.store.open(intent.blob_name)
    try:
        kept = await kept_of(ledger, intent.blob_name)  # the upload's metadata and ACL
        doc = await write(call, call.key, reader, content_type=intent.content_type,
                          meta=kept.meta, acl=kept.acl,
                          sha256=digests.sha256, if_match=if_match, shape=shape,
                          if_none_match=None if create_only(if_none_match) else if_none_match)
    finally:
        await reader.aclose()
    await ledger.abandon(intent)
    return doc


async def abort_multipart_upload(call: Call) -> Response:
    call.need("write")
    upload = await open_upload(call)
    await failpoints.hit("multipart.before_abort")
    try:
        await Resumable(call.ledger).terminate(upload)
    except IntentLost:
        raise _no_such_upload() from None
    # a termination lost with its connection raised DatabaseUnavailable (ServiceUnavailable)
    await failpoints.hit("multipart.after_abort")
    await drop_parts(call.ledger, upload.id)
    return Response(status_code=204, headers=call.headers())
