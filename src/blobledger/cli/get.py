"""``blobledger get ID [-o FILE]``: download a document's bytes (to stdout by default).

With ``-o`` the bytes go to a temporary file beside FILE that replaces it only once they are
complete and match the SHA-256 the service announced: never a half-written FILE.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import IO

import httpx

from blobledger.cli._client import (
    ClientError,
    Progress,
    add_connection_options,
    check,
    document_path,
    open_client,
    unreachable,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("get", help="download a document",
                                   description="Write the bytes of document ID to stdout "
                                   "or to FILE.")
    parser.add_argument("id", metavar="ID")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write here (atomically) instead of stdout")
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def announced_sha256(response: httpx.Response) -> str | None:
    for item in response.headers.get("repr-digest", "").split(","):
        algorithm, _, value = item.strip().partition("=")
        if algorithm.lower() == "sha-256" and value.startswith(":") and value.endswith(":"):
            with contextlib.suppress(binascii.Error, ValueError):
                return base64.b64decode(value[1:-1], validate=True).hex()
    return None


def copy(response: httpx.Response, out: IO[bytes], progress: Progress) -> str:
    digest = hashlib.sha256()
    for chunk in response.iter_bytes():
        digest.update(chunk)
        out.write(chunk)
        progress.add(len(chunk))
    return digest.hexdigest()


def run(args: argparse.Namespace) -> int:
    target: Path | None = args.output
    with open_client(args) as client:
        try:
            with client.stream("GET", document_path(args.id, "/content")) as response:
                check(response)
                expected = announced_sha256(response)
                length = response.headers.get("content-length", "")
                progress = Progress(args.id, int(length) if length.isdigit() else None)
                if target is not None:
                    write_atomically(target, response, progress)
                    return 0
                progress.enabled = False
                got = copy(response, sys.stdout.buffer, progress)
                sys.stdout.buffer.flush()
                if expected is not None and got != expected:
                    raise ClientError(f"the bytes of {args.id} do not match their SHA-256")
        except httpx.HTTPError as exc:
            raise unreachable(args.url, exc) from None
    return 0


def write_atomically(target: Path, response: httpx.Response, progress: Progress) -> str:
    expected = announced_sha256(response)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".part")
    except OSError as exc:
        raise ClientError(f"cannot write {target}: {exc.strerror or exc}") from None
    temp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            got = copy(response, handle, progress)
            handle.flush()
            os.fsync(handle.fileno())
        progress.finish()
        if expected is not None and got != expected:
            raise ClientError(f"the downloaded bytes do not match their SHA-256; {target} "
                              "left unchanged")
        os.replace(temp, target)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise ClientError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return got
