"""What the HTTP client commands (put, get, ls, rm) share: the ``--url``/``--token`` options,
one httpx client, a progress bar, and turning any failure into one readable line.

``--url`` defaults to ``BLOBLEDGER_URL`` or http://127.0.0.1:8000; ``--token`` to
``BLOBLEDGER_TOKEN``. A problem response becomes ``ClientError("<detail> (HTTP 409)")``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from typing import IO
from urllib.parse import quote

import httpx

from blobledger.errors import BlobLedgerError

DEFAULT_URL = "http://127.0.0.1:8000"
PROBLEM_PREFIX = "urn:blobledger:problem:"
CHUNK = 1024 * 1024


class ClientError(BlobLedgerError):
    """A request the service refused or that could not be made (one line, exit 1)."""


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("BLOBLEDGER_URL") or DEFAULT_URL,
                        help="the service (BLOBLEDGER_URL, else %(default)s)")
    parser.add_argument("--token", default=os.environ.get("BLOBLEDGER_TOKEN"),
                        help="bearer token (BLOBLEDGER_TOKEN)")


def open_client(args: argparse.Namespace) -> httpx.Client:
    url = str(args.url).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ClientError(f"--url must be an http:// or https:// URL, not {url!r}")
    headers = {"User-Agent": "blobledger-cli"}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
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


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, total: int | None, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.label = label
        self.total = total
        self.done = 0
        self._started = time.monotonic()
        self._drawn = 0.0

    def add(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if self.enabled and (now - self._drawn >= 0.1 or self.done == self.total):
            self._drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.done / max(now - self._started, 1e-6)
        if self.total:
            share = self.done / self.total
            bar = "#" * int(share * 30)
            text = (f"\r{self.label} [{bar:<30}] {share:4.0%} {_size(self.done)}/"
                    f"{_size(self.total)} {_size(int(rate))}/s")
        else:
            text = f"\r{self.label} {_size(self.done)} {_size(int(rate))}/s"
        self.stream.write(text)
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def read_chunks(handle: IO[bytes], progress: Progress) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK):
        progress.add(len(chunk))
        yield chunk
