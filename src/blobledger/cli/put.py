"""``blobledger put FILE``: upload a file, retrying under one idempotency key.

Every attempt carries the same ``Idempotency-Key``, so a retry after a lost response returns
the document the first attempt created instead of a second one. Connection failures, 408,
429 and 5xx are retried with exponential backoff (honouring Retry-After), and so is a 409
that says an earlier attempt under the key is still running. Prints the document as JSON.
"""

from __future__ import annotations

import argparse
import json
import mimetypes
import os
import random
import time
import uuid
from pathlib import Path

import httpx

from blobledger.cli._client import (
    ClientError,
    Progress,
    add_connection_options,
    describe,
    open_client,
    problem_type,
    read_chunks,
    unreachable,
)

RETRY_STATUSES = {408, 429, 500, 502, 503, 504}
MAX_DELAY = 10.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("put", help="upload a file",
                                   description="Upload FILE as a new document.")
    parser.add_argument("file", metavar="FILE", type=Path)
    parser.add_argument("--name", help="the document's name (default: the file's name)")
    parser.add_argument("--content-type", help="default: guessed from the name")
    parser.add_argument("--retries", type=int, default=6,
                        help="retries after a failed attempt (default 6)")
    parser.add_argument("--idempotency-key", help="default: a new random key")
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def retry_delay(attempt: int, response: httpx.Response | None) -> float:
    """Retry-After if the service gave one, else exponential backoff with jitter."""
    if response is not None:
        after = response.headers.get("retry-after", "")
        if after.isascii() and after.isdigit() and len(after) <= 6:
            return min(float(after), MAX_DELAY)
    return min(0.25 * 2.0**attempt, MAX_DELAY) * random.uniform(0.8, 1.2)


def retryable(response: httpx.Response) -> bool:
    if response.status_code in RETRY_STATUSES:
        return True
    return response.status_code == 409 and problem_type(response) == "idempotency-in-progress"


def run(args: argparse.Namespace) -> int:
    path: Path = args.file
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise ClientError(f"{path} is not a regular file")
    except OSError as exc:
        raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
    name = args.name or path.name
    content_type = (args.content_type or mimetypes.guess_type(name)[0]
                    or "application/octet-stream")
    headers = {"Idempotency-Key": args.idempotency_key or uuid.uuid4().hex,
               "Content-Type": content_type, "Content-Length": str(size)}
    last = ""
    with open_client(args) as client:
        for attempt in range(max(args.retries, 0) + 1):
            response: httpx.Response | None = None
            progress = Progress(f"{name}", size)
            try:
                with path.open("rb") as handle:
                    response = client.post("/documents", params={"name": name},
                                           content=read_chunks(handle, progress),
                                           headers=headers)
            except OSError as exc:
                raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
            except httpx.TransportError as exc:
                last = str(unreachable(args.url, exc))
            finally:
                progress.finish()
            if response is not None:
                if response.status_code < 400:
                    print(json.dumps(response.json()))
                    return 0
                if not retryable(response):
                    raise ClientError(describe(response))
                last = describe(response)
            if attempt < args.retries:
                time.sleep(retry_delay(attempt, response))
    raise ClientError(f"upload of {os.fspath(path)} failed after {args.retries + 1} "
                      f"attempts: {last}")
