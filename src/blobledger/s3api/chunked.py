"""``aws-chunked`` request bodies (``Content-Encoding: aws-chunked``), decoded as they
stream: ``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``, whose every chunk carries a signature
chained from the request's (each computed by botocore's signer, :class:`.sigv4.Chain`, and
checked before the chunk's bytes go on), and ``STREAMING-UNSIGNED-PAYLOAD-TRAILER``, unsigned
chunks followed by a trailer of ``x-amz-checksum-*`` values (botocore's checksums over
HTTPS), checked at the end.

A bad chunk, a signature that does not hold, a length other than
``x-amz-decoded-content-length`` or a checksum that does not match raises before the body
ends: the ledger's upload fails and nothing becomes visible."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import AsyncGenerator, AsyncIterator

from blobledger.s3api.call import Call
from blobledger.s3api.checksums import CHECKSUMS, Checksum
from blobledger.s3api.errors import S3Error
from blobledger.s3api.sigv4 import STREAMING, STREAMING_SIGNED

#: the longest chunk header or trailer line read
MAX_LINE = 4096
#: the largest chunk accepted (SDKs send 8 KiB to 1 MiB)
MAX_CHUNK = 16 * 1024 * 1024
_SIZE = re.compile(r"^[0-9a-fA-F]{1,8}$")
_SIGNATURE = re.compile(r"^chunk-signature=([0-9a-f]{64})$")


def streaming(call: Call) -> bool:
    """Whether the request's body is ``aws-chunked`` (its declared payload says so)."""
    return call.signed.payload in STREAMING


def decoded_length(call: Call) -> int:
    """The body's length once decoded (``x-amz-decoded-content-length``, required)."""
    text = call.request.headers.get("x-amz-decoded-content-length")
    if text is None or not text.isdigit():
        raise S3Error("MissingContentLength", "an aws-chunked body needs "
                      "x-amz-decoded-content-length")
    return int(text)


def _malformed(why: str) -> S3Error:
    return S3Error("IncompleteBody", f"the aws-chunked body is malformed: {why}")


class _Reader:
    """Lines and exact lengths out of the body's pieces as they arrive."""

    def __init__(self, raw: AsyncIterator[bytes]) -> None:
        self.raw = raw
        self.buffer = bytearray()

    async def _more(self) -> None:
        try:
            self.buffer += await anext(self.raw)
        except StopAsyncIteration:
            raise _malformed("it ended early") from None

    async def line(self) -> str:
        while (end := self.buffer.find(b"\r\n")) < 0:
            if len(self.buffer) > MAX_LINE:
                raise _malformed("a line is too long")
            await self._more()
        text = bytes(self.buffer[:end])
        del self.buffer[:end + 2]
        try:
            return text.decode("ascii")
        except UnicodeDecodeError:
            raise _malformed("a chunk header is not ASCII") from None

    async def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._more()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    async def rest(self) -> bytes:
        return bytes(self.buffer) + b"".join([piece async for piece in self.raw])


def _trailer_checksums(call: Call) -> dict[str, Checksum]:
    names = [name.strip().lower() for name in
             call.request.headers.get("x-amz-trailer", "").split(",") if name.strip()]
    found = {}
    for name in names:
        algorithm = name.removeprefix("x-amz-checksum-")
        if not name.startswith("x-amz-checksum-") or algorithm not in CHECKSUMS:
            raise S3Error("NotImplemented", f"the trailer {name} is not implemented (only "
                          f"x-amz-checksum-{{{','.join(CHECKSUMS)}}})")
        found[name] = Checksum(algorithm, "")
    return found


async def decode(call: Call, raw: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    """The decoded bytes of the ``aws-chunked`` body ``raw``, each chunk checked."""
    declared = decoded_length(call)
    chain = call.signed.chain if call.signed.payload == STREAMING_SIGNED else None
    if call.signed.payload == STREAMING_SIGNED and chain is None:
        raise S3Error("InvalidRequest", "a signed chunked body needs a header signature")
    checksums = {} if chain is not None else _trailer_checksums(call)
    previous = chain.seed if chain is not None else ""
    reader = _Reader(raw)
    total = 0
    while True:
        size_text, _, extension = (await reader.line()).partition(";")
        if not _SIZE.match(size_text):
            raise _malformed(f"{size_text[:16]!r} is not a chunk size")
        size = int(size_text, 16)
        if size > MAX_CHUNK or total + size > declared:
            raise _malformed("a chunk is larger than x-amz-decoded-content-length allows")
        data = await reader.exactly(size)
        if chain is not None:
            signature = _SIGNATURE.match(extension)
            if signature is None:
                raise _malformed("a chunk has no chunk-signature")
            expected = chain.chunk_signature(previous, hashlib.sha256(data).hexdigest())
            if not hmac.compare_digest(expected, signature.group(1)):
                raise S3Error("SignatureDoesNotMatch", "a chunk's signature does not match "
                              "the signature we calculated")
            previous = expected
        if size == 0:
            break
        if await reader.line() != "":
            raise _malformed("a chunk's data is not followed by CRLF")
        total += size
        for checksum in checksums.values():
            checksum.update(data)
        yield data
    trailer: dict[str, str] = {}
    if chain is None:  # the trailer's lines, then an empty one
        while (line := await reader.line()) != "":
            name, sep, value = line.partition(":")
            if not sep:
                raise _malformed("a trailer line is not name:value")
            trailer[name.strip().lower()] = value.strip()
    elif await reader.line() != "":
        raise _malformed("the last chunk is not followed by CRLF")
    if await reader.rest():
        raise _malformed("bytes follow the last chunk")
    if total != declared:
        raise S3Error("IncompleteBody", f"the body decoded to {total} bytes, not the "
                      f"{declared} of x-amz-decoded-content-length")
    for name, checksum in checksums.items():
        if name not in trailer:
            raise S3Error("InvalidRequest", f"the trailer {name} announced by x-amz-trailer "
                          "was not sent")
        checksum.expected = trailer[name]
        checksum.check()
