"""What the HTTP client commands (put, get, ls, rm, show) share: the ``--url``/``--token``
options, one :class:`blobledger.client.Client` (each request sent once, unless the command
asks for retries: ``put``), the progress bar (:mod:`._output`), and turning any failure into
one readable line.

``--url`` defaults to the ``url`` setting (``BLOBLEDGER_URL``, else http://127.0.0.1:8000);
``--token`` to the ``token`` setting (``BLOBLEDGER_TOKEN``). A problem response becomes
``ClientError("<detail> (HTTP 409)")``; an error answer whose body is not a valid problem
document, "the server answered 409 with a body that is not a problem document"
(:mod:`blobledger.client._answers` checks every body the commands read).

Retries are the client's (:mod:`blobledger.client._retry`: bounded attempts and total
time, exponential backoff with jitter; :func:`retrying`, stamina's, for ``put --direct``'s
own steps). What says retry: a connection failure, a 5xx (500, 502, 503, 504), or a
response that carries ``Retry-After`` (a 429, a 503, the 409 of an attempt under the same
idempotency key still running), whose wait is honoured, given in seconds or as an HTTP
date. Any other 4xx is final. A connection that cannot be made at all is
:class:`Unreachable` (exit 3), told with the URL tried and ``BLOBLEDGER_URL``; its retries
are each told on stderr as they happen (:class:`Attempts`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, TypeVar

import click
import httpx
import stamina

from blobledger import __version__
from blobledger.cli._output import Progress, one_line
from blobledger.client import Client, Retried
from blobledger.client._answers import describe
from blobledger.client._retry import (
    MAX_DELAY,
    RETRY_AFTER_STATUSES,
    RETRY_STATUSES,
    retry_after,
    says_retry,
)
from blobledger.errors import BlobLedgerError

F = TypeVar("F", bound=Callable[..., object])
__all__ = ["MAX_DELAY", "RETRY_AFTER_STATUSES", "RETRY_STATUSES", "TOTAL_TIME", "Attempts",
           "ClientError", "Connection", "Progress", "TryAgain", "Unreachable", "answered",
           "check", "connection_options", "describe", "open_client", "read_chunks",
           "retry_after", "retrying", "unreachable"]
CHUNK = 1024 * 1024
#: the longest time all the attempts of one request may take
TOTAL_TIME = 300.0
#: retries of a connection that cannot be made, unless ``--retries`` is given: a service
#: that is not there (the wrong port) is told within a second, not waited for
CONNECT_RETRIES = 2


class ClientError(BlobLedgerError):
    """A request the service refused or that could not be made (one line, exit 1)."""

    exit_code = 1


class Unreachable(ClientError):
    """The service could not be reached (one line, exit 3: an outage, or the wrong URL)."""

    exit_code = 3


class TryAgain(ClientError):
    """A response that says to try again; ``wait``: its Retry-After, in seconds, if any."""

    def __init__(self, message: str, wait: float | None = None) -> None:
        super().__init__(message)
        self.wait = wait

    @classmethod
    def check(cls, response: httpx.Response) -> httpx.Response:
        """The response, unless it says retry (TryAgain) or failed (ClientError)."""
        if response.status_code < 400:
            return response
        if says_retry(response):
            raise cls(describe(response), retry_after(response))
        raise ClientError(describe(response))


def retrying(retries: int, url: str = "", *,
             connect_retries: int | None = None) -> Iterator[stamina.Attempt]:
    """Up to ``retries`` retries of a block that raises TryAgain or httpx.TransportError
    to be retried; the last failure is raised when attempts or :data:`TOTAL_TIME` run out.
    A connection that cannot be made at all (refused, no such host) is retried at most
    ``connect_retries`` times (default: ``retries``), and each such retry is told on stderr
    at once, with the URL tried and how to point the CLI elsewhere: a service that is not
    there is never waited for in silence. Other retries print nothing (stamina's own hooks
    would write to stdout): only the outcome is told."""
    allowed = retries if connect_retries is None else min(connect_retries, retries)
    refused = 0

    def backoff(exc: Exception) -> bool | float:
        nonlocal refused
        if isinstance(exc, TryAgain):
            return min(exc.wait, MAX_DELAY) if exc.wait is not None else True
        if isinstance(exc, httpx.ConnectError):
            refused += 1
            return refused <= allowed
        return isinstance(exc, httpx.TransportError)

    def tell(details: stamina.instrumentation.RetryDetails) -> None:
        if isinstance(details.caused_by, httpx.ConnectError):
            tell_connect_retry(url, details.caused_by, details.wait_for, refused, allowed)

    stamina.instrumentation.set_on_retry_hooks([tell])
    return iter(stamina.retry_context(
        on=backoff, attempts=retries + 1, timeout=TOTAL_TIME, wait_initial=0.25,
        wait_max=MAX_DELAY, wait_jitter=0.25))


def tell_connect_retry(url: str, exc: httpx.ConnectError, wait: float, retry: int,
                       allowed: int) -> None:
    print(f"blobledger: {one_line(connect_failure(url, exc))}; trying again in {wait:.1f}s "
          f"(retry {retry} of {allowed})", file=sys.stderr, flush=True)


class Attempts:
    """The attempts of one request the client retries (its ``on_retry``): counted
    (``made``), whether the last one said retry but none was left (``given_up``), and each
    retry of a connection that cannot be made told on stderr at once, with the URL tried."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.made = 1
        self.given_up = False

    def __call__(self, retried: Retried) -> None:
        if retried.wait is None:
            self.given_up = True
            return
        self.made += 1
        if isinstance(retried.cause, httpx.ConnectError):
            tell_connect_retry(self.url, retried.cause, retried.wait, retried.retry,
                               retried.of)


def connection_options(function: F) -> F:
    """``--url`` and ``--token`` (defaults: the ``url`` and ``token`` settings)."""
    function = click.option("--url", metavar="URL",
                            help="the service (default: BLOBLEDGER_URL, else "
                            "http://127.0.0.1:8000)")(function)
    return click.option("--token", metavar="TOKEN",
                        help="bearer token (default: BLOBLEDGER_TOKEN)")(function)


@dataclass(frozen=True)
class Connection:
    """Where the client commands send their requests."""

    url: str
    token: str | None

    @classmethod
    def resolve(cls, url: str | None, token: str | None) -> Connection:
        """The options given, else the settings."""
        if url is None or token is None:
            from blobledger.cli import settings

            current = settings()
            url = current.url if url is None else url
            token = current.token if token is None else token
        return cls(url, token)


@contextlib.contextmanager
def open_client(connection: Connection, *, retries: int = 0,
                connect_retries: int | None = None, retry_time: float | None = None,
                on_retry: Callable[[Retried], None] | None = None) -> Iterator[Client]:
    """The client for the service (never following a redirect; each request sent once
    unless ``retries`` and the rest of the client's retry options say otherwise); an answer
    that cannot be read (a broken encoding, a bad header) inside the block is one line, not
    a traceback, and an error the client raised is one line of exit 1 (:func:`answered`)."""
    url = connection.url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ClientError(f"--url must be an http:// or https:// URL, not {url!r}")
    with Client(url, connection.token, retries=retries, connect_retries=connect_retries,
                retry_time=retry_time, on_retry=on_retry, timeout=30.0,
                user_agent=f"blobledger-cli/{__version__}") as client, answered():
        try:
            yield client
        except httpx.TransportError as exc:
            raise unreachable(url, exc) from None
        except httpx.HTTPError as exc:
            raise ClientError(f"the answer of {url} could not be read: {exc}") from None


@contextlib.contextmanager
def answered() -> Iterator[None]:
    """The client's errors (a problem answered, an answer refused) as :class:`ClientError`:
    the same line, exit 1."""
    try:
        yield
    except ClientError:
        raise
    except BlobLedgerError as exc:
        raise ClientError(str(exc)) from None


def check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise ClientError(describe(response))
    return response


def unreachable(url: str, exc: httpx.HTTPError, what: str = "") -> ClientError:
    """The one line for a request that failed on its way (``what``: said first): for a
    connection that could not be made, the URL tried and how to point the CLI elsewhere
    (exit 3, :class:`Unreachable`)."""
    if isinstance(exc, httpx.ConnectError):
        return Unreachable(f"{what}{connect_failure(url, exc)}; is the service running "
                           "there? if it listens elsewhere, set BLOBLEDGER_URL (or --url) to "
                           "the URL blobledger serve prints "
                           "(export BLOBLEDGER_URL=http://127.0.0.1:PORT)")
    if isinstance(exc, httpx.TransportError):
        return Unreachable(f"{what}cannot reach {url}: {_reason(exc)}")
    return ClientError(f"{what}cannot reach {url}: {_reason(exc)}")


def connect_failure(url: str, exc: httpx.HTTPError) -> str:
    return f"cannot connect to {url} ({_reason(exc)})"


def _reason(exc: httpx.HTTPError) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def read_chunks(handle: IO[bytes], progress: Progress) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK):
        progress.add(len(chunk))
        yield chunk
