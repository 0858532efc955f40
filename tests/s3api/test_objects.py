"""boto3 against the endpoint: objects written, read, replaced, deleted and listed as S3
clients expect, each operation on the ledger's steps."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.s3api.conftest import BUCKET, READER, client, on
from tests.support.server import Server


def error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    response = exc.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def test_put_get_head_replace_delete(s3: Any, prefix: str) -> None:
    key = prefix + "report 2026/é.txt"
    made = s3.put_object(Bucket=BUCKET, Key=key, Body=b"hello world", ContentType="text/plain")
    got = s3.get_object(Bucket=BUCKET, Key=key)
    assert got["Body"].read() == b"hello world"
    assert got["ETag"] == made["ETag"] and got["ContentType"] == "text/plain"
    assert got["ContentLength"] == 11 and got["LastModified"] is not None
    assert got["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]

    head = s3.head_object(Bucket=BUCKET, Key=key)
    assert head["ContentLength"] == 11 and head["ETag"] == made["ETag"]

    replaced = s3.put_object(Bucket=BUCKET, Key=key, Body=b"a new text")  # a replace
    assert replaced["ETag"] != made["ETag"]
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"a new text"

    s3.delete_object(Bucket=BUCKET, Key=key)
    with pytest.raises(ClientError) as gone:
        s3.get_object(Bucket=BUCKET, Key=key)
    assert error(gone) == (404, "NoSuchKey")
    with pytest.raises(ClientError) as headless:
        s3.head_object(Bucket=BUCKET, Key=key)
    assert error(headless)[0] == 404
    s3.delete_object(Bucket=BUCKET, Key=key)  # a delete of nothing succeeds, as in S3


def test_ranges_and_conditional_reads(s3: Any, prefix: str) -> None:
    key = prefix + "digits"
    tag = s3.put_object(Bucket=BUCKET, Key=key, Body=b"0123456789")["ETag"]
    part = s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=2-4")
    assert part["Body"].read() == b"234" and part["ContentRange"] == "bytes 2-4/10"
    assert s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=-3")["Body"].read() == b"789"
    assert s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=7-")["Body"].read() == b"789"
    with pytest.raises(ClientError) as past:
        s3.get_object(Bucket=BUCKET, Key=key, Range="bytes=10-12")
    assert error(past) == (416, "InvalidRange")

    assert s3.get_object(Bucket=BUCKET, Key=key, IfMatch=tag)["Body"].read() == b"0123456789"
    with pytest.raises(ClientError) as other:
        s3.get_object(Bucket=BUCKET, Key=key, IfMatch='"0000"')
    assert error(other) == (412, "PreconditionFailed")
    with pytest.raises(ClientError) as same:
        s3.get_object(Bucket=BUCKET, Key=key, IfNoneMatch=tag)
    assert error(same)[0] == 304
    assert s3.get_object(Bucket=BUCKET, Key=key, IfNoneMatch='"0000"')["ETag"] == tag


def test_if_none_match_star_creates_only(s3: Any, prefix: str) -> None:
    key = prefix + "once"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as taken:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"second", IfNoneMatch="*")
    assert error(taken) == (412, "PreconditionFailed")
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"first"


def test_list_objects_v2(s3: Any, prefix: str) -> None:
    names = ["a/1", "a/2", "b", "c/d/e", "c/f", "g h", "z"]
    for name in names:
        s3.put_object(Bucket=BUCKET, Key=prefix + name, Body=name.encode())
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    assert [c["Key"] for c in listed["Contents"]] == [prefix + n for n in names]
    assert listed["Contents"][0]["Size"] == 3 and not listed["IsTruncated"]

    folded = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, Delimiter="/")
    assert [c["Key"] for c in folded["Contents"]] == [prefix + n for n in ("b", "g h", "z")]
    assert [p["Prefix"] for p in folded["CommonPrefixes"]] == [prefix + "a/", prefix + "c/"]

    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=prefix, Delimiter="/", PaginationConfig={"PageSize": 2})
    entries = [[*(c["Key"] for c in page.get("Contents", [])),
                *(p["Prefix"] for p in page.get("CommonPrefixes", []))] for page in pages]
    assert [len(page) for page in entries] == [2, 2, 1]
    assert sorted(key for page in entries for key in page) == sorted(
        [prefix + n for n in ("a/", "b", "c/", "g h", "z")])

    after = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, StartAfter=prefix + "c/f")
    assert [c["Key"] for c in after["Contents"]] == [prefix + "g h", prefix + "z"]
    first = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, MaxKeys=3)
    assert first["IsTruncated"] and first["KeyCount"] == 3
    rest = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix,
                              ContinuationToken=first["NextContinuationToken"])
    assert [c["Key"] for c in first["Contents"] + rest["Contents"]] == \
        [prefix + n for n in names]


def test_the_one_bucket(s3: Any) -> None:
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == [BUCKET]
    s3.head_bucket(Bucket=BUCKET)
    with pytest.raises(ClientError) as missing:
        s3.list_objects_v2(Bucket="another-bucket")
    assert error(missing) == (404, "NoSuchBucket")
    with pytest.raises(ClientError) as mine:
        s3.create_bucket(Bucket=BUCKET)  # a write key creates no bucket, even one it has
    assert error(mine) == (403, "AccessDenied")


@pytest.mark.parametrize("call", [
    lambda s3, key: s3.put_object_acl(Bucket=BUCKET, Key=key, GrantRead="id=someone"),
    lambda s3, key: s3.put_bucket_versioning(
        Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"}),
    lambda s3, key: s3.copy_object(Bucket=BUCKET, Key=key + "2", TaggingDirective="REPLACE",
                                   CopySource={"Bucket": BUCKET, "Key": key}),
], ids=["acl-grant", "versioning", "copy-tagging"])
@on("sqlite-local")  # refused by the endpoint before any transaction: one server
def test_what_is_not_implemented_says_so(s3: Any, prefix: str, call: Any) -> None:
    key = prefix + "k"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"k")
    with pytest.raises(ClientError) as refused:
        call(s3, key)
    assert error(refused) == (501, "NotImplemented")
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"k"


def test_checksums_are_checked_and_a_mismatch_leaves_nothing(s3: Any, prefix: str) -> None:
    key = prefix + "checked"
    with pytest.raises(ClientError) as crc:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"some bytes", ChecksumCRC32="AAAAAA==")
    assert error(crc) == (400, "BadDigest")
    wrong_md5 = "1B2M2Y8AsgTpgAmY7PhCfg=="  # the MD5 of no bytes
    with pytest.raises(ClientError) as md5:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"some bytes", ContentMD5=wrong_md5)
    assert error(md5) == (400, "BadDigest")
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=key)
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"some bytes",
                  ChecksumSHA256=base64.b64encode(hashlib.sha256(b"some bytes").digest()).decode())
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"some bytes"


# the body's digest checked at its end, as the checksums are (those on each server): one
@on("postgresql-azure")
def test_a_body_that_is_not_the_signed_sha256_is_refused(s3_server: Server,
                                                         prefix: str) -> None:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from tests.s3api.conftest import WRITER

    url = f"{s3_server.url}/s3/{BUCKET}/{prefix}swapped"
    signed = AWSRequest(method="PUT", url=url, data=b"signed bytes")
    S3SigV4Auth(Credentials(*WRITER), "s3", "us-east-1").add_auth(signed)
    assert signed.headers["X-Amz-Content-SHA256"] == hashlib.sha256(b"signed bytes").hexdigest()
    sent = httpx.put(url, content=b"other bytes!", headers=dict(signed.headers.items()))
    assert sent.status_code == 400 and "<Code>XAmzContentSHA256Mismatch</Code>" in sent.text
    assert "<RequestId>" in sent.text and sent.headers["x-amz-request-id"]
    s3 = client(s3_server)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)


@on("sqlite-local")  # a key's scope, checked before any transaction: one server
def test_a_read_key_cannot_write(s3_server: Server, s3: Any, prefix: str) -> None:
    s3.put_object(Bucket=BUCKET, Key=prefix + "r", Body=b"r")
    reader = client(s3_server, READER)
    assert reader.get_object(Bucket=BUCKET, Key=prefix + "r")["Body"].read() == b"r"
    with pytest.raises(ClientError) as put:
        reader.put_object(Bucket=BUCKET, Key=prefix + "w", Body=b"w")
    assert error(put) == (403, "AccessDenied")
    with pytest.raises(ClientError) as delete:
        reader.delete_object(Bucket=BUCKET, Key=prefix + "r")
    assert error(delete) == (403, "AccessDenied")
    assert s3.get_object(Bucket=BUCKET, Key=prefix + "r")["Body"].read() == b"r"


def _signed_put(server: Server, key: str, body: bytes, **context: Any) -> httpx.Response:
    """A PUT signed by botocore's S3 signer with the given signing context, sent as is."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from tests.s3api.conftest import WRITER

    url = f"{server.url}/s3/{BUCKET}/{key}"
    request = AWSRequest(method="PUT", url=url, data=body)
    request.context.update(context)
    S3SigV4Auth(Credentials(*WRITER), "s3", "us-east-1").add_auth(request)
    return httpx.put(url, content=body, headers=dict(request.headers.items()))


@on("postgresql-azure")  # the signature's form: one server
def test_an_unsigned_payload_is_accepted(s3_server: Server, s3: Any, prefix: str) -> None:
    from botocore.config import Config

    sent = _signed_put(s3_server, prefix + "unsigned", b"unsigned body",
                       client_config=Config(s3={"payload_signing_enabled": False}))
    assert sent.status_code == 200, sent.text
    assert s3.get_object(Bucket=BUCKET, Key=prefix + "unsigned")["Body"].read() == \
        b"unsigned body"


def test_a_body_of_unknown_length_is_accepted(s3: Any, prefix: str) -> None:
    """HTTP's chunked transfer coding (no Content-Length) streams in as any body does."""

    def chunked(request: Any, **_: Any) -> None:
        request.headers.add_header("Transfer-Encoding", "chunked")

    s3.meta.events.register_first("before-sign.s3.PutObject", chunked)
    s3.put_object(Bucket=BUCKET, Key=prefix + "chunked", Body=b"streamed")
    assert s3.get_object(Bucket=BUCKET, Key=prefix + "chunked")["Body"].read() == b"streamed"


def test_a_key_no_name_can_hold_is_an_invalid_uri(s3: Any) -> None:
    with pytest.raises(ClientError) as refused:
        s3.get_object(Bucket=BUCKET, Key="\xae\x8a-")  # U+008A: a control character
    assert error(refused) == (400, "InvalidURI")
    assert refused.value.response["Error"]["Message"] == "Couldn't parse the specified URI."


def test_part_number_of_an_object_of_one_part(s3: Any, prefix: str) -> None:
    key = prefix + "single"
    tag = s3.put_object(Bucket=BUCKET, Key=key, Body=b"body")["ETag"]
    whole = s3.get_object(Bucket=BUCKET, Key=key, PartNumber=1)
    assert whole["Body"].read() == b"body" and whole["ETag"] == tag
    with pytest.raises(ClientError) as beyond:
        s3.get_object(Bucket=BUCKET, Key=key, PartNumber=2)
    assert error(beyond) == (400, "InvalidPart")
