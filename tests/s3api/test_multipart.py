"""boto3's multipart upload against a real ``serve``: a resumable upload on the ledger's
upload rows, on SQLite with the local disk, PostgreSQL with Azurite and PostgreSQL with
moto's S3 (where the store's own multipart upload carries the parts)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.s3api.rows import parts_of
from blobledger.workers.sweeper import Sweeper
from tests.conftest import run_sync
from tests.s3api.conftest import BUCKET, KEYS, LOCK_WAIT, client
from tests.s3api.test_objects import error
from tests.support.server import Server, fresh_database, running_server
from tests.support.services import Azurite, MotoS3

MIB = 1024 * 1024


@pytest.fixture(scope="module", params=["sqlite-local", "postgresql-azure", "postgresql-moto"])
def mp_server(request: pytest.FixtureRequest, azurite: Azurite,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    extra = {"BLOBLEDGER_S3API_KEYS": KEYS}
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite-local":
            folder: Path = tmp_path_factory.mktemp("s3mp")
            url = f"sqlite+aiosqlite:///{folder / 'ledger.db'}"
            extra["BLOBLEDGER_STORE_URL"] = f"file://{folder / 'store'}"
        else:
            url = stack.enter_context(fresh_database())
        if request.param == "postgresql-moto":
            moto: MotoS3 = request.getfixturevalue("moto")
            extra.update(moto.environment(), BLOBLEDGER_STORE_URL=f"s3://mp{os.getpid()}")
        yield stack.enter_context(running_server(azurite, url, extra=extra))


@pytest.fixture
def s3(mp_server: Server) -> Any:
    return client(mp_server)


def parts_list(*made: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"Parts": [{"PartNumber": number, "ETag": part["ETag"]} for number, part in made]}


def test_parts_out_of_order_and_again_then_complete(s3: Any, prefix: str) -> None:
    key = prefix + "big.bin"
    started = s3.create_multipart_upload(Bucket=BUCKET, Key=key, ContentType="video/mp4",
                                         Metadata={"camera": "north"})
    upload = started["UploadId"]
    first, again, last = os.urandom(5 * MIB), os.urandom(5 * MIB), b"the tail"
    two = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2, Body=last)
    s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=first)
    one = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=again)
    assert one["ETag"] == f'"{hashlib.md5(again).hexdigest()}"'  # a part's ETag: its MD5

    listed = s3.list_parts(Bucket=BUCKET, Key=key, UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in listed] == [
        (1, one["ETag"], 5 * MIB), (2, two["ETag"], len(last))]
    uploads = s3.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in uploads] == [(key, upload)]
    with pytest.raises(ClientError) as invisible:  # nothing visible before the completion
        s3.head_object(Bucket=BUCKET, Key=key)
    assert error(invisible)[0] == 404

    done = s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload,
                                        MultipartUpload=parts_list((1, one), (2, two)))
    got = s3.get_object(Bucket=BUCKET, Key=key)
    assert got["Body"].read() == again + last
    assert got["ETag"] == done["ETag"] and got["ContentType"] == "video/mp4"
    assert got["Metadata"] == {"camera": "north"}
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix)
    listed_keys = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed_keys] == [(key, 5 * MIB + len(last))]


def test_upload_part_copy_takes_a_range_of_a_ready_object(s3: Any, prefix: str) -> None:
    """UploadPartCopy: a part copied from a ready object, whole or a range of it (the
    source's conditions checked first), then completed with an uploaded part."""
    source, key = prefix + "source.bin", prefix + "assembled.bin"
    data = os.urandom(6 * MIB)
    tag = s3.put_object(Bucket=BUCKET, Key=source, Body=data)["ETag"]
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    copied = s3.upload_part_copy(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1,
                                 CopySource={"Bucket": BUCKET, "Key": source},
                                 CopySourceRange=f"bytes={MIB}-{6 * MIB - 1}",
                                 CopySourceIfMatch=tag)["CopyPartResult"]
    assert copied["ETag"] == f'"{hashlib.md5(data[MIB:]).hexdigest()}"'
    with pytest.raises(ClientError) as stale:  # the source's condition, checked first
        s3.upload_part_copy(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2,
                            CopySource={"Bucket": BUCKET, "Key": source},
                            CopySourceIfMatch='"' + "0" * 32 + '"')
    assert error(stale) == (412, "PreconditionFailed")
    with pytest.raises(ClientError) as outside:
        s3.upload_part_copy(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2,
                            CopySource={"Bucket": BUCKET, "Key": source},
                            CopySourceRange=f"bytes=0-{6 * MIB}")
    assert error(outside) == (416, "InvalidRange")
    with pytest.raises(ClientError) as missing:
        s3.upload_part_copy(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2,
                            CopySource={"Bucket": BUCKET, "Key": prefix + "nothing"})
    assert error(missing) == (404, "NoSuchKey")
    whole = s3.upload_part_copy(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2,
                                CopySource={"Bucket": BUCKET, "Key": source})["CopyPartResult"]
    tail = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=3, Body=b"end")
    listed = s3.list_parts(Bucket=BUCKET, Key=key, UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in listed] == [
        (1, 5 * MIB), (2, 6 * MIB), (3, 3)]
    s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": copied["ETag"]},
                  {"PartNumber": 2, "ETag": whole["ETag"]},
                  {"PartNumber": 3, "ETag": tail["ETag"]}]})
    got = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert got == data[MIB:] + data + b"end"


def test_a_completion_is_checked_as_s3_checks_it(s3: Any, prefix: str) -> None:
    key = prefix + "checked.txt"
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    one = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"a")
    two = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2, Body=b"b")
    wrong = {"Parts": [{"PartNumber": 1, "ETag": '"' + "0" * 32 + '"'}]}
    missing = {"Parts": [{"PartNumber": 3, "ETag": one["ETag"]}]}
    for parts, code in [(wrong, "InvalidPart"), (missing, "InvalidPart"),
                        (parts_list((2, two), (1, one)), "InvalidPartOrder"),
                        (parts_list((1, one), (2, two)), "EntityTooSmall")]:
        with pytest.raises(ClientError) as refused:
            s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload,
                                         MultipartUpload=parts)
        assert error(refused) == (400, code)
    with pytest.raises(ClientError) as unknown:
        s3.upload_part(Bucket=BUCKET, Key=key, UploadId="0" * 32, PartNumber=1, Body=b"x")
    assert error(unknown) == (404, "NoSuchUpload")
    # the refusals changed nothing: the upload completes with its last part alone; a
    # number named again right after itself is named by its last entry (the part uploaded
    # again since the first entry's ETag)
    again = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2, Body=b"c")
    s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload,
                                 MultipartUpload=parts_list((2, two), (2, again)))
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"c"


# the condition is the database's (parts and completion on each store: the tests around)
@pytest.mark.parametrize("mp_server", ["sqlite-local", "postgresql-azure"], indirect=True)
def test_if_none_match_refuses_an_existing_key_and_a_plain_completion_replaces(
        s3: Any, prefix: str) -> None:
    key = prefix + "kept.txt"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"the first bytes")
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    part = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"new")
    with pytest.raises(ClientError) as refused:
        s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload, IfNoneMatch="*",
                                     MultipartUpload=parts_list((1, part)))
    assert error(refused) == (412, "PreconditionFailed")
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"the first bytes"
    # the upload is still there: completed without the condition, it replaces the object
    done = s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload,
                                        MultipartUpload=parts_list((1, part)))
    got = s3.get_object(Bucket=BUCKET, Key=key)
    assert got["Body"].read() == b"new" and got["ETag"] == done["ETag"]


def test_abort_drops_the_upload(s3: Any, prefix: str) -> None:
    key = prefix + "dropped.txt"
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"bytes")
    s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload)
    with pytest.raises(ClientError) as gone:
        s3.list_parts(Bucket=BUCKET, Key=key, UploadId=upload)
    assert error(gone) == (404, "NoSuchUpload")
    with pytest.raises(ClientError) as late:
        s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2, Body=b"more")
    assert error(late) == (404, "NoSuchUpload")
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)


def test_racing_completions_with_if_none_match_one_wins(mp_server: Server,
                                                         prefix: str) -> None:
    key = prefix + "raced.txt"
    clients = [client(mp_server) for _ in range(2)]
    ready = []
    for n, s3 in enumerate(clients):
        upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        part = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1,
                              Body=f"writer {n}".encode())
        ready.append((s3, upload, part))

    def complete(item: tuple[Any, str, dict[str, Any]]) -> int | tuple[int, str]:
        s3, upload, part = item
        try:
            s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload,
                                         IfNoneMatch="*", MultipartUpload=parts_list((1, part)))
        except ClientError as exc:
            return exc.response["ResponseMetadata"]["HTTPStatusCode"], \
                exc.response["Error"]["Code"]
        return 200

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(complete, ready))
    assert sorted(outcomes, key=str) == sorted([200, (412, "PreconditionFailed")], key=str)
    winner = outcomes.index(200)
    assert clients[0].get_object(Bucket=BUCKET, Key=key)["Body"].read() == \
        f"writer {winner}".encode()


def test_an_upload_survives_a_killed_service(azurite: Azurite, tmp_path: Path) -> None:
    """SIGKILL between two parts; a new process completes the upload from the rows and the
    staged parts the dead one left."""
    extra = {"BLOBLEDGER_S3API_KEYS": KEYS, "BLOBLEDGER_STORE_URL": f"file://{tmp_path}/store"}
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    first_part = os.urandom(5 * MIB)
    with running_server(azurite, url, extra=extra) as server:
        s3 = client(server)
        upload = s3.create_multipart_upload(Bucket=BUCKET, Key="k/survivor.bin")["UploadId"]
        one = s3.upload_part(Bucket=BUCKET, Key="k/survivor.bin", UploadId=upload,
                             PartNumber=1, Body=first_part)
        server.process.kill()
        server.process.wait()
    with running_server(azurite, url, extra=extra) as server:
        s3 = client(server)
        two = s3.upload_part(Bucket=BUCKET, Key="k/survivor.bin", UploadId=upload,
                             PartNumber=2, Body=b"after the restart")
        s3.complete_multipart_upload(Bucket=BUCKET, Key="k/survivor.bin", UploadId=upload,
                                     MultipartUpload=parts_list((1, one), (2, two)))
        got = s3.get_object(Bucket=BUCKET, Key="k/survivor.bin")["Body"].read()
        assert got == first_part + b"after the restart"


def test_an_abandoned_upload_is_swept_like_any_other(azurite: Azurite, tmp_path: Path) -> None:
    """An upload never completed nor aborted: once expired, the sweeper takes its intent and
    its staged parts; the endpoint then knows it no more, and forgets its parts' rows."""
    extra = {"BLOBLEDGER_S3API_KEYS": KEYS, "BLOBLEDGER_STORE_URL": f"file://{tmp_path}/store"}
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    with running_server(azurite, url, extra=extra) as server:
        s3 = client(server)
        upload = s3.create_multipart_upload(Bucket=BUCKET, Key="k/left.bin")["UploadId"]
        s3.upload_part(Bucket=BUCKET, Key="k/left.bin", UploadId=upload, PartNumber=1,
                       Body=b"never completed")

        async def sweep(later: bool) -> tuple[int, list[str], int]:
            settings = Settings(database_url=url, store_url=extra["BLOBLEDGER_STORE_URL"])
            async with Ledger.from_settings(settings) as ledger:
                swept = 0
                if later:  # past the upload's expiry
                    ledger.transitions.offset = settings.resumable_expiry + 1
                    swept = (await Sweeper(ledger, lock_wait=LOCK_WAIT).run_once()).swept
                    ledger.transitions.offset = 0
                staged = [u.name async for u in ledger.store.list_uncommitted()]
                return swept, staged, len(await parts_of(ledger, upload))

        assert run_sync(sweep(later=True))[:2] == (1, [])
        with pytest.raises(ClientError) as gone:
            s3.list_parts(Bucket=BUCKET, Key="k/left.bin", UploadId=upload)
        assert error(gone) == (404, "NoSuchUpload")
        assert "Uploads" not in s3.list_multipart_uploads(Bucket=BUCKET)
        s3.create_multipart_upload(Bucket=BUCKET, Key="k/next.bin")  # forgets the parts' rows
        assert run_sync(sweep(later=False)) == (0, [], 0)
        assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


def test_upload_part_copy(s3: Any, prefix: str) -> None:
    """UploadPartCopy: parts copied from ranges of a ready object (and a whole one), their
    ETags their MD5s; a range past the source's end is InvalidRange, one not of the form
    bytes=first-last InvalidArgument."""
    source, key = prefix + "copy-source", prefix + "copied"
    data = bytes(range(256)) * (24 * 1024)  # 6 MiB: the first part at least 5 MiB
    s3.put_object(Bucket=BUCKET, Key=source, Body=data)
    s3.put_object(Bucket=BUCKET, Key=source + ".small", Body=b"tail")
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    origin = {"Bucket": BUCKET, "Key": source}
    cut = 5 * 1024 * 1024
    first = s3.upload_part_copy(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1,
                                CopySource=origin, CopySourceRange=f"bytes=0-{cut - 1}")
    assert first["CopyPartResult"]["ETag"] == f'"{hashlib.md5(data[:cut]).hexdigest()}"'
    second = s3.upload_part_copy(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=2,
                                 CopySource={"Bucket": BUCKET, "Key": source + ".small"})
    for bad, code in (("bytes=0-" + str(len(data)), (400, "InvalidRange")),
                      ("0-2", (400, "InvalidArgument")), ("bytes=0-2,3-5",
                                                         (400, "InvalidArgument"))):
        with pytest.raises(ClientError) as refused:
            s3.upload_part_copy(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=3,
                                CopySource=origin, CopySourceRange=bad)
        assert error(refused)[1] == code[1], bad
    s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": first["CopyPartResult"]["ETag"]},
                  {"PartNumber": 2, "ETag": second["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data[:cut] + b"tail"
