"""The Azure SDK's errors as blobledger's: :func:`translate` (the one mapping) and
:func:`map_errors` (around every call, under the store's circuit breaker)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
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

from blobledger._base.logs import first_line
from blobledger.errors import (
    AccessRefused,
    BlobAlreadyExists,
    BlobLedgerError,
    BlobNotFound,
    ConditionNotMet,
    StoreError,
    StoreMissing,
    StoreUnavailable,
)
from blobledger.stores.resilience import Breaker, breaker_watch


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def _code(exc: BaseException) -> str:
    return str(getattr(exc, "error_code", "") or "")


def translate(exc: BaseException, name: str, *, put: bool = False) -> BlobLedgerError:
    """The blobledger error for an SDK, HTTP or network error (the one mapping)."""
    status = _status(exc)
    # 401 is ClientAuthenticationError in the SDK's operations; the store's own requests
    # (lean) carry the bare status
    if isinstance(exc, ClientAuthenticationError) or status in (401, 403):
        return AccessRefused(f"storage refused the credentials for {name}: {first_line(exc)} "
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
        return StoreUnavailable(f"storage unreachable: {first_line(exc)}")
    if isinstance(exc, HttpResponseError):
        return StoreError(f"storage answered {status} {_code(exc)} for {name}")
    return StoreUnavailable(f"storage error for {name}: {first_line(exc)}")


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


