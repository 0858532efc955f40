"""The Azure backend on Azurite joins the conformance suite, plus the SDK traps pinned."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import uuid4

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError
from azure.storage.blob import BlobBlock
from azure.storage.blob import BlobClient as SyncBlobClient
from azure.storage.blob.aio import BlobServiceClient

from blobledger.errors import (
    BlobAlreadyExists,
    ConditionNotMet,
    IntegrityError,
    StoreUnavailable,
)
from blobledger.stores.azure import NO_COMMITTED_BLOB, AzureStore
from blobledger.stores.base import tags_match
from tests.conftest import new_container
from tests.stores.contract import PENDING, StoreContract, new_name, put, read_all, stream
from tests.support.services import Azurite


class TestAzureStore(StoreContract):
    big = 600 * 1024

    @pytest.fixture
    async def store(self, azurite: Azurite) -> AsyncIterator[AzureStore]:
        store = AzureStore(new_container(), connection_string=azurite.connection_string,
                           single_put_limit=256 * 1024, block_size=100 * 1024)
        await store.prepare()
        async with store:
            yield store


# -- the SDK's create-only trap, pinned ----------------------------------------------------
#
# azure-storage-blob adds If-None-Match: * on its own only when no other access condition is
# given: if_modified_since, if_unmodified_since or an etag with IfModified silently turn it
# off. The store therefore sets the condition itself on every write. These tests pin both
# halves: the trap exists in the installed SDK, and the store's writes always carry it.

TRAP_PARAMETERS: list[dict[str, Any]] = [
    {"if_modified_since": datetime(2000, 1, 1, tzinfo=UTC)},
    {"if_unmodified_since": datetime(2100, 1, 1, tzinfo=UTC)},
    {"etag": '"0x0"', "match_condition": MatchConditions.IfModified},
]


@pytest.mark.parametrize("params", TRAP_PARAMETERS, ids=lambda p: next(iter(p)))
async def test_sdk_trap_parameters_turn_create_only_off(
    azurite: Azurite, params: dict[str, Any]
) -> None:
    async with BlobServiceClient.from_connection_string(azurite.connection_string) as service:
        container = service.get_container_client(new_container())
        await container.create_container()
        blob = container.get_blob_client("trap.bin")
        await blob.upload_blob(b"first", overwrite=False)
        await blob.upload_blob(b"second", overwrite=False, **params)  # no 409: it overwrote
        assert await (await blob.download_blob()).readall() == b"second"
        with pytest.raises(ResourceExistsError):  # without them, overwrite=False holds
            await blob.upload_blob(b"third", overwrite=False)
        await container.delete_container()


async def test_every_store_write_carries_if_none_match(azurite: Azurite) -> None:
    seen: list[tuple[str, str, str | None]] = []

    def hook(request: Any) -> None:
        http = request.http_request
        query = parse_qs(urlsplit(http.url).query)
        if http.method == "PUT" and "restype" not in query:  # blob writes, not the container
            comp = query.get("comp", [""])[0]
            seen.append((comp, http.url, http.headers.get("If-None-Match")))

    store = AzureStore(new_container(), connection_string=azurite.connection_string,
                       single_put_limit=1024, block_size=1024,
                       client_options={"raw_request_hook": hook})
    await store.prepare()
    async with store:
        await put(store, new_name(), b"small")
        await put(store, new_name(), b"x" * 5000)  # staged: 5 blocks, then Put Block List
    writes = [(comp, inm) for comp, _, inm in seen if comp in ("", "blocklist")]
    assert ("", "*") in writes and ("blocklist", "*") in writes
    assert all(inm == "*" for _, inm in writes), writes
    assert sum(1 for comp, _, _ in seen if comp == "block") == 5


@pytest.mark.parametrize("piece", [9000, 2500, 700], ids=["whole", "pieces", "small"])
async def test_a_staged_put_sends_views_of_the_body_and_hashes_it_whole(
    azurite: Azurite, piece: int
) -> None:
    """A body in memory is staged block by block from views of its bytes (no copy), its
    blocks hashed behind their upload: the blob and its digests are the body's, whatever
    the pieces it came in (a block within one piece, or across several)."""
    sent: list[type] = []

    def hook(request: Any) -> None:
        http = request.http_request
        if parse_qs(urlsplit(http.url).query).get("comp") == ["block"]:
            sent.append(type(http.data if http.data is not None else http.body))

    data = bytes(range(256)) * 35 + b"end"  # 8963 bytes: 9 blocks, the last one short
    store = AzureStore(new_container(), connection_string=azurite.connection_string,
                       single_put_limit=1024, block_size=1000,
                       client_options={"raw_request_hook": hook})
    await store.prepare()
    async with store:
        name = new_name()
        digests = await store.put(name, stream(data, piece), tags=PENDING,
                                  expected_sha256=hashlib.sha256(data).hexdigest(),
                                  expected_md5=hashlib.md5(data).hexdigest())
        assert digests.size == len(data)
        assert await read_all(store, name) == data
        info = await store.stat(name)
        assert (info.sha256, info.md5) == (digests.sha256, digests.md5)
    assert len(sent) == 9
    if piece == 9000:
        assert set(sent) == {memoryview}, sent
    if piece == 700:
        assert set(sent) == {bytes}, sent


async def test_a_staged_commit_asks_the_service_for_create_only(azurite: Azurite) -> None:
    """``commit_staged`` (a resumable upload's completion) sends its Put Block List with
    ``If-None-Match: *``: without it a duplicate completion that stalled past another's
    publication would re-create the ready document's blob, tagged ``pending`` again (the
    conformance suite's ``test_a_staged_commit_never_overwrites`` shows the outcome)."""
    seen: list[str | None] = []

    def hook(request: Any) -> None:
        http = request.http_request
        if http.method == "PUT" and parse_qs(urlsplit(http.url).query).get("comp") == [
                "blocklist"]:
            seen.append(http.headers.get("If-None-Match"))

    store = AzureStore(new_container(), connection_string=azurite.connection_string,
                       client_options={"raw_request_hook": hook})
    await store.prepare()
    async with store:
        name = new_name()
        handle = await store.begin_staged(name, tags=PENDING)
        part = await store.stage(name, handle, 1, b"staged")
        await store.commit_staged(name, handle, [part], tags=PENDING)
        with pytest.raises(BlobAlreadyExists):
            await store.commit_staged(name, handle, [part], tags=PENDING)
    assert seen == ["*", "*"]


async def test_a_conditioned_retag_asks_the_service_to_condition_it(azurite: Azurite) -> None:
    """Every conditioned retag (C3's ``committed`` over ``pending``, the deletion path's
    ``deleting`` over ``committed``) sends its condition as ``x-ms-if-tags``: on the real
    service that header is the only guard (the store compares the tags itself on the
    emulator alone, which ignores it), so a retag without it could write tags backwards."""
    seen: list[str | None] = []

    def hook(request: Any) -> None:
        http = request.http_request
        if http.method == "PUT" and parse_qs(urlsplit(http.url).query).get("comp") == ["tags"]:
            seen.append(http.headers.get("x-ms-if-tags"))

    store = AzureStore(new_container(), connection_string=azurite.connection_string,
                       client_options={"raw_request_hook": hook})
    await store.prepare()
    async with store:
        name = new_name()
        await put(store, name, b"retagged", state="pending")
        await store.set_tags(name, {"state": "committed"}, if_tags=PENDING)
        await store.set_tags(name, {"state": "deleting"}, if_tags={"state": "committed"})
        assert await store.get_tags(name) == {"state": "deleting"}
    assert seen == ["\"state\" = 'pending'", "\"state\" = 'committed'"]


async def test_a_retag_after_a_put_reuses_the_puts_blob_client(
        azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> None:
    """A single put keeps its blob client for the retag of the same blob that follows (C3,
    or the retag worker of the same process): one client built for both requests, the retag
    sent to that blob with its condition, the client given up after it; the kept clients
    are bounded and dropped with the store's clients."""
    from blobledger.stores.azure import store as azure_store

    monkeypatch.setattr(azure_store, "KEPT_BLOB_CLIENTS", 2)
    sent: list[tuple[str, str | None]] = []

    def hook(request: Any) -> None:
        http = request.http_request
        if http.method == "PUT" and parse_qs(urlsplit(http.url).query).get("comp") == ["tags"]:
            sent.append((urlsplit(http.url).path, http.headers.get("x-ms-if-tags")))

    store = AzureStore(new_container(), connection_string=azurite.connection_string,
                       client_options={"raw_request_hook": hook})
    await store.prepare()
    # as against the service: the retag is the one request (no read of the tags first)
    store.capabilities = dataclasses.replace(store.capabilities,
                                             state_conditioned_transition=True)
    async with store:
        built: list[str] = []
        make = type(store._client()).get_blob_client

        def counted(client: Any, blob: str, *args: Any, **kwargs: Any) -> Any:
            built.append(blob)
            return make(client, blob, *args, **kwargs)

        monkeypatch.setattr(type(store._client()), "get_blob_client", counted)
        first, second, third = new_name(), new_name(), new_name()
        for name in (first, second, third):
            await put(store, name, b"kept", state="pending")
        assert list(store._kept) == [second, third]  # the oldest given up past the bound
        await store.set_tags(third, {"state": "committed"}, if_tags=PENDING)
        assert built == [first, second, third] and list(store._kept) == [second]
        await store.set_tags(first, {"state": "committed"}, if_tags=PENDING)  # not kept
        await store.set_tags(third, {"state": "deleting"}, if_tags={"state": "committed"})
        assert built == [first, second, third, first, third]
        assert await store.get_tags(third) == {"state": "deleting"}
    assert not store._kept
    assert [(path.split("/", 3)[-1], cond) for path, cond in sent] == [
        (third, "\"state\" = 'pending'"), (first, "\"state\" = 'pending'"),
        (third, "\"state\" = 'committed'")]


async def test_a_retag_the_service_refuses_stands(azurite: Azurite) -> None:
    """On the real service ``x-ms-if-tags`` is the retag's only guard, and its refusal must
    stand: only a blob with no tags at all (a direct upload's, counted ``pending``) is
    retagged again without the condition. Azurite ignores the header (see below), so the
    service's answer is played by the store's one call that sends it (a mismatch refused as
    the service refuses it, 412), and the store is told it talks to the service."""
    store = AzureStore(new_container(), connection_string=azurite.connection_string)
    await store.prepare()
    store.capabilities = dataclasses.replace(store.capabilities,
                                             state_conditioned_transition=True)
    send = store._set_blob_tags

    async def as_the_service(name: str, tags: Any, if_tags: Any) -> None:
        if if_tags is not None and not tags_match(await store.get_tags(name), if_tags):
            raise ConditionNotMet(name, "ConditionNotMet")
        await send(name, tags, if_tags)

    store._set_blob_tags = as_the_service  # type: ignore[method-assign]
    async with store:
        name = new_name()
        await put(store, name, b"deleted soon", state="deleting")
        with pytest.raises(ConditionNotMet):
            await store.set_tags(name, {"state": "committed"}, if_tags=PENDING)
        assert await store.get_tags(name) == {"state": "deleting"}
        untagged = new_name()
        await store._client().get_blob_client(untagged).upload_blob(b"direct")
        await store.set_tags(untagged, {"state": "committed"}, if_tags=PENDING)
        assert await store.get_tags(untagged) == {"state": "committed"}


async def test_emulator_ignores_tag_condition_on_set_tags(azurite: Azurite) -> None:
    """A known Azurite gap, asserted rather than skipped: Set Blob Tags ignores x-ms-if-tags
    (the real service enforces it). The store knows it is talking to the emulator, says so
    in its capabilities, and compares the tags itself before it asks."""
    store = AzureStore(new_container(), connection_string=azurite.connection_string)
    await store.prepare()
    async with store:
        name = new_name()
        await put(store, name, b"x", state="committed")
        raw = store._client().get_blob_client(name)
        await raw.set_blob_tags({"state": "deleting"},
                                if_tags_match_condition="\"state\" = 'pending'")
        assert await store.get_tags(name) == {"state": "deleting"}  # the gap: not refused
        assert store.capabilities.state_conditioned_transition is False


async def test_delete_guard_is_enforced_by_the_server(azurite: Azurite) -> None:
    """Unlike Set Blob Tags, Delete Blob's x-ms-if-tags is enforced by Azurite itself."""
    store = AzureStore(new_container(), connection_string=azurite.connection_string)
    await store.prepare()
    async with store:
        name = new_name()
        await put(store, name, b"keep", state="committed")
        raw = store._client().get_blob_client(name)
        with pytest.raises(ResourceModifiedError):
            await raw.delete_blob(if_tags_match_condition="\"state\" = 'pending'")
        assert await store.get_tags(name) == {"state": "committed"}


@pytest.mark.parametrize("block_id", [b"foreign-block-0", b"0123456789abcdef0000000000000000"],
                         ids=["foreign-length", "own-length"])
async def test_put_over_leftover_uncommitted_blocks(azurite: Azurite, block_id: bytes) -> None:
    """Azurite answers 409 to Put Blob on a name holding only uncommitted blocks (what a
    crashed staged upload leaves); the store commits a block list instead and succeeds,
    also when the leftover block ids have another length than the store's own."""
    store = AzureStore(new_container(), connection_string=azurite.connection_string)
    await store.prepare()
    async with store:
        name = new_name()
        raw = store._client().get_blob_client(name)
        await raw.stage_block(base64.b64encode(block_id).decode(), b"junk")
        assert [u.name async for u in store.list_uncommitted()] == [name]
        await put(store, name, b"resumed bytes")
        assert (await store.stat(name)).size == len(b"resumed bytes")
        assert [u async for u in store.list_uncommitted()] == []


async def test_unreachable_endpoint_is_unavailable() -> None:
    from tests.support.services import connection_string, free_port

    store = AzureStore(new_container(), connection_string=connection_string(free_port()),
                       client_options={"retry_total": 0})
    async with store:
        with pytest.raises(StoreUnavailable):
            await store.ping()
        with pytest.raises(StoreUnavailable):
            await put(store, new_name(), b"x")


async def test_uncommitted_blocks_of_a_loser_and_of_a_crash_are_listed(azurite: Azurite) -> None:
    store = AzureStore(new_container(), connection_string=azurite.connection_string,
                       single_put_limit=1024, block_size=1024)
    await store.prepare()
    async with store:
        won, crashed = new_name(), new_name()
        await put(store, won, b"w" * 3000)
        with pytest.raises(BlobAlreadyExists):
            await put(store, won, b"l" * 3000)  # the loser staged 3 blocks before its commit
        raw = store._client().get_blob_client(crashed)
        await raw.stage_block(base64.b64encode(b"0123456789abcdef0000000000000000").decode(),
                              b"half an upload")
        found = {u.name: u async for u in store.list_uncommitted()}
        assert (found[won].committed, found[won].blocks) == (True, 3)
        assert (found[crashed].committed, found[crashed].blocks) == (False, 1)
        await store.discard_uncommitted(crashed)
        await store.discard_uncommitted(won)  # a committed blob is never touched
        assert [u.name async for u in store.list_uncommitted()] == [won]
        assert await store.get_tags(won) == {"state": "pending"}


def commit_before_delete(azurite: Azurite, container: str, name: str, block_id: str
                         ) -> Callable[[Any], None]:
    """A request hook: right before the first DELETE of ``name`` is sent, another client
    commits the block list under that name, tagged committed (a retry resuming a crashed
    staged upload), so the commit lands after any check the store made before its delete."""
    armed = [True]

    def hook(request: Any) -> None:
        http = request.http_request
        if armed[0] and http.method == "DELETE" and urlsplit(http.url).path.endswith(name):
            armed[0] = False
            with SyncBlobClient.from_connection_string(
                    azurite.connection_string, container, name) as blob:
                blob.commit_block_list([BlobBlock(block_id=block_id)],
                                       tags={"state": "committed"})

    return hook


async def test_clearing_blocks_never_deletes_a_blob_committed_meanwhile(azurite: Azurite) -> None:
    container, name = new_container(), new_name()
    block = base64.b64encode(b"0123456789abcdef0000000000000000").decode()
    store = AzureStore(container, connection_string=azurite.connection_string,
                       client_options={"raw_request_hook": commit_before_delete(
                           azurite, container, name, block)})
    await store.prepare()
    async with store:
        await store._client().get_blob_client(name).stage_block(block, b"resumed bytes")
        await store.discard_uncommitted(name)  # the commit lands right before its DELETE
        assert await store.get_tags(name) == {"state": "committed"}
        assert await read_all(store, name) == b"resumed bytes"


async def test_a_failed_staged_put_never_deletes_a_blob_committed_meanwhile(
    azurite: Azurite,
) -> None:
    """A staged put that fails (here: its checksum) drops its blocks; a blob that another
    attempt of the same intent committed meanwhile under the name is refused that delete."""
    container, name = new_container(), new_name()
    block = base64.b64encode(b"0123456789abcdef0000000000000000").decode()
    store = AzureStore(container, connection_string=azurite.connection_string,
                       single_put_limit=1024, block_size=1024,
                       client_options={"raw_request_hook": commit_before_delete(
                           azurite, container, name, block)})
    await store.prepare()
    async with store:
        await store._client().get_blob_client(name).stage_block(block, b"the other attempt")
        with pytest.raises(IntegrityError):
            await store.put(name, stream(b"x" * 3000), tags=PENDING, expected_sha256="0" * 64)
        assert await store.get_tags(name) == {"state": "committed"}
        assert await read_all(store, name) == b"the other attempt"


def test_no_committed_blob_condition_is_unsatisfiable() -> None:
    """Both clauses name one key with two values: no blob's tags can meet it."""
    assert NO_COMMITTED_BLOB.count("AND") == 1
    assert NO_COMMITTED_BLOB.count('"state"') == 2


async def test_what_azurite_honours_on_delete(azurite: Azurite) -> None:
    """Pinned, measured on Azurite 3.37: why clearing uncommitted blocks uses
    NO_COMMITTED_BLOB and why a delete takes one condition, never two."""
    block = base64.b64encode(b"0123456789abcdef0000000000000000").decode()
    async with BlobServiceClient.from_connection_string(azurite.connection_string) as service:
        container = service.get_container_client(new_container())
        await container.create_container()

        async def uncommitted_only(name: str) -> Any:
            blob = container.get_blob_client(name)
            await blob.stage_block(block, b"left by a crash")
            return blob

        async def names() -> list[str]:
            return [p.name async for p in container.list_blobs(include=["uncommittedblobs"])]

        # a name holding only uncommitted blocks counts as absent for If-Match: always 412
        blob = await uncommitted_only("u-if-match")
        (etag,) = [p.etag async for p in container.list_blobs(include=["uncommittedblobs"])]
        with pytest.raises(ResourceModifiedError):
            await blob.delete_blob(etag=f'"{etag}"', match_condition=MatchConditions.IfNotModified)
        assert await names() == ["u-if-match"]
        await blob.delete_blob(if_tags_match_condition=NO_COMMITTED_BLOB)
        assert await names() == []  # x-ms-if-tags is not evaluated there: the blocks go

        # against committed blobs, tagged or not, the same condition is evaluated: 412
        for tags in (None, {"state": "pending"}, {"state": "committed"}):
            blob = container.get_blob_client(f"c-{len(tags or {})}-{uuid4().hex}")
            await blob.upload_blob(b"committed", tags=tags)
            with pytest.raises(ResourceModifiedError):
                await blob.delete_blob(if_tags_match_condition=NO_COMMITTED_BLOB)
            assert await blob.exists()

        # If-None-Match: * does not protect a committed blob on Azurite: it is deleted
        blob = container.get_blob_client("c-if-none-match")
        await blob.upload_blob(b"committed", tags={"state": "committed"})
        await blob.delete_blob(match_condition=MatchConditions.IfMissing)
        assert not await blob.exists()

        # If-Match and x-ms-if-tags together: only If-Match is evaluated
        blob = container.get_blob_client("c-both")
        await blob.upload_blob(b"committed", tags={"state": "committed"})
        etag = (await blob.get_blob_properties()).etag
        await blob.delete_blob(etag=etag, match_condition=MatchConditions.IfNotModified,
                               if_tags_match_condition="\"state\" = 'pending'")
        assert not await blob.exists()
        await container.delete_container()
