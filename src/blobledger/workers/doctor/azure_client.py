"""An Azure account probed directly through the SDK: bounded clients, and SDK answers read
for their HTTP status and error code.

The doctor's Azure checks and the measured cases (:mod:`blobledger.experiments`) talk to the
SDK on purpose: they measure what the SDK and the service do, so SDK exceptions are inspected
here instead of being translated into blobledger errors. Failures that stop a whole run
(unreachable endpoint, refused credentials) become blobledger errors by :func:`fatal`, which
reuses the one mapping in :mod:`blobledger.stores.azure`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from azure.core.exceptions import AzureError, HttpResponseError
from azure.storage.blob.aio import BlobServiceClient, ContainerClient, ExponentialRetry

from blobledger._base.logs import first_line
from blobledger.config import Settings
from blobledger.errors import BlobLedgerError, ConfigError, StoreError
from blobledger.stores.azure import translate

#: Staged uploads start above this size in the cases (the article used the SDK's 256 MiB
#: default with 12 MiB of data; a small limit shows the same behaviour in milliseconds).
SINGLE_PUT = 64 * 1024
BLOCK = 64 * 1024
TAG_HINT = ("a SAS needs permission 't', Azure RBAC needs "
            "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/tags/write")


# -- clients -------------------------------------------------------------------------------
def retry_policy() -> ExponentialRetry:
    """Short, bounded retries: an unreachable endpoint fails in seconds, not minutes."""
    return ExponentialRetry(initial_backoff=1, increment_base=1, retry_total=2,
                            random_jitter_range=0)


def service_client(settings: Settings, *, single_put: int = SINGLE_PUT,
                   block: int = BLOCK) -> BlobServiceClient:
    """A service client for the configured account, with bounded retries and timeouts."""
    options: dict[str, Any] = {
        "retry_policy": retry_policy(),
        "connection_timeout": 5,
        "read_timeout": 60,
        "max_single_put_size": single_put,
        "max_block_size": block,
    }
    try:
        if settings.azure.connection_string:
            return BlobServiceClient.from_connection_string(
                settings.azure.connection_string, **options)
        if settings.azure.account_url:
            from azure.identity.aio import DefaultAzureCredential

            return BlobServiceClient(settings.azure.account_url,
                                     credential=DefaultAzureCredential(), **options)
    except (ValueError, AzureError) as exc:
        raise ConfigError(f"invalid Azure configuration: {first_line(exc)}") from exc
    raise ConfigError("azure:// store needs BLOBLEDGER_AZURE_CONNECTION_STRING "
                      "or BLOBLEDGER_AZURE_ACCOUNT_URL")


def azure_container(settings: Settings, what: str) -> str:
    """The container named by an ``azure://<container>`` store URL; ConfigError otherwise."""
    url = settings.store_url
    if not url.startswith("azure://"):
        raise ConfigError(
            f"{what} needs an Azure store: set BLOBLEDGER_STORE_URL=azure://<container> and "
            f"BLOBLEDGER_AZURE_CONNECTION_STRING (the store is {url})")
    container = url[len("azure://"):].strip("/")
    if not 3 <= len(container) <= 63:
        raise ConfigError(f"Azure container name {container!r} must have 3-63 characters")
    return container


# -- reading SDK answers -------------------------------------------------------------------
def error_code(exc: HttpResponseError) -> str:
    """The service's own ``x-ms-error-code`` (the SDK rewrites some into enum names)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    code = headers.get("x-ms-error-code") or getattr(exc, "error_code", None) or ""
    return str(getattr(code, "value", code))


def http(exc: HttpResponseError) -> str:
    """``HTTP 409 BlobAlreadyExists``, as the article prints a refused call."""
    return f"HTTP {exc.status_code} {error_code(exc)}".rstrip()


def is_permission_error(exc: BaseException) -> bool:
    return isinstance(exc, HttpResponseError) and exc.status_code == 403


def fatal(exc: BaseException, where: str) -> BlobLedgerError:
    """The one-line error that ends a run: permissions named, the rest via the store mapping."""
    if isinstance(exc, BlobLedgerError):
        return exc
    if is_permission_error(exc):
        assert isinstance(exc, HttpResponseError)
        return StoreError(f"the Azure credentials were refused for {where} "
                          f"({error_code(exc) or 403}): {first_line(exc)}")
    return translate(exc, where)


async def check_tag_permission(container: ContainerClient) -> None:
    """Write and read index tags on a probe blob; StoreError naming the permission if refused.

    The probe blob is deleted again whatever happens.
    """
    blob = container.get_blob_client("probe-tag-permission")
    try:
        await blob.upload_blob(b"probe", overwrite=True)
        try:
            await blob.set_blob_tags({"state": "pending"})
            await blob.get_blob_tags()
        except HttpResponseError as exc:
            if exc.status_code == 403:
                raise StoreError(
                    f"the Azure credentials may not write blob index tags ({error_code(exc)}): "
                    f"{TAG_HINT}") from None
            raise
    finally:
        with contextlib.suppress(AzureError):
            await blob.delete_blob()
