"""Names: the only place that validates document names and makes blob names.

Document names are labels chosen by users; they are never used as paths. Blob names are
generated here, from a random UUID and a sanitised extension, and never come from a client.
Every store also checks blob names with :func:`check_blob_name` before touching anything.

A document name is stored in Unicode normal form C (``café`` typed either way is one
name). Characters that display as something else or as nothing are refused: control and
format characters (bidirectional overrides such as U+202E, zero-width spaces and joiners,
the byte-order mark), line and paragraph separators, private-use, unassigned and
surrogate code points, and the fullwidth forms of ASCII (U+FF01 to U+FF5E). Media types are
checked against RFC 9110's grammar, so a stored one can always be sent back as a header.
"""

from __future__ import annotations

import re
import unicodedata
import uuid

from blobledger.errors import InvalidInput, InvalidName

MAX_NAME_LENGTH = 1024
MAX_CONTENT_TYPE_LENGTH = 255
_EXTENSION = re.compile(r"^[A-Za-z0-9]{1,16}$")
_BLOB_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}"
_BLOB_NAME = re.compile(rf"^{_BLOB_SEGMENT}(?:/{_BLOB_SEGMENT}){{0,15}}$")
_PREFIX = re.compile(rf"^{_BLOB_SEGMENT}(?:/{_BLOB_SEGMENT}){{0,7}}$")
# RFC 9110 section 8.3.1: type "/" subtype *( OWS ";" OWS [ name "=" ( token / quoted-string ) ] ),
# ASCII only (no obs-text): nothing in it can end a header line or start another
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
_OWS = r"[ \t]*"
_CONTENT_TYPE = re.compile(
    rf"{_TOKEN}/{_TOKEN}(?:{_OWS};{_OWS}(?:{_TOKEN}=(?:{_TOKEN}|{_QUOTED}))?)*", re.ASCII)
#: general categories refused in names: controls, format characters (bidirectional
#: overrides, zero-width characters), surrogates, private use, unassigned, line/paragraph
#: separators
_REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def check_document_name(name: object) -> str:
    """Return the name, in Unicode normal form C, if acceptable; else raise InvalidName
    saying why."""
    if not isinstance(name, str):
        raise InvalidName("name must be a string")
    if name == "":
        raise InvalidName("name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"name is longer than {MAX_NAME_LENGTH} characters")
    for char in name:
        category = unicodedata.category(char)
        if category == "Cs":
            raise InvalidName("name contains an unpaired surrogate (not valid UTF-8)")
        if category == "Cc":
            raise InvalidName(f"name contains a control character (U+{ord(char):04X})")
        if category in _REFUSED_CATEGORIES:
            raise InvalidName(f"name contains an invisible or formatting character "
                              f"(U+{ord(char):04X})")
        if 0xFF01 <= ord(char) <= 0xFF5E:
            raise InvalidName(f"name contains a fullwidth form of an ASCII character "
                              f"(U+{ord(char):04X}); use {unicodedata.normalize('NFKC', char)!r}")
    name = unicodedata.normalize("NFC", name)
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"name is longer than {MAX_NAME_LENGTH} characters")
    if name != name.strip():
        raise InvalidName("name must not start or end with whitespace")
    if "\\" in name:
        raise InvalidName("name must not contain a backslash")
    if name.startswith("/"):
        raise InvalidName("name must not start with '/'")
    if any(part in (".", "..") for part in name.split("/")):
        raise InvalidName("name must not contain '.' or '..' path segments")
    return name


def is_media_type(value: str) -> bool:
    """Whether ``value`` is an RFC 9110 media type (ASCII, at most 255 characters): safe to
    send as a Content-Type header."""
    return (isinstance(value, str) and len(value) <= MAX_CONTENT_TYPE_LENGTH
            and _CONTENT_TYPE.fullmatch(value) is not None)


def check_content_type(content_type: str | None) -> str:
    """An RFC 9110 media type (``type/subtype`` and ``; name=token-or-"quoted"``
    parameters), without surrounding blanks; octet-stream if none. InvalidInput otherwise."""
    if content_type is None or content_type.strip(" \t") == "":
        return "application/octet-stream"
    content_type = content_type.strip(" \t")
    if not is_media_type(content_type):
        raise InvalidInput(f"content type {content_type[:80]!r} is not a valid media type "
                           "(RFC 9110: type/subtype; name=token or \"quoted string\")")
    return content_type


def check_prefix(prefix: str) -> str:
    """A blob-name prefix: slash-separated safe segments."""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise InvalidInput(f"blob prefix {prefix!r} must be safe path segments "
                           "([A-Za-z0-9._-])")
    return prefix


def check_name_prefix(prefix: str) -> str:
    """A prefix to list document names by: in normal form C, and holding nothing a name
    cannot hold (a NUL or a control character is InvalidInput, not an empty list)."""
    if not isinstance(prefix, str):
        raise InvalidInput("prefix must be a string")
    if len(prefix) > MAX_NAME_LENGTH:
        raise InvalidInput(f"prefix is longer than {MAX_NAME_LENGTH} characters")
    for char in prefix:
        category = unicodedata.category(char)
        if category in _REFUSED_CATEGORIES or 0xFF01 <= ord(char) <= 0xFF5E:
            raise InvalidInput(f"prefix contains a character no name holds (U+{ord(char):04X})")
    return unicodedata.normalize("NFC", prefix)


def extension_of(document_name: str) -> str:
    """The sanitised, lower-cased extension of a document name, with its dot, or ''."""
    base = document_name.rsplit("/", 1)[-1]
    if "." not in base:
        return ""
    ext = base.rsplit(".", 1)[1]
    return "." + ext.lower() if _EXTENSION.match(ext) else ""


def new_blob_name(prefix: str, document_name: str) -> str:
    """``<prefix>/<uuid hex><ext>``: the only function that makes blob names."""
    return f"{prefix}/{uuid.uuid4().hex}{extension_of(document_name)}"


def new_document_id() -> str:
    """A new document id: 32 lower-case hex digits."""
    return uuid.uuid4().hex


def check_blob_name(name: str) -> str:
    """Raise InvalidName unless the blob name is made of safe segments (no traversal)."""
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH or not _BLOB_NAME.match(name):
        raise InvalidName(f"invalid blob name: {name!r}"[:200])
    return name
