"""boto3 against the endpoint: PutObject with If-Match, user metadata, CopyObject."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.s3api.conftest import BUCKET
from tests.s3api.test_objects import error


def test_if_match_replaces_only_the_version_it_names(s3: Any, prefix: str) -> None:
    key = prefix + "matched.txt"
    with pytest.raises(ClientError) as nothing:  # a key that names nothing: S3's NoSuchKey
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x", IfMatch='"' + "0" * 32 + '"')
    assert error(nothing) == (404, "NoSuchKey")
    first = s3.put_object(Bucket=BUCKET, Key=key, Body=b"one")["ETag"]
    second = s3.put_object(Bucket=BUCKET, Key=key, Body=b"two", IfMatch=first)["ETag"]
    with pytest.raises(ClientError) as stale:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"three", IfMatch=first)
    assert error(stale) == (412, "PreconditionFailed")
    got = s3.get_object(Bucket=BUCKET, Key=key)
    assert got["Body"].read() == b"two" and got["ETag"] == second
    # If-None-Match with an ETag: a write unless the object's ETag is that one
    with pytest.raises(ClientError) as same:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"three", IfNoneMatch=second)
    assert error(same) == (412, "PreconditionFailed")
    third = s3.put_object(Bucket=BUCKET, Key=key, Body=b"three", IfNoneMatch=first)["ETag"]
    assert s3.head_object(Bucket=BUCKET, Key=key)["ETag"] == third != second


def test_user_metadata_is_kept_with_each_version(s3: Any, prefix: str) -> None:
    key = prefix + "meta.txt"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"a", Metadata={"Owner": "ops", "n": "1"})
    assert s3.head_object(Bucket=BUCKET, Key=key)["Metadata"] == {"owner": "ops", "n": "1"}
    assert s3.get_object(Bucket=BUCKET, Key=key)["Metadata"] == {"owner": "ops", "n": "1"}
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"b")  # a replace without: none
    assert s3.head_object(Bucket=BUCKET, Key=key)["Metadata"] == {}
    with pytest.raises(ClientError) as large:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"c", Metadata={"big": "v" * 2048})
    assert error(large) == (400, "MetadataTooLarge")
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"b"
    # botocore sends (and signs) a non-ASCII value as UTF-8 (its Metadata parameter takes
    # ASCII only: the headers set as s3-tests sets them); one Latin-1 holds comes back as
    # it was, another as RFC 2047's encoded word, as S3 answers it

    def non_ascii(params: dict[str, Any], **_: Any) -> None:
        params["headers"].update({"x-amz-meta-city": "Zürich", "x-amz-meta-east": "東京"})

    s3.meta.events.register("before-call.s3.PutObject", non_ascii)
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"d")
    assert s3.head_object(Bucket=BUCKET, Key=key)["Metadata"] == {
        "city": "Zürich", "east": "=?UTF-8?B?5p2x5Lqs?="}


def test_headers_s3_keeps_with_the_object(s3: Any, prefix: str) -> None:
    """Cache-Control, Content-Disposition, Content-Encoding, Content-Language and Expires
    are kept with the version written and answered on GET and HEAD (a copy takes them with
    the metadata); a replace without them has none."""
    key = prefix + "kept.txt"
    expires = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"a", CacheControl="max-age=60",
                  ContentDisposition='attachment; filename="a.txt"', ContentEncoding="gzip",
                  ContentLanguage="fr", Expires=expires)
    for got in (s3.head_object(Bucket=BUCKET, Key=key), s3.get_object(Bucket=BUCKET, Key=key)):
        assert (got["CacheControl"], got["ContentDisposition"], got["ContentEncoding"],
                got["ContentLanguage"], got["Expires"]) == (
            "max-age=60", 'attachment; filename="a.txt"', "gzip", "fr", expires)
    s3.copy_object(Bucket=BUCKET, Key=key + ".copy", CopySource={"Bucket": BUCKET, "Key": key})
    assert s3.head_object(Bucket=BUCKET, Key=key + ".copy")["CacheControl"] == "max-age=60"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"b")
    assert "CacheControl" not in s3.head_object(Bucket=BUCKET, Key=key)


def test_copy_object(s3: Any, prefix: str) -> None:
    source, copied = prefix + "source.txt", prefix + "copy.txt"
    made = s3.put_object(Bucket=BUCKET, Key=source, Body=b"the source", ContentType="text/plain",
                         Metadata={"origin": "scanner"})["ETag"]
    origin = {"Bucket": BUCKET, "Key": source}
    result = s3.copy_object(Bucket=BUCKET, Key=copied, CopySource=origin)["CopyObjectResult"]
    got = s3.get_object(Bucket=BUCKET, Key=copied)
    assert got["Body"].read() == b"the source" and got["ETag"] == result["ETag"] == made
    assert got["ContentType"] == "text/plain" and got["Metadata"] == {"origin": "scanner"}

    s3.copy_object(Bucket=BUCKET, Key=copied, CopySource=origin, MetadataDirective="REPLACE",
                   ContentType="application/json", Metadata={"origin": "copied"})  # a replace
    head = s3.head_object(Bucket=BUCKET, Key=copied)
    assert head["ContentType"] == "application/json" and head["Metadata"] == {
        "origin": "copied"}

    for options, code in [({"CopySourceIfMatch": '"' + "0" * 32 + '"'}, 412),
                          ({"CopySourceIfNoneMatch": made}, 412),
                          ({"IfNoneMatch": "*"}, 412)]:
        with pytest.raises(ClientError) as refused:
            s3.copy_object(Bucket=BUCKET, Key=copied, CopySource=origin, **options)
        assert error(refused) == (code, "PreconditionFailed")
    with pytest.raises(ClientError) as itself:
        s3.copy_object(Bucket=BUCKET, Key=source, CopySource=origin)
    assert error(itself) == (400, "InvalidRequest")
    with pytest.raises(ClientError) as missing:
        s3.copy_object(Bucket=BUCKET, Key=copied, CopySource={"Bucket": BUCKET,
                                                              "Key": prefix + "none"})
    assert error(missing) == (404, "NoSuchKey")
    assert s3.get_object(Bucket=BUCKET, Key=copied)["Metadata"] == {"origin": "copied"}
