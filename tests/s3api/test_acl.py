"""Canned ACLs, unsigned requests and buckets of another account through the S3 endpoint,
with boto3 (signed and ``botocore.UNSIGNED``) against a real ``serve``: an unsigned request
does what a bucket's or an object's ACL grants everyone and nothing more (never a held
document, never past the bucket's limits), a bad signature is never read as none, and a key
of another account reaches a bucket only as its ACL says."""

from __future__ import annotations

from typing import Any

import boto3
import httpx
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import run_sync
from tests.s3api.conftest import ADMIN, KEYS, WRITER, client, on, server_ledger
from tests.s3api.test_objects import error
from tests.support.server import Server

#: a key that is an account of its own (S3's "another user")
OTHER = ("AKIDOTHER", "other-secret-0123456789")
S3_EXTRA = {"BLOBLEDGER_S3API_KEYS": f"{KEYS},{OTHER[0]}:{OTHER[1]}:write+admin",
            "BLOBLEDGER_S3API_ACCOUNTS": OTHER[0],
            # a held creation waits for a scan that takes longer than the module's tests
            "BLOBLEDGER_PROCESSORS": "scan", "BLOBLEDGER_SCAN_COMMAND": "sleep 30"}


def unsigned(server: Server) -> Any:
    """boto3's client that signs nothing (as a browser or curl reads a public object)."""
    return boto3.client(
        "s3", endpoint_url=f"{server.url}/s3", region_name="us-east-1",
        config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"},
                      retries={"max_attempts": 1, "mode": "standard"}))


def refused(call: Any, *args: Any, **params: Any) -> tuple[int, str]:
    with pytest.raises(ClientError) as exc:
        call(*args, **params)
    return error(exc)


def grants(policy: dict[str, Any]) -> set[tuple[str, str]]:
    return {(g["Grantee"].get("URI") or g["Grantee"].get("ID", ""), g["Permission"])
            for g in policy["Grants"]}


def test_a_public_read_bucket_is_read_without_a_signature(s3_server: Server, s3: Any) -> None:
    admin, anyone = client(s3_server, ADMIN), unsigned(s3_server)
    admin.create_bucket(Bucket="pub-read", ACL="public-read")
    s3.put_object(Bucket="pub-read", Key="a.txt", Body=b"public bytes")
    assert anyone.get_object(Bucket="pub-read", Key="a.txt")["Body"].read() == b"public bytes"
    assert anyone.head_object(Bucket="pub-read", Key="a.txt")["ContentLength"] == 12
    assert [c["Key"] for c in anyone.list_objects(Bucket="pub-read")["Contents"]] == ["a.txt"]
    assert anyone.list_objects_v2(Bucket="pub-read")["KeyCount"] == 1
    # a bucket anyone lists: a missing key is NoSuchKey; writes and its settings stay the keys'
    assert refused(anyone.get_object, Bucket="pub-read", Key="none") == (404, "NoSuchKey")
    assert refused(anyone.put_object, Bucket="pub-read", Key="b", Body=b"x") == \
        (403, "AccessDenied")
    assert refused(anyone.delete_object, Bucket="pub-read", Key="a.txt") == \
        (403, "AccessDenied")
    assert refused(anyone.get_bucket_acl, Bucket="pub-read") == (403, "AccessDenied")
    assert refused(anyone.delete_bucket, Bucket="pub-read") == (403, "AccessDenied")
    assert refused(anyone.list_buckets) == (403, "AccessDenied")
    assert refused(anyone.get_object, Bucket="pub-read", Key="a.txt",
                   ResponseContentType="text/html") == (400, "InvalidRequest")
    policy = admin.get_bucket_acl(Bucket="pub-read")
    assert policy["Owner"]["ID"] == ADMIN[0]
    assert grants(policy) == {(ADMIN[0], "FULL_CONTROL"),
                              ("http://acs.amazonaws.com/groups/global/AllUsers", "READ")}
    # made private again: nothing, and no telling which keys exist
    admin.put_bucket_acl(Bucket="pub-read", ACL="private")
    assert refused(anyone.get_object, Bucket="pub-read", Key="a.txt") == \
        (403, "AccessDenied")
    assert refused(anyone.get_object, Bucket="pub-read", Key="none") == (403, "AccessDenied")
    assert refused(anyone.list_objects_v2, Bucket="pub-read") == (403, "AccessDenied")
    assert refused(anyone.get_object, Bucket="no-such-bucket", Key="a") == \
        (404, "NoSuchBucket")
    s3.delete_object(Bucket="pub-read", Key="a.txt")
    admin.delete_bucket(Bucket="pub-read")


@on("sqlite-local")  # the endpoint's decision before the ledger's reads: one server
def test_an_object_acl_decides_over_its_buckets(s3_server: Server, s3: Any) -> None:
    admin, anyone = client(s3_server, ADMIN), unsigned(s3_server)
    admin.create_bucket(Bucket="mixed")
    s3.put_object(Bucket="mixed", Key="shown", Body=b"shown", ACL="public-read")
    s3.put_object(Bucket="mixed", Key="hidden", Body=b"hidden")
    assert anyone.get_object(Bucket="mixed", Key="shown")["Body"].read() == b"shown"
    assert refused(anyone.get_object, Bucket="mixed", Key="hidden") == (403, "AccessDenied")
    assert refused(anyone.list_objects, Bucket="mixed") == (403, "AccessDenied")
    admin.put_bucket_acl(Bucket="mixed", ACL="public-read")
    s3.put_object_acl(Bucket="mixed", Key="hidden", ACL="private")
    assert refused(anyone.get_object, Bucket="mixed", Key="hidden") == (403, "AccessDenied")
    assert s3.get_object_acl(Bucket="mixed", Key="hidden")["Grants"][0]["Permission"] == \
        "FULL_CONTROL"
    assert len(s3.get_object_acl(Bucket="mixed", Key="shown")["Grants"]) == 2
    # a copy takes the request's ACL, not the source's; a replace its own
    s3.copy_object(Bucket="mixed", Key="copy", CopySource={"Bucket": "mixed", "Key": "hidden"},
                   ACL="public-read")
    assert anyone.get_object(Bucket="mixed", Key="copy")["Body"].read() == b"hidden"
    s3.put_object(Bucket="mixed", Key="shown", Body=b"replaced", ACL="private")
    assert refused(anyone.get_object, Bucket="mixed", Key="shown") == (403, "AccessDenied")
    # grants to named users are not canned ACLs
    assert refused(s3.put_object, Bucket="mixed", Key="g", Body=b"x",
                   GrantRead=f"id={OTHER[0]}") == (501, "NotImplemented")
    policy = s3.get_object_acl(Bucket="mixed", Key="copy")
    policy["Grants"].append({"Grantee": {"ID": OTHER[0], "Type": "CanonicalUser"},
                             "Permission": "FULL_CONTROL"})
    del policy["ResponseMetadata"]
    assert refused(s3.put_object_acl, Bucket="mixed", Key="copy",
                   AccessControlPolicy=policy) == (501, "NotImplemented")
    assert refused(s3.put_object, Bucket="mixed", Key="g", Body=b"x",
                   ACL="bucket-owner-read") == (501, "NotImplemented")
    for key in ("shown", "hidden", "copy"):
        s3.delete_object(Bucket="mixed", Key=key)
    admin.delete_bucket(Bucket="mixed")


async def _bucket(server: Server, name: str, **settings: Any) -> None:
    async with server_ledger(server) as ledger:
        await ledger.buckets.create(name, **settings)


def test_an_unsigned_write_keeps_the_buckets_limits_and_hold(s3_server: Server,
                                                             s3: Any) -> None:
    """public-read-write takes unsigned writes, within the bucket's largest object and its
    quota; a held creation stays invisible to anyone, unsigned or not."""
    anyone = unsigned(s3_server)
    run_sync(_bucket(s3_server, "drop-box", acl="public-read-write", max_object_bytes=10,
                     quota_objects=2))
    anyone.put_object(Bucket="drop-box", Key="small", Body=b"0123456789")
    assert s3.get_object(Bucket="drop-box", Key="small")["Body"].read() == b"0123456789"
    assert refused(anyone.put_object, Bucket="drop-box", Key="large",
                   Body=b"01234567890") == (400, "EntityTooLarge")
    anyone.put_object(Bucket="drop-box", Key="second", Body=b"x")
    assert refused(anyone.put_object, Bucket="drop-box", Key="third", Body=b"x") == \
        (403, "QuotaExceeded")
    anyone.delete_object(Bucket="drop-box", Key="second")  # WRITE deletes, as in S3
    run_sync(_bucket(s3_server, "held-box", acl="public-read-write", hold=True))
    anyone.put_object(Bucket="held-box", Key="held", Body=b"not yet")
    assert refused(anyone.get_object, Bucket="held-box", Key="held") == (404, "NoSuchKey")
    assert "Contents" not in anyone.list_objects_v2(Bucket="held-box")
    assert refused(s3.get_object, Bucket="held-box", Key="held") == (404, "NoSuchKey")


@on("sqlite-local")  # a signature's check: one server
def test_a_bad_signature_is_refused_not_taken_for_none(s3_server: Server) -> None:
    admin = client(s3_server, ADMIN)
    admin.create_bucket(Bucket="open-box", ACL="public-read-write")
    forged = client(s3_server, (WRITER[0], "not-the-secret-0123456789"))
    assert refused(forged.put_object, Bucket="open-box", Key="k", Body=b"x") == \
        (403, "SignatureDoesNotMatch")
    assert refused(forged.list_objects_v2, Bucket="open-box") == (403, "SignatureDoesNotMatch")
    unknown = client(s3_server, ("AKIDNOBODY", "nobody-secret-0123456789"))
    assert refused(unknown.list_objects_v2, Bucket="open-box") == (403, "InvalidAccessKeyId")
    # a CORS preflight: no bucket has a CORS configuration, signed or not
    url = admin.generate_presigned_url("list_objects_v2", Params={"Bucket": "open-box"})
    assert httpx.options(url).status_code == 400
    assert httpx.options(url, headers={"Origin": "https://app.example"}).status_code == 403
    admin.delete_bucket(Bucket="open-box")


@on("sqlite-local")  # who owns a bucket, decided before the ledger's steps: one server
def test_a_bucket_of_another_account(s3_server: Server, s3: Any) -> None:
    admin, other, anyone = client(s3_server, ADMIN), client(s3_server, OTHER), \
        unsigned(s3_server)
    other.create_bucket(Bucket="theirs")
    other.put_object(Bucket="theirs", Key="private", Body=b"theirs")
    # the name is taken, by another account: not ours to recreate, read, list or copy from
    assert refused(admin.create_bucket, Bucket="theirs") == (409, "BucketAlreadyExists")
    assert refused(s3.get_object, Bucket="theirs", Key="private") == (403, "AccessDenied")
    assert refused(s3.list_objects_v2, Bucket="theirs") == (403, "AccessDenied")
    assert refused(s3.copy_object, Bucket="blobledger", Key="stolen",
                   CopySource={"Bucket": "theirs", "Key": "private"}) == (403, "AccessDenied")
    assert refused(admin.delete_bucket, Bucket="theirs") == (403, "AccessDenied")
    assert "theirs" not in [b["Name"] for b in admin.list_buckets()["Buckets"]]
    assert [b["Name"] for b in other.list_buckets()["Buckets"]] == ["theirs"]
    # nor is the service's account's bucket theirs
    assert refused(other.get_object, Bucket="blobledger", Key="anything") == \
        (403, "AccessDenied")
    # authenticated-read: every key reads, an unsigned request does not
    other.put_bucket_acl(Bucket="theirs", ACL="authenticated-read")
    assert s3.get_object(Bucket="theirs", Key="private")["Body"].read() == b"theirs"
    assert refused(anyone.get_object, Bucket="theirs", Key="private") == \
        (403, "AccessDenied")
    assert refused(s3.put_object, Bucket="theirs", Key="k", Body=b"x") == \
        (403, "AccessDenied")
    # public-read-write: another key writes, and its upload shows who began it
    other.put_bucket_acl(Bucket="theirs", ACL="public-read-write")
    upload = s3.create_multipart_upload(Bucket="theirs", Key="big")["UploadId"]
    listed = other.list_multipart_uploads(Bucket="theirs")["Uploads"]
    assert [(u["UploadId"], u["Initiator"]["ID"], u["Owner"]["ID"]) for u in listed] == \
        [(upload, WRITER[0], WRITER[0])]
    s3.abort_multipart_upload(Bucket="theirs", Key="big", UploadId=upload)
    # an object's owner is its bucket's, in a listing and in its ACL alike
    owner = other.get_object_acl(Bucket="theirs", Key="private")["Owner"]
    assert [c["Owner"] for c in s3.list_objects(Bucket="theirs")["Contents"]] == [owner]
    assert owner["ID"] == OTHER[0]
    other.delete_object(Bucket="theirs", Key="private")
    other.delete_bucket(Bucket="theirs")


@on("sqlite-local")  # CreateBucket's answers and ListBuckets' pages: one server
def test_recreate_and_list_buckets_by_pages(s3_server: Server) -> None:
    admin = client(s3_server, ADMIN)
    admin.create_bucket(Bucket="page-a", ACL="public-read")
    admin.create_bucket(Bucket="page-a", ACL="public-read")  # the same: 200, as us-east-1
    assert refused(admin.create_bucket, Bucket="page-a") == (409, "BucketAlreadyExists")
    assert admin.get_bucket_acl(Bucket="page-a")["Grants"][1]["Permission"] == "READ"
    admin.create_bucket(Bucket="page-b")
    assert refused(admin.create_bucket, Bucket="page-b", ACL="public-read-write") == \
        (409, "BucketAlreadyExists")
    first = admin.list_buckets(MaxBuckets=1, Prefix="page-")
    assert [b["Name"] for b in first["Buckets"]] == ["page-a"]
    second = admin.list_buckets(MaxBuckets=1, Prefix="page-",
                                ContinuationToken=first["ContinuationToken"])
    assert [b["Name"] for b in second["Buckets"]] == ["page-b"]
    assert "ContinuationToken" not in second
    assert refused(admin.list_buckets, MaxBuckets=10001) == (400, "InvalidArgument")
    names = [b["Name"] for b in admin.list_buckets()["Buckets"]]
    assert names == sorted(names) and {"blobledger", "page-a", "page-b"} <= set(names)
    admin.delete_bucket(Bucket="page-a")
    admin.delete_bucket(Bucket="page-b")
