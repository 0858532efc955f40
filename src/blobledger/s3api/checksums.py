"""The ``x-amz-checksum-*`` values the endpoint checks (in a header, or in an
``aws-chunked`` body's trailer), each computed over the bytes as they stream."""

from __future__ import annotations

import base64
import hashlib
import zlib
from typing import Any

from blobledger.s3api.errors import S3Error

CHECKSUMS = ("crc32", "sha1", "sha256")


class Checksum:
    """An ``x-amz-checksum-*`` header's value, computed over the bytes as they stream."""

    def __init__(self, algorithm: str, expected: str) -> None:
        self.algorithm = algorithm
        self.expected = expected
        self.crc = 0
        self.hash: Any = hashlib.new(algorithm) if algorithm != "crc32" else None

    def update(self, chunk: bytes) -> None:
        if self.hash is None:
            self.crc = zlib.crc32(chunk, self.crc)
        else:
            self.hash.update(chunk)

    def check(self) -> None:
        digest = self.crc.to_bytes(4, "big") if self.hash is None else self.hash.digest()
        if base64.b64encode(digest).decode() != self.expected:
            raise S3Error("BadDigest", f"the {self.algorithm.upper()} you specified did not "
                          "match the calculated checksum")
