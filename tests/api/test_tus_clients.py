"""tus with a client nobody here wrote (tuspy, from PyPI) against real ``serve`` processes on
PostgreSQL: every store, and a 256 MiB upload resumed after the server was SIGKILLed
mid-request, by a second ``serve`` instance."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tusclient import client as tus_client
from tusclient.exceptions import TusCommunicationError, TusUploadFailed

from tests.support.server import Server, fresh_database, running_server
from tests.support.services import Azurite, MotoS3

MiB = 1024 * 1024
TUS = {"Tus-Resumable": "1.0.0"}


class CountingFile(io.BytesIO):
    """The file tuspy reads: counts every byte it reads (what it sends)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.sent = 0

    def read(self, size: int | None = -1, /) -> bytes:
        chunk = super().read(size)
        self.sent += len(chunk)
        return chunk


def store_env(kind: str, tmp_path: Path, moto: MotoS3 | None) -> dict[str, str]:
    if kind == "local":
        return {"BLOBLEDGER_STORE_URL": f"file://{tmp_path / 'store'}"}
    if kind == "s3":
        assert moto is not None
        return {"BLOBLEDGER_STORE_URL": f"s3://tus{uuid.uuid4().hex[:12]}/app",
                **moto.environment()}
    return {}  # the server's own Azurite container


def document(server: Server, doc_id: str) -> dict[str, object]:
    response = httpx.get(f"{server.url}/documents/{doc_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.mark.parametrize("kind", ["local", "azure", "s3"])
def test_tuspy_uploads_on_every_store(kind: str, tmp_path: Path, azurite: Azurite,
                                      request: pytest.FixtureRequest) -> None:
    moto = request.getfixturevalue("moto") if kind == "s3" else None
    data = os.urandom(13 * MiB + 321)
    with fresh_database() as url, running_server(
            azurite, url, extra=store_env(kind, tmp_path, moto)) as server:
        client = tus_client.TusClient(f"{server.url}/files/")
        uploader = client.uploader(file_stream=io.BytesIO(data), chunk_size=6 * MiB,
                                   metadata={"filename": f"{kind}.bin"},
                                   upload_checksum=True)
        uploader.upload()
        head = httpx.head(str(uploader.url), headers=TUS)
        doc = document(server, head.headers["Blobledger-Document"])
        assert doc["sha256"] == hashlib.sha256(data).hexdigest()
        assert doc["name"] == f"{kind}.bin" and doc["size"] == len(data)
        content = httpx.get(f"{server.url}/documents/{doc['id']}/content")
        assert content.content == data


@contextlib.contextmanager
def background(target: object) -> Iterator[dict[str, BaseException | None]]:
    outcome: dict[str, BaseException | None] = {"error": None}

    def run() -> None:
        try:
            target()  # type: ignore[operator]
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield outcome
    finally:
        thread.join(120)


@pytest.mark.slow
def test_tuspy_resumes_256_mib_across_a_killed_serve(tmp_path: Path, azurite: Azurite) -> None:
    data = os.urandom(256 * MiB)
    source = CountingFile(data)
    chunk = 64 * MiB
    env = store_env("local", tmp_path, None)
    with fresh_database() as url:
        with running_server(azurite, url, extra=env) as first:
            client = tus_client.TusClient(f"{first.url}/files/")
            uploader = client.uploader(file_stream=source, chunk_size=chunk, retries=0,
                                       metadata={"filename": "big.bin"})
            upload_id = uploader.create_url().rsplit("/", 1)[-1]
            uploader.set_url(f"{first.url}/files/{upload_id}")
            with background(uploader.upload) as outcome:
                deadline = time.monotonic() + 120
                offset = 0
                while offset < 96 * MiB and time.monotonic() < deadline:  # inside chunk 2
                    offset = int(httpx.head(str(uploader.url), headers=TUS)
                                 .headers["Upload-Offset"])
                    time.sleep(0.02)
                first.process.kill()  # SIGKILL, mid-request
                first.process.wait(10)
            assert isinstance(outcome["error"], (TusCommunicationError, TusUploadFailed,
                                                 OSError)), outcome
        sent_before = source.sent
        with running_server(azurite, url, extra=env) as second:  # another instance
            resumed = tus_client.TusClient(f"{second.url}/files/").uploader(
                file_stream=source, chunk_size=chunk, url=f"{second.url}/files/{upload_id}")
            durable = resumed.offset
            assert 96 * MiB <= durable < len(data)
            assert durable < sent_before <= durable + chunk + 8 * MiB
            resumed.upload()
            head = httpx.head(str(resumed.url), headers=TUS)
            doc = document(second, head.headers["Blobledger-Document"])
            assert doc["sha256"] == hashlib.sha256(data).hexdigest()
            resent = source.sent - len(data)
            # only what was in flight past the last stored part is sent again
            assert 0 < resent <= chunk, resent
            print(f"resume after kill: durable offset {durable / MiB:.1f} MiB, "
                  f"re-sent {resent / MiB:.1f} MiB")
