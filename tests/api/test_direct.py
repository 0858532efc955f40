"""Direct uploads at ``/uploads`` on every backend: the client puts the bytes to the URL it is
given (Azure's own SDK with the SAS URL, a plain HTTP PUT to the S3 presigned URL or to
``serve``), completion checks what the store holds, and nothing can be overwritten."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.storage.blob import BlobClient, ContentSettings

from blobledger import Ledger
from blobledger.uploads.direct import DirectUploads
from blobledger.workers import reconciler
from blobledger.workers.invariants import check
from blobledger.workers.reconciler import reconcile
from blobledger.workers.sweeper import Sweeper
from tests.api.conftest import client_for, leftovers, problem
from tests.stores.contract import read_all
from tests.support.holds import Holds
from tests.sweeper.support import HOUR, one, rows, seed_intent, stored


@pytest.fixture
async def client(ledger: Ledger) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(ledger) as instance:
        yield instance


async def begin(client: httpx.AsyncClient, name: str | None, data: bytes, **extra: Any
                ) -> dict[str, Any]:
    response = await client.post("/uploads", json={"name": name, "size": len(data),
                                                   "content_type": "text/plain", **extra})
    assert response.status_code == 201, response.text
    return dict(response.json())


def via_sdk(target: dict[str, Any], data: bytes, tags: dict[str, str] | None = None) -> int:
    """Put ``data`` the way a client of that store would; the HTTP status (201 created)."""
    if "sig=" in target["url"] and "x-ms-blob-type" in target["headers"]:
        blob = BlobClient.from_blob_url(target["url"], api_version="2026-06-06")
        try:
            blob.upload_blob(data, tags=tags,
                             content_settings=ContentSettings(content_type="text/plain"))
        except ResourceExistsError:
            return 409
        except HttpResponseError as exc:
            return int(exc.status_code or 0)
        finally:
            blob.close()
        return 201
    headers = dict(target["headers"])
    if "Content-Length" in headers:  # signed (S3): what an honest client sends is its size
        headers["Content-Length"] = str(len(data))
    if tags is not None:
        headers["x-amz-tagging"] = "&".join(f"{k}={v}" for k, v in tags.items())
    response = httpx.put(target["url"], content=data, headers=headers)
    return 201 if response.status_code in (200, 201) else response.status_code


async def put(target: dict[str, Any], data: bytes, client: httpx.AsyncClient,
              tags: dict[str, str] | None = None) -> int:
    if target["via"] == "service":
        response = await client.put(target["url"].removeprefix("http://test"), content=data,
                                    headers=target["headers"])
        return response.status_code
    return await asyncio.to_thread(via_sdk, target, data, tags)


async def test_direct_upload_becomes_a_document_and_never_overwrites(
        ledger: Ledger, client: httpx.AsyncClient) -> None:
    data = os.urandom(300 * 1024)
    target = await begin(client, "direct.txt", data,
                         sha256=hashlib.sha256(data).hexdigest())
    assert target["via"] == ("service" if ledger.store.url.startswith("file:") else "store")
    problem(await client.post(f"/uploads/{target['id']}/complete"), 409, "offset-mismatch")
    assert await put(target, data, client) == 201
    assert (await client.get("/documents")).json()["items"] == []  # visible only after C4
    done = await client.post(f"/uploads/{target['id']}/complete")
    assert done.status_code == 201, done.text
    doc = done.json()
    assert doc["sha256"] == hashlib.sha256(data).hexdigest() and doc["size"] == len(data)
    assert await ledger.store.get_tags(doc["blob"]) == {"state": "committed"}
    # the same URL, again and with other bytes: refused by the store (or by serve); Azure
    # refuses a create-only SAS's write to an existing blob with 403 before If-None-Match
    assert await put(target, b"overwrite!" * 10, client) in (403, 409, 412)
    # A client that drops If-None-Match gains nothing: on Azure the SAS holds no write
    # permission; on S3 the header is signed (test_the_url_is_for_that_blob_only), which real
    # S3 enforces and moto does not (it checks no presigned signature): not tried there.
    if target["via"] == "store" and "x-amz-tagging" not in target["headers"]:
        headers = {k: v for k, v in target["headers"].items() if k != "If-None-Match"}
        raw = await asyncio.to_thread(httpx.put, target["url"], content=b"overwrite",
                                      headers=headers)
        assert raw.status_code in (403, 412), raw.text
    assert (await client.get(f"/documents/{doc['id']}/content")).content == data
    again = await client.post(f"/uploads/{target['id']}/complete")
    assert again.status_code == 201 and again.json()["id"] == doc["id"]


async def test_the_url_is_for_that_blob_only(ledger: Ledger, client: httpx.AsyncClient) -> None:
    target = await begin(client, "only.txt", b"abc")
    url = target["url"]
    if target["via"] == "service":
        other = url.replace(target["id"], "0" * 32).removeprefix("http://test")
        response = await client.put(other, content=b"abc")
        assert response.status_code == 410
        wrong = url.split("?")[0].removeprefix("http://test") + "?token=nope"
        assert (await client.put(wrong, content=b"abc")).status_code == 410
        return
    parts = urlsplit(url)
    if "x-amz-tagging" in target["headers"]:
        # S3: the signature covers the key and the guards. moto checks no presigned
        # signature, so what real S3 refuses (another key, a dropped header) is not tried.
        signed = parse_qs(parts.query)["X-Amz-SignedHeaders"][0].split(";")
        assert {"if-none-match", "x-amz-tagging", "content-type"} <= set(signed), signed
        return
    elsewhere = f"{parts.scheme}://{parts.netloc}{parts.path}x?{parts.query}"
    status = await asyncio.to_thread(via_sdk, {**target, "url": elsewhere}, b"abc")
    assert status in (400, 403), status


async def test_a_lying_client_gets_nothing(ledger: Ledger, client: httpx.AsyncClient) -> None:
    data = b"what I really send"
    target = await begin(client, "lie.txt", data, sha256=hashlib.sha256(b"other").hexdigest())
    status = await put(target, data, client)
    if target["via"] == "service":
        problem_status = status  # serve checks the declared SHA-256 while receiving
        assert problem_status == 400
        assert await put(target, b"other", client) == 201
        # the declared size (18) is not what was stored (5)
        problem(await client.post(f"/uploads/{target['id']}/complete"), 400)
    else:
        assert status == 201
        problem(await client.post(f"/uploads/{target['id']}/complete"), 400,
                "checksum-mismatch")
    problem(await client.post(f"/uploads/{target['id']}/complete"), 410)
    left = await leftovers(ledger)
    assert left["documents"] == [] and set(left["blobs"]) <= {"deleting"}


async def test_a_blob_the_client_tagged_committed_is_never_rolled_forward(
        ledger: Ledger, client: httpx.AsyncClient) -> None:
    target = await begin(client, "self-tagged.txt", b"sneaky")
    if target["via"] == "service":
        pytest.skip("serve tags what it receives itself")
    assert await put(target, b"sneaky", client, tags={"state": "committed"}) == 201
    ledger.transitions.offset = ledger.settings.direct_upload_expiry + 3600
    try:
        report = await Sweeper(ledger).run_once()
        assert report.rolled_forward == 0 and report.moved_to_deleting == 1
        await Sweeper(ledger).run_once()  # the deletion path
    finally:
        ledger.transitions.offset = 0
    assert await leftovers(ledger) == {"documents": [], "blobs": [], "stored": []}


async def test_abandoned_direct_upload_is_swept(ledger: Ledger, client: httpx.AsyncClient) -> None:
    target = await begin(client, "abandoned.txt", b"half")
    assert await put(target, b"half", client) == 201
    ledger.transitions.offset = ledger.settings.direct_upload_expiry + 3600
    try:
        problem(await client.post(f"/uploads/{target['id']}/complete"), 410)
        report = await Sweeper(ledger).run_once()
        # Azure's blob is untagged (the client's SAS cannot tag): its delete conditioned on
        # pending is refused, the row fenced to deleting and the deletion path deletes it
        gone = (report.moved_to_deleting, report.deleted) if ledger.store.url.startswith(
            "azure://") else (report.swept,)
        assert gone == ((1, 1) if len(gone) == 2 else (1,)), report
    finally:
        ledger.transitions.offset = 0
    assert await leftovers(ledger) == {"documents": [], "blobs": [], "stored": []}


async def test_cancel_and_bad_input(ledger: Ledger, client: httpx.AsyncClient) -> None:
    target = await begin(client, "cancel.txt", b"x")
    assert (await client.delete(f"/uploads/{target['id']}")).status_code == 204
    assert await leftovers(ledger) == {"documents": [], "blobs": [], "stored": []}
    problem(await client.post("/uploads", json={"name": "a", "size": -1}), 400)
    problem(await client.post("/uploads", json={"name": "a", "size": 10**13}), 413)
    problem(await client.post("/uploads", json={"name": "a", "size": 1, "sha256": "zz"}), 400)
    await begin(client, "taken.txt", b"x")
    problem(await client.post("/uploads", json={"name": "taken.txt", "size": 1}), 409,
            "name-taken")


@pytest.mark.parametrize("point", ["direct.after_verify", "direct.after_confirm"])
async def test_two_completions_at_once_answer_the_same_document(
        ledger: Ledger, client: httpx.AsyncClient, holds: Holds, point: str) -> None:
    """A client that retries ``complete`` while its first call still runs: the first is held
    at ``point`` while the second finishes; both answer the one document (the slower one
    lost the confirm or C4 to its twin, which holds the same token: not ``IntentLost``)."""
    data = os.urandom(4096)
    target = await begin(client, "twice.txt", data)
    assert await put(target, data, client) == 201
    holds.at(point)
    first = asyncio.create_task(client.post(f"/uploads/{target['id']}/complete"))
    await holds.wait(point)
    second = await client.post(f"/uploads/{target['id']}/complete")
    assert second.status_code == 201, second.text
    holds.go(point)
    answered = await first
    assert answered.status_code == 201, answered.text
    assert answered.json()["id"] == second.json()["id"]
    docs = (await client.get("/documents")).json()["items"]
    assert [d["id"] for d in docs] == [second.json()["id"]]
    assert (await client.get(f"/documents/{docs[0]['id']}/content")).content == data


async def test_the_clients_url_cannot_tag_the_blob(
        ledger: Ledger, client: httpx.AsyncClient) -> None:
    """Azure: the SAS the service hands out creates the blob and does nothing else. After
    completion its holder cannot retag the ready blob (``state=pending`` would let the
    lifecycle rule delete acknowledged bytes): Set Blob Tags is refused with 403, the
    document stays readable and ``check`` is clean. The PUT it describes carries no tags."""
    if not ledger.store.url.startswith("azure:"):
        pytest.skip("a SAS is Azure's (S3's presigned PUT signs one request; serve tags itself)")
    data = os.urandom(2048)
    target = await begin(client, "untaggable.txt", data)
    assert await put(target, data, client) == 201
    done = await client.post(f"/uploads/{target['id']}/complete")
    assert done.status_code == 201, done.text
    doc = done.json()
    blob = BlobClient.from_blob_url(target["url"], api_version="2026-06-06")
    try:
        with pytest.raises(HttpResponseError) as refused:
            await asyncio.to_thread(blob.set_blob_tags, {"state": "pending"})
        assert refused.value.status_code == 403
    finally:
        blob.close()
    assert await ledger.store.get_tags(doc["blob"]) == {"state": "committed"}
    assert (await client.get(f"/documents/{doc['id']}/content")).content == data
    assert (await check(ledger)).ok
    assert parse_qs(urlsplit(target["url"]).query)["sp"] == ["c"]
    assert "x-ms-tags" not in target["headers"]


async def test_a_cancelled_direct_upload_with_bytes_is_deleted(
        ledger: Ledger, client: httpx.AsyncClient) -> None:
    """The client put its (on Azure untagged) blob, then cancelled: the deletion path removes
    the blob and its row."""
    target = await begin(client, "cancelled.txt", b"put, then cancelled")
    assert await put(target, b"put, then cancelled", client) == 201
    assert (await client.delete(f"/uploads/{target['id']}")).status_code == 204
    await Sweeper(ledger).run_once()


@pytest.mark.parametrize("attachment", [False, True], ids=["document", "attachment"])
@pytest.mark.parametrize("first_at", [None, "after_tag"], ids=["first-done", "first-at-tag"])
async def test_a_duplicate_completion_that_read_the_upload_before_it_was_verified(
        ledger: Ledger, client: httpx.AsyncClient, holds: Holds, attachment: bool,
        first_at: str | None) -> None:
    """A duplicate ``complete`` that read the upload's row before its twin verified the
    bytes, and its tags after the twin's C3/A3 (``committed``): it must not take the client
    for a liar and give the upload up. Both answer what the first made; it stays intact."""
    data = os.urandom(4096)
    extra: dict[str, Any] = {"attachment": True, "filename": "d.txt"} if attachment else {}
    target = await begin(client, None if attachment else "duplicate.txt", data, **extra)
    assert await put(target, data, client) == 201
    url = f"/uploads/{target['id']}/complete"
    holds.at("direct.before_check")
    late = asyncio.create_task(client.post(url))
    await holds.wait("direct.before_check")  # it read the row: not verified yet
    held = None
    if first_at is None:
        first = await client.post(url)
    else:
        point = f"direct.{'stage.' if attachment else ''}{first_at}"
        holds.at(point)
        held = asyncio.create_task(client.post(url))
        await holds.wait(point)  # verified and tagged committed, not yet C4 / done
    holds.go("direct.before_check")
    duplicate = await late
    if held is not None:
        holds.go(point)
        first = await held
    assert first.status_code == 201, first.text
    assert duplicate.status_code == 201, duplicate.text
    made = first.json()
    assert duplicate.json() == made
    assert await ledger.store.get_tags(made["blob"]) == {"state": "committed"}
    if attachment:
        staged = await ledger.staged_upload(target["id"])
        assert staged.name == made["blob"]
        assert b"".join([c async for c in await ledger.store.open(staged.name)]) == data
    else:
        assert (await client.get(f"/documents/{made['id']}/content")).content == data
    again = await client.post(url)
    assert (again.status_code, again.json()) == (201, made)


async def test_giving_up_a_verified_upload_is_refused(
        ledger: Ledger, client: httpx.AsyncClient, holds: Holds) -> None:
    """The give-up is fenced in the database: once a completion recorded the verified
    SHA-256, no give-up (a duplicate that judged stale tags) abandons the upload."""
    data = os.urandom(2048)
    target = await begin(client, "verified.txt", data)
    assert await put(target, data, client) == 201
    holds.at("direct.after_verify")
    first = asyncio.create_task(client.post(f"/uploads/{target['id']}/complete"))
    await holds.wait("direct.after_verify")
    direct = DirectUploads(ledger)
    upload = await direct.find(target["id"])
    assert upload.sha256 == hashlib.sha256(data).hexdigest()
    assert await direct.resumable.give_up(upload, upload.intent("text/plain")) is False
    holds.go("direct.after_verify")
    done = await first
    assert done.status_code == 201, done.text
    assert (await client.get(f"/documents/{done.json()['id']}/content")).content == data


@pytest.mark.parametrize("point", ["direct.before_upload", "put.before_commit",
                                   "direct.after_upload"])
async def test_a_put_to_serve_whose_intent_was_swept_meanwhile_is_gone(
        ledger: Ledger, client: httpx.AsyncClient, holds: Holds, point: str) -> None:
    """``serve``'s content PUT paused (its token checked; the bytes staged; the bytes
    stored) while a sweeper with its clock past the upload's expiry sweeps the intent: the
    PUT must answer 410, not 201 for an intent that is gone, and leave no blob without a
    row."""
    if not ledger.store.url.startswith("file:"):
        pytest.skip("only serve receives a direct upload's bytes (the local store)")
    data = os.urandom(8192)
    target = await begin(client, "swept-late.txt", data)
    holds.at(point)
    putting = asyncio.create_task(put(target, data, client))
    await holds.wait(point)
    ledger.transitions.offset = ledger.settings.direct_upload_expiry + 3600
    try:
        assert (await Sweeper(ledger).run_once()).swept == 1
    finally:
        ledger.transitions.offset = 0
    holds.go(point)
    assert await putting == 410
    assert await leftovers(ledger) == {"documents": [], "blobs": [], "stored": []}


async def late_untagged_put(ledger: Ledger, client: httpx.AsyncClient, data: bytes,
                            how: str = "swept") -> str:
    """A direct upload whose intent was removed before its client put the bytes: swept (the
    ledger's clock past the URL's expiry and ``sweep_after``: a storage clock that runs
    behind the database's lets the URL outlive its intent) or cancelled (and the deletion
    path ran; the URL is still valid); then the client's put, which leaves bytes with no
    ``state`` tag and no row. The blob's name."""
    target = await begin(client, "late.txt", data)
    name = (await DirectUploads(ledger).find(target["id"])).blob_name
    settings = ledger.settings
    if how == "cancelled":
        assert (await client.delete(f"/uploads/{target['id']}")).status_code == 204
    else:
        ledger.clock_offset = settings.direct_upload_expiry + settings.sweep_after + 1
    await Sweeper(ledger).run_once()
    assert await rows(ledger) == {}
    if target["via"] == "service":
        # serve refuses a put whose intent is gone, and tags what it receives: on disk only a
        # writer beside blobledger leaves untagged bytes; written here as such a put would
        assert await put(target, data, client) == 410
        await ledger.store.put(name, one(data), tags={})
    elif "x-amz-tagging" in target["headers"]:
        # S3 signs the tags, so the service refuses a put without them; moto checks no
        # presigned signature and stores the put untagged, as a store that did not enforce
        # the signed header would
        headers = {k: v for k, v in target["headers"].items() if k != "x-amz-tagging"}
        assert await put({**target, "headers": headers}, data, client) == 201
    else:
        assert await put(target, data, client) == 201  # Azure: the SAS creates it untagged
    assert await ledger.store.get_tags(name) == {}
    return name


@pytest.mark.parametrize("how", ["swept", "cancelled"])
async def test_a_late_clients_untagged_blob_is_removed_by_reconcile_fix(
        ledger: Ledger, client: httpx.AsyncClient, how: str) -> None:
    """The client put its bytes after its upload's intent was removed (swept, or cancelled
    and deleted): an untagged blob that no row refers to, and no row ever will (a removed
    row never comes back). The settled invariants report it (I4); ``reconcile --fix``
    deletes it (conditioned on the ETag it listed), and the settled check is clean after."""
    name = await late_untagged_put(ledger, client, b"put after the intent was removed", how)
    ledger.clock_offset = 3 * HOUR  # the blob is old now
    before = await check(ledger, settled=True)
    assert [(v.invariant, v.subject) for v in before.violations] == [("I4", f"blob {name}")]
    report = await reconcile(ledger, fix=True, older_than=2 * HOUR, blocks=False)
    assert (report.orphan, report.fixed, report.kept, report.refused) == (1, 1, 0, 0), report
    assert name not in await stored(ledger)
    after = await check(ledger, settled=True)
    assert after.ok, after.render()


async def test_a_young_untagged_orphan_is_left_alone(
        ledger: Ledger, client: httpx.AsyncClient) -> None:
    """Younger than ``--older-than``, an untagged orphan is reported, not deleted."""
    name = await late_untagged_put(ledger, client, b"young untagged bytes")
    ledger.clock_offset = 0
    report = await reconcile(ledger, fix=True, older_than=2 * HOUR, blocks=False)
    assert (report.orphan, report.fixed) == (1, 0), report
    assert name in await stored(ledger)


async def test_an_untagged_blob_whose_row_appears_before_the_delete_is_kept(
        ledger: Ledger, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reconciler read the untagged orphan's row (none); a row for the name appears
    before the delete (a row refers to it now, however it came): the row is read again
    right before the delete and the blob is kept."""
    name = await late_untagged_put(ledger, client, b"bytes a row now refers to")
    real = reconciler._row_state
    seeded: list[str] = []

    async def read_then_row(of: Ledger, blob: str) -> tuple[str, bool] | None:
        state = await real(of, blob)
        if blob == name and not seeded:  # after the first read (on SQLite the re-read holds
            seeded.append(name)  # the write lock: the row must be there before it)
            await seed_intent(ledger, tag=None, name=name, age=0, lease_in=HOUR)
        return state

    monkeypatch.setattr(reconciler, "_row_state", read_then_row)
    ledger.clock_offset = 3 * HOUR
    report = await reconcile(ledger, fix=True, older_than=2 * HOUR, blocks=False)
    assert (report.fixed, report.kept) == (0, 1), report
    assert await stored(ledger) == {name: ""}
    assert await rows(ledger) == {name: "pending"}


async def test_an_untagged_orphan_is_deleted_only_with_the_bytes_listed(
        ledger: Ledger, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The delete of an untagged orphan is conditioned on the ETag the listing showed: other
    bytes stored under the name after the listing (here: the blob removed and written again)
    are refused, never deleted blind."""
    name = await late_untagged_put(ledger, client, b"the bytes listed")
    real = reconciler._row_state
    rewritten: list[str] = []

    async def read_then_rewrite(of: Ledger, blob: str) -> tuple[str, bool] | None:
        state = await real(of, blob)
        if blob == name and not rewritten:
            rewritten.append(name)
            info = await ledger.store.stat(name)
            await ledger.store.delete(name, if_etag=info.etag)
            await ledger.store.put(name, one(b"other bytes, written after the listing"),
                                   tags={})
        return state

    monkeypatch.setattr(reconciler, "_row_state", read_then_rewrite)
    ledger.clock_offset = 3 * HOUR
    report = await reconcile(ledger, fix=True, older_than=2 * HOUR, blocks=False)
    assert (report.fixed, report.refused) == (0, 1), report
    assert await read_all(ledger.store, name) == b"other bytes, written after the listing"


async def test_a_put_to_serve_whose_intent_a_sweeper_claimed_meanwhile_is_gone(
        ledger: Ledger, client: httpx.AsyncClient, holds: Holds) -> None:
    """``serve``'s content PUT stored its bytes and is paused while a sweeper, its clock past
    the upload's expiry, claims the intent and is held before deciding (the upload's row is
    still open). The PUT must answer 410, the intent being no longer the upload's, not 201
    for bytes the sweeper goes on to delete."""
    if not ledger.store.url.startswith("file:"):
        pytest.skip("only serve receives a direct upload's bytes (the local store)")
    data = os.urandom(8192)
    target = await begin(client, "claimed-late.txt", data)
    holds.at("direct.after_upload")
    putting = asyncio.create_task(put(target, data, client))
    await holds.wait("direct.after_upload")
    ledger.transitions.offset = ledger.settings.direct_upload_expiry + 3600
    try:
        holds.at("sweep.after_claim")
        sweeper = asyncio.create_task(Sweeper(ledger).run_once())
        await holds.wait("sweep.after_claim")
        holds.go("direct.after_upload")
        assert await asyncio.wait_for(putting, 10) == 410
        holds.go("sweep.after_claim")
        assert (await asyncio.wait_for(sweeper, 10)).swept == 1
    finally:
        ledger.transitions.offset = 0
    assert await leftovers(ledger) == {"documents": [], "blobs": [], "stored": []}
