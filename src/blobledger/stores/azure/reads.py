"""The Azure store's reads: a blob's properties and tags, its bytes (a range, read ahead),
the listing (lean, :mod:`~blobledger.stores.azure.listing`, or the SDK's), and the names
holding only uncommitted blocks (listed, and cleared under a condition no committed blob
meets)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob.aio import ContainerClient

from blobledger import failpoints
from blobledger._base.aio import prefetch
from blobledger._base.names import check_blob_name
from blobledger.errors import BlobNotFound, ConditionNotMet
from blobledger.stores.azure import listing
from blobledger.stores.azure.conditions import NO_COMMITTED_BLOB, _quoted
from blobledger.stores.base import BlobInfo, BlobReader, Store, UncommittedInfo

READ_AHEAD = 1  # chunks fetched ahead of the reader
# Blobs per listing page where the SDK's list_blobs reads it (only on an SDK without what
# blobledger.stores.azure.listing needs): the SDK parses a whole page into objects before
# yielding the first, so a page costs memory.
LIST_PAGE = 750


def _info(props: Any, tags: Mapping[str, str] | None) -> BlobInfo:
    metadata = props.metadata or {}
    settings = props.content_settings
    return BlobInfo(
        name=props.name,
        size=int(props.size or 0),
        last_modified=props.last_modified,
        etag=_quoted(str(props.etag)),
        content_type=settings.content_type if settings else None,
        sha256=metadata.get("sha256"),
        md5=metadata.get("md5"),
        tags=tags,
    )


class Reads(Store):
    """Properties, tags, bytes and listings."""

    if TYPE_CHECKING:  # the store's own (:class:`~blobledger.stores.azure.store.AzureStore`)
        container_name: str

        def _client(self) -> ContainerClient: ...

        def _mapped(self, name: str, *, put: bool = False) -> AbstractContextManager[None]: ...

    # -- metadata -------------------------------------------------------------------------
    async def stat(self, name: str) -> BlobInfo:
        check_blob_name(name)
        with self._mapped(name):
            props = await self._client().get_blob_client(name).get_blob_properties()
        return _info(props, None)

    async def get_tags(self, name: str) -> dict[str, str]:
        check_blob_name(name)
        with self._mapped(name):
            return dict(await self._client().get_blob_client(name).get_blob_tags())

    # -- reads ----------------------------------------------------------------------------
    async def open(self, name: str, start: int = 0, length: int | None = None) -> BlobReader:
        check_blob_name(name)
        blob = self._client().get_blob_client(name)
        if length == 0:
            info = await self.stat(name)
            return BlobReader(info, min(start, info.size), 0, _empty())
        with self._mapped(name):
            try:
                if start == 0 and length is None:
                    downloader = await blob.download_blob()
                else:
                    downloader = await blob.download_blob(offset=start, length=length)
            except HttpResponseError as exc:
                if exc.status_code != 416:
                    raise
                info = await self.stat(name)
                return BlobReader(info, info.size, 0, _empty())
        props = downloader.properties
        info = _info(props, None)
        content_range = str(getattr(props, "content_range", "") or "")
        if "/" in content_range:  # a ranged answer: properties.size is the range's length
            total = int(content_range.rsplit("/", 1)[1])
            info = BlobInfo(**{**info.__dict__, "size": total})
        actual = int(downloader.size or 0)
        return BlobReader(info, start, actual, self._chunks(name, downloader))

    async def _chunks(self, name: str, downloader: Any) -> AsyncIterator[bytes]:
        # One chunk is fetched ahead while the previous one is sent on: the two hops overlap.
        with self._mapped(name):
            async for chunk in prefetch(downloader.chunks(), READ_AHEAD):
                yield chunk

    # -- listing --------------------------------------------------------------------------
    async def list(
        self, prefix: str = "", *, tags: bool = True, checksums: bool = True
    ) -> AsyncIterator[BlobInfo]:
        include = (["tags"] if tags else []) + (["metadata"] if checksums else [])
        with self._mapped(self.container_name):
            async for info in self._listed(prefix, include):
                yield info

    async def _listed(self, prefix: str, include: Sequence[str]) -> AsyncIterator[BlobInfo]:
        """The container's flat listing under ``prefix``: read lean as it streams in
        (:mod:`blobledger.stores.azure.listing`), or by the SDK's ``list_blobs`` where the
        installed SDK lacks what that needs. The caller maps the errors."""
        client = self._client()
        if listing.supported(client):
            async for info in listing.blobs(client, prefix or None, include):
                yield info
            return
        async for props in client.list_blobs(
            name_starts_with=prefix or None, include=list(include) or None,
            results_per_page=LIST_PAGE,
        ):
            yield _info(props, dict(props.tags or {}) if "tags" in include else None)

    async def list_uncommitted(self, prefix: str = "") -> AsyncIterator[UncommittedInfo]:
        """Names holding uncommitted blocks: those with no committed blob (from the
        ``uncommittedblobs`` listing) and committed blobs whose block list shows leftovers.
        A name whose blocks vanished since the listing (a sweep, a tus termination: the
        block list is then not found) is skipped."""
        client = self._client()
        with self._mapped(self.container_name):
            async for info in self._listed(prefix, ["uncommittedblobs"]):
                await failpoints.hit("scan.uncommitted")
                blob = client.get_blob_client(info.name)
                try:
                    committed, uncommitted = await blob.get_block_list("all")
                except ResourceNotFoundError:
                    continue
                if uncommitted:
                    yield UncommittedInfo(
                        name=info.name,
                        blocks=len(uncommitted),
                        size=sum(int(b.size or 0) for b in uncommitted),
                        committed=bool(committed),
                        last_modified=info.last_modified,
                    )

    async def discard_uncommitted(self, name: str) -> bool:
        """Delete a name that holds only uncommitted blocks (clears them).

        The delete carries :data:`NO_COMMITTED_BLOB`: the service refuses it (412) if a
        committed blob holds the name, also one committed after any check of ours. A
        committed blob's leftover blocks cannot be dropped without re-committing it, which
        would rewrite its properties; the service discards them after seven days.
        """
        check_blob_name(name)
        try:
            with self._mapped(name):
                await self._client().get_blob_client(name).delete_blob(
                    if_tags_match_condition=NO_COMMITTED_BLOB)
        except (BlobNotFound, ConditionNotMet):
            return False  # nothing there, or a committed blob holds the name
        return True


#: the protocol's pending tag (``blobledger.protocol.models.PENDING_TAG``, a test pins them
#: equal): the stores sit below the protocol and do not import it


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover


