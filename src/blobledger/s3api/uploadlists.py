"""ListMultipartUploads (the open, unexpired uploads of the bucket, by key then by when
they began), ListParts (an upload's recorded parts, by number), and the abort of every open
upload of a bucket that DeleteBucket removes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from xml.sax.saxutils import escape

from sqlalchemy import Select, select
from starlette.responses import Response

from blobledger.errors import IntentLost, OffsetMismatch
from blobledger.protocol.models import UploadMode, UploadState
from blobledger.protocol.transitions.statements import NOW, documents, uploads
from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error
from blobledger.s3api.multipart import INITIATOR, KEY, open_upload
from blobledger.s3api.rows import drop_parts, parts_of
from blobledger.s3api.shapes import upload_algorithm
from blobledger.s3api.xmlbody import NAMESPACE, iso, xml_response
from blobledger.uploads.resumable import Resumable

MAX_ITEMS = 1000


def _most(call: Call, name: str) -> int:
    text = call.params.get(name, str(MAX_ITEMS))
    if not text.isdigit():
        raise S3Error("InvalidArgument", f"{name} must be a non-negative integer")
    return min(int(text), MAX_ITEMS)


def _owner(call: Call, meta: dict[str, str]) -> str:
    """The upload's Initiator and Owner: the key that began it (one begun before the key
    was recorded: the key that asks)."""
    key_id = escape(meta.get(INITIATOR) or call.signed.key_id)
    return (f"<Initiator><ID>{key_id}</ID><DisplayName>{key_id}</DisplayName></Initiator>"
            f"<Owner><ID>{key_id}</ID><DisplayName>{key_id}</DisplayName></Owner>")


def _of_bucket(call: Call) -> Select[tuple[str, str, datetime]]:
    """The open uploads of the request's bucket (that of their placeholder document)."""
    return (select(uploads.c.id, uploads.c.meta, uploads.c.created_at)
            .join(documents, documents.c.id == uploads.c.document_id)
            .where(documents.c.bucket == call.ledger_bucket,
                   uploads.c.mode == UploadMode.S3.value,
                   uploads.c.state == UploadState.OPEN.value))


async def abort_uploads(call: Call) -> None:
    """Every open upload of the request's bucket aborted (expired ones too), as S3's
    DeleteBucket drops the uploads in progress: each one's intent to the deletion path,
    its parts dropped. One completed or swept meanwhile is passed over."""
    ledger = call.ledger
    async with ledger.db.transaction(readonly=True) as conn:
        rows = (await conn.execute(_of_bucket(call))).all()
    for row in rows:
        upload = await ledger.transitions.find_upload(row.id)
        if upload is None:
            continue
        try:
            await Resumable(ledger).terminate(upload)
        except (IntentLost, OffsetMismatch):
            continue
        await drop_parts(ledger, upload.id)


async def list_multipart_uploads(call: Call) -> Response:
    call.need("read")
    params = call.params
    if params.get("delimiter"):
        raise S3Error("NotImplemented", "ListMultipartUploads with a delimiter is not "
                      "implemented")
    prefix = params.get("prefix", "")
    key_marker = params.get("key-marker", "")
    id_marker = params.get("upload-id-marker", "")
    most = _most(call, "max-uploads")
    ledger = call.ledger
    async with ledger.db.transaction(readonly=True) as conn:
        rows = (await conn.execute(_of_bucket(call).where(uploads.c.expires_at > NOW),
                                   ledger.transitions.times())).all()
    metas = {row.id: json.loads(row.meta) for row in rows}
    found = sorted((metas[row.id].get(KEY, ""), row.created_at, row.id) for row in rows)
    found = [item for item in found if item[0].startswith(prefix) and (
        item[0] > key_marker or (item[0] == key_marker and id_marker
                                 and item[2] > id_marker))]
    shown, truncated = found[:most], len(found) > most
    items = "".join(
        f"<Upload><Key>{escape(key)}</Key><UploadId>{upload_id}</UploadId>"
        f"{_owner(call, metas[upload_id])}"
        f"<StorageClass>STANDARD</StorageClass><Initiated>{iso(created.replace(tzinfo=UTC))}</Initiated>"
        "</Upload>" for key, created, upload_id in shown)
    following = ""
    if truncated and shown:
        following = (f"<NextKeyMarker>{escape(shown[-1][0])}</NextKeyMarker>"
                     f"<NextUploadIdMarker>{shown[-1][2]}</NextUploadIdMarker>")
    return xml_response(
        f'<ListMultipartUploadsResult xmlns="{NAMESPACE}"><Bucket>{escape(call.bucket)}'
        f"</Bucket><KeyMarker>{escape(key_marker)}</KeyMarker><UploadIdMarker>"
        f"{escape(id_marker)}</UploadIdMarker>{following}<Prefix>{escape(prefix)}</Prefix>"
        f"<MaxUploads>{most}</MaxUploads><IsTruncated>{str(truncated).lower()}"
        f"</IsTruncated>{items}</ListMultipartUploadsResult>", call)


async def list_parts(call: Call) -> Response:
    call.need("read")
    upload = await open_upload(call)
    marker_text = call.params.get("part-number-marker", "0") or "0"
    if not marker_text.isdigit():
        raise S3Error("InvalidArgument", "part-number-marker must be an integer")
    marker = int(marker_text)
    most = _most(call, "max-parts")
    recorded = [part for part in await parts_of(call.ledger, upload.id)
                if part.number > marker]
    shown, truncated = recorded[:most], len(recorded) > most
    algorithm = upload_algorithm(upload.meta)
    member = "" if algorithm is None else algorithm.member
    items = "".join(
        f"<Part><PartNumber>{part.number}</PartNumber><LastModified>{iso(part.created_at.replace(tzinfo=UTC))}"
        f'</LastModified><ETag>"{part.md5}"</ETag><Size>{part.size}</Size>'
        + (f"<{member}>{part.checksum}</{member}>" if member and part.checksum else "")
        + "</Part>" for part in shown)
    checksum = "" if algorithm is None else (
        f"<ChecksumAlgorithm>{algorithm.name}</ChecksumAlgorithm>"
        f"<ChecksumType>{algorithm.type}</ChecksumType>")
    following = shown[-1].number if shown else marker
    return xml_response(
        f'<ListPartsResult xmlns="{NAMESPACE}"><Bucket>{escape(call.bucket)}</Bucket>'
        f"<Key>{escape(call.key)}</Key><UploadId>{upload.id}</UploadId>"
        f"{_owner(call, upload.meta)}"
        f"<StorageClass>STANDARD</StorageClass><PartNumberMarker>{marker}"
        f"</PartNumberMarker><NextPartNumberMarker>{following}</NextPartNumberMarker>"
        f"<MaxParts>{most}</MaxParts><IsTruncated>{str(truncated).lower()}</IsTruncated>"
        f"{checksum}{items}</ListPartsResult>", call)
