"""HTTP header values the service reads and writes: ETags (the document version),
conditional lists, byte ranges, checksum headers and a safe Content-Disposition.

Pure functions, no I/O. A malformed value a client sent raises :class:`Problem` (400).
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

_ETAG = re.compile(r'\s*(W/)?"([^"]*)"\s*|\s*([^",\s]+)\s*')
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_DIGEST_ITEM = re.compile(r"^\s*([A-Za-z0-9-]+)\s*=\s*:([A-Za-z0-9+/=]*):\s*$")


def etag(version: int) -> str:
    """The strong ETag of a document version: ``"3"``."""
    return f'"{version}"'


def etag_versions(value: str, *, weak: bool = False) -> list[int] | None:
    """The versions listed in an If-Match / If-None-Match value; None means ``*``.

    Entities that are not versions of ours match nothing and are dropped; so are weak ones
    (``W/"3"``) unless ``weak`` (If-None-Match compares weakly, If-Match strongly).
    """
    if value.strip() == "*":
        return None
    versions: list[int] = []
    for item in value.split(","):
        match = _ETAG.fullmatch(item)
        if match is None or (match.group(1) and not weak):
            continue
        text = match.group(2) if match.group(2) is not None else match.group(3)
        if text.isdigit() and len(text) <= 18:
            versions.append(int(text))
    return versions


def matches(value: str | None, version: int, *, weak: bool = True) -> bool:
    """Whether a conditional header's entity list names ``version`` (``*`` names all)."""
    if value is None:
        return False
    versions = etag_versions(value, weak=weak)
    return versions is None or version in versions


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


def parse_range(value: str | None, size: int) -> ByteRange | None:
    """The single byte range asked for, or None to send the whole representation.

    Invalid syntax and multiple ranges are ignored (RFC 9110 allows a server to ignore
    Range); a syntactically valid range past the end raises Unsatisfiable.
    """
    if value is None:
        return None
    match = _RANGE.match(value.strip().replace(" ", ""))
    if match is None or (not match.group(1) and not match.group(2)):
        return None
    first, last = match.group(1), match.group(2)
    if first:
        start = int(first)
        end = int(last) if last else size - 1
        if last and end < start:
            return None
        if start >= size:
            raise Unsatisfiable
        end = min(end, size - 1)
        return ByteRange(start, end - start + 1)
    suffix = int(last)
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
