"""The read side's operations with boto3 against a real ``serve``: ListObjects (v1),
ListObjectVersions (each object its ``null`` version), DeleteObjects, the ``response-*``
overrides, and the endpoint on a host of its own (path-style from its root,
virtual-host-style on ``BUCKET.HOST``)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any
from urllib.parse import quote

import boto3
import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.s3api.conftest import BUCKET, READER, WRITER, client, on
from tests.s3api.test_objects import error
from tests.support.server import Server

#: the servers of this module answer S3 at the root of ``localhost`` and on
#: ``BUCKET.localhost``; 127.0.0.1 stays the service's (and /s3 the endpoint's)
S3_EXTRA = {"BLOBLEDGER_S3API_HOST": "localhost",
            "BLOBLEDGER_ALLOWED_HOSTS": ".localhost,127.0.0.1"}


def test_list_objects_v1(s3: Any, prefix: str) -> None:
    for name in ["a/1", "a/2", "b/1", "c", "d e", "f"]:
        s3.put_object(Bucket=BUCKET, Key=prefix + name, Body=name.encode())
    whole = s3.list_objects(Bucket=BUCKET, Prefix=prefix)
    assert [c["Key"] for c in whole["Contents"]] == [prefix + n for n in
                                                      ["a/1", "a/2", "b/1", "c", "d e", "f"]]
    assert whole["IsTruncated"] is False and whole["Contents"][0]["Size"] == 3
    folded = s3.list_objects(Bucket=BUCKET, Prefix=prefix, Delimiter="/", MaxKeys=2)
    assert [p["Prefix"] for p in folded["CommonPrefixes"]] == [prefix + "a/", prefix + "b/"]
    assert folded["IsTruncated"] is True and folded["NextMarker"] == prefix + "b/"
    rest = s3.list_objects(Bucket=BUCKET, Prefix=prefix, Delimiter="/",
                           Marker=folded["NextMarker"])
    assert [c["Key"] for c in rest["Contents"]] == [prefix + n for n in ["c", "d e", "f"]]
    assert "CommonPrefixes" not in rest and rest["IsTruncated"] is False
    after = s3.list_objects(Bucket=BUCKET, Prefix=prefix, Marker=prefix + "c")
    assert [c["Key"] for c in after["Contents"]] == [prefix + "d e", prefix + "f"]
    encoded = s3.list_objects(Bucket=BUCKET, Prefix=prefix + "d", EncodingType="url")
    # boto3 decodes only the encoding it asked for itself: this one arrives as sent
    assert [c["Key"] for c in encoded["Contents"]] == [prefix + "d%20e"]
    raw = s3.list_objects(Bucket=BUCKET, Prefix=prefix, MaxKeys=0)
    assert "Contents" not in raw and raw["IsTruncated"] is False
    pages = s3.get_paginator("list_objects").paginate(Bucket=BUCKET, Prefix=prefix,
                                                      PaginationConfig={"PageSize": 2})
    assert sum(len(page["Contents"]) for page in pages) == 6


def test_listings_compare_what_no_name_holds(s3: Any, prefix: str) -> None:
    """A prefix, marker or start-after holding a control character (which no name holds)
    is compared, as S3 does: the prefix matches nothing, the marker passes over the names
    before it. An empty continuation token is the first page's; ``fetch-owner`` adds each
    object's owner."""
    for name in ["a", "b"]:
        s3.put_object(Bucket=BUCKET, Key=prefix + name, Body=name.encode())
    for listed in (s3.list_objects(Bucket=BUCKET, Prefix=prefix + "\n"),
                   s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "\n")):
        assert "Contents" not in listed and listed["Prefix"] == prefix + "\n"
    after = s3.list_objects(Bucket=BUCKET, Prefix=prefix, Marker=prefix + "a\n")
    assert [c["Key"] for c in after["Contents"]] == [prefix + "b"]
    started = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, StartAfter=prefix + "\x01")
    assert [c["Key"] for c in started["Contents"]] == [prefix + "a", prefix + "b"]
    empty = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, ContinuationToken="")
    assert [c["Key"] for c in empty["Contents"]] == [prefix + "a", prefix + "b"]
    assert empty["ContinuationToken"] == "" and "Owner" not in empty["Contents"][0]
    owned = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, FetchOwner=True)
    assert owned["Contents"][0]["Owner"]["ID"] == WRITER[0]


def test_list_object_versions(s3: Any, prefix: str) -> None:
    """A bucket without versioning: each object once, its version ``null`` and the latest,
    no delete markers; ``versionId=null`` names the object on GET, HEAD, DELETE and in
    DeleteObjects, another version is NotImplemented."""
    names = ["a/1", "a/2", "b/1", "c", "d e"]
    for name in names:
        s3.put_object(Bucket=BUCKET, Key=prefix + name, Body=name.encode())
    assert s3.get_bucket_versioning(Bucket=BUCKET).get("Status") is None
    whole = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix)
    assert [(v["Key"], v["VersionId"], v["IsLatest"], v["Size"]) for v in
            whole["Versions"]] == [(prefix + n, "null", True, len(n)) for n in names]
    assert whole["Versions"][0]["ETag"] == s3.head_object(Bucket=BUCKET,
                                                          Key=prefix + "a/1")["ETag"]
    assert "DeleteMarkers" not in whole and whole["IsTruncated"] is False
    first = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix, MaxKeys=2)
    assert [v["Key"] for v in first["Versions"]] == [prefix + "a/1", prefix + "a/2"]
    assert first["IsTruncated"] is True and first["NextKeyMarker"] == prefix + "a/2"
    assert first["NextVersionIdMarker"] == "null"
    rest = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix, KeyMarker=prefix + "a/2",
                                   VersionIdMarker="null")
    assert [v["Key"] for v in rest["Versions"]] == [prefix + n for n in names[2:]]
    folded = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix, Delimiter="/",
                                     MaxKeys=1)
    assert [p["Prefix"] for p in folded["CommonPrefixes"]] == [prefix + "a/"]
    after = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix, Delimiter="/",
                                    KeyMarker=folded["NextKeyMarker"])
    assert [p["Prefix"] for p in after["CommonPrefixes"]] == [prefix + "b/"]
    assert [v["Key"] for v in after["Versions"]] == [prefix + "c", prefix + "d e"]
    encoded = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix + "d", EncodingType="url")
    assert [v["Key"] for v in encoded["Versions"]] == [prefix + "d%20e"]
    pages = s3.get_paginator("list_object_versions").paginate(
        Bucket=BUCKET, Prefix=prefix, PaginationConfig={"PageSize": 2})
    assert [v["Key"] for page in pages for v in page["Versions"]] == \
        [prefix + n for n in names]

    key = prefix + "c"
    assert s3.get_object(Bucket=BUCKET, Key=key, VersionId="null")["Body"].read() == b"c"
    assert s3.head_object(Bucket=BUCKET, Key=key, VersionId="null")["ContentLength"] == 1
    with pytest.raises(ClientError) as other:
        s3.get_object(Bucket=BUCKET, Key=key, VersionId="3HL4kqtJlcpXroDTDmjVBH40Nrjfkd")
    assert error(other) == (501, "NotImplemented")
    with pytest.raises(ClientError) as marker:
        s3.list_object_versions(Bucket=BUCKET, KeyMarker=key, VersionIdMarker="v2")
    assert error(marker) == (400, "InvalidArgument")
    s3.delete_object(Bucket=BUCKET, Key=key, VersionId="null")
    listed = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix)
    s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [
        {"Key": v["Key"], "VersionId": v["VersionId"]} for v in listed["Versions"]]})
    assert "Versions" not in s3.list_object_versions(Bucket=BUCKET, Prefix=prefix)


def test_delete_objects(s3: Any, prefix: str) -> None:
    for name in ["x", "y", "z"]:
        s3.put_object(Bucket=BUCKET, Key=prefix + name, Body=name.encode())
    tag = s3.head_object(Bucket=BUCKET, Key=prefix + "z")["ETag"]
    answer = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [
        {"Key": prefix + "x"}, {"Key": prefix + "never"},
        {"Key": prefix + "y", "ETag": '"00000000000000000000000000000000"'},
        {"Key": prefix + "z", "ETag": tag}]})
    assert sorted(d["Key"] for d in answer["Deleted"]) == [prefix + n for n in
                                                           ["never", "x", "z"]]
    assert [(e["Key"], e["Code"]) for e in answer["Errors"]] == [
        (prefix + "y", "PreconditionFailed")]
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    assert [c["Key"] for c in listed["Contents"]] == [prefix + "y"]
    quiet = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": prefix + "y"}],
                                                     "Quiet": True})
    assert "Deleted" not in quiet and "Errors" not in quiet
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)


@on("sqlite-local")  # refused before any transaction: one server
def test_delete_objects_refuses_what_it_cannot_trust(s3_server: Server, s3: Any,
                                                     prefix: str) -> None:
    s3.put_object(Bucket=BUCKET, Key=prefix + "kept", Body=b"kept")
    reader = client(s3_server, READER)
    with pytest.raises(ClientError) as scope:
        reader.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": prefix + "kept"}]})
    assert error(scope) == (403, "AccessDenied")
    bomb = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><Delete><Object><Key>&b;</Key>'
            b"</Object></Delete>")
    for body, code in [(bomb, "MalformedXML"), (b"<Delete></Delete>", "MalformedXML"),
                       (b"<Delete><Object><Key>x", "MalformedXML")]:
        url = f"{s3_server.url}/s3/{BUCKET}?delete"
        request = AWSRequest(method="POST", url=url, data=body, headers={
            "Content-MD5": base64.b64encode(
                hashlib.md5(body, usedforsecurity=False).digest()).decode()})
        S3SigV4Auth(Credentials(*WRITER), "s3", "us-east-1").add_auth(request)
        sent = httpx.post(url, content=body, headers=dict(request.headers.items()))
        assert sent.status_code == 400 and f"<Code>{code}</Code>" in sent.text, sent.text
    assert s3.get_object(Bucket=BUCKET, Key=prefix + "kept")["Body"].read() == b"kept"


@on("postgresql-azure")  # the answer's headers, whatever the backend: one server
def test_response_overrides(s3: Any, prefix: str) -> None:
    key = prefix + "report.bin"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"%PDF", ContentType="application/pdf")
    got = s3.get_object(Bucket=BUCKET, Key=key, ResponseContentType="text/plain",
                        ResponseContentDisposition='attachment; filename="r.txt"',
                        ResponseCacheControl="no-store", ResponseContentLanguage="fr")
    assert got["ContentType"] == "text/plain" and got["CacheControl"] == "no-store"
    assert got["ContentDisposition"] == 'attachment; filename="r.txt"'
    assert got["ContentLanguage"] == "fr" and got["Body"].read() == b"%PDF"
    url = s3.generate_presigned_url("get_object", Params={
        "Bucket": BUCKET, "Key": key, "ResponseContentDisposition": "inline"})
    shown = httpx.get(url)
    assert shown.headers["content-disposition"] == "inline"
    assert shown.headers["content-type"] == "application/pdf"
    assert s3.head_object(Bucket=BUCKET, Key=key, ResponseContentType="text/csv")[
        "ContentType"] == "text/csv"


@on("sqlite-local")  # the request's routing by its host: one server
def test_the_endpoint_on_a_host_of_its_own(s3_server: Server, prefix: str) -> None:
    """Path-style at the root of ``localhost``; virtual-host-style on ``BUCKET.localhost``
    (sent to 127.0.0.1 with that Host, as DNS would); 127.0.0.1 stays the service's."""
    root = client(s3_server)
    at_root = boto3.client(
        "s3", endpoint_url=f"http://localhost:{s3_server.port}", region_name="us-east-1",
        aws_access_key_id=WRITER[0], aws_secret_access_key=WRITER[1],
        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
    at_root.put_object(Bucket=BUCKET, Key=prefix + "root", Body=b"at the root")
    assert root.get_object(Bucket=BUCKET, Key=prefix + "root")["Body"].read() == \
        b"at the root"
    host = f"{BUCKET}.localhost:{s3_server.port}"
    for method, body in [("PUT", b"virtual host"), ("GET", b"")]:
        request = AWSRequest(method=method, url=f"http://{host}/{prefix}virtual", data=body)
        S3SigV4Auth(Credentials(*WRITER), "s3", "us-east-1").add_auth(request)
        sent = httpx.request(method, f"{s3_server.url}/{prefix}virtual", content=body,
                             headers={**dict(request.headers.items()), "Host": host})
        assert sent.status_code == 200, sent.text
    assert sent.content == b"virtual host"
    query = f"list-type=2&prefix={quote(prefix, safe='')}"  # encoded, as SigV4 signs it
    listing = AWSRequest(method="GET", url=f"http://{host}/?{query}")
    S3SigV4Auth(Credentials(*WRITER), "s3", "us-east-1").add_auth(listing)
    listed = httpx.get(f"{s3_server.url}/?{query}",
                       headers={**dict(listing.headers.items()), "Host": host})
    assert listed.status_code == 200 and f"<Key>{prefix}virtual</Key>" in listed.text
    assert httpx.get(f"{s3_server.url}/readyz").status_code == 200
