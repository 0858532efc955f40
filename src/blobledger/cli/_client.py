"""What the HTTP client commands (put, get, ls, rm) share: the ``--url``/``--token`` options,
one httpx client, the progress bar (:mod:`._output`), and turning any failure into one
readable line.

``--url`` defaults to the ``url`` setting (``BLOBLEDGER_URL``, else http://127.0.0.1:8000);
``--token`` to the ``token`` setting (``BLOBLEDGER_TOKEN``). A problem response becomes
``ClientError("<detail> (HTTP 409)")``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, TypeVar
from urllib.parse import quote

import click
import httpx

from blobledger import __version__
from blobledger.cli._output import Progress
from blobledger.errors import BlobLedgerError

F = TypeVar("F", bound=Callable[..., object])
__all__ = ["ClientError", "Connection", "Progress", "check", "connection_options",
           "describe", "document_path", "open_client", "problem_type", "read_chunks",
           "unreachable"]
PROBLEM_PREFIX = "urn:blobledger:problem:"
CHUNK = 1024 * 1024


class ClientError(BlobLedgerError):
    """A request the service refused or that could not be made (one line, exit 1)."""


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


def open_client(connection: Connection) -> httpx.Client:
    url = connection.url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ClientError(f"--url must be an http:// or https:// URL, not {url!r}")
    headers = {"User-Agent": f"blobledger-cli/{__version__}"}
    if connection.token:
        headers["Authorization"] = f"Bearer {connection.token}"
    return httpx.Client(base_url=url, headers=headers, trust_env=False,
                        timeout=httpx.Timeout(30.0, read=300.0))


def document_path(doc_id: str, suffix: str = "") -> str:
    return f"/documents/{quote(doc_id, safe='')}{suffix}"


def problem_type(response: httpx.Response) -> str | None:
    """The short problem type (``name-taken``) of a problem response, if it is one."""
    if not response.headers.get("content-type", "").startswith("application/problem+json"):
        return None
    try:
        kind = response.json().get("type", "")
    except ValueError:
        return None
    return str(kind).removeprefix(PROBLEM_PREFIX) if isinstance(kind, str) else None


def describe(response: httpx.Response) -> str:
    """One line for a failed response: the problem's detail, else the status."""
    detail = ""
    if problem_type(response) is not None:
        body = response.json()
        detail = str(body.get("detail") or body.get("title") or "")
    elif response.text and len(response.text) < 200 and "\n" not in response.text.strip():
        detail = response.text.strip()
    status = f"HTTP {response.status_code}"
    return f"{detail} ({status})" if detail else f"{status} {response.reason_phrase}".strip()


def check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        response.read()
        raise ClientError(describe(response))
    return response


def unreachable(url: str, exc: httpx.HTTPError) -> ClientError:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ClientError(f"cannot reach {url}: {reason}")


def read_chunks(handle: IO[bytes], progress: Progress) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK):
        progress.add(len(chunk))
        yield chunk
