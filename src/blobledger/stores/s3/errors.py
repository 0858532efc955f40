"""botocore's errors as blobledger's: :func:`translate` (the one mapping) and
:func:`map_errors` (around every call, under the store's circuit breaker)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from blobledger._base.logs import first_line
from blobledger.errors import (
    AccessRefused,
    BlobAlreadyExists,
    BlobLedgerError,
    BlobNotFound,
    ConditionNotMet,
    ConfigError,
    StoreError,
    StoreMissing,
    StoreUnavailable,
)
from blobledger.stores.resilience import Breaker, breaker_watch


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None) or {}
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status) if status is not None else None


def translate(exc: BaseException, name: str, *, put: bool = False) -> BlobLedgerError:
    """The blobledger error for a botocore, HTTP or network error (the one mapping)."""
    from botocore.exceptions import ClientError, NoCredentialsError

    if isinstance(exc, NoCredentialsError):
        return ConfigError("no AWS credentials found (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...)")
    if not isinstance(exc, ClientError):
        return StoreUnavailable(f"storage unreachable: {first_line(exc)}")
    status, code = _status(exc), _code(exc)
    if code == "NoSuchBucket":
        return StoreMissing(f"bucket for {name} does not exist; set BLOBLEDGER_STORE_URL to "
                            "the store in use")
    if status == 403 or code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return AccessRefused(f"storage refused the credentials for {name}: {code} (check the "
                             "AWS credentials and their permissions on the bucket)")
    if put and (status in (409, 412) or code in ("PreconditionFailed",
                                                 "ConditionalRequestConflict")):
        return BlobAlreadyExists(name)
    if status == 404 or code in ("NoSuchKey", "NotFound", "NoSuchUpload"):
        return BlobNotFound(name)
    if status in (409, 412) or code == "PreconditionFailed":
        return ConditionNotMet(name, code)
    if status is not None and (status >= 500 or status in (408, 429)):
        return StoreUnavailable(f"storage answered {status} for {name}")
    return StoreError(f"storage answered {status} {code} for {name}")


@contextmanager
def map_errors(name: str, *, put: bool = False,
               breaker: Breaker | None = None) -> Iterator[None]:
    """Translate whatever botocore raises inside the block into a blobledger error; with a
    ``breaker``, fail at once while it is open, and tell it whether the store answered."""
    from botocore.exceptions import BotoCoreError, ClientError

    with breaker_watch(breaker, _status):
        try:
            yield
        except BlobLedgerError:
            raise
        except (ClientError, BotoCoreError, OSError, TimeoutError) as exc:
            raise translate(exc, name, put=put) from exc
