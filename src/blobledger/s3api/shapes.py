"""A multipart object's shape as S3 shows it: its ETag (the MD5 of its parts' MD5s, then
``-<n>``), its parts (``partNumber`` on GetObject and HeadObject, ``x-amz-mp-parts-count``)
and its checksum (``x-amz-checksum-*`` and ``x-amz-checksum-type``, answered when the request
asks with ``x-amz-checksum-mode: ENABLED``)."""

from __future__ import annotations

import hashlib
from typing import Any
from xml.sax.saxutils import escape

from blobledger.s3api.call import Call
from blobledger.s3api.composite import Algorithm
from blobledger.s3api.errors import S3Error
from blobledger.s3api.rows import Part, Shape

#: the upload row's metadata naming its checksum algorithm and type
ALGORITHM = "checksum_algorithm"
TYPE = "checksum_type"


def upload_algorithm(meta: dict[str, Any]) -> Algorithm | None:
    """The checksum algorithm an upload's row records (None: none)."""
    name, kind = meta.get(ALGORITHM), meta.get(TYPE)
    return None if name is None or kind is None else Algorithm(str(name), str(kind))


def algorithm_headers(algorithm: Algorithm | None) -> dict[str, str]:
    """What CreateMultipartUpload and CompleteMultipartUpload answer of the algorithm."""
    if algorithm is None:
        return {}
    return {"x-amz-checksum-algorithm": algorithm.name, "x-amz-checksum-type": algorithm.type}


def shape_for(chosen: list[Part], algorithm: Algorithm | None,
              named: dict[int, str | None]) -> Shape:
    """The shape of the object the chosen parts make: its ETag, its parts and, when the
    upload has an algorithm, its checksum. Each part the completion names must then carry
    its checksum (``named``: by number) and it must be the recorded one; the request's
    own ``x-amz-checksum-*`` of the object is checked by the caller (``BadDigest``)."""
    digest = hashlib.md5(usedforsecurity=False)
    for part in chosen:
        digest.update(bytes.fromhex(part.md5))
    etag = f"{digest.hexdigest()}-{len(chosen)}"
    if algorithm is None:
        return Shape(etag, tuple((part.size, None) for part in chosen))
    checksums = []
    for part in chosen:
        if part.checksum is None or named.get(part.number) != part.checksum:
            raise S3Error("BadDigest", f"part {part.number}'s {algorithm.name} checksum is "
                          "missing from the completion or differs from the part's")
        checksums.append((part.size, part.checksum))
    return Shape(etag, tuple(checksums), algorithm.name, algorithm.type,
                 algorithm.of_object(checksums))


def checked_object_checksum(call: Call, shape: Shape) -> None:
    """The completion's ``x-amz-checksum-<algorithm>``, when sent, against the object's."""
    if shape.algorithm is None:
        return
    sent = call.request.headers.get(f"x-amz-checksum-{shape.algorithm.lower()}")
    if sent is not None and sent.strip() != shape.checksum:
        raise S3Error("BadDigest", f"the {shape.algorithm} you specified did not match the "
                      "object's checksum")


def checksum_elements(shape: Shape | None) -> str:
    """The object's checksum as S3's XML answers carry it (empty: it has none)."""
    if shape is None or shape.algorithm is None or shape.checksum is None:
        return ""
    member = f"Checksum{shape.algorithm}"
    return (f"<{member}>{escape(shape.checksum)}</{member}>"
            f"<ChecksumType>{escape(shape.type or 'COMPOSITE')}</ChecksumType>")


def object_checksum_headers(shape: Shape | None) -> dict[str, str]:
    if shape is None or shape.algorithm is None or shape.checksum is None:
        return {}
    return {f"x-amz-checksum-{shape.algorithm.lower()}": shape.checksum,
            "x-amz-checksum-type": shape.type or "COMPOSITE"}


def answered_checksum(call: Call, shape: Shape | None,
                      part: tuple[int, int] | None) -> dict[str, str]:
    """The object's checksum (or, with ``partNumber``, the part's) when the request asks
    for it (``x-amz-checksum-mode: ENABLED``) and the object has one; a ranged read has
    none, as in S3 (the object's checksum is not its range's)."""
    if call.request.headers.get("x-amz-checksum-mode", "").upper() != "ENABLED":
        return {}
    if shape is None or shape.algorithm is None:
        return {}
    if part is None:
        return {} if "range" in call.request.headers else object_checksum_headers(shape)
    number = int(call.params["partNumber"])
    checksum = shape.parts[number - 1][1]
    if checksum is None:
        return {}
    return {f"x-amz-checksum-{shape.algorithm.lower()}": checksum,
            "x-amz-checksum-type": shape.type or "COMPOSITE"}
