"""HTTP header values the service reads and writes: ETags (the document version),
conditional lists, byte ranges and checksum headers (Content-Disposition is
:mod:`blobledger._base.disposition`).

Pure functions, no I/O. A malformed digest header raises :class:`Problem` (400); a
malformed conditional header matches nothing and a malformed Range is ignored (RFC 9110).

The grammars are werkzeug's (``werkzeug.http``: entity-tag lists, Range, header quoting)
and http-sfv's (RFC 9651 structured fields, for ``Repr-Digest``); what stays here is where
their semantics are not the service's, each said at its place: werkzeug reads unquoted and
``w/`` tags and skips junk between commas (we match nothing on a malformed list), drops the
weak marker of an If-Range tag. Range is :mod:`blobledger._base.ranges` (the Django view
reads it too), re-exported here.
"""

from __future__ import annotations

import base64
import re
from datetime import datetime
from email.utils import format_datetime

from http_sfv.dictionary import Dictionary
from werkzeug.datastructures import ETags
from werkzeug.http import parse_etags

from blobledger._base.ranges import ByteRange as ByteRange  # re-exported: the routes and
from blobledger._base.ranges import Unsatisfiable as Unsatisfiable  # tests read Range here
from blobledger._base.ranges import parse_range as parse_range
from blobledger.api.problems import Problem

# RFC 9110 section 8.8.3: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E /
# obs-text (header values arrive decoded as Latin-1, so obs-text is U+0080 to U+00FF); a
# list is ``#entity-tag``, empty elements allowed. Checked before werkzeug parses the list:
# werkzeug is lenient (``3``, ``w/"3"``, ``"1"junk, "2"`` all yield tags) and the service
# documents that an unquoted ``3`` or a malformed list matches nothing.
_TAG = '(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"'
_ENTITY_TAG_LIST = re.compile(
    f"[ \t]*(?:{_TAG}[ \t]*)?(?:,[ \t]*(?:{_TAG}[ \t]*)?)*")
#: a version as this service writes it in an ETag: a decimal number without leading zeros
_VERSION = re.compile(r"[1-9][0-9]{0,17}", re.ASCII)


#: the Repr-Digest algorithms read (RFC 9530 keys), and the digest size of each
_DIGESTS = {"sha-256": 32, "md5": 16}


class MalformedHeader(ValueError):
    """A header value that does not follow its grammar."""


def etag(tag: int | str) -> str:
    """The strong ETag of a document version (``"3"``), or of another representation named
    by an opaque tag (a variant's SHA-256)."""
    return f'"{tag}"'


def parse_entity_tags(value: str) -> ETags | None:
    """The entity tags of an If-Match / If-None-Match value (``#entity-tag``), or None for
    ``*``; MalformedHeader if the value is neither (``1``, ``"1``, ``W/1``, ...)."""
    value = value.strip(" \t")
    if value == "*":
        return None
    if '"' not in value or _ENTITY_TAG_LIST.fullmatch(value) is None:
        raise MalformedHeader("not a list of quoted entity tags")
    return parse_etags(value)


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
    # werkzeug lists an empty tag ("") as None: no version either way
    return sorted(int(tag) for tag in tags.as_set(include_weak=weak)
                  if tag and _VERSION.fullmatch(tag))


def matches(value: str | None, version: int | str, *, weak: bool = True) -> bool:
    """Whether a conditional header's entity list names ``version`` (a document's version,
    or the opaque tag of another representation; ``*`` names all)."""
    if value is None:
        return False
    try:
        tags = parse_entity_tags(value)
    except MalformedHeader:
        return False
    if tags is None:
        return True
    return tags.contains_weak(str(version)) if weak else tags.contains(str(version))


def if_range_matches(value: str, version: int | str) -> bool:
    """Whether an If-Range value is the strong ETag of ``version`` (or of an opaque tag, as
    :func:`etag` writes it). Anything else (another
    tag, a weak tag, a date, a malformed value) asks for the whole representation.

    Not werkzeug's ``parse_if_range_header``: it drops the weak marker (``W/"3"`` would
    match, where RFC 9110 section 13.1.5 compares strongly) and reads an unquoted ``3``
    as a tag; and a date needs no parsing here, since any date sends the whole document.
    """
    return value.strip(" \t") == etag(version)


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


def expected_digests(repr_digest: str | None, content_md5: str | None) -> tuple[str | None,
                                                                               str | None]:
    """The (sha256, md5) hex digests a client declared for the document's bytes.

    ``Repr-Digest: sha-256=:<base64>:`` (RFC 9530, a structured-field dictionary of byte
    sequences, parsed by http-sfv; ``md5`` is also read from it) and
    ``Content-MD5: <base64>`` (RFC 1864). Unknown algorithms in Repr-Digest are ignored.
    """
    sha256 = md5 = None
    if repr_digest is not None:
        digests = _repr_digests(repr_digest)
        sha256, md5 = digests.get("sha-256"), digests.get("md5")
    if content_md5 is not None:
        md5 = _b64_hex(content_md5.strip(), 16, "Content-MD5")
    return sha256, md5


def _repr_digests(value: str) -> dict[str, str]:
    """The hex digests of the algorithms read in a Repr-Digest dictionary; 400 if it is
    none, or if such a member is not a byte sequence (``sha-256=abc``) of its size. Keys
    are lowercase (RFC 9651); other algorithms are ignored, whatever their value."""
    parsed = Dictionary()
    try:
        parsed.parse(value.encode("latin-1"))
    except ValueError:  # UnicodeEncodeError included
        raise _digest_syntax() from None
    digests = {}
    for algorithm, size in _DIGESTS.items():
        if algorithm in parsed:
            digest = parsed[algorithm].value
            if not isinstance(digest, bytes):
                raise _digest_syntax()
            digests[algorithm] = _sized_hex(digest, size, f"Repr-Digest {algorithm}")
    return digests


def _digest_syntax() -> Problem:
    return Problem(400, "invalid-input", "Repr-Digest must look like sha-256=:<base64>:")


def repr_digest(sha256_hex: str) -> str:
    return f"sha-256=:{base64.b64encode(bytes.fromhex(sha256_hex)).decode()}:"


def _sized_hex(raw: bytes, size: int, what: str) -> str:
    if len(raw) != size:
        raise Problem(400, "invalid-input", f"{what} must be the base64 of {size} bytes")
    return raw.hex()


def _b64_hex(text: str, size: int, what: str) -> str:
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error included
        raw = b""
    return _sized_hex(raw, size, what)
