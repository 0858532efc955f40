"""HTTP header values the service reads and writes: ETags (the document version),
conditional lists, byte ranges, checksum headers and a safe Content-Disposition.

Pure functions, no I/O. A malformed digest header raises :class:`Problem` (400); a
malformed conditional header matches nothing and a malformed Range is ignored (RFC 9110).
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from email.utils import format_datetime
from urllib.parse import quote

from blobledger.api.problems import Problem

_RANGE = re.compile(r"bytes=([0-9]*)-([0-9]*)", re.ASCII | re.IGNORECASE)
_DIGEST_ITEM = re.compile(r"^\s*([A-Za-z0-9-]+)\s*=\s*:([A-Za-z0-9+/=]*):\s*$", re.ASCII)
# RFC 9110 section 8.8.3: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E /
# obs-text (header values arrive decoded as Latin-1, so obs-text is U+0080 to U+00FF)
_ENTITY_TAG = re.compile('(W/)?"([\x21\x23-\x7e\x80-\xff]*)"')
_OWS = re.compile(r"[ \t]*")
#: a version as this service writes it in an ETag: a decimal number without leading zeros
_VERSION = re.compile(r"[1-9][0-9]{0,17}", re.ASCII)
#: more digits than any byte position can have: such a number is treated as "very large"
MAX_DIGITS = 18


class MalformedHeader(ValueError):
    """A header value that does not follow its grammar."""


@dataclass(frozen=True)
class EntityTag:
    weak: bool
    opaque: str


def etag(version: int) -> str:
    """The strong ETag of a document version: ``"3"``."""
    return f'"{version}"'


def parse_entity_tags(value: str) -> list[EntityTag] | None:
    """The entity tags of an If-Match / If-None-Match value (``#entity-tag``), or None for
    ``*``; MalformedHeader if the value is neither (``1``, ``"1``, ``W/1``, ...)."""
    if value.strip(" \t") == "*":
        return None
    tags: list[EntityTag] = []
    pos, end = 0, len(value)
    while pos < end:
        pos = _OWS.match(value, pos).end()  # type: ignore[union-attr]
        if pos < end and value[pos] == ",":  # empty list elements are allowed
            pos += 1
            continue
        if pos == end:
            break
        match = _ENTITY_TAG.match(value, pos)
        if match is None:
            raise MalformedHeader("not a list of quoted entity tags")
        tags.append(EntityTag(bool(match.group(1)), match.group(2)))
        pos = _OWS.match(value, match.end()).end()  # type: ignore[union-attr]
        if pos < end and value[pos] != ",":
            raise MalformedHeader("entity tags must be separated by commas")
    if not tags:
        raise MalformedHeader("no entity tag")
    return tags


def etag_versions(value: str, *, weak: bool = False) -> list[int] | None:
    """The versions listed in an If-Match / If-None-Match value; None means ``*``.

    Entity tags are compared character by character with the ones this service writes
    (``"0001"`` is not ``"1"``): others match nothing and are dropped; so are weak ones
    (``W/"3"``) unless ``weak`` (If-None-Match compares weakly, If-Match strongly). A value
    that is neither ``*`` nor a list of quoted entity tags (``1``, ``garbage``) matches
    nothing: an If-Match holding one fails (412), an If-None-Match holding one holds.
    """
    try:
        tags = parse_entity_tags(value)
    except MalformedHeader:
        return []
    if tags is None:
        return None
    return [int(tag.opaque) for tag in tags
            if (weak or not tag.weak) and _VERSION.fullmatch(tag.opaque)]


def matches(value: str | None, version: int, *, weak: bool = True) -> bool:
    """Whether a conditional header's entity list names ``version`` (``*`` names all)."""
    if value is None:
        return False
    versions = etag_versions(value, weak=weak)
    return versions is None or version in versions


def if_range_matches(value: str, version: int) -> bool:
    """Whether an If-Range value is the strong ETag of ``version``. Anything else (another
    tag, a weak tag, a date, a malformed value) asks for the whole representation."""
    match = _ENTITY_TAG.fullmatch(value.strip(" \t"))
    return match is not None and not match.group(1) and match.group(2) == str(version)


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


@dataclass(frozen=True)
class ByteRange:
    start: int
    length: int

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.start + self.length - 1}/{size}"


class Unsatisfiable(Exception):
    """The Range names no byte of the representation (416)."""


def _position(digits: str) -> int:
    """A byte position; one with more than MAX_DIGITS digits is larger than any size."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= MAX_DIGITS else 10**MAX_DIGITS


def parse_range(value: str | None, size: int) -> ByteRange | None:
    """The single byte range asked for, or None to send the whole representation.

    Invalid syntax and multiple ranges are ignored (RFC 9110 allows a server to ignore
    Range); a syntactically valid range past the end raises Unsatisfiable. Positions are
    ASCII digits of any length (a huge one is simply past the end).
    """
    if value is None:
        return None
    match = _RANGE.fullmatch(value.strip(" \t").replace(" ", ""))
    if match is None or (not match.group(1) and not match.group(2)):
        return None
    first, last = match.group(1), match.group(2)
    if first:
        start = _position(first)
        end = _position(last) if last else size - 1
        if last and end < start:
            return None
        if start >= size:
            raise Unsatisfiable
        end = min(end, size - 1)
        return ByteRange(start, end - start + 1)
    suffix = _position(last)
    if suffix == 0 or size == 0:
        raise Unsatisfiable
    suffix = min(suffix, size)
    return ByteRange(size - suffix, suffix)


def expected_digests(repr_digest: str | None, content_md5: str | None) -> tuple[str | None,
                                                                               str | None]:
    """The (sha256, md5) hex digests a client declared for the document's bytes.

    ``Repr-Digest: sha-256=:<base64>:`` (RFC 9530; ``md5`` is also read from it) and
    ``Content-MD5: <base64>`` (RFC 1864). Unknown algorithms in Repr-Digest are ignored.
    """
    sha256 = md5 = None
    if repr_digest is not None:
        for item in repr_digest.split(","):
            match = _DIGEST_ITEM.match(item)
            if match is None:
                raise Problem(400, "invalid-input",
                              "Repr-Digest must look like sha-256=:<base64>:")
            algorithm = match.group(1).lower()
            if algorithm == "sha-256":
                sha256 = _b64_hex(match.group(2), 32, "Repr-Digest sha-256")
            elif algorithm == "md5":
                md5 = _b64_hex(match.group(2), 16, "Repr-Digest md5")
    if content_md5 is not None:
        md5 = _b64_hex(content_md5.strip(), 16, "Content-MD5")
    return sha256, md5


def repr_digest(sha256_hex: str) -> str:
    return f"sha-256=:{base64.b64encode(bytes.fromhex(sha256_hex)).decode()}:"


def _b64_hex(text: str, size: int, what: str) -> str:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise Problem(400, "invalid-input", f"{what} must be the base64 of {size} bytes")
    return raw.hex()


def content_disposition(document_name: str) -> str:
    """``attachment`` with an ASCII fallback filename and an RFC 5987 ``filename*``."""
    base = document_name.rsplit("/", 1)[-1] or "download"
    fallback = "".join(
        c if 0x20 <= ord(c) < 0x7F and c not in '"\\%;' else "_"
        for c in unicodedata.normalize("NFKD", base)
        if not unicodedata.combining(c)
    ) or "download"
    encoded = quote(base, safe="!#$&+-.^_`|~")
    return f'attachment; filename="{fallback}"; filename*=UTF-8\'\'{encoded}'
