"""The Azure Blob backend (``azure://<container>``), on ``azure-storage-blob`` (aio).

Create-only is set explicitly on every write (``If-None-Match: *`` via
``MatchConditions.IfMissing``), on single puts *and* on Put Block List: the SDK's implicit
create-only vanishes when other access conditions are passed, so it is never relied upon.
Staged uploads use block ids of one fixed length. 409 and 412 on a put both mean "exists".
Every Delete Blob carries a condition the service checks: ``x-ms-if-tags`` (or ``If-Match``
for an ETag-conditioned delete, never both: Azurite evaluates ``If-Match`` and then skips the
tag condition). Clearing a name that holds only uncommitted blocks uses a tag condition that
no committed blob can satisfy (:data:`NO_COMMITTED_BLOB`), so a blob committed under that name
in the meantime is refused by the service, not by an earlier check. Tag updates carry
``x-ms-if-tags`` too. SDK errors become blobledger errors in :func:`map_errors` and nowhere
else.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from urllib.parse import urlsplit

import aiohttp
from azure.core import MatchConditions
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.core.pipeline.transport import AioHttpTransport
from azure.storage.blob import BlobBlock, BlobSasPermissions, ContentSettings, generate_blob_sas
from azure.storage.blob.aio import BlobServiceClient, ContainerClient, LinearRetry

from blobledger import failpoints
from blobledger._base.aio import prefetch
from blobledger._base.disposition import content_disposition, signed_cache_control
from blobledger._base.names import check_blob_name
from blobledger.config import Settings
from blobledger.errors import (
    AccessRefused,
    BlobAlreadyExists,
    BlobLedgerError,
    BlobNotFound,
    ConditionNotMet,
    ConfigError,
    Digests,
    StoreError,
    StoreMissing,
    StoreUnavailable,
)
from blobledger.stores.azure import listing
from blobledger.stores.azure.settings import AzureSettings
from blobledger.stores.base import (
    BlobInfo,
    BlobReader,
    ByteReader,
    Capabilities,
    Condition,
    DeleteOutcome,
    DirectPut,
    Hasher,
    SignedRead,
    Store,
    Tags,
    UncommittedInfo,
    tags_match,
    verify,
)
from blobledger.stores.limits import StoreLimits
from blobledger.stores.resilience import Breaker, breaker_watch

SINGLE_PUT_LIMIT = 4 * 1024 * 1024
BLOCK_SIZE = 4 * 1024 * 1024
BLOCKS_IN_FLIGHT = 4
GET_CHUNK = 4 * 1024 * 1024
DATA_BLOCK_SIZE = 256 * 1024  # bytes per read from a response body
READ_AHEAD = 1  # chunks fetched ahead of the reader
# The SDK's default retry waits 15 s, 18 s and 24 s (each ±3 s): far too long for a request
# path. Here: 0.5 s (±0.25 s) before each retry, as many retries as ``retries`` says.
RETRY_BACKOFF = 0.5
RETRY_JITTER = 0.25
BATCH_LIMIT = 256
# Blobs per listing page where the SDK's list_blobs reads it (only on an SDK without what
# blobledger.stores.azure.listing needs): the SDK parses a whole page into objects before
# yielding the first, so a page costs memory.
LIST_PAGE = 750
# If-None-Match: * (IfMissing takes no etag: passing one leaks it into the transport).
CREATE_ONLY: dict[str, Any] = {"match_condition": MatchConditions.IfMissing}
# A tag condition no blob can satisfy: the condition on the delete that clears a name holding
# only uncommitted blocks. Measured on Azurite 3.37: x-ms-if-tags is not evaluated against a
# name holding only uncommitted blocks (the delete goes through and clears them) and is
# evaluated against a committed blob, tagged or not (412). If-None-Match: * does not do this
# there (a committed blob is deleted under it), and If-Match always fails on such a name.
NO_COMMITTED_BLOB = "\"state\" = 'pending' AND \"state\" = 'committed'"


def tag_condition(tags: Tags | None) -> str | None:
    """The ``x-ms-if-tags`` expression for an equality condition (``"state" = 'pending'``)."""
    if not tags:
        return None
    for key, value in tags.items():
        if "'" in value or '"' in key:
            raise ValueError(f"tag condition {key}={value} holds a quote")
    return " AND ".join(f"\"{key}\" = '{value}'" for key, value in sorted(tags.items()))


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def _code(exc: BaseException) -> str:
    return str(getattr(exc, "error_code", "") or "")


def translate(exc: BaseException, name: str, *, put: bool = False) -> BlobLedgerError:
    """The blobledger error for an SDK, HTTP or network error (the one mapping)."""
    status = _status(exc)
    if isinstance(exc, ClientAuthenticationError) or status == 403:
        return AccessRefused(f"storage refused the credentials for {name}: {_first_line(exc)} "
                             "(check BLOBLEDGER_AZURE_CONNECTION_STRING's account key)")
    conflict = isinstance(exc, (ResourceExistsError, ResourceModifiedError))
    if put and (status in (409, 412) or conflict):
        return BlobAlreadyExists(name)
    if isinstance(exc, ResourceNotFoundError) or status == 404:
        if _code(exc) == "ContainerNotFound":
            return StoreMissing(f"container for {name} does not exist; set "
                                "BLOBLEDGER_STORE_URL to the store in use")
        return BlobNotFound(name)
    if status == 412 or isinstance(exc, ResourceModifiedError):
        return ConditionNotMet(name, _code(exc))
    if status == 409 or isinstance(exc, ResourceExistsError):
        return BlobAlreadyExists(name)
    if status is not None and (status >= 500 or status in (408, 429)):
        return StoreUnavailable(f"storage answered {status} for {name}")
    if isinstance(exc, (ServiceRequestError, ServiceResponseError, aiohttp.ClientError,
                        asyncio.TimeoutError, ConnectionError)):
        return StoreUnavailable(f"storage unreachable: {_first_line(exc)}")
    if isinstance(exc, HttpResponseError):
        return StoreError(f"storage answered {status} {_code(exc)} for {name}")
    return StoreUnavailable(f"storage error for {name}: {_first_line(exc)}")


@contextmanager
def map_errors(name: str, *, put: bool = False,
               breaker: Breaker | None = None) -> Iterator[None]:
    """Translate whatever the SDK raises inside the block into a blobledger error; with a
    ``breaker``, fail at once while it is open, and tell it whether the store answered."""
    with breaker_watch(breaker, _status):
        try:
            yield
        except BlobLedgerError:
            raise
        except (TimeoutError, AzureError, aiohttp.ClientError, ConnectionError) as exc:
            raise translate(exc, name, put=put) from exc


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else type(exc).__name__


def _quoted(etag: str) -> str:
    """ETags as HTTP quotes them: listings return them bare, properties quoted."""
    return etag if etag.startswith('"') else f'"{etag}"'


def _delete_options(condition: Condition) -> dict[str, Any]:
    """The Delete Blob condition: x-ms-if-tags, or If-Match on the ETag (one of them)."""
    if condition.tags:
        return {"if_tags_match_condition": tag_condition(condition.tags)}
    return {"etag": _quoted(condition.etag or ""), "match_condition": MatchConditions.IfNotModified}


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


class AzureStore(Store):
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
                raise ConfigError(f"invalid Azure configuration: {_first_line(exc)}") from exc
            self._container = self._service.get_container_client(self.container_name)
        return self._container

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
        head = await reader.read(self.single_put_limit + 1)
        if len(head) > self.single_put_limit:
            reader.unread(head)
            return await self._staged(name, reader, tags, content_type,
                                      expected_sha256, expected_md5)
        hasher = Hasher()
        await hasher.update(head)
        digests = hasher.digests()
        verify(digests, expected_sha256, expected_md5)
        settings = ContentSettings(content_type=content_type,
                                   content_md5=bytearray(bytes.fromhex(digests.md5)))
        await failpoints.hit("put.before_commit")
        try:
            with self._mapped(name, put=True):
                await self._client().get_blob_client(name).upload_blob(
                    head, blob_type="BlockBlob", overwrite=False, length=len(head),
                    tags=dict(tags), metadata=_metadata(digests), content_settings=settings,
                    **CREATE_ONLY,
                )
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
                chunk = await reader.read(self.block_size)
                if not chunk and block_ids:
                    break
                await self._stage_next(name, chunk, hasher, attempt, block_ids, in_flight)
                if not chunk:
                    break
            if in_flight:
                await asyncio.gather(*in_flight)
            digests = hasher.digests()
            verify(digests, expected_sha256, expected_md5)
        except BaseException:
            await asyncio.shield(self._abandon_staging(name, in_flight))
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
        self, name: str, chunk: bytes, hasher: Hasher, attempt: str, block_ids: list[str],
        in_flight: set[asyncio.Task[None]],
    ) -> None:
        """Hash and stage one block; up to BLOCKS_IN_FLIGHT blocks upload concurrently."""
        await hasher.update(chunk)
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

    async def _stage(self, name: str, block_id: str, chunk: bytes) -> None:
        with self._mapped(name):
            await self._client().get_blob_client(name).stage_block(
                block_id, chunk, length=len(chunk))

    async def _stage_first(self, name: str, block_id: str, chunk: bytes) -> None:
        """Stage the first block; clear foreign leftovers that block it.

        A name holding only uncommitted blocks whose ids have another length (left by a
        writer outside this store) refuses our blocks with 400 InvalidBlobOrBlock.
        Such a name has no committed blob, so deleting it only clears those blocks.
        """
        blob = self._client().get_blob_client(name)
        with self._mapped(name):
            try:
                await blob.stage_block(block_id, chunk, length=len(chunk))
            except HttpResponseError as exc:
                if (getattr(exc, "error_code", None) != "InvalidBlobOrBlock"
                        or not await self._only_uncommitted(name)):
                    raise
                await self.discard_uncommitted(name)
                await blob.stage_block(block_id, chunk, length=len(chunk))

    async def _only_uncommitted(self, name: str) -> bool:
        try:
            await self.stat(name)
        except BlobNotFound:
            return True
        return False

    async def _abandon_staging(self, name: str, in_flight: set[asyncio.Task[None]]) -> None:
        """Stop the block uploads still in flight and wait until each has ended, so that
        none is still sending from this process when the blocks are dropped."""
        for task in in_flight:
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
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

    async def set_tags(self, name: str, tags: Tags, *, if_tags: Tags | None = None) -> None:
        """Retag under ``x-ms-if-tags``; a condition ``pending`` is also met by a blob with no
        tags at all (a direct upload's, created untagged: :meth:`direct_put`)."""
        check_blob_name(name)
        if if_tags and not self.capabilities.state_conditioned_transition:
            current = await self.get_tags(name)  # the service ignores the condition
            if not tags_match(current, if_tags) and not _untagged_pending(current, if_tags):
                raise ConditionNotMet(name, f"tags are {current}")
            await failpoints.hit("store.set_tags.after_read")
        try:
            await self._set_blob_tags(name, tags, if_tags)
        except ConditionNotMet:
            if not _untagged_pending(await self.get_tags(name), if_tags):
                raise
            # Untagged: nobody writes ``pending`` on such a blob, so this write (C3's
            # ``committed``) cannot undo another actor's retag; see docs/backends.md.
            await self._set_blob_tags(name, tags, None)

    async def _set_blob_tags(self, name: str, tags: Tags, if_tags: Tags | None) -> None:
        with self._mapped(name):
            await self._client().get_blob_client(name).set_blob_tags(
                dict(tags), if_tags_match_condition=tag_condition(if_tags)
            )

    async def _delete(self, name: str, condition: Condition) -> bool:
        check_blob_name(name)
        try:
            with self._mapped(name):
                await self._client().get_blob_client(name).delete_blob(
                    delete_snapshots="include", **_delete_options(condition)
                )
        except BlobNotFound:
            return False
        except ConditionNotMet:
            # If-Match on an absent blob is a 412 (Azurite), not a 404: absent is absent.
            if condition.etag and await self._only_uncommitted(name):
                return False
            raise
        return True

    async def _delete_many(self, items: Sequence[tuple[str, Condition]]) -> list[DeleteOutcome]:
        """Blob Batch deletes, 256 per request, each with its own condition."""
        outcomes: list[DeleteOutcome] = []
        for start in range(0, len(items), BATCH_LIMIT):
            chunk = items[start : start + BATCH_LIMIT]
            for name, _ in chunk:
                check_blob_name(name)
            requests = [
                {"name": name, "delete_snapshots": "include", **_delete_options(cond)}
                for name, cond in chunk
            ]
            with self._mapped(self.container_name):
                responses = await self._client().delete_blobs(
                    *requests, raise_on_any_failure=False
                )
                answers = [r async for r in responses]
            for (name, _), response in zip(chunk, answers, strict=True):
                status = response.status_code
                if status in (200, 202):
                    outcomes.append(DeleteOutcome(name, deleted=True))
                elif status == 404:
                    outcomes.append(DeleteOutcome(name))
                elif status == 412:
                    outcomes.append(DeleteOutcome(name, error=ConditionNotMet(name, "batch")))
                elif status >= 500 or status in (408, 429):
                    outcomes.append(DeleteOutcome(
                        name, error=StoreError(f"storage answered {status} in a batch")))
                else:
                    outcomes.append(DeleteOutcome(
                        name, error=StoreError(f"storage answered {status} for {name}")))
        return outcomes

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
PENDING_TAG: Tags = {"state": "pending"}


def _untagged_pending(current: Mapping[str, str], if_tags: Tags | None) -> bool:
    """A blob with no tags at all meets the condition ``pending`` (and nothing else)."""
    return not current and if_tags == PENDING_TAG


def _metadata(digests: Digests) -> dict[str, str]:
    return {"sha256": digests.sha256, "md5": digests.md5}


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover


