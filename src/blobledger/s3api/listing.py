"""ListObjects (v1: ``marker``), ListObjectsV2 (``continuation-token``, ``start-after``) and
ListObjectVersions (``key-marker``, ``version-id-marker``) over the ledger's ready documents:
``prefix``, ``delimiter``, ``max-keys``, ``encoding-type=url``. A bucket here has no
versioning: each ready document is its one version, ``null``, the latest."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from urllib.parse import quote
from xml.sax.saxutils import escape

from starlette.responses import Response

from blobledger._base.names import MAX_NAME_LENGTH, check_name_prefix
from blobledger.errors import InvalidInput
from blobledger.protocol.documents import Document
from blobledger.s3api.access import owner_id
from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error
from blobledger.s3api.lookup import etag_of
from blobledger.s3api.rows import Shape, shapes_of
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


def _holdable(text: str) -> str:
    """The longest start of ``text`` that a name could hold (the ledger refuses to list
    by a prefix or after a name holding a control character: S3 only compares them)."""
    for cut, char in enumerate(text[:MAX_NAME_LENGTH]):
        try:
            check_name_prefix(char)
        except InvalidInput:
            return text[:cut]
    return text[:MAX_NAME_LENGTH]


async def _ready(call: Call, prefix: str, after: str | None) -> AsyncIterator[Document]:
    """The ready documents under ``prefix`` after the name ``after``, in name order. A
    prefix holding a character no name holds matches nothing; an ``after`` holding one is
    compared as it is (the ledger's page starts at its longest start a name could hold)."""
    if _holdable(prefix) != prefix:
        return
    bound = after if after is None else _holdable(after) or None
    while True:
        batch = await call.ledger.page(prefix=prefix, after=bound, limit=PAGE,
                                       bucket=call.ledger_bucket)
        for doc in batch:
            if after is None or doc.name > after:
                yield doc
        if len(batch) < PAGE:
            return
        bound = batch[-1].name


@dataclass
class _Page:
    """One page of a listing: its objects, its common prefixes, and where it stopped."""

    contents: list[Document] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    truncated: bool = False
    #: the last name the page passed (an object's, or one folded into a common prefix)
    last: str | None = None
    #: the last entry the page answers (a key or a common prefix): v1's NextMarker
    last_entry: str | None = None
    #: the common prefix whose keys are all answered (the next page skips them)
    skip: str | None = None
    #: the shapes of the multipart objects among ``contents``, by blob (their ETags)
    shapes: dict[str, Shape] = field(default_factory=dict)


async def _walk(call: Call, prefix: str, delimiter: str, after: str | None,
                skip: str | None, max_keys: int) -> _Page:
    """Ready documents only (never a pending, held or rejected one), in the database's
    order of names, after ``after``; a key under a common prefix is folded into it, and
    one folded into ``skip`` (answered by an earlier page) is passed over."""
    page = _Page(last=after, skip=skip)
    if max_keys == 0:
        return page
    async for doc in _ready(call, prefix, after):
        folded = None
        if delimiter:
            rest = doc.name[len(prefix):]
            cut = rest.find(delimiter)
            if cut >= 0:
                folded = prefix + rest[:cut + len(delimiter)]
        if folded is not None and folded == page.skip:
            page.last = doc.name
            continue
        if len(page.contents) + len(page.prefixes) >= max_keys:
            page.truncated = True
            break
        if folded is not None:
            page.prefixes.append(folded)
            page.skip = page.last_entry = folded
        else:
            page.contents.append(doc)
            page.last_entry = doc.name
        page.last = doc.name
    page.shapes = await shapes_of(call.ledger, [doc.blob for doc in page.contents])
    return page


def _options(call: Call) -> tuple[str, str, str | None, int]:
    params = call.params
    encoding = params.get("encoding-type")
    if encoding not in (None, "url"):
        raise S3Error("InvalidArgument", "encoding-type must be url")
    max_text = params.get("max-keys", str(MAX_KEYS))
    if not max_text.isdigit():
        raise S3Error("InvalidArgument", "max-keys must be a number")
    return (params.get("prefix", ""), params.get("delimiter", ""), encoding,
            min(int(max_text), MAX_KEYS))


def _encoder(encoding: str | None) -> Callable[[str], str]:
    def enc(text: str) -> str:
        return escape(quote(text, safe="/") if encoding == "url" else text)
    return enc


def _entries(call: Call, page: _Page, enc: Callable[[str], str], versions: bool = False,
             owner: bool = True) -> list[str]:
    """The page's objects (``<Contents>``, or ``<Version>``: its one version, ``null``),
    with their owner unless ``owner`` is false (ListObjectsV2 without ``fetch-owner``),
    and its common prefixes. An object's owner is its bucket's (the key that created it;
    for a bucket no key owns, the key that asks; none shown to an unsigned request
    there), as GetObjectAcl shows it."""
    tag = "Version" if versions else "Contents"
    version = "<VersionId>null</VersionId><IsLatest>true</IsLatest>" if versions else ""
    assert call.access is not None
    who = escape(owner_id(call.access.bucket, call.signed))
    shown = f"<Owner><ID>{who}</ID><DisplayName>{who}</DisplayName></Owner>" if who else ""
    parts = []
    for doc in page.contents:
        etag = escape(etag_of(doc, page.shapes.get(doc.blob)))
        parts.append(f"<{tag}><Key>{enc(doc.name)}</Key>{version}<LastModified>"
                     f"{iso(doc.updated_at)}</LastModified><ETag>{etag}"
                     f"</ETag><Size>{doc.size or 0}</Size>"
                     f"{shown if owner else ''}<StorageClass>STANDARD"
                     f"</StorageClass></{tag}>")
    for folded in page.prefixes:
        parts.append(f"<CommonPrefixes><Prefix>{enc(folded)}</Prefix></CommonPrefixes>")
    return parts


async def list_objects_v2(call: Call) -> Response:
    """ListObjectsV2: a page after ``start-after`` or where the continuation token says."""
    call.need("read")
    prefix, delimiter, encoding, max_keys = _options(call)
    token = call.params.get("continuation-token")
    start_after = call.params.get("start-after")
    # an empty token is the first page's, as in S3
    after, skip = _untoken(token) if token else (start_after or None, None)
    page = await _walk(call, prefix, delimiter, after, skip, max_keys)
    next_token = _token(page.last, page.skip) if page.truncated and page.last else None
    enc = _encoder(encoding)
    parts = [f'<ListBucketResult xmlns="{NAMESPACE}"><Name>{call.bucket}</Name>',
             f"<Prefix>{enc(prefix)}</Prefix>", f"<MaxKeys>{max_keys}</MaxKeys>",
             f"<KeyCount>{len(page.contents) + len(page.prefixes)}</KeyCount>",
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
    parts += _entries(call, page, enc, owner=call.params.get("fetch-owner") == "true")
    parts.append("</ListBucketResult>")
    return xml_response("".join(parts), call)


async def _after_marker(call: Call, prefix: str, delimiter: str, marker: str,
                        max_keys: int) -> _Page:
    """A page after v1's ``marker`` (ListObjectVersions' ``key-marker``): one that is a
    common prefix passes over every key under it."""
    skip = marker if delimiter and marker.endswith(delimiter) else None
    return await _walk(call, prefix, delimiter, marker or None, skip, max_keys)


async def list_objects(call: Call) -> Response:
    """ListObjects (v1): a page after ``marker``. A marker that is a common prefix (v1's
    ``NextMarker`` of a page that ended on one) passes over every key under it, as S3
    does; ``NextMarker`` is answered with a delimiter (without one, a client continues
    from the last key)."""
    call.need("read")
    prefix, delimiter, encoding, max_keys = _options(call)
    marker = call.params.get("marker", "")
    page = await _after_marker(call, prefix, delimiter, marker, max_keys)
    enc = _encoder(encoding)
    parts = [f'<ListBucketResult xmlns="{NAMESPACE}"><Name>{call.bucket}</Name>',
             # v1's Prefix is not URL-encoded (clients do not decode it), its Marker is
             f"<Prefix>{escape(prefix)}</Prefix>", f"<Marker>{enc(marker)}</Marker>",
             f"<MaxKeys>{max_keys}</MaxKeys>",
             f"<IsTruncated>{'true' if page.truncated else 'false'}</IsTruncated>"]
    if delimiter:
        parts.append(f"<Delimiter>{enc(delimiter)}</Delimiter>")
        if page.truncated and page.last_entry is not None:
            parts.append(f"<NextMarker>{enc(page.last_entry)}</NextMarker>")
    if encoding:
        parts.append("<EncodingType>url</EncodingType>")
    parts += _entries(call, page, enc)
    parts.append("</ListBucketResult>")
    return xml_response("".join(parts), call)


async def list_object_versions(call: Call) -> Response:
    """ListObjectVersions of a bucket without versioning: each ready document once, as its
    ``null`` version, the latest; no delete markers. A page goes on after ``key-marker``
    (every key has only its ``null`` version, so ``version-id-marker`` adds nothing);
    ``NextKeyMarker`` is the page's last entry, ``NextVersionIdMarker`` ``null``."""
    call.need("read")
    prefix, delimiter, encoding, max_keys = _options(call)
    marker = call.params.get("key-marker", "")
    version_marker = call.params.get("version-id-marker")
    if version_marker is not None and version_marker not in ("", "null"):
        raise S3Error("InvalidArgument", "Invalid version id specified")
    if version_marker and not marker:
        raise S3Error("InvalidArgument", "A version-id marker cannot be specified without "
                      "a key marker.")
    page = await _after_marker(call, prefix, delimiter, marker, max_keys)
    enc = _encoder(encoding)
    parts = [f'<ListVersionsResult xmlns="{NAMESPACE}"><Name>{call.bucket}</Name>',
             f"<Prefix>{enc(prefix)}</Prefix>", f"<KeyMarker>{enc(marker)}</KeyMarker>",
             f"<VersionIdMarker>{escape(version_marker or '')}</VersionIdMarker>",
             f"<MaxKeys>{max_keys}</MaxKeys>",
             f"<IsTruncated>{'true' if page.truncated else 'false'}</IsTruncated>"]
    if delimiter:
        parts.append(f"<Delimiter>{enc(delimiter)}</Delimiter>")
    if page.truncated and page.last_entry is not None:
        parts.append(f"<NextKeyMarker>{enc(page.last_entry)}</NextKeyMarker>"
                     "<NextVersionIdMarker>null</NextVersionIdMarker>")
    if encoding:
        parts.append("<EncodingType>url</EncodingType>")
    parts += _entries(call, page, enc, versions=True)
    parts.append("</ListVersionsResult>")
    return xml_response("".join(parts), call)


async def get_bucket_versioning(call: Call) -> Response:
    """GetBucketVersioning: versioning was never turned on (an empty configuration)."""
    call.need("read")
    return xml_response(f'<VersioningConfiguration xmlns="{NAMESPACE}"/>', call)
