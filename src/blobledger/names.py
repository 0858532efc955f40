"""Names: the only place that validates document names and makes blob names.

Document names are labels chosen by users; they are never used as paths. Blob names are
generated here, from a random UUID and a sanitised extension, and never come from a client.
Every store also checks blob names with :func:`check_blob_name` before touching anything.
"""

from __future__ import annotations

import re
import unicodedata
import uuid

from blobledger.errors import InvalidName

MAX_NAME_LENGTH = 1024
MAX_CONTENT_TYPE_LENGTH = 255
_EXTENSION = re.compile(r"^[A-Za-z0-9]{1,16}$")
_BLOB_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}"
_BLOB_NAME = re.compile(rf"^{_BLOB_SEGMENT}(?:/{_BLOB_SEGMENT}){{0,15}}$")
_PREFIX = re.compile(rf"^{_BLOB_SEGMENT}(?:/{_BLOB_SEGMENT}){{0,7}}$")
_CONTENT_TYPE = re.compile(r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(\s*;\s*[\x20-\x7e]*)?$")


def check_document_name(name: object) -> str:
    """Return the name if acceptable, else raise InvalidName saying why."""
    if not isinstance(name, str):
        raise InvalidName("name must be a string")
    if name == "":
        raise InvalidName("name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"name is longer than {MAX_NAME_LENGTH} characters")
    for char in name:
        category = unicodedata.category(char)
        if category == "Cc":
            raise InvalidName(f"name contains a control character (U+{ord(char):04X})")
        if category == "Cs":
            raise InvalidName("name contains an unpaired surrogate (not valid UTF-8)")
    if name != name.strip():
        raise InvalidName("name must not start or end with whitespace")
    if "\\" in name:
        raise InvalidName("name must not contain a backslash")
    if name.startswith("/"):
        raise InvalidName("name must not start with '/'")
    if any(part in (".", "..") for part in name.split("/")):
        raise InvalidName("name must not contain '.' or '..' path segments")
    return name


def check_content_type(content_type: str | None) -> str:
    """A plain ``type/subtype[; params]`` media type, defaulting to octet-stream."""
    if content_type is None or content_type.strip() == "":
        return "application/octet-stream"
    content_type = content_type.strip()
    if len(content_type) > MAX_CONTENT_TYPE_LENGTH or not _CONTENT_TYPE.match(content_type):
        raise InvalidName(f"content type {content_type[:80]!r} is not a valid media type")
    return content_type


def check_prefix(prefix: str) -> str:
    """A blob-name prefix: slash-separated safe segments."""
    if not _PREFIX.match(prefix):
        raise InvalidName(f"blob prefix {prefix!r} must be safe path segments ([A-Za-z0-9._-])")
    return prefix


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
