"""An upload's C4 and "upload done" are one step: a ``blobledger`` process SIGKILLed right
after C4 of a tus or direct upload leaves the upload closed with its document, so a HEAD or
a repeated ``complete`` (another process) answers the document, never 503 forever. And an
upload that an older release left open beside its ready document (killed between the two
steps it then had) is closed by its next completion, which answers the document."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, update

from blobledger import Ledger
from blobledger.protocol.models import UploadRow, UploadState
from tests.api.conftest import client_for
from tests.api.test_direct import begin, put
from tests.crash.child import Job, Target, payload
from tests.crash.conftest import make_target
from tests.crash.harness import kill_at, read_all, resolve, settle
from tests.support.holds import Holds

TUS = {"Tus-Resumable": "1.0.0"}
SEED = 5
CASES = [pytest.param("tus", "sqlite-local", id="tus-sqlite-local"),
         pytest.param("tus", "postgresql-azure", id="tus-postgresql-azure"),
         pytest.param("direct", "sqlite-local", id="direct-sqlite-local"),
         pytest.param("direct", "postgresql-s3", id="direct-postgresql-s3")]


async def upload_rows(ledger: Ledger) -> list[tuple[str, str]]:
    async with ledger.db.session() as session:
        return [(r.id, r.state) for r in (await session.execute(
            select(UploadRow.id, UploadRow.state))).all()]


async def completed_again(client: httpx.AsyncClient, via: str, upload_id: str) -> str:
    """What a client that comes back gets: tus's HEAD, or a direct upload's ``complete``;
    the document's id."""
    if via == "tus":
        head = await client.head(f"/files/{upload_id}", headers=TUS)
        assert head.status_code == 200, head.text
        return str(head.headers["Blobledger-Document"])
    done = await client.post(f"/uploads/{upload_id}/complete")
    assert done.status_code == 201, done.text
    return str(done.json()["id"])


@pytest.mark.parametrize(("via", "backend"), CASES)
async def test_killed_right_after_c4_the_upload_answers_its_document(
        via: str, backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    target: Target = await make_target(backend, tmp_path, request)
    await kill_at(Job(target, f"{via}.after_commit=kill", via,
                      {"name": "doc.bin", "seed": SEED}))
    async with target.ledger() as ledger:
        (upload_id, _), = await upload_rows(ledger)
        async with client_for(ledger) as client:
            doc_id = await completed_again(client, via, upload_id)
            assert await completed_again(client, via, upload_id) == doc_id
        assert await read_all(ledger, doc_id) == payload(SEED)
        assert await upload_rows(ledger) == [(upload_id, UploadState.DONE)]
    report = (await resolve(target, settle)).report
    assert report is not None
    assert report.ok, report.render()


@pytest.mark.parametrize("via", ["tus", "direct"])
async def test_an_upload_left_open_beside_its_ready_document_is_closed(
        ledger: Ledger, via: str) -> None:
    data = b"made ready by an older release"
    async with client_for(ledger) as client:
        if via == "tus":
            created = await client.post("/files/", content=data, headers={
                **TUS, "Content-Type": "application/offset+octet-stream",
                "Upload-Length": str(len(data)), "Upload-Metadata": "name ZG9jLmJpbg=="})
            assert created.status_code == 201, created.text
            upload_id = created.headers["Location"].rsplit("/", 1)[1]
            doc_id = created.headers["Blobledger-Document"]
        else:
            target = await begin(client, "doc.bin", data)
            assert await put(target, data, client) == 201
            done = await client.post(f"/uploads/{target['id']}/complete")
            assert done.status_code == 201, done.text
            upload_id, doc_id = target["id"], done.json()["id"]
        # as an older release left it when killed between C4 and closing the upload
        async with ledger.db.transaction() as conn:
            await conn.execute(update(UploadRow).where(UploadRow.id == upload_id)
                               .values(state=UploadState.OPEN.value))
        assert await completed_again(client, via, upload_id) == doc_id
    assert await upload_rows(ledger) == [(upload_id, UploadState.DONE)]
    assert await read_all(ledger, doc_id) == data


async def test_two_completions_closing_an_upload_left_open_both_answer_its_document(
        ledger: Ledger, holds: Holds) -> None:
    """Two completions of a direct upload an older release left open beside its ready
    document: the first is held right before it closes the upload, the second closes it
    and answers; the first, whose close then matches nothing, reads the upload again and
    answers the same document (not 503 \"retry\", which would never change)."""
    data = b"closed by a twin"
    async with client_for(ledger) as client:
        target = await begin(client, "twin.bin", data)
        assert await put(target, data, client) == 201
        done = await client.post(f"/uploads/{target['id']}/complete")
        assert done.status_code == 201, done.text
        doc_id = done.json()["id"]
        async with ledger.db.transaction() as conn:
            await conn.execute(update(UploadRow).where(UploadRow.id == target["id"])
                               .values(state=UploadState.OPEN.value))
        holds.at("upload.before_close_settled")
        first = asyncio.create_task(client.post(f"/uploads/{target['id']}/complete"))
        await holds.wait("upload.before_close_settled")
        assert await completed_again(client, "direct", target["id"]) == doc_id
        holds.go("upload.before_close_settled")
        answer = await first
        assert answer.status_code == 201, answer.text
        assert answer.json()["id"] == doc_id
    assert await upload_rows(ledger) == [(target["id"], UploadState.DONE)]
