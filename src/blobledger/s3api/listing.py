"""ListObjectsV2 over the ledger's ready documents."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from urllib.parse import quote
from xml.sax.saxutils import escape

from starlette.responses import Response

from blobledger.protocol.documents import Document
from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error
from blobledger.s3api.lookup import etag_of
from blobledger.s3api.xmlbody import NAMESPACE, iso, xml_response

#: the most keys one listing answers (S3's own)
MAX_KEYS = 1000
PAGE = 500


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
        batch = await call.ledger.page(prefix=prefix, after=after, limit=PAGE,
                                       bucket=call.ledger_bucket)
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

    parts = [f'<ListBucketResult xmlns="{NAMESPACE}"><Name>{call.bucket}</Name>',
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
    return xml_response("".join(parts), call)
