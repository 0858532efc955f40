"""No unconditional delete reaches any store, from any caller.

Every flow that deletes (compensation, the sweeper, the deletion path, ``reconcile --fix``,
the doctor's clean-up) runs against a real store wrapped in :class:`RecordingStore`, which
records what each caller asked for; on Azurite, a request hook also records every DELETE
the service receives, batch sub-requests included, and the condition header it carried.
"""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pytest

from blobledger import Ledger, NameTaken
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.errors import Digests
from blobledger.stores.azure import AzureStore
from blobledger.stores.base import (
    BlobInfo,
    BlobReader,
    Condition,
    DeleteOutcome,
    Store,
    Tags,
    UncommittedInfo,
)
from blobledger.stores.local import LocalStore
from blobledger.workers.doctor.checks import store_report
from blobledger.workers.reconciler import reconcile
from blobledger.workers.sweeper import Sweeper
from tests.conftest import new_container
from tests.support.services import Azurite
from tests.sweeper.support import HOUR, one, seed_intent


@dataclass
class RecordingStore(Store):
    """A real store behind a recorder of every destructive call and its condition."""

    inner: Store
    calls: list[tuple[str, str, Tags | None, str | None]] = field(default_factory=list)
    unconditioned: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.url = self.inner.url
        self.capabilities = self.inner.capabilities

    def _record(self, kind: str, name: str, tags: Tags | None, etag: str | None) -> None:
        self.calls.append((kind, name, dict(tags) if tags is not None else None, etag))
        if not tags and not etag:
            self.unconditioned.append((kind, name))

    async def delete(
        self, name: str, *, if_tags: Tags | None = None, if_etag: str | None = None
    ) -> bool:
        self._record("delete", name, if_tags, if_etag)
        return await self._delete(name, Condition(tags=if_tags, etag=if_etag))

    async def _delete(self, name: str, condition: Condition) -> bool:
        return await self.inner._delete(name, condition)

    async def delete_many(self, items: Sequence[tuple[str, Tags]]) -> list[DeleteOutcome]:
        for name, tags in items:
            self._record("delete_many", name, tags, None)
        return await self.inner.delete_many(items)

    async def discard_uncommitted(self, name: str) -> bool:
        self.calls.append(("discard_uncommitted", name, None, None))
        return await self.inner.discard_uncommitted(name)

    async def put(
        self, name: str, data: AsyncIterable[bytes], *, tags: Tags,
        content_type: str | None = None, expected_sha256: str | None = None,
        expected_md5: str | None = None,
    ) -> Digests:
        return await self.inner.put(name, data, tags=tags, content_type=content_type,
                                    expected_sha256=expected_sha256, expected_md5=expected_md5)

    async def stat(self, name: str) -> BlobInfo:
        return await self.inner.stat(name)

    async def get_tags(self, name: str) -> dict[str, str]:
        return await self.inner.get_tags(name)

    async def set_tags(self, name: str, tags: Tags, *, if_tags: Tags | None = None) -> None:
        await self.inner.set_tags(name, tags, if_tags=if_tags)

    async def open(self, name: str, start: int = 0, length: int | None = None) -> BlobReader:
        return await self.inner.open(name, start, length)

    def list(self, prefix: str = "", *, tags: bool = True, checksums: bool = True
             ) -> AsyncIterator[BlobInfo]:
        return self.inner.list(prefix, tags=tags, checksums=checksums)

    def list_uncommitted(self, prefix: str = "") -> AsyncIterator[UncommittedInfo]:
        return self.inner.list_uncommitted(prefix)

    async def ping(self) -> None:
        await self.inner.ping()

    async def close(self) -> None:
        await self.inner.close()


@dataclass
class Wire:
    """Every DELETE Azurite is sent (batch sub-requests too), with its condition header."""

    deletes: list[tuple[str, str | None]] = field(default_factory=list)

    def hook(self, request: Any) -> None:
        http = request.http_request
        info = getattr(http, "multipart_mixed_info", None)
        for sub in [http, *(info[0] if info else [])]:
            if sub.method == "DELETE":
                headers = {key.lower(): value for key, value in sub.headers.items()}
                condition = headers.get("x-ms-if-tags") or headers.get("if-match")
                self.deletes.append((unquote(urlsplit(sub.url).path), condition))


@pytest.fixture(params=["local", "azure"])
async def setup(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Ledger, RecordingStore, Wire]]:
    wire = Wire()
    inner: Store
    if request.param == "local":
        inner = LocalStore(tmp_path / "store")
    else:
        azurite: Azurite = request.getfixturevalue("azurite")
        inner = AzureStore(new_container(), connection_string=azurite.connection_string,
                           single_put_limit=1024, block_size=1024,
                           client_options={"raw_request_hook": wire.hook})
        await inner.prepare()
    store = RecordingStore(inner)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    settings = Settings(database_url=url, store_url=inner.url, upload_deadline=60,
                        sweep_after=180, delete_grace=0)
    async with Ledger(Database(url), store, settings) as ledger:
        yield ledger, store, wire


async def leave_uncommitted(store: Store, name: str) -> None:
    if isinstance(store, AzureStore):
        block = base64.b64encode(b"0" * 32).decode()
        await store._client().get_blob_client(name).stage_block(block, b"lost bytes")
    else:
        assert isinstance(store, LocalStore)
        part = store.root / "uploads" / f"{quote(name, safe='')}.{os.urandom(8).hex()}.part"
        part.write_bytes(b"lost bytes")


async def test_every_delete_of_every_flow_carries_a_condition(
    setup: tuple[Ledger, RecordingStore, Wire],
) -> None:
    ledger, store, wire = setup
    prefix = ledger.settings.blob_prefix

    # create, replace (small and staged), delete: the deletion path gets the old blobs
    doc = await ledger.create("a.txt", b"one")
    doc = await ledger.replace(doc.id, b"two" * 1000, expected_version=doc.version)
    await ledger.delete(doc.id, expected_version=doc.version)

    async def taken() -> str:
        return "b.txt"

    await ledger.create("b.txt", b"first")
    with pytest.raises(NameTaken):  # named after its upload: the pending blob is compensated
        await ledger.create(None, b"second", name_after_upload=taken)

    await seed_intent(ledger, tag="pending")  # a crash after C2: the sweeper's
    await Sweeper(ledger).run_once()  # sweeps, then runs the deletion path

    await ledger.store.put(f"{prefix}/orphan", one(b"orphan"), tags={"state": "pending"})
    await leave_uncommitted(store.inner, f"{prefix}/leftover")
    ledger.clock_offset = 3 * HOUR
    report = await reconcile(ledger, fix=True, older_than=2 * HOUR)
    assert report.fixed == 2

    assert (await store_report(store)).failed == []

    kinds = {kind for kind, *_ in store.calls}
    assert {"delete", "discard_uncommitted"} <= kinds
    assert kinds & {"delete", "delete_many"}
    assert store.unconditioned == []
    ledger_deletes = [tags for _, name, tags, _ in store.calls if name.startswith(prefix)]
    assert ledger_deletes and {"state": "committed"} not in ledger_deletes
    if isinstance(store.inner, AzureStore):
        assert len(wire.deletes) >= 5
        assert [(path, c) for path, c in wire.deletes if not c] == []


async def test_a_caller_without_a_condition_is_stopped_before_the_store(
    setup: tuple[Ledger, RecordingStore, Wire],
) -> None:
    ledger, store, wire = setup
    doc = await ledger.create("kept.txt", b"live data")
    with pytest.raises(ValueError, match="condition"):
        await store.delete(doc.blob)
    with pytest.raises(ValueError, match="condition"):
        await store.delete_many([(doc.blob, {})])
    assert store.unconditioned == [("delete", doc.blob), ("delete_many", doc.blob)]
    assert wire.deletes == []
    assert b"".join([c async for c in ledger.read(doc.id)]) == b"live data"
