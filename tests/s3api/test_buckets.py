"""Buckets through the S3 endpoint, with boto3 against a real ``serve``: CreateBucket,
ListBuckets, HeadBucket and DeleteBucket for a key with the ``admin`` scope, a name unique
per bucket, and a tenant's key that reaches only its own buckets."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.s3api.conftest import ADMIN, BUCKET, TENANT, client, on
from tests.s3api.test_objects import error
from tests.support.server import Server


def test_buckets_are_namespaces(s3_server: Server, s3: Any) -> None:
    admin = client(s3_server, ADMIN)
    with pytest.raises(ClientError) as denied:
        s3.create_bucket(Bucket="photos")  # a write key manages no bucket
    assert error(denied) == (403, "AccessDenied")
    admin.create_bucket(Bucket="photos")
    s3.put_object(Bucket="photos", Key="kept.txt", Body=b"kept")
    admin.create_bucket(Bucket="photos")  # us-east-1's answer: 200, nothing changed
    assert [c["Key"] for c in s3.list_objects_v2(Bucket="photos")["Contents"]] == [
        "kept.txt"]
    s3.delete_object(Bucket="photos", Key="kept.txt")
    with pytest.raises(ClientError) as bad:
        admin.create_bucket(Bucket="default")  # the default bucket goes by BUCKET here
    assert error(bad) == (409, "BucketAlreadyExists")
    assert [b["Name"] for b in admin.list_buckets()["Buckets"]] == [BUCKET, "photos"]
    admin.head_bucket(Bucket="photos")

    s3.put_object(Bucket=BUCKET, Key="same.txt", Body=b"in the default bucket")
    s3.put_object(Bucket="photos", Key="same.txt", Body=b"in photos", IfNoneMatch="*")
    assert s3.get_object(Bucket=BUCKET, Key="same.txt")["Body"].read() == \
        b"in the default bucket"
    assert s3.get_object(Bucket="photos", Key="same.txt")["Body"].read() == b"in photos"
    assert [c["Key"] for c in s3.list_objects_v2(Bucket="photos")["Contents"]] == [
        "same.txt"]
    assert s3.list_objects_v2(Bucket="photos")["Name"] == "photos"
    # a copy from one bucket to another, each its own namespace
    s3.copy_object(Bucket=BUCKET, Key="copied.txt",
                   CopySource={"Bucket": "photos", "Key": "same.txt"})
    assert s3.get_object(Bucket=BUCKET, Key="copied.txt")["Body"].read() == b"in photos"
    s3.delete_object(Bucket=BUCKET, Key="copied.txt")
    with pytest.raises(ClientError) as nowhere:
        s3.copy_object(Bucket=BUCKET, Key="copied.txt",
                       CopySource={"Bucket": "no-such-bucket", "Key": "same.txt"})
    assert error(nowhere) == (404, "NoSuchBucket")

    with pytest.raises(ClientError) as full:
        admin.delete_bucket(Bucket="photos")
    assert error(full) == (409, "BucketNotEmpty")
    s3.delete_object(Bucket="photos", Key="same.txt")
    admin.delete_bucket(Bucket="photos")
    with pytest.raises(ClientError) as gone:
        s3.get_object(Bucket="photos", Key="same.txt")
    assert error(gone) == (404, "NoSuchBucket")
    assert s3.get_object(Bucket=BUCKET, Key="same.txt")["Body"].read() == \
        b"in the default bucket"
    with pytest.raises(ClientError) as kept:
        admin.delete_bucket(Bucket=BUCKET)
    assert error(kept) == (403, "AccessDenied")


@on("postgresql-azure")  # a key's scope (the buckets it names): one server
def test_a_tenant_key_reaches_only_its_buckets(s3_server: Server, s3: Any) -> None:
    tenant = client(s3_server, TENANT)
    tenant.create_bucket(Bucket="tenant-a")
    with pytest.raises(ClientError) as elsewhere:
        tenant.create_bucket(Bucket="tenant-b")
    assert error(elsewhere) == (403, "AccessDenied")
    tenant.put_object(Bucket="tenant-a", Key="k", Body=b"tenant's")
    assert [b["Name"] for b in tenant.list_buckets()["Buckets"]] == ["tenant-a"]
    for operation, params in (("get_object", {"Key": "k"}),
                              ("put_object", {"Key": "k", "Body": b"x"}),
                              ("list_objects_v2", {})):
        with pytest.raises(ClientError) as refused:
            getattr(tenant, operation)(Bucket=BUCKET, **params)
        assert error(refused) == (404, "NoSuchBucket")
    # a key of every bucket reads the tenant's
    assert s3.get_object(Bucket="tenant-a", Key="k")["Body"].read() == b"tenant's"
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket=BUCKET, Key="k")
    assert error(missing) == (404, "NoSuchKey")


def test_delete_bucket_aborts_its_uploads_in_progress(s3_server: Server, s3: Any) -> None:
    """S3 deletes a bucket whose only content is multipart uploads in progress: they are
    aborted; each bucket lists its own uploads only."""
    admin = client(s3_server, ADMIN)
    admin.create_bucket(Bucket="drafts")
    started = s3.create_multipart_upload(Bucket="drafts", Key="big.bin")["UploadId"]
    s3.upload_part(Bucket="drafts", Key="big.bin", UploadId=started, PartNumber=1,
                   Body=b"part")
    mine = s3.create_multipart_upload(Bucket=BUCKET, Key="kept.bin")["UploadId"]
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket="drafts")["Uploads"]] \
        == [started]
    assert mine in [u["UploadId"] for u in
                    s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])]
    assert started not in [u["UploadId"] for u in
                           s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])]
    admin.delete_bucket(Bucket="drafts")
    with pytest.raises(ClientError) as gone:
        s3.head_bucket(Bucket="drafts")
    assert error(gone)[0] == 404
    assert mine in [u["UploadId"] for u in
                    s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])]
    s3.abort_multipart_upload(Bucket=BUCKET, Key="kept.bin", UploadId=mine)
