"""A direct upload's target (``POST /uploads``'s answer), checked before anything is sent:

- the method is ``PUT``: every backend's create is one (an Azure SAS, an S3 presigned PUT,
  ``serve``'s own ``/uploads/{id}/content`` for a store on local disk);
- the URL is ``https``, or ``http`` to the server's own origin (the scheme, host and port of
  the service's URL), or ``http`` to a loopback host when the server is itself on loopback
  (Azurite, moto or MinIO beside a local ``serve``); it holds no user or password;
- its headers are all on :data:`ALLOWED_HEADERS`, what the backends ask for (Azure:
  ``x-ms-blob-type``, ``If-None-Match``, ``Content-Type``; S3: ``If-None-Match``,
  ``x-amz-tagging``, ``Content-Type``, checksums; ``serve``: ``Content-Type``): never a
  ``Cookie``, an ``Authorization`` nor any other header the server adds; a
  ``Content-Length`` only if it is the file's size (the client sets it itself);
- the upload's id is a plain id (it goes into the completion's path) and its ``size``, if
  given, the file's.

Anything else is :class:`Refused`, and nothing is sent. The bytes go by a client of their
own: without the token, the environment's proxies or ``.netrc``, never following a redirect.
A server that offers no direct uploads (``POST /uploads`` answers 404 or 405) is
:class:`NoDirectUploads`; bytes the store did not take are :class:`StoreFailed`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import httpx

from blobledger.client._answers import DirectTarget
from blobledger.errors import BlobLedgerError, ServiceError

#: the headers a direct upload may carry, lower case (and any ``x-amz-checksum-*``)
ALLOWED_HEADERS = frozenset({
    "content-type", "content-length", "content-md5", "if-none-match",
    "x-ms-blob-type", "x-ms-blob-content-type", "x-ms-blob-content-md5", "x-ms-version",
    "x-amz-tagging", "x-amz-content-sha256", "x-amz-sdk-checksum-algorithm",
})
ALLOWED_PREFIXES = ("x-amz-checksum-",)
#: the store's answers to a direct PUT that are retried
STORE_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class Refused(BlobLedgerError):
    """A direct upload target the client will not send to (nothing was sent)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the server's direct upload target is refused: {reason}; "
                         "nothing was sent")


class NoDirectUploads(ServiceError):
    """The server offers no direct uploads (``POST /uploads`` answered 404 or 405): send
    the bytes the ordinary way (``create``)."""


class StoreFailed(ServiceError):
    """The store did not take a direct upload's bytes: it refused them, answered a
    redirect (never followed), or still failed when the retries were spent (``given_up``:
    why, ``"HTTP 503"`` or ``"the store was unreachable: ..."``; ``status`` 0 when it could
    not be reached)."""

    def __init__(self, message: str, status: int, given_up: str | None = None) -> None:
        super().__init__(message, status)
        self.given_up = given_up


@dataclass(frozen=True)
class Target:
    """Where the bytes go, checked: the upload's id, the URL, the headers to send."""

    id: str
    url: httpx.URL
    headers: dict[str, str]


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    default = 443 if url.scheme == "https" else 80
    return url.scheme, url.host.lower(), url.port or default


def checked_target(answer: DirectTarget, server: str, size: int) -> Target:
    """The target of ``answer`` if it is one the client sends to (see the module), else
    :class:`Refused`."""
    if answer.method != "PUT":
        raise Refused(f"method {answer.method!r}, not PUT")
    try:
        url = httpx.URL(answer.url)
        own = httpx.URL(server)
    except (httpx.InvalidURL, ValueError) as exc:
        raise Refused(f"not a URL ({exc})") from None
    if not url.host or url.scheme not in ("http", "https"):
        raise Refused(f"{answer.url!r} is not an http(s) URL")
    if url.userinfo:
        raise Refused("the URL carries a user or a password")
    if url.scheme == "http" and _origin(url) != _origin(own) and not (
            is_loopback(url.host) and is_loopback(own.host)):
        raise Refused(f"plain http to {url.host!r}, neither https nor the server's own "
                      "origin")
    if answer.size is not None and answer.size != size:
        raise Refused(f"it is for {answer.size} bytes, the file has {size}")
    headers: dict[str, str] = {}
    for name, value in answer.headers.items():
        lower = name.lower()
        if lower not in ALLOWED_HEADERS and not lower.startswith(ALLOWED_PREFIXES):
            raise Refused(f"header {name!r} is not one a store needs")
        if not (value.isascii() and value.isprintable()):
            raise Refused(f"header {name!r} has a value that is not printable ASCII")
        if lower == "content-length":
            if value.strip() != str(size):
                raise Refused(f"Content-Length {value!r} is not the file's size, {size}")
            continue
        headers[name] = value
    headers["Content-Length"] = str(size)
    return Target(answer.id, url, headers)
