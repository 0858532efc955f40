"""An object's ETag (its MD5; a multipart object's the MD5 of its parts' MD5s), a multipart
object's parts (``partNumber``, ``PartsCount``), its checksums (an upload's
``ChecksumAlgorithm``, each part's, the object's composite or full-object one) and
GetObjectAttributes, through boto3 against a real ``serve``."""

from __future__ import annotations

import base64
import hashlib
import os
import zlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.s3api.conftest import BUCKET, on
from tests.s3api.test_objects import error

MIB = 1024 * 1024


def md5_etag(*parts: bytes) -> str:
    joined = b"".join(hashlib.md5(part).digest() for part in parts)
    return f'"{hashlib.md5(joined).hexdigest()}-{len(parts)}"'


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def test_a_single_put_has_its_md5_for_etag_everywhere(s3: Any, prefix: str) -> None:
    key, body = prefix + "one.txt", b"bar"
    put = s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    assert put["ETag"] == '"37b51d194a7513e45b56f6524f2d51f2"' == \
        f'"{hashlib.md5(body).hexdigest()}"'
    assert s3.head_object(Bucket=BUCKET, Key=key)["ETag"] == put["ETag"]
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]
    assert [(c["Key"], c["ETag"]) for c in listed] == [(key, put["ETag"])]
    again = s3.put_object(Bucket=BUCKET, Key=key, Body=b"baz", IfMatch=put["ETag"])
    assert again["ETag"] == f'"{hashlib.md5(b"baz").hexdigest()}"'
    copied = s3.copy_object(Bucket=BUCKET, Key=prefix + "copy.txt",
                            CopySource={"Bucket": BUCKET, "Key": key})
    assert copied["CopyObjectResult"]["ETag"] == again["ETag"]
    attributes = s3.get_object_attributes(
        Bucket=BUCKET, Key=key,
        ObjectAttributes=["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"])
    assert (attributes["ETag"], attributes["ObjectSize"], attributes["StorageClass"]) == (
        hashlib.md5(b"baz").hexdigest(), 3, "STANDARD")
    assert "ObjectParts" not in attributes and "Checksum" not in attributes


def test_a_multipart_object_keeps_its_parts_and_their_etag(s3: Any, prefix: str) -> None:
    key = prefix + "parts.bin"
    first, last = os.urandom(5 * MIB), b"the tail of it"
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    one = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=first)
    two = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2, Body=last)
    done = s3.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": one["ETag"]}, {"PartNumber": 2, "ETag": two["ETag"]}]})
    assert done["ETag"] == md5_etag(first, last)
    assert "ChecksumSHA256" not in done
    assert s3.head_object(Bucket=BUCKET, Key=key)["ETag"] == done["ETag"]
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]
    assert [c["ETag"] for c in listed] == [done["ETag"]]

    for number, body in [(1, first), (2, last)]:
        head = s3.head_object(Bucket=BUCKET, Key=key, PartNumber=number)
        assert (head["PartsCount"], head["ContentLength"], head["ETag"]) == (
            2, len(body), done["ETag"])
        got = s3.get_object(Bucket=BUCKET, Key=key, PartNumber=number)
        assert (got["PartsCount"], got["ETag"]) == (2, done["ETag"])
        assert got["Body"].read() == body
    with pytest.raises(ClientError) as past:
        s3.get_object(Bucket=BUCKET, Key=key, PartNumber=3)
    assert error(past) == (400, "InvalidPart")
    assert "PartsCount" not in s3.head_object(Bucket=BUCKET, Key=key)

    # If-Match takes the multipart ETag; the replace is then an object of one part
    replaced = s3.put_object(Bucket=BUCKET, Key=key, Body=b"small", IfMatch=done["ETag"])
    assert replaced["ETag"] == f'"{hashlib.md5(b"small").hexdigest()}"'
    assert "PartsCount" not in s3.head_object(Bucket=BUCKET, Key=key, PartNumber=1)
    with pytest.raises(ClientError) as gone:
        s3.head_object(Bucket=BUCKET, Key=key, PartNumber=2)
    assert error(gone)[0] == 400

    attributes = s3.get_object_attributes(Bucket=BUCKET, Key=key,
                                          ObjectAttributes=["ObjectParts", "ETag"])
    assert attributes["ETag"] == hashlib.md5(b"small").hexdigest()
    assert "ObjectParts" not in attributes


def test_a_completion_that_replaces_keeps_the_parts(s3: Any, prefix: str) -> None:
    """A completion over a key that names an object replaces it (R1-R4): the replacement
    has the upload's ETag and parts."""
    key = prefix + "over.bin"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"before")
    first, last = os.urandom(5 * MIB), b"after"
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key, Metadata={"k": "v"},
                                        ChecksumAlgorithm="SHA1")["UploadId"]
    one = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=first,
                         ChecksumAlgorithm="SHA1")
    two = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2, Body=last,
                         ChecksumAlgorithm="SHA1")
    done = s3.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": one["ETag"], "ChecksumSHA1": one["ChecksumSHA1"]},
            {"PartNumber": 2, "ETag": two["ETag"], "ChecksumSHA1": two["ChecksumSHA1"]}]})
    composite = b64(hashlib.sha1(hashlib.sha1(first).digest()
                                 + hashlib.sha1(last).digest()).digest()) + "-2"
    assert (done["ETag"], done["ChecksumSHA1"]) == (md5_etag(first, last), composite)
    head = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    assert (head["ETag"], head["ChecksumSHA1"], head["Metadata"]) == (
        done["ETag"], composite, {"k": "v"})
    assert s3.get_object(Bucket=BUCKET, Key=key, PartNumber=2)["Body"].read() == last


def test_a_multipart_upload_with_a_composite_checksum(s3: Any, prefix: str) -> None:
    key = prefix + "sha256.bin"
    first, last = os.urandom(5 * MIB), os.urandom(1000)
    sums = [b64(hashlib.sha256(part).digest()) for part in (first, last)]
    composite = b64(hashlib.sha256(b"".join(hashlib.sha256(part).digest()
                                            for part in (first, last))).digest()) + "-2"
    started = s3.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm="SHA256")
    assert (started["ChecksumAlgorithm"], started["ChecksumType"]) == ("SHA256", "COMPOSITE")
    upload = started["UploadId"]
    one = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=first,
                         ChecksumAlgorithm="SHA256", ChecksumSHA256=sums[0])
    two = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2, Body=last,
                         ChecksumAlgorithm="SHA256")
    assert (one["ChecksumSHA256"], two["ChecksumSHA256"]) == tuple(sums)
    with pytest.raises(ClientError) as wrong:  # a part's checksum checked as it streams
        s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=3, Body=b"x",
                       ChecksumAlgorithm="SHA256", ChecksumSHA256=sums[0])
    assert error(wrong) == (400, "BadDigest")
    listed = s3.list_parts(Bucket=BUCKET, Key=key, UploadId=upload)
    assert listed["ChecksumAlgorithm"] == "SHA256"
    assert [p["ChecksumSHA256"] for p in listed["Parts"]] == sums

    parts = [{"PartNumber": 1, "ETag": one["ETag"], "ChecksumSHA256": sums[0]},
             {"PartNumber": 2, "ETag": two["ETag"], "ChecksumSHA256": sums[1]}]
    # the object's checksum wrong, a part's missing, a part's another's
    refusals: list[dict[str, Any]] = [
        dict(ChecksumSHA256="bad", MultipartUpload={"Parts": parts}),
        dict(MultipartUpload={"Parts": [parts[0], {"PartNumber": 2, "ETag": two["ETag"]}]}),
        dict(MultipartUpload={"Parts": [parts[0], {**parts[1], "ChecksumSHA256": sums[0]}]})]
    for refused in refusals:
        with pytest.raises(ClientError) as bad:
            s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload, **refused)
        assert error(bad) == (400, "BadDigest")
    with pytest.raises(ClientError) as invisible:  # a refused completion changes nothing
        s3.head_object(Bucket=BUCKET, Key=key)
    assert error(invisible)[0] == 404

    done = s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload,
                                        ChecksumSHA256=composite,
                                        MultipartUpload={"Parts": parts})
    assert (done["ChecksumSHA256"], done["ChecksumType"]) == (composite, "COMPOSITE")
    again = s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload,
                                         MultipartUpload={"Parts": parts})
    assert (again["ETag"], again["ChecksumSHA256"]) == (done["ETag"], composite)
    assert "ChecksumSHA256" not in s3.head_object(Bucket=BUCKET, Key=key)
    head = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    assert (head["ChecksumSHA256"], head["ChecksumType"]) == (composite, "COMPOSITE")
    for number, body in [(1, first), (2, last)]:
        got = s3.get_object(Bucket=BUCKET, Key=key, PartNumber=number, ChecksumMode="ENABLED")
        assert (got["ChecksumSHA256"], got["ChecksumType"]) == (sums[number - 1], "COMPOSITE")
        assert got["Body"].read() == body
    attributes = s3.get_object_attributes(Bucket=BUCKET, Key=key,
                                          ObjectAttributes=["Checksum", "ObjectParts"],
                                          MaxParts=1)
    assert attributes["Checksum"] == {"ChecksumSHA256": composite, "ChecksumType": "COMPOSITE"}
    parts_shown = attributes["ObjectParts"]
    assert (parts_shown["TotalPartsCount"], parts_shown["IsTruncated"]) == (2, True)
    assert [(p["PartNumber"], p["Size"], p["ChecksumSHA256"])
            for p in parts_shown["Parts"]] == [(1, len(first), sums[0])]


@on("sqlite-local")  # the arithmetic of the checksum, and a refusal before any row
def test_a_full_object_crc32_and_the_algorithms_not_here(s3: Any, prefix: str) -> None:
    key = prefix + "crc.bin"
    first, last = os.urandom(5 * MIB), os.urandom(777)
    started = s3.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm="CRC32",
                                         ChecksumType="FULL_OBJECT")
    upload = started["UploadId"]
    made = [s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=number,
                           Body=body, ChecksumAlgorithm="CRC32")
            for number, body in [(1, first), (2, last)]]
    whole = b64(zlib.crc32(first + last).to_bytes(4, "big"))
    done = s3.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=upload, ChecksumCRC32=whole,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": m["ETag"],
                                    "ChecksumCRC32": m["ChecksumCRC32"]}
                                   for n, m in enumerate(made, start=1)]})
    assert (done["ChecksumCRC32"], done["ChecksumType"]) == (whole, "FULL_OBJECT")
    got = s3.get_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == whole and got["Body"].read() == first + last
    # a range has no checksum (botocore would check the range against the object's)
    ranged = s3.get_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED", Range="bytes=0-9")
    assert "ChecksumCRC32" not in ranged and ranged["Body"].read() == first[:10]

    for algorithm in ["CRC32C", "CRC64NVME"]:
        with pytest.raises(ClientError) as refused:
            s3.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm=algorithm)
        assert error(refused) == (501, "NotImplemented")
    with pytest.raises(ClientError) as wrong_type:
        s3.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm="SHA256",
                                   ChecksumType="FULL_OBJECT")
    assert error(wrong_type) == (400, "InvalidRequest")


@on("sqlite-local")  # UploadPartCopy's own steps run on each store in test_multipart.py
def test_a_copied_part_has_its_checksum(s3: Any, prefix: str) -> None:
    source, key = prefix + "source.bin", prefix + "copied.bin"
    data = os.urandom(5 * MIB + 10)
    s3.put_object(Bucket=BUCKET, Key=source, Body=data)
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key,
                                        ChecksumAlgorithm="SHA256")["UploadId"]
    copied = s3.upload_part_copy(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1,
                                 CopySource={"Bucket": BUCKET, "Key": source})
    result = copied["CopyPartResult"]
    assert result["ChecksumSHA256"] == b64(hashlib.sha256(data).digest())
    two = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2, Body=b"end",
                         ChecksumAlgorithm="SHA256")
    done = s3.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": result["ETag"], "ChecksumSHA256": result["ChecksumSHA256"]},
            {"PartNumber": 2, "ETag": two["ETag"], "ChecksumSHA256": two["ChecksumSHA256"]}]})
    assert done["ETag"] == md5_etag(data, b"end")
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data + b"end"
