"""The bucket's operations: ListBuckets and HeadBucket for the one bucket, CreateBucket of it
(already yours), and ListObjectsV2 over the ledger's ready documents."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import quote
from xml.sax.saxutils import escape

from defusedxml import ElementTree
from starlette.responses import Response

from blobledger.protocol.documents import Document
from blobledger.s3api.call import Call
from blobledger.s3api.errors import XML_TYPE, S3Error
from blobledger.s3api.objects import etag_of, read_body

NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
#: the most keys one listing answers (S3's own)
MAX_KEYS = 1000
#: the largest CreateBucketConfiguration body read
MAX_XML_BODY = 64 * 1024
#: the bucket's creation date as ListBuckets shows it: it has always existed
CREATED = datetime(2024, 1, 1, tzinfo=UTC)
PAGE = 500

def _xml(body: str, call: Call) -> Response:
    return Response('<?xml version="1.0" encoding="UTF-8"?>\n' + body, 200,
                    headers=call.headers(), media_type=XML_TYPE)


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{when.microsecond // 1000:03d}Z"


async def list_buckets(call: Call) -> Response:
    call.need("read")
    owner = f"<Owner><ID>{call.signed.key_id}</ID><DisplayName>{call.signed.key_id}" \
            "</DisplayName></Owner>"
    return _xml(f'<ListAllMyBucketsResult xmlns="{NAMESPACE}">{owner}<Buckets><Bucket>'
                f"<Name>{call.settings.s3api_bucket}</Name><CreationDate>{iso(CREATED)}"
                "</CreationDate></Bucket></Buckets></ListAllMyBucketsResult>", call)


async def head_bucket(call: Call) -> Response:
    call.need("read")
    return Response(status_code=200, headers=call.headers(**{"x-amz-bucket-region":
                                                             "us-east-1"}))


async def create_bucket(call: Call) -> Response:
    """The one bucket exists: a CreateBucket of it is ``BucketAlreadyOwnedByYou`` once its
    configuration, if any, parses (untrusted XML: defusedxml refuses entities and DTDs)."""
    call.need("write")
    body = b"".join([chunk async for chunk in read_body(call, MAX_XML_BODY)])
    if body.strip():
        try:
            root = ElementTree.fromstring(body)
        except Exception:  # defusedxml's refusals and expat's parse errors alike
            raise S3Error("MalformedXML", "the XML you provided was not well-formed") from None
        if not root.tag.endswith("CreateBucketConfiguration"):
            raise S3Error("MalformedXML", "expected a CreateBucketConfiguration")
    raise S3Error("BucketAlreadyOwnedByYou", "the bucket exists and is yours")


def _token(after: str, skip: str | None) -> str:
    raw = json.dumps({"a": after, "s": skip}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _untoken(text: str) -> tuple[str, str | None]:
    try:
        data = json.loads(base64.urlsafe_b64decode(text.encode()))
        after, skip = data["a"], data["s"]
        if isinstance(after, str) and (skip is None or isinstance(skip, str)):
            return after, skip
    except (ValueError, KeyError, TypeError):
        pass
    raise S3Error("InvalidArgument", "the continuation token is not valid")


async def _ready(call: Call, prefix: str, after: str | None) -> AsyncIterator[Document]:
    """The ready documents under ``prefix`` after the name ``after``, in name order."""
    while True:
        batch = await call.ledger.page(prefix=prefix, after=after, limit=PAGE)
        for doc in batch:
            yield doc
        if len(batch) < PAGE:
            return
        after = batch[-1].name


async def list_objects_v2(call: Call) -> Response:
    """Ready documents only (never a pending, held or rejected one), in the database's
    order of names; a key under a common prefix is folded into it."""
    call.need("read")
    params = call.params
    prefix = params.get("prefix", "")
    delimiter = params.get("delimiter", "")
    encoding = params.get("encoding-type")
    if encoding not in (None, "url"):
        raise S3Error("InvalidArgument", "encoding-type must be url")
    max_text = params.get("max-keys", str(MAX_KEYS))
    if not max_text.isdigit():
        raise S3Error("InvalidArgument", "max-keys must be a number")
    max_keys = min(int(max_text), MAX_KEYS)
    token = params.get("continuation-token")
    start_after = params.get("start-after")
    after, skip = _untoken(token) if token is not None else (start_after or None, None)

    contents: list[Document] = []
    prefixes: list[str] = []
    next_token: str | None = None
    last = after
    async for doc in _ready(call, prefix, after):
        folded = None
        if delimiter:
            rest = doc.name[len(prefix):]
            cut = rest.find(delimiter)
            if cut >= 0:
                folded = prefix + rest[:cut + len(delimiter)]
        if folded is not None and folded == skip:
            last = doc.name
            continue
        if len(contents) + len(prefixes) >= max_keys:
            next_token = _token(last, skip) if last is not None else None
            break
        if folded is not None:
            prefixes.append(folded)
            skip = folded
        else:
            contents.append(doc)
        last = doc.name

    def enc(text: str) -> str:
        return escape(quote(text, safe="/") if encoding == "url" else text)

    parts = [f'<ListBucketResult xmlns="{NAMESPACE}"><Name>{call.settings.s3api_bucket}</Name>',
             f"<Prefix>{enc(prefix)}</Prefix>", f"<MaxKeys>{max_keys}</MaxKeys>",
             f"<KeyCount>{len(contents) + len(prefixes)}</KeyCount>",
             f"<IsTruncated>{'true' if next_token else 'false'}</IsTruncated>"]
    if delimiter:
        parts.append(f"<Delimiter>{enc(delimiter)}</Delimiter>")
    if encoding:
        parts.append("<EncodingType>url</EncodingType>")
    if token is not None:
        parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
    if next_token:
        parts.append(f"<NextContinuationToken>{next_token}</NextContinuationToken>")
    if start_after is not None:
        parts.append(f"<StartAfter>{enc(start_after)}</StartAfter>")
    for doc in contents:
        parts.append(f"<Contents><Key>{enc(doc.name)}</Key><LastModified>"
                     f"{iso(doc.updated_at)}</LastModified><ETag>{escape(etag_of(doc))}"
                     f"</ETag><Size>{doc.size or 0}</Size><StorageClass>STANDARD"
                     "</StorageClass></Contents>")
    for folded in prefixes:
        parts.append(f"<CommonPrefixes><Prefix>{enc(folded)}</Prefix></CommonPrefixes>")
    parts.append("</ListBucketResult>")
    return _xml("".join(parts), call)
