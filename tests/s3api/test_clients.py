"""The protocol under S3 clients: two writers racing ``If-None-Match: *`` on one key, a
listing while an upload is still streaming, and the AWS CLI used as a user would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.s3api.conftest import BUCKET, WRITER, client
from tests.support.server import Server

AWS = Path(sys.executable).parent / "aws"


def race(server: Server, key: str, bodies: list[bytes]) -> list[tuple[int, bytes, str]]:
    """Each body PUT with ``If-None-Match: *`` by a client of its own, all at once: each
    one's (status, body, ETag or error code)."""
    clients = [client(server) for _ in bodies]
    start = threading.Barrier(len(bodies))
    outcomes: list[tuple[int, bytes, str]] = []

    def put(index: int) -> None:
        start.wait()
        try:
            made = clients[index].put_object(Bucket=BUCKET, Key=key, Body=bodies[index],
                                             IfNoneMatch="*")
            outcomes.append((200, bodies[index], made["ETag"]))
        except ClientError as exc:
            status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
            outcomes.append((status, bodies[index], exc.response["Error"]["Code"]))

    threads = [threading.Thread(target=put, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_two_clients_racing_if_none_match_star(s3_server: Server, s3: Any,
                                               prefix: str) -> None:
    """Exactly one 200, the other 412, and the key holds the winner's bytes, every time."""
    for round_ in range(6):
        key = f"{prefix}race-{round_}"
        outcomes = race(s3_server, key, [bytes([65 + i]) * (256 * 1024) for i in range(2)])
        assert sorted(status for status, _, _ in outcomes) == [200, 412], outcomes
        winner = next(o for o in outcomes if o[0] == 200)
        loser = next(o for o in outcomes if o[0] == 412)
        assert loser[2] == "PreconditionFailed"
        stored = s3.get_object(Bucket=BUCKET, Key=key)
        assert stored["Body"].read() == winner[1] and stored["ETag"] == winner[2]


def test_a_listing_shows_no_object_before_its_bytes(s3_server: Server, s3: Any,
                                                    prefix: str) -> None:
    """A PUT whose body is half sent is a pending document: no listing, no GET shows it."""
    key = prefix + "streaming"
    body = b"x" * 200_000
    url = f"{s3_server.url}/s3/{BUCKET}/{key}"
    signed = AWSRequest(method="PUT", url=url, data=body)
    S3SigV4Auth(Credentials(*WRITER), "s3", "us-east-1").add_auth(signed)
    head = "".join(f"{name}: {value}\r\n" for name, value in signed.headers.items())
    with socket.create_connection(("127.0.0.1", s3_server.port)) as sock:
        sock.sendall(f"PUT /s3/{BUCKET}/{key} HTTP/1.1\r\nHost: 127.0.0.1:{s3_server.port}\r\n"
                     f"Content-Length: {len(body)}\r\n{head}\r\n".encode() + body[:100_000])
        assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        with pytest.raises(ClientError) as early:
            s3.head_object(Bucket=BUCKET, Key=key)
        assert early.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
        sock.sendall(body[100_000:])
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200"), answer
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    assert [(c["Key"], c["Size"]) for c in listed["Contents"]] == [(key, len(body))]


def test_the_aws_cli_copies_and_lists(s3_server: Server, tmp_path: Path, prefix: str) -> None:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": WRITER[0], "AWS_SECRET_ACCESS_KEY": WRITER[1],
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp_path / "none"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}

    def aws(*args: str) -> str:
        done = subprocess.run([str(AWS), "--endpoint-url", f"{s3_server.url}/s3", "s3", *args],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    source = tmp_path / "notes.txt"
    source.write_bytes(b"written by the AWS CLI\n" * 1000)
    aws("cp", str(source), f"s3://{BUCKET}/{prefix}cli/notes.txt")
    aws("cp", str(source), f"s3://{BUCKET}/{prefix}cli/deeper/again.txt")
    top = aws("ls", f"s3://{BUCKET}/{prefix}cli/")
    assert "PRE deeper/" in top and "notes.txt" in top and "again.txt" not in top
    every = aws("ls", "--recursive", f"s3://{BUCKET}/{prefix}")
    assert f"{prefix}cli/notes.txt" in every and f"{prefix}cli/deeper/again.txt" in every
    back = tmp_path / "back.txt"
    aws("cp", f"s3://{BUCKET}/{prefix}cli/notes.txt", str(back))
    assert back.read_bytes() == source.read_bytes()
    aws("rm", f"s3://{BUCKET}/{prefix}cli/notes.txt")
    assert "notes.txt" not in aws("ls", "--recursive", f"s3://{BUCKET}/{prefix}")


def test_the_endpoint_beside_bearer_tokens(azurite: Any, tmp_path: Path) -> None:
    """With API tokens set, S3 keys still sign S3 requests; neither credential opens the
    other's routes."""
    from tests.s3api.conftest import KEYS
    from tests.support.server import running_server

    extra = {"BLOBLEDGER_S3API_KEYS": KEYS, "BLOBLEDGER_API_TOKENS": "bearer-token-1:write",
             "BLOBLEDGER_STORE_URL": f"file://{tmp_path / 'store'}"}
    with running_server(azurite, f"sqlite+aiosqlite:///{tmp_path / 'db'}",
                        extra=extra) as server:
        s3 = client(server)
        s3.put_object(Bucket=BUCKET, Key="beside", Body=b"beside tokens")
        assert s3.get_object(Bucket=BUCKET, Key="beside")["Body"].read() == b"beside tokens"
        bearer = {"Authorization": "Bearer bearer-token-1"}
        assert httpx.get(f"{server.url}/documents", headers=bearer).status_code == 200
        refused = httpx.get(f"{server.url}/s3/{BUCKET}?list-type=2", headers=bearer)
        # S3's own answer to an Authorization of another kind
        assert refused.status_code == 400 and "<Code>InvalidArgument</Code>" in refused.text
        signed = s3.generate_presigned_url("list_objects_v2", Params={"Bucket": BUCKET})
        query = signed.split("?", 1)[1]
        assert httpx.get(f"{server.url}/documents?{query}").status_code == 401
