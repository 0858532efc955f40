"""The Azure Blob backend (``azure://<container>``), on ``azure-storage-blob`` (aio).

Create-only is set explicitly on every write (``If-None-Match: *`` via
``MatchConditions.IfMissing``), on single puts *and* on Put Block List: the SDK's implicit
create-only vanishes when other access conditions are passed, so it is never relied upon.
Staged uploads use block ids of one fixed length. 409 and 412 on a put both mean "exists".
Every Delete Blob carries a condition the service checks: ``x-ms-if-tags`` (or ``If-Match``
for an ETag-conditioned delete, never both: Azurite evaluates ``If-Match`` and then skips
the tag condition). Clearing a name that holds only uncommitted blocks uses a tag condition
that no committed blob can satisfy (:data:`~.conditions.NO_COMMITTED_BLOB`), so a blob
committed under that name in the meantime is refused by the service, not by an earlier
check. Tag updates carry ``x-ms-if-tags`` too. SDK errors become blobledger errors in
:func:`~blobledger.stores.azure.errors.map_errors` and nowhere else.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterable, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from urllib.parse import urlsplit

import aiohttp
from azure.core.exceptions import AzureError, HttpResponseError, ResourceExistsError
from azure.core.pipeline.transport import AioHttpTransport
from azure.storage.blob import BlobBlock, BlobSasPermissions, ContentSettings, generate_blob_sas
from azure.storage.blob.aio import BlobClient, BlobServiceClient, ContainerClient, LinearRetry

from blobledger import failpoints
from blobledger._base.disposition import content_disposition, signed_cache_control
from blobledger._base.logs import first_line
from blobledger._base.names import check_blob_name
from blobledger.config import Settings
from blobledger.errors import (
    BlobAlreadyExists,
    BlobLedgerError,
    BlobNotFound,
    ConfigError,
    Digests,
)
from blobledger.stores.azure.conditions import CREATE_ONLY, ConditionalWrites
from blobledger.stores.azure.errors import map_errors
from blobledger.stores.azure.lean import LeanRequests, observed
from blobledger.stores.azure.reads import Reads
from blobledger.stores.azure.settings import AzureSettings
from blobledger.stores.base import (
    ByteReader,
    Capabilities,
    DirectPut,
    Hasher,
    SignedRead,
    Tags,
    verify,
)
from blobledger.stores.limits import StoreLimits
from blobledger.stores.resilience import Breaker

SINGLE_PUT_LIMIT = 4 * 1024 * 1024
BLOCK_SIZE = 4 * 1024 * 1024
BLOCKS_IN_FLIGHT = 4
GET_CHUNK = 4 * 1024 * 1024
DATA_BLOCK_SIZE = 256 * 1024  # bytes per read from a response body
# The SDK's default retry waits 15 s, 18 s and 24 s (each ±3 s): far too long for a request
# path. Here: 0.5 s (±0.25 s) before each retry, as many retries as ``retries`` says.
RETRY_BACKOFF = 0.5
RETRY_JITTER = 0.25
#: blob clients kept from a single put for the retag of the same blob that follows (C3, or
#: the retag worker of the same process): the SDK builds a generated client behind every
#: blob client (about 0.09 ms of CPU, and cycles the collector frees later; about 32 KB
#: each, so at most this many are kept)
KEPT_BLOB_CLIENTS = 256


class AzureStore(ConditionalWrites, Reads):
    """Blobs in one Azure container."""

    def __init__(
        self,
        container: str,
        *,
        connection_string: str | None = None,
        account_url: str | None = None,
        credential: Any = None,
        single_put_limit: int = SINGLE_PUT_LIMIT,
        block_size: int = BLOCK_SIZE,
        client_options: Mapping[str, Any] | None = None,
        limits: StoreLimits | None = None,
    ) -> None:
        """``limits``: timeouts, retries and the circuit breaker (the settings' defaults
        when None); ``client_options`` go to the SDK's client as they are."""
        if not 3 <= len(container) <= 63:
            raise ConfigError(f"Azure container name {container!r} must have 3-63 characters")
        if not connection_string and not account_url:
            raise ConfigError(
                "azure:// store needs BLOBLEDGER_AZURE_CONNECTION_STRING "
                "or BLOBLEDGER_AZURE_ACCOUNT_URL"
            )
        self.container_name = container
        self.url = f"azure://{container}"
        self._connection_string = connection_string
        self._account_url = account_url
        self._credential = credential
        self.single_put_limit = single_put_limit
        self.block_size = block_size
        self._client_options = dict(client_options or {})
        self.limits = limits or AzureSettings()
        self._retry_total = int(self._client_options.pop("retry_total", self.limits.retries))
        self.probe_timeout = self.limits.probe_timeout
        self.breaker = Breaker.of(self.url, self.limits)
        endpoint = connection_string or account_url or ""
        self.is_emulator = "devstoreaccount1" in endpoint or "UseDevelopmentStorage" in endpoint
        # Azurite ignores x-ms-if-tags on Set Blob Tags (measured): see docs/backends.md.
        self.capabilities = Capabilities(state_conditioned_transition=not self.is_emulator,
                                         batch_delete=True)
        self._session: aiohttp.ClientSession | None = None
        self._service: BlobServiceClient | None = None
        self._container: ContainerClient | None = None
        #: blob clients of single puts, by name, until their retag takes them (oldest first)
        self._kept: OrderedDict[str, BlobClient] = OrderedDict()
        self._lean: LeanRequests | None = None

    @classmethod
    def from_settings(cls, container: str, settings: Settings) -> AzureStore:
        if settings.azure.connection_string:
            return cls(container, connection_string=settings.azure.connection_string,
                       limits=settings.azure)
        if settings.azure.account_url:
            parts = urlsplit(settings.azure.account_url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ConfigError("BLOBLEDGER_AZURE_ACCOUNT_URL must be an http(s) URL")
            try:
                from azure.identity.aio import DefaultAzureCredential
            except ImportError as exc:  # pragma: no cover - azure-identity is a dependency
                raise ConfigError("BLOBLEDGER_AZURE_ACCOUNT_URL needs azure-identity") from exc
            return cls(container, account_url=settings.azure.account_url,
                       credential=DefaultAzureCredential(), limits=settings.azure)
        return cls(container)  # raises the ConfigError naming what is missing

    # -- clients --------------------------------------------------------------------------
    def _client(self) -> ContainerClient:
        if self._container is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64), trust_env=False
            )
            # With a transport of our own, the clients' timeout options never reach it:
            # the transport must carry them itself.
            timeouts = {"connection_timeout": self.limits.connect_timeout,
                        "read_timeout": self.limits.read_timeout}
            timeouts.update({key: self._client_options[key] for key in
                             ("connection_timeout", "read_timeout") if key in self._client_options})
            # A transport we build ourselves gets azure-core's 4 KiB read size, not the 256 KiB
            # the storage SDK sets on its own: downloads then cost a Python step per 4 KiB.
            transport = AioHttpTransport(session=self._session, session_owner=False,
                                         connection_data_block_size=DATA_BLOCK_SIZE, **timeouts)
            options: dict[str, Any] = {
                "transport": transport,
                "max_single_get_size": GET_CHUNK,
                "max_chunk_get_size": GET_CHUNK,
                "max_single_put_size": self.single_put_limit,
                "max_block_size": self.block_size,
                # the SDK's annotations say int; the waits are floats
                "retry_policy": LinearRetry(backoff=cast(int, RETRY_BACKOFF),
                                            random_jitter_range=cast(int, RETRY_JITTER),
                                            retry_total=self._retry_total),
                **timeouts,
                **self._client_options,
            }
            try:
                if self._connection_string:
                    self._service = BlobServiceClient.from_connection_string(
                        self._connection_string, **options
                    )
                else:
                    self._service = BlobServiceClient(
                        self._account_url or "", credential=self._credential, **options
                    )
            except (ValueError, AzureError) as exc:
                raise ConfigError(f"invalid Azure configuration: {first_line(exc)}") from exc
            self._container = self._service.get_container_client(self.container_name)
            # The put and the retag as requests of their own, unless options other than the
            # timeouts and retries (which they keep) were given to the SDK's client: those
            # apply to every request the SDK sends (see lean).
            self._lean = None if set(self._client_options) - set(timeouts) else LeanRequests.of(
                self._container, transport, self._session, retries=self._retry_total,
                backoff=RETRY_BACKOFF, jitter=RETRY_JITTER, **timeouts)
        return self._container

    def _kept_blob(self, name: str) -> BlobClient:
        """A blob client for ``name``, kept for the retag that follows the put."""
        blob = self._client().get_blob_client(name)
        self._kept[name] = blob
        if len(self._kept) > KEPT_BLOB_CLIENTS:
            self._kept.popitem(last=False)
        return blob

    def _lean_requests(self, name: str) -> LeanRequests | None:
        """What sends ``name``'s put or retag as a request of its own (and gives up a blob
        client kept for it), or None when the SDK sends it (see lean)."""
        self._client()
        if self._lean is None or observed():
            return None
        self._kept.pop(name, None)
        return self._lean

    def _retag_blob(self, name: str) -> BlobClient:
        """The blob client a put kept for ``name`` (given up: a retag is its last use), or a
        new one. A kept client is the one :meth:`ContainerClient.get_blob_client` made on
        this store's current container client: the same pipeline, credential and URL."""
        blob = self._kept.pop(name, None)
        return blob if blob is not None else self._client().get_blob_client(name)

    def _mapped(self, name: str, *, put: bool = False) -> AbstractContextManager[None]:
        """:func:`map_errors` under this store's circuit breaker."""
        return map_errors(name, put=put, breaker=self.breaker)

    async def close(self) -> None:
        if self._service is not None:
            await self._service.close()
        if self._session is not None:
            await self._session.close()
        if self._credential is not None and hasattr(self._credential, "close"):
            await self._credential.close()
        self._service = self._container = None
        self._session = None
        self._lean = None
        self._kept.clear()

    async def prepare(self) -> None:
        """Create the container if it does not exist."""
        with self._mapped(self.container_name), suppress(ResourceExistsError):
            await self._client().create_container()

    async def ping(self) -> None:
        with self._mapped(self.container_name):
            await self._client().get_container_properties()

    # -- put ------------------------------------------------------------------------------
    async def put(
        self,
        name: str,
        data: AsyncIterable[bytes],
        *,
        tags: Tags,
        content_type: str | None = None,
        expected_sha256: str | None = None,
        expected_md5: str | None = None,
    ) -> Digests:
        check_blob_name(name)
        reader = ByteReader(data)
        if await reader.longer_than(self.single_put_limit):
            return await self._staged(name, reader, tags, content_type,
                                      expected_sha256, expected_md5)
        head = await reader.read(self.single_put_limit)
        hasher = Hasher()
        await hasher.update(head)
        digests = hasher.digests()
        verify(digests, expected_sha256, expected_md5)
        md5 = bytes.fromhex(digests.md5)
        await failpoints.hit("put.before_commit")
        try:
            with self._mapped(name, put=True):
                lean = self._lean_requests(name)
                if lean is None or not await lean.upload_blob(
                        name, head, tags=tags, metadata=_metadata(digests),
                        content_type=content_type, content_md5=base64.b64encode(md5).decode(),
                        if_none_match="*"):
                    await self._kept_blob(name).upload_blob(
                        head, blob_type="BlockBlob", overwrite=False, length=len(head),
                        tags=dict(tags), metadata=_metadata(digests), **CREATE_ONLY,
                        content_settings=ContentSettings(content_type=content_type,
                                                         content_md5=bytearray(md5)))
            await failpoints.hit("put.after_commit")
            return digests
        except BlobAlreadyExists:
            if not await self._only_uncommitted(name):
                raise BlobAlreadyExists(name, digests) from None
        # Azurite refuses Put Blob on a name that holds only uncommitted blocks (left by a
        # crashed staged attempt of this same intent); committing a block list clears them.
        reader.unread(head)
        return await self._staged(name, reader, tags, content_type, expected_sha256,
                                  expected_md5)

    async def _staged(
        self, name: str, reader: ByteReader, tags: Tags, content_type: str | None,
        expected_sha256: str | None, expected_md5: str | None,
    ) -> Digests:
        blob = self._client().get_blob_client(name)
        hasher = Hasher()
        attempt = uuid.uuid4().hex[:16]
        block_ids: list[str] = []
        in_flight: set[asyncio.Task[None]] = set()
        try:
            while True:
                chunk = await reader.read_view(self.block_size)
                if not chunk and block_ids:
                    break
                await self._stage_next(name, chunk, hasher, attempt, block_ids, in_flight)
                if not chunk:
                    break
            if in_flight:
                await asyncio.gather(*in_flight)
            await hasher.settle()
            digests = hasher.digests()
            verify(digests, expected_sha256, expected_md5)
        except BaseException:
            await asyncio.shield(self._abandon_staging(name, in_flight, hasher))
            raise
        settings = ContentSettings(content_type=content_type)
        await failpoints.hit("put.before_commit")
        try:
            with self._mapped(name, put=True):
                await blob.commit_block_list(
                    [BlobBlock(block_id=b) for b in block_ids], content_settings=settings,
                    metadata=_metadata(digests), tags=dict(tags), **CREATE_ONLY,
                )
        except BlobAlreadyExists:
            raise BlobAlreadyExists(name, digests) from None
        await failpoints.hit("put.after_commit")
        return digests

    async def _stage_next(
        self, name: str, chunk: bytes | memoryview, hasher: Hasher, attempt: str,
        block_ids: list[str], in_flight: set[asyncio.Task[None]],
    ) -> None:
        """Stage one block, hashed behind it (in a thread, while it is sent: the digests
        are needed by the block list only); up to BLOCKS_IN_FLIGHT blocks upload
        concurrently."""
        await hasher.feed(chunk, ahead=BLOCKS_IN_FLIGHT)
        block_id = base64.b64encode(f"{attempt}{len(block_ids):016d}".encode()).decode()
        block_ids.append(block_id)
        if len(block_ids) == 1:
            await self._stage_first(name, block_id, chunk)
            return
        while len(in_flight) >= BLOCKS_IN_FLIGHT:
            done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            in_flight.difference_update(done)
            for task in done:
                task.result()
        in_flight.add(asyncio.ensure_future(self._stage(name, block_id, chunk)))

    async def _stage(self, name: str, block_id: str, chunk: bytes | memoryview) -> None:
        with self._mapped(name):
            await self._client().get_blob_client(name).stage_block(
                block_id, _body(chunk), length=len(chunk))

    async def _stage_first(self, name: str, block_id: str, chunk: bytes | memoryview) -> None:
        """Stage the first block; clear foreign leftovers that block it.

        A name holding only uncommitted blocks whose ids have another length (left by a
        writer outside this store) refuses our blocks with 400 InvalidBlobOrBlock.
        Such a name has no committed blob, so deleting it only clears those blocks.
        """
        blob = self._client().get_blob_client(name)
        with self._mapped(name):
            try:
                await blob.stage_block(block_id, _body(chunk), length=len(chunk))
            except HttpResponseError as exc:
                if (getattr(exc, "error_code", None) != "InvalidBlobOrBlock"
                        or not await self._only_uncommitted(name)):
                    raise
                await self.discard_uncommitted(name)
                await blob.stage_block(block_id, _body(chunk), length=len(chunk))

    async def _only_uncommitted(self, name: str) -> bool:
        try:
            await self.stat(name)
        except BlobNotFound:
            return True
        return False

    async def _abandon_staging(self, name: str, in_flight: set[asyncio.Task[None]],
                               hasher: Hasher) -> None:
        """Stop the block uploads still in flight and the hashing behind them, and wait
        until each has ended, so that none is still sending from this process when the
        blocks are dropped."""
        for task in in_flight:
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
        await hasher.abandon()
        await self._forget_blocks(name)

    async def _forget_blocks(self, name: str) -> None:
        """Best effort: drop the blocks of a failed staged put. A blob committed under the
        name meanwhile (another attempt of the same intent) is refused by the service."""
        with suppress(BlobLedgerError):
            await self.discard_uncommitted(name)

    # -- staged uploads: Put Block per part, Put Block List with If-None-Match: * ----------
    async def begin_staged(self, name: str, *, tags: Tags,
                           content_type: str | None = None) -> str:
        check_blob_name(name)
        return ""

    async def stage(self, name: str, handle: str, number: int, data: bytes) -> str:
        """One block; its id names the part and a random token (all ids of a blob have the
        same length, and a second call for a number never replaces the first one's block)."""
        check_blob_name(name)
        block_id = base64.b64encode(f"{number:06d}-{uuid.uuid4().hex[:16]}".encode()).decode()
        if number == 1:
            await self._stage_first(name, block_id, data)
        else:
            await self._stage(name, block_id, data)
        return block_id

    async def commit_staged(
        self, name: str, handle: str, parts: Sequence[str], *, tags: Tags,
        content_type: str | None = None,
    ) -> Digests:
        """Put Block List, create-only; then the committed bytes are read back and hashed
        (the service cannot hash a block list) and the checksums set as metadata."""
        check_blob_name(name)
        blob = self._client().get_blob_client(name)
        await failpoints.hit("staged.before_commit")
        with self._mapped(name, put=True):
            await blob.commit_block_list(
                [BlobBlock(block_id=b) for b in parts],
                content_settings=ContentSettings(content_type=content_type),
                tags=dict(tags), **CREATE_ONLY)
        await failpoints.hit("staged.after_commit")
        return await self.digest_stored(name)

    async def abort_staged(self, name: str, handle: str) -> None:
        await self.discard_uncommitted(name)

    async def direct_put(self, name: str, *, size: int, tags: Tags, content_type: str,
                         expires_in: float) -> DirectPut | None:
        """A service SAS for this one blob with the create permission only (``c``): its holder
        can write the blob once, while it does not exist, and nothing else (no overwrite, no
        read, no delete, no tags). The client sends ``If-None-Match: *`` and no tags: Azure
        authorises ``x-ms-tags`` on Put Blob as a tag write (the ``t`` permission), which
        would let the holder retag the blob for the SAS's lifetime, after completion too. The
        blob is therefore created untagged, and ``tags`` (``pending``) is not sent: a blob
        with no tags counts as ``pending`` for C3's retag (:meth:`set_tags`). A delete
        conditioned on ``pending`` refuses it (the condition is the service's, exact); the
        sweeper then fences its row to ``deleting`` and the deletion path tags it
        ``deleting`` and deletes it (docs/backends.md). None without an account key (a SAS
        is then a user delegation SAS, not offered yet).

        A SAS cannot bind the size (``size`` is not part of it): its holder can create the
        blob with any number of bytes its one Put Blob carries, until the SAS expires.
        Completion then refuses it (the size is checked against what the store holds) and
        gives the upload up, and the sweeper removes the blob."""
        signed = self._blob_sas(name, BlobSasPermissions(create=True), expires_in)
        if signed is None:
            return None
        url, expires_at = signed
        return DirectPut(url=url, expires_at=expires_at, headers={
            "x-ms-blob-type": "BlockBlob", "If-None-Match": "*",
            "Content-Type": content_type})

    async def read_url(self, name: str, *, expires_in: float, filename: str,
                       content_type: str) -> SignedRead | None:
        """A service SAS for this one blob with the read permission only (``r``), its answer's
        Content-Disposition (``rscd``) and Content-Type (``rsct``) fixed by the signature. None
        without an account key, as :meth:`direct_put`."""
        signed = self._blob_sas(
            name, BlobSasPermissions(read=True), expires_in,
            content_disposition=content_disposition(filename, content_type),
            content_type=content_type, cache_control=signed_cache_control(expires_in))
        if signed is None:
            return None
        url, expires_at = signed
        return SignedRead(url=url, expires_at=expires_at)

    def _blob_sas(self, name: str, permission: BlobSasPermissions, expires_in: float,
                  **overrides: Any) -> tuple[str, datetime] | None:
        """A service SAS URL for the one blob ``name`` with ``permission`` (and the answer's
        header ``overrides``), valid from five minutes ago (clock skew) for ``expires_in``
        seconds, and its expiry; None without an account key (a SAS would then be a user
        delegation SAS, not offered yet)."""
        check_blob_name(name)
        self._client()
        credential = getattr(self._service, "credential", None)
        key = getattr(credential, "account_key", None)
        account = getattr(credential, "account_name", None)
        if not key or not account:
            return None
        now = datetime.now(UTC)
        expires_at = now + timedelta(seconds=expires_in)
        sas = generate_blob_sas(account_name=account, container_name=self.container_name,
                                blob_name=name, account_key=key, permission=permission,
                                expiry=expires_at, start=now - timedelta(minutes=5),
                                **overrides)
        url = self._client().get_blob_client(name).url.split("?", 1)[0]
        return f"{url}?{sas}", expires_at

    async def _record_digests(self, name: str, digests: Digests) -> None:
        with self._mapped(name):
            await self._client().get_blob_client(name).set_blob_metadata(_metadata(digests))


def _body(chunk: bytes | memoryview) -> bytes:
    """A block's bytes as the SDK's annotation names them: a view (of ``bytes``, read-only)
    is sent as it is (azure-core hands it to aiohttp, which writes any buffer), so that a
    body given in memory is not copied block by block before it is sent."""
    return cast(bytes, chunk)


def _metadata(digests: Digests) -> dict[str, str]:
    return {"sha256": digests.sha256, "md5": digests.md5}
