"""GetObjectAttributes (``GET /BUCKET/KEY?attributes``): what ``x-amz-object-attributes``
names of a ready object, without its bytes: its ETag, its checksum (a multipart upload's
with an algorithm), its parts (a multipart object's; ``x-amz-max-parts``,
``x-amz-part-number-marker``), its storage class (``STANDARD``) and its size."""

from __future__ import annotations

from xml.sax.saxutils import escape

from starlette.responses import Response

from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error
from blobledger.s3api.lookup import etag_of, find, http_date
from blobledger.s3api.rows import Shape, shape_of
from blobledger.s3api.shapes import checksum_elements
from blobledger.s3api.xmlbody import NAMESPACE, xml_response

KNOWN = ("ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize")
MAX_PARTS = 1000


def _number(call: Call, header: str, default: int) -> int:
    text = call.request.headers.get(header)
    if text is None:
        return default
    if not text.strip().isdigit():
        raise S3Error("InvalidArgument", f"{header} must be a number")
    return int(text)


def _parts(call: Call, shape: Shape) -> str:
    marker = _number(call, "x-amz-part-number-marker", 0)
    most = min(_number(call, "x-amz-max-parts", MAX_PARTS), MAX_PARTS)
    numbered = list(enumerate(shape.parts, start=1))
    shown = [(number, part) for number, part in numbered if number > marker][:most]
    truncated = bool(shown) and shown[-1][0] < len(numbered)
    member = f"Checksum{shape.algorithm}"
    entries = "".join(
        f"<Part><PartNumber>{number}</PartNumber><Size>{size}</Size>"
        + (f"<{member}>{escape(checksum)}</{member}>" if checksum is not None else "")
        + "</Part>" for number, (size, checksum) in shown)
    last = shown[-1][0] if shown else marker
    return (f"<ObjectParts><PartsCount>{len(numbered)}</PartsCount>"
            f"<PartNumberMarker>{marker}</PartNumberMarker>"
            f"<NextPartNumberMarker>{last}</NextPartNumberMarker><MaxParts>{most}</MaxParts>"
            f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{entries}"
            "</ObjectParts>")


async def get_object_attributes(call: Call) -> Response:
    call.need("read")
    asked = {item.strip() for item in
             call.request.headers.get("x-amz-object-attributes", "").split(",") if item.strip()}
    if not asked or asked - set(KNOWN):
        raise S3Error("InvalidArgument", f"x-amz-object-attributes names one or more of "
                      f"{', '.join(KNOWN)}")
    doc = await find(call, call.key)
    shape = await shape_of(call.ledger, doc.blob)
    body = []
    if "ETag" in asked:
        body.append(f"<ETag>{escape(etag_of(doc, shape).strip(chr(34)))}</ETag>")
    if "Checksum" in asked and checksum_elements(shape):
        body.append(f"<Checksum>{checksum_elements(shape)}</Checksum>")
    if "ObjectParts" in asked and shape is not None:
        body.append(_parts(call, shape))
    if "StorageClass" in asked:
        body.append("<StorageClass>STANDARD</StorageClass>")
    if "ObjectSize" in asked:
        body.append(f"<ObjectSize>{doc.size or 0}</ObjectSize>")
    return xml_response(f'<GetObjectAttributesResponse xmlns="{NAMESPACE}">{"".join(body)}'
                        "</GetObjectAttributesResponse>", call,
                        **{"Last-Modified": http_date(doc.updated_at)})
