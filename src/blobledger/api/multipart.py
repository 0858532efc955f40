"""Incremental ``multipart/form-data`` parsing: one file field streamed, small text fields kept.

The body is fed to ``python_multipart``'s push parser one received chunk at a time; the file
part's bytes are handed on as they arrive, so the whole file is never held in memory nor
spooled to disk. Text fields (such as ``name``) are small, bounded and must be UTF-8; they
may come before or after the file. Anything malformed is a 400 :class:`Problem`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from python_multipart import MultipartParser
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import parse_options_header

from blobledger.api.problems import Problem

MAX_FIELD_BYTES = 64 * 1024
MAX_FIELDS = 16
MAX_BOUNDARY = 200
#: a part's headers, all together, and how many there may be (the parser also bounds one
#: header line; these bound what this reader itself keeps)
MAX_PART_HEADER_BYTES = 8 * 1024
MAX_PART_HEADERS = 8

Event = tuple[str, object]


@dataclass(frozen=True)
class FilePart:
    """The headers of the file part."""

    filename: str | None
    content_type: str | None


def boundary_of(content_type: str) -> bytes | None:
    """The boundary of a ``multipart/form-data`` Content-Type, or None if it is not one."""
    kind, params = parse_options_header(content_type)
    if kind != b"multipart/form-data":
        return None
    boundary = params.get(b"boundary")
    if not boundary or len(boundary) > MAX_BOUNDARY:
        raise Problem(400, "invalid-input", "multipart/form-data needs a boundary parameter")
    return boundary


def _bad(detail: str) -> Problem:
    return Problem(400, "invalid-multipart", detail)


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(f"{what} is not valid UTF-8") from None


class FormReader:
    """Reads a form with exactly one file field (``file_field``) from a byte stream."""

    def __init__(self, body: AsyncIterator[bytes], boundary: bytes, *,
                 file_field: str = "file") -> None:
        self._body = body
        self._file_field = file_field
        self._events: deque[Event] = deque()
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._headers: dict[str, bytes] = {}
        self._header_bytes = 0
        self._ended = False
        self._head: bytes | None = None
        self._file_seen = False
        self.fields: dict[str, str] = {}
        self._parser = MultipartParser(boundary, max_header_count=MAX_PART_HEADERS,
                                       max_header_size=MAX_PART_HEADER_BYTES, callbacks={
            "on_part_begin": self._on_part_begin,
            "on_header_field": self._on_header_field,
            "on_header_value": self._on_header_value,
            "on_header_end": self._on_header_end,
            "on_headers_finished": self._on_headers_finished,
            "on_part_data": self._on_part_data,
            "on_part_end": lambda: self._events.append(("part_end", None)),
            "on_end": lambda: self._events.append(("end", None)),
        })

    # -- parser callbacks (synchronous, called from write) ---------------------------------
    def _on_part_begin(self) -> None:
        self._headers = {}
        self._header_bytes = 0

    def _count_header_bytes(self, count: int) -> None:
        self._header_bytes += count
        if self._header_bytes > MAX_PART_HEADER_BYTES:
            raise _bad(f"a form part's headers exceed {MAX_PART_HEADER_BYTES} bytes")

    def _on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._count_header_bytes(end - start)
        self._header_field += data[start:end]

    def _on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._count_header_bytes(end - start)
        self._header_value += data[start:end]

    def _on_header_end(self) -> None:
        key = bytes(self._header_field).decode("latin-1").lower()
        if len(self._headers) >= MAX_PART_HEADERS:
            raise _bad(f"a form part has more than {MAX_PART_HEADERS} headers")
        self._headers[key] = bytes(self._header_value)
        self._header_field.clear()
        self._header_value.clear()

    def _on_headers_finished(self) -> None:
        self._events.append(("headers", self._headers))

    def _on_part_data(self, data: bytes, start: int, end: int) -> None:
        if end > start:
            self._events.append(("data", bytes(data[start:end])))

    # -- reading ---------------------------------------------------------------------------
    async def _next(self) -> Event:
        while not self._events:
            if self._ended:
                raise _bad("the multipart body ended before its closing boundary")
            try:
                chunk = await anext(self._body)
            except StopAsyncIteration:
                self._ended = True
                continue
            try:
                self._parser.write(chunk)
            except MultipartParseError as exc:
                raise _bad(f"malformed multipart body: {exc}") from None
        return self._events.popleft()

    def _disposition(self, headers: dict[str, bytes]) -> tuple[str, str | None]:
        raw = headers.get("content-disposition")
        if raw is None:
            raise _bad("a form part has no Content-Disposition header")
        kind, params = parse_options_header(raw.decode("latin-1"))
        if kind != b"form-data" or b"name" not in params:
            raise _bad("a form part's Content-Disposition must be form-data with a name")
        field = _utf8(params[b"name"], "a form field name")
        filename = params.get(b"filename")
        return field, (_utf8(filename, "the filename") if filename is not None else None)

    async def _read_field(self, field: str) -> None:
        value = bytearray()
        while True:
            kind, payload = await self._next()
            if kind == "part_end":
                break
            assert kind == "data" and isinstance(payload, bytes)
            value += payload
            if len(value) > MAX_FIELD_BYTES:
                raise _bad(f"form field {field[:40]!r} is longer than {MAX_FIELD_BYTES} bytes")
        if field in self.fields:
            raise _bad(f"form field {field[:40]!r} appears more than once")
        if len(self.fields) >= MAX_FIELDS:
            raise _bad(f"the form has more than {MAX_FIELDS} fields")
        self.fields[field] = _utf8(bytes(value), f"form field {field[:40]!r}")

    async def until_file(self) -> FilePart:
        """Read up to the first bytes of the file part; text fields before it are kept.

        A form without the file field, or whose file field is empty, is a 400.
        """
        while True:
            kind, payload = await self._next()
            if kind == "end":
                raise _bad(f"the form has no {self._file_field!r} field")
            if kind != "headers":
                continue
            assert isinstance(payload, dict)
            field, filename = self._disposition(payload)
            if field != self._file_field:
                await self._read_field(field)
                continue
            self._file_seen = True
            content_type = payload.get("content-type")
            part = FilePart(filename, content_type.decode("latin-1") if content_type else None)
            kind, payload = await self._next()
            if kind == "part_end":
                raise _bad(f"the {self._file_field!r} field is empty")
            assert kind == "data" and isinstance(payload, bytes)
            self._head = payload
            return part

    async def file_data(self) -> AsyncIterator[bytes]:
        """The file part's bytes as they arrive; then the rest of the form is read, so that
        ``fields`` is complete (and the body well formed) when this iterator ends."""
        if self._head is None:
            raise RuntimeError("until_file() first")
        head, self._head = self._head, b""
        yield head
        while True:
            kind, payload = await self._next()
            if kind == "part_end":
                break
            assert kind == "data" and isinstance(payload, bytes)
            yield payload
        while True:
            kind, payload = await self._next()
            if kind == "end":
                async for _ in self._body:  # an epilogue: read (and count) but ignore it
                    pass
                return
            if kind != "headers":
                continue
            assert isinstance(payload, dict)
            field, _ = self._disposition(payload)
            if field == self._file_field:
                raise _bad(f"the form has more than one {self._file_field!r} field")
            await self._read_field(field)
