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
time, exponential backoff with jitter; a direct upload's PUT to the store as
:mod:`blobledger.client._core` retries it). What says retry: a connection failure, a 5xx
(500, 502, 503, 504), or a response that carries ``Retry-After`` (a 429, a 503, the 409
of an attempt under the same idempotency key still running), whose wait is honoured, given
in seconds or as an HTTP date. Any other 4xx is final. A connection that cannot be made at all is
:class:`Unreachable` (exit 3), told with the URL tried and ``BLOBLEDGER_URL``; its retries
are each told on stderr as they happen (:class:`Attempts`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import click
import httpx

from blobledger import __version__
from blobledger.cli import ClientError, Unreachable
from blobledger.cli._output import Progress, one_line
from blobledger.client import Client, Retried
from blobledger.client._retry import retry_after
from blobledger.errors import BlobLedgerError

F = TypeVar("F", bound=Callable[..., object])
__all__ = ["TOTAL_TIME", "Attempts", "ClientError", "Connection", "Progress", "Unreachable",
           "answered", "connection_options", "open_client", "retry_after", "unreachable"]
#: the longest time all the attempts of one request may take
TOTAL_TIME = 300.0
#: retries of a connection that cannot be made, unless ``--retries`` is given: a service
#: that is not there (the wrong port) is told within a second, not waited for
CONNECT_RETRIES = 2


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

