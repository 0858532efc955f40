"""The ``content-type`` processor: the declared type checked against the bytes themselves.

The first bytes are identified by ``puremagic`` (the ``processors`` extra). The declared
type is refused only where the bytes contradict it:

- a declared type that is a format with a signature the library knows (PNG, JPEG, GIF,
  WebP, PDF, ZIP, GZIP, ...) whose bytes do not carry it;
- a textual declared type (``text/*``, JSON, XML, ...) whose bytes are binary (a NUL, or
  not UTF-8);
- any other declared type whose bytes carry a signature of another format (a ``video/mp4``
  that is a PDF), except ``application/octet-stream``, which claims nothing, and the members
  of a container family (an ``.docx`` type on ZIP bytes).

Bytes the library cannot identify contradict no type that has no signature: they are
accepted (a CSV declared ``text/csv`` that is UTF-8, an unknown binary format).
"""

from __future__ import annotations

from blobledger.errors import ConfigError
from blobledger.protocol.documents import Document
from blobledger.workers.processors.base import ACCEPT, Reader, Verdict, reject

NAME = "content-type"
#: how much of the head is read
HEAD = 64 * 1024
#: the types that claim nothing about their bytes
GENERIC = frozenset({"application/octet-stream", "binary/octet-stream",
                     "application/unknown"})
#: formats that always begin with a signature the library knows: declared, they must show it
SIGNED = frozenset({
    "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/tiff",
    "application/pdf", "application/zip", "application/gzip", "application/x-gzip",
    "application/x-7z-compressed", "application/x-bzip2", "application/x-xz",
    "application/x-rar-compressed", "application/vnd.rar", "video/mp4", "audio/flac",
    "audio/ogg", "application/ogg", "audio/wav", "audio/x-wav",
})
#: one format under several names (compared after this mapping)
ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg",
           "application/x-zip-compressed": "application/zip",
           "application/x-pdf": "application/pdf", "application/x-gzip": "application/gzip",
           "audio/x-wav": "audio/wav", "audio/wave": "audio/wav",
           "audio/vnd.wave": "audio/wav", "application/vnd.rar": "application/x-rar-compressed",
           "audio/ogg": "application/ogg", "video/ogg": "application/ogg"}
#: containers whose member formats carry the container's signature
CONTAINERS = {"application/zip": ("application/vnd.openxmlformats-officedocument.",
                                  "application/vnd.oasis.opendocument.",
                                  "application/epub+zip", "application/java-archive",
                                  "application/vnd.android.package-archive",
                                  "application/x-zip")}
_TEXTUAL = ("application/json", "application/xml", "application/javascript",
            "application/x-ndjson", "application/yaml", "application/x-yaml",
            "application/csv", "application/sql", "application/x-sh")


def _base(media_type: str) -> str:
    base = media_type.split(";", 1)[0].strip().lower()
    return ALIASES.get(base, base)


def textual(media_type: str) -> bool:
    base = _base(media_type)
    return (base.startswith("text/") or base in _TEXTUAL
            or base.endswith(("+xml", "+json", "+yaml")))


def is_text(head: bytes, complete: bool) -> bool:
    """No NUL and UTF-8 (a multi-byte character cut by the end of a partial head counts)."""
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return not complete and exc.start >= len(head) - 3 and exc.reason.startswith(
            "unexpected end")
    return True


def detected(head: bytes) -> set[str]:
    """The media types the bytes' signatures name (empty: none known)."""
    try:
        import puremagic
    except ImportError:  # pragma: no cover - the extra is part of the dev install
        raise ConfigError("the content-type processor needs puremagic: "
                          "pip install 'blobledger[processors]'") from None
    if not head:
        return set()
    try:
        matches = puremagic.magic_string(head)
    except (puremagic.PureError, ValueError):
        return set()
    return {_base(m.mime_type) for m in matches if m.mime_type}


def judge(declared: str, head: bytes, complete: bool) -> Verdict:
    """The verdict on a head of bytes declared ``declared`` (``complete``: the whole)."""
    base = _base(declared)
    if textual(base):
        if is_text(head, complete):
            return ACCEPT
        named = ", ".join(sorted(detected(head))) or "unidentified binary data"
        return reject(f"declared {base}, but the bytes are binary ({named})")
    if base in GENERIC:
        return ACCEPT
    found = detected(head)
    if base in found or any(
            base.startswith(members) for container, members in CONTAINERS.items()
            if container in found):
        return ACCEPT
    if found:
        return reject(f"declared {base}, but the bytes are {', '.join(sorted(found))}")
    if base in SIGNED:
        return reject(f"declared {base}, but the bytes do not carry its signature")
    return ACCEPT


class ContentTypeCheck:
    """The declared content type against the first bytes (:func:`judge`)."""

    name = NAME

    def __init__(self) -> None:
        detected(b"")  # ConfigError at once when puremagic is missing

    async def run(self, doc: Document, read: Reader) -> Verdict:
        head = bytearray()
        async for chunk in read(0, HEAD):
            head += chunk
        complete = doc.size is not None and len(head) >= doc.size
        return judge(doc.content_type, bytes(head[:HEAD]), complete)
