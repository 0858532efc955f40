"""``put --direct``: the bytes straight to the store, where ``POST /uploads`` says, but only
as the CLI expects them to go. The server's answer is checked before anything is sent
(:func:`checked_target`); anything else is refused in one line and nothing is sent:

- the method is ``PUT``: every backend's create is one (an Azure SAS, an S3 presigned PUT,
  ``serve``'s own ``/uploads/{id}/content`` for a store on local disk);
- the URL is ``https``, or ``http`` to the server's own origin (the scheme, host and port of
  ``--url``), or ``http`` to a loopback host when the server is itself on loopback (Azurite,
  moto or MinIO beside a local ``serve``); it holds no user or password;
- its headers are all on :data:`ALLOWED_HEADERS`, what the backends ask for (Azure:
  ``x-ms-blob-type``, ``If-None-Match``, ``Content-Type``; S3: ``If-None-Match``,
  ``x-amz-tagging``, ``Content-Type``, checksums; ``serve``: ``Content-Type``): never a
  ``Cookie``, an ``Authorization`` nor any other header the server adds; a
  ``Content-Length`` only if it is the file's size (the CLI sets it itself);
- the upload's id is a plain id (it goes into the completion's path) and its ``size``, if
  given, the file's.

The bytes go by a client of their own: without the CLI's token, the environment's proxies
or ``.netrc``, and never following a redirect (a 3xx is a refusal).
"""

from __future__ import annotations

import ipaddress
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx

from blobledger.cli._client import (
    MAX_DELAY,
    ClientError,
    Progress,
    TryAgain,
    describe,
    read_chunks,
    retry_after,
    retrying,
    unreachable,
)
from blobledger.client._answers import DirectTarget, DocumentAnswer, read

#: the headers a direct upload may carry, lower case (and any ``x-amz-checksum-*``)
ALLOWED_HEADERS = frozenset({
    "content-type", "content-length", "content-md5", "if-none-match",
    "x-ms-blob-type", "x-ms-blob-content-type", "x-ms-blob-content-md5", "x-ms-version",
    "x-amz-tagging", "x-amz-content-sha256", "x-amz-sdk-checksum-algorithm",
})
ALLOWED_PREFIXES = ("x-amz-checksum-",)
#: the store's answers to a direct PUT that are retried
STORE_RETRY_STATUSES = {408, 429, 500, 502, 503, 504}


class Refused(ClientError):
    """A direct upload target the CLI will not send to (nothing was sent)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the server's direct upload target is refused: {reason}; "
                         "nothing was sent")


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
    """The target of ``answer`` if it is one the CLI sends to (see the module), else
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


def retry_delay(attempt: int, response: httpx.Response | None) -> float:
    """Retry-After if the store gave one, else exponential backoff with jitter."""
    after = retry_after(response) if response is not None else None
    if after is not None:
        return min(after, MAX_DELAY)
    return min(0.25 * 2.0**attempt, MAX_DELAY) * random.uniform(0.8, 1.2)


def direct_upload(url: str, retries: int, client: httpx.Client, path: Path, name: str,
                  content_type: str, size: int, sha256: str) -> object | None:
    """POST /uploads, PUT the bytes where it says (if allowed), complete: the document's
    JSON; None if the server offers no direct uploads."""
    try:
        began = client.post("/uploads", json={"name": name, "size": size,
                                              "content_type": content_type, "sha256": sha256})
    except httpx.TransportError as exc:
        raise unreachable(url, exc) from None
    if began.status_code in (404, 405):
        return None  # a server without direct uploads
    if began.status_code != 201:
        raise ClientError(describe(began))
    answer, _ = read(DirectTarget, began, "a direct upload's target")
    target = checked_target(answer, url, size)
    _send(target, retries, path, name, size)
    completion = f"/uploads/{quote(target.id, safe='')}/complete"
    try:
        for completing in retrying(retries, url):
            with completing:
                done = TryAgain.check(client.post(completion))
    except TryAgain as exc:
        last = str(exc)
    except httpx.TransportError as exc:
        last = str(unreachable(url, exc))
    else:
        document: object = read(DocumentAnswer, done, "a document")[1]
        return document
    raise ClientError(f"completing the upload of {os.fspath(path)} failed: {last}")


def _send(target: Target, retries: int, path: Path, name: str, size: int) -> None:
    """PUT the file to the target, retrying what the store says to retry. Kept by hand: a
    refusal is success on a retry (the create-only PUT found its bytes)."""
    last = ""
    for attempt in range(retries + 1):
        response: httpx.Response | None = None
        progress = Progress(name, size)
        try:
            with path.open("rb") as handle, httpx.Client(
                    timeout=None, trust_env=False, follow_redirects=False) as storage:
                response = storage.put(target.url, headers=target.headers,
                                       content=read_chunks(handle, progress))
        except httpx.TransportError as exc:
            last = f"the store was unreachable: {exc}"
        except OSError as exc:
            raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
        finally:
            progress.finish()
        # 403/409/412 on a retry: the create-only put refused, the bytes are there already
        if response is not None and (response.status_code < 300 or (
                attempt > 0 and response.status_code in (403, 409, 412))):
            return
        if response is not None and 300 <= response.status_code < 400:
            raise ClientError(f"the store answered {response.status_code}, a redirect (not "
                              "followed)")
        if response is not None and response.status_code not in STORE_RETRY_STATUSES:
            text = " ".join(response.text[:200].split())
            raise ClientError(f"the store refused the upload: HTTP {response.status_code} "
                              f"{text}")
        if response is not None:
            last = f"HTTP {response.status_code}"
        if attempt < retries:
            time.sleep(retry_delay(attempt, response))
    raise ClientError(f"direct upload of {os.fspath(path)} failed: {last}")
