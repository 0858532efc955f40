"""A multipart upload's checksums: the algorithm CreateMultipartUpload names
(``x-amz-checksum-algorithm``, ``x-amz-checksum-type``), each part's checksum, and the
object's, computed from the parts' as S3 computes it: ``COMPOSITE``, the checksum of the
parts' checksums followed by ``-<n>``; ``FULL_OBJECT`` (CRC32 here), the CRC32 of the whole
object, combined from the parts' CRC32s and sizes without reading the bytes again.

CRC32C and CRC64NVME need a library this service does not carry: an upload naming either is
``NotImplemented``."""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass

from blobledger.s3api.errors import S3Error

#: the algorithms an upload may name, and the types each takes (its default first)
TYPES = {"CRC32": ("COMPOSITE", "FULL_OBJECT"), "SHA1": ("COMPOSITE",),
         "SHA256": ("COMPOSITE",)}
NOT_HERE = ("CRC32C", "CRC64NVME")
_CRC32_POLY = 0xEDB88320


@dataclass(frozen=True)
class Algorithm:
    """An upload's checksum algorithm (``CRC32``, ``SHA1``, ``SHA256``) and type."""

    name: str
    type: str

    @property
    def header(self) -> str:
        return f"x-amz-checksum-{self.name.lower()}"

    @property
    def member(self) -> str:
        return f"Checksum{self.name}"

    def digest(self, data: bytes) -> str:
        """The checksum of ``data`` (base64)."""
        return base64.b64encode(_raw(self.name, data)).decode()

    def of_object(self, parts: list[tuple[int, str]]) -> str:
        """The object's checksum from its parts' (size, base64 checksum), in order."""
        if self.type == "FULL_OBJECT":
            crc = 0
            for size, checksum in parts:
                crc = crc32_combine(crc, int.from_bytes(base64.b64decode(checksum), "big"),
                                    size)
            return base64.b64encode(crc.to_bytes(4, "big")).decode()
        joined = b"".join(base64.b64decode(checksum) for _, checksum in parts)
        return f"{self.digest(joined)}-{len(parts)}"


def _raw(name: str, data: bytes) -> bytes:
    if name == "CRC32":
        return zlib.crc32(data).to_bytes(4, "big")
    return hashlib.new(name.lower(), data).digest()


def requested(algorithm: str | None, kind: str | None) -> Algorithm | None:
    """The algorithm and type a CreateMultipartUpload asks for (None: none)."""
    if algorithm is None:
        if kind is not None:
            raise S3Error("InvalidRequest", "x-amz-checksum-type needs "
                          "x-amz-checksum-algorithm")
        return None
    name = algorithm.strip().upper()
    if name in NOT_HERE:
        raise S3Error("NotImplemented", f"the {name} checksum is not implemented here "
                      f"(only {', '.join(TYPES)})")
    if name not in TYPES:
        raise S3Error("InvalidRequest", f"not a checksum algorithm: {algorithm!r}")
    chosen = (kind or TYPES[name][0]).strip().upper()
    if chosen not in TYPES[name]:
        raise S3Error("InvalidRequest", f"the {name} checksum does not take the type "
                      f"{chosen}")
    return Algorithm(name, chosen)


def _gf2_times(matrix: list[int], vector: int) -> int:
    total, row = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[row]
        vector >>= 1
        row += 1
    return total


def _gf2_square(matrix: list[int]) -> list[int]:
    return [_gf2_times(matrix, row) for row in matrix]


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC32 of A+B from A's CRC32, B's and B's length (zlib's ``crc32_combine``)."""
    if length2 <= 0:
        return crc1
    odd = [_CRC32_POLY] + [1 << n for n in range(31)]  # one zero bit
    even = _gf2_square(odd)  # two zero bits
    odd = _gf2_square(even)  # four
    while True:
        even = _gf2_square(odd)  # a zero byte, then two, four...
        if length2 & 1:
            crc1 = _gf2_times(even, crc1)
        length2 >>= 1
        if not length2:
            break
        odd = _gf2_square(even)
        if length2 & 1:
            crc1 = _gf2_times(odd, crc1)
        length2 >>= 1
        if not length2:
            break
    return crc1 ^ crc2
