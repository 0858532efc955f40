"""``blobledger put FILE``: upload a file, retrying under one idempotency key.

Every attempt carries the same ``Idempotency-Key``, so a retry after a lost response returns
the document the first attempt created instead of a second one. What says retry is retried
(:func:`blobledger.cli._client.retrying`: connection failures, 5xx, and a 409 or 429 with
``Retry-After``, as the 409 that says an earlier attempt under the key is still running),
nothing else. Prints the document as JSON.

With ``--direct`` the bytes go to the store itself when the server offers it (``POST
/uploads``; a server without it gets the ordinary upload): the file's SHA-256 is declared, the
bytes are PUT to the URL the server answered (never with this client's token), and the
server completes the upload after checking what the store holds. The URL, method and
headers the server answers are checked first (:mod:`blobledger.cli._direct`): a target the
CLI does not expect is refused and nothing is sent.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import uuid
from pathlib import Path

import click
import httpx

from blobledger.cli._answers import DocumentAnswer, read
from blobledger.cli._client import (
    ClientError,
    Connection,
    Progress,
    TryAgain,
    connection_options,
    open_client,
    read_chunks,
    retrying,
    unreachable,
)
from blobledger.cli._direct import direct_upload
from blobledger.cli._output import print_json

EXAMPLES = """\b
Examples:
  blobledger put report.pdf
  blobledger put scan.bin --name scans/2026/03.tiff --content-type image/tiff
  blobledger put big.iso --retries 10 --idempotency-key "$(uuidgen)"
"""


@click.command(epilog=EXAMPLES)
@click.argument("file", type=click.Path(path_type=Path, dir_okay=True))
@click.option("--name", help="the document's name (default: the file's name)")
@click.option("--content-type", help="default: guessed from the name")
@click.option("--retries", type=click.IntRange(min=0), default=6, show_default=True,
              help="retries after a failed attempt")
@click.option("--idempotency-key", help="default: a new random key")
@click.option("--direct", is_flag=True,
              help="send the bytes straight to the store if the server offers it")
@connection_options
def command(file: Path, name: str | None, content_type: str | None, retries: int,
            idempotency_key: str | None, direct: bool, url: str | None,
            token: str | None) -> int:
    """Upload FILE as a new document; print the document as JSON.

    Every attempt carries the same Idempotency-Key: a retry after a lost
    response returns the document the first attempt created. A progress bar
    is drawn on stderr when it is a terminal."""
    return upload(file, name=name, content_type=content_type, retries=retries,
                  idempotency_key=idempotency_key, connection=Connection.resolve(url, token),
                  direct=direct)


def upload(path: Path, *, name: str | None, content_type: str | None, retries: int,
           idempotency_key: str | None, connection: Connection, direct: bool = False) -> int:
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise ClientError(f"{path} is not a regular file")
    except OSError as exc:
        raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
    name = name or path.name
    content_type = (content_type or mimetypes.guess_type(name)[0]
                    or "application/octet-stream")
    headers = {"Idempotency-Key": idempotency_key or uuid.uuid4().hex,
               "Content-Type": content_type, "Content-Length": str(size)}
    with open_client(connection) as client:
        if direct:
            doc = direct_upload(connection.url, retries, client, path, name, content_type,
                                size, _sha256(path))
            if doc is not None:
                print_json(doc)
                return 0
        tries = 0
        try:
            for attempt in retrying(retries):
                with attempt:
                    tries = attempt.num
                    response = _post(client, path, name, size, headers)
        except TryAgain as exc:
            last = str(exc)
        except httpx.TransportError as exc:
            last = str(unreachable(connection.url, exc))
        else:
            print_json(read(DocumentAnswer, response, "a document")[1])
            return 0
    raise ClientError(f"upload of {os.fspath(path)} failed after {tries} attempts: {last}")


def _post(client: httpx.Client, path: Path, name: str, size: int,
          headers: dict[str, str]) -> httpx.Response:
    """One attempt of ``POST /documents``: TryAgain or TransportError to retry."""
    progress = Progress(name, size)
    try:
        with path.open("rb") as handle:
            return TryAgain.check(client.post("/documents", params={"name": name},
                                              content=read_chunks(handle, progress),
                                              headers=headers))
    except OSError as exc:
        raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        progress.finish()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(1024 * 1024):
                digest.update(chunk)
    except OSError as exc:
        raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
    return digest.hexdigest()
