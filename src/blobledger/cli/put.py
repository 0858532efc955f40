"""``blobledger put FILE``: upload a file, retrying under one idempotency key.

The upload is :meth:`blobledger.client.Client.create`: every attempt carries the same
``Idempotency-Key`` (and the file's ``Repr-Digest``), so a retry after a lost response
returns the document the first attempt created instead of a second one. What says retry is
retried (:mod:`blobledger.client._retry`: connection failures, 5xx, and a 409 or 429 with
``Retry-After``, as the 409 that says an earlier attempt under the key is still running),
nothing else; the retries of a connection that cannot be made are told as they happen
(:class:`blobledger.cli._client.Attempts`). Prints the document as JSON.

With ``--direct`` the bytes go to the store itself when the server offers it
(:meth:`blobledger.client.Client.upload_direct`, ``POST /uploads``; a server without it gets
the ordinary upload): the file's SHA-256 is declared, the bytes are PUT to the URL the
server answered (never with this client's token, never following a redirect; what the
store says to retry is sent again), and the server completes the upload after checking
what the store holds. The URL, method and headers the server answers are checked first
(:mod:`blobledger.client._direct`): a target the client does not expect is refused and
nothing is sent.

With ``--replace`` the file becomes the new bytes of an existing document, found by its name
or id (:mod:`blobledger.cli._lookup`): ``PUT /documents/{id}/content`` with ``If-Match`` set
to the version just read (or ``--if-version``) and the file's ``Repr-Digest``, sent once. A
document changed meanwhile is refused by the service (412) and told in one line.

With ``--hold`` the creation is held (``POST /documents?hold=true``, docs/pipeline.md): the
document is committed but readable by nobody until the service's processors accepted it;
one line on stderr says so, and ``blobledger show ID`` tells its writer its state.

A connection that cannot be made at all is retried twice (each retry told on stderr, with
the URL tried), unless ``--retries`` is given: a service that is not there is not waited for.
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import click
import httpx

from blobledger.cli._client import (
    CONNECT_RETRIES,
    TOTAL_TIME,
    Attempts,
    ClientError,
    Connection,
    Progress,
    connection_options,
    open_client,
    unreachable,
)
from blobledger.cli._lookup import find
from blobledger.cli._output import display_name, print_json
from blobledger.client import Client, NoDirectUploads, StoreFailed
from blobledger.client._answers import DocumentAnswer
from blobledger.errors import BlobLedgerError, PreconditionFailed

#: retries after a failed attempt, unless ``--retries`` says otherwise
RETRIES = 6

EXAMPLES = """\b
Examples:
  blobledger put report.pdf
  blobledger put report-v2.pdf --replace --name report.pdf
  blobledger put scan.bin --name scans/2026/03.tiff --content-type image/tiff
  blobledger put big.iso --retries 10 --idempotency-key "$(uuidgen)"
  blobledger put upload.pdf --hold
"""


@click.command(epilog=EXAMPLES)
@click.argument("file", type=click.Path(path_type=Path, dir_okay=True))
@click.option("--name", help="the document's name (default: the file's name); with "
              "--replace, the name or the id of the document replaced")
@click.option("--content-type", help="default: guessed from the name (with --replace: the "
              "document's own)")
@click.option("--retries", type=click.IntRange(min=0), metavar="N",
              help=f"retries after a failed attempt [default: {RETRIES}; a connection "
              f"that cannot be made: {CONNECT_RETRIES}]")
@click.option("--idempotency-key", help="default: a new random key")
@click.option("--direct", is_flag=True,
              help="send the bytes straight to the store if the server offers it")
@click.option("--replace", is_flag=True,
              help="give an existing document these bytes (If-Match: the version read, "
              "or --if-version); sent once")
@click.option("--if-version", type=click.IntRange(min=1), metavar="V",
              help="with --replace: only if the document is still at version V")
@click.option("--hold", is_flag=True,
              help="hold the document (readable by nobody) until the service's processors "
              "accept it; blobledger show ID tells its state")
@connection_options
def command(file: Path, name: str | None, content_type: str | None, retries: int | None,
            idempotency_key: str | None, direct: bool, replace: bool, if_version: int | None,
            hold: bool, url: str | None, token: str | None) -> int:
    """Upload FILE as a new document; print the document as JSON.

    Every attempt carries the same Idempotency-Key: a retry after a lost
    response returns the document the first attempt created. A progress bar
    is drawn on stderr when it is a terminal.

    With --replace, FILE becomes the new bytes of the document named --name
    (default: FILE's name) or whose id --name is, only if it is still at the
    version read first (or --if-version): a document changed meanwhile is
    refused (HTTP 412) and left as it is."""
    connection = Connection.resolve(url, token)
    if replace:
        for given, option in ((direct, "--direct"), (idempotency_key, "--idempotency-key"),
                              (retries is not None, "--retries"), (hold, "--hold")):
            if given:
                raise click.UsageError(f"--replace is sent once: {option} does not apply")
        return replace_content(file, key=name, content_type=content_type,
                               version=if_version, connection=connection)
    if if_version is not None:
        raise click.UsageError("--if-version goes with --replace")
    if hold and direct:
        raise click.UsageError("--hold goes through the service: --direct does not apply "
                               "(a direct upload is held by the service's settings)")
    return upload(file, name=name, content_type=content_type,
                  retries=RETRIES if retries is None else retries,
                  idempotency_key=idempotency_key, connection=connection, direct=direct,
                  connect_retries=CONNECT_RETRIES if retries is None else None, hold=hold)


def file_size(path: Path) -> int:
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise ClientError(f"{path} is not a regular file")
    except OSError as exc:
        raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
    return size


def upload(path: Path, *, name: str | None, content_type: str | None, retries: int,
           idempotency_key: str | None, connection: Connection, direct: bool = False,
           connect_retries: int | None = None, hold: bool = False) -> int:
    size = file_size(path)
    name = name or path.name
    content_type = (content_type or mimetypes.guess_type(name)[0]
                    or "application/octet-stream")
    attempts = Attempts(connection.url)
    with open_client(connection, retries=retries, connect_retries=connect_retries,
                     retry_time=TOTAL_TIME, on_retry=attempts) as client:
        progress = Progress(name, size)
        try:
            with path.open("rb") as handle:
                created = (_direct(client, path, handle, name, content_type, progress)
                           if direct else None)
                if created is None:
                    created = client.create(name, handle, content_type=content_type,
                                            idempotency_key=idempotency_key, hold=hold,
                                            progress=_shown(progress))
        except OSError as exc:
            raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
        except httpx.TransportError as exc:
            raise unreachable(connection.url, exc, f"upload of {os.fspath(path)} failed "
                              f"after {attempts.made} attempts: ") from None
        except ClientError:
            raise
        except BlobLedgerError as exc:
            if not attempts.given_up:
                raise
            raise ClientError(f"upload of {os.fspath(path)} failed after {attempts.made} "
                              f"attempts: {exc}") from None
        finally:
            progress.finish()
        print_json(created.raw)
        if created.status == "held":
            click.echo(f"held: {display_name(created.name)} is readable by nobody until the "
                       f"service's processors accept it; see its state with "
                       f"blobledger show {created.id}", err=True)
    return 0


def _direct(client: Client, path: Path, handle: BinaryIO, name: str, content_type: str,
            progress: Progress) -> DocumentAnswer | None:
    """:meth:`~blobledger.client.Client.upload_direct`: the document, or None if the
    server offers no direct uploads (the file is then sent the ordinary way, from its
    start)."""
    try:
        return client.upload_direct(name, handle, content_type=content_type,
                                    progress=_shown(progress))
    except NoDirectUploads:
        handle.seek(0)
        return None
    except StoreFailed as exc:
        if exc.given_up is None:
            raise ClientError(str(exc)) from None
        raise ClientError(f"direct upload of {os.fspath(path)} failed: "
                          f"{exc.given_up}") from None


def replace_content(path: Path, *, key: str | None, content_type: str | None,
                    version: int | None, connection: Connection) -> int:
    """:meth:`~blobledger.client.Client.replace` (``PUT /documents/{id}/content`` with
    ``If-Match``), once: the document found by ``key`` (default: the file's name) gets the
    file's bytes, if it is still at ``version`` (default: the version just read)."""
    size = file_size(path)
    key = key or path.name
    with open_client(connection) as client:
        try:
            doc, _ = find(client, key)
            expected = doc.version if version is None else version
            progress = Progress(doc.name, size)
            try:
                with path.open("rb") as handle:
                    replaced = client.replace(
                        doc.id, handle, if_match=expected, progress=_shown(progress),
                        content_type=(content_type or doc.content_type
                                      or mimetypes.guess_type(doc.name)[0]
                                      or "application/octet-stream"))
            except OSError as exc:
                raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
            except PreconditionFailed as exc:
                now = exc.current_version
                where = (f"is at version {now}, not {expected}" if now is not None
                         else f"is no longer at version {expected}")
                raise ClientError(f"{doc.name!r} {where}: it changed meanwhile, nothing was "
                                  "replaced (HTTP 412); see it with blobledger show, then "
                                  "replace again") from None
            finally:
                progress.finish()
        except httpx.TransportError as exc:
            raise unreachable(connection.url, exc, f"replace of {key!r}: ") from None
        print_json(replaced.raw)
    return 0


def _shown(progress: Progress) -> Callable[[int], None]:
    """The client's progress (the bytes an attempt sent so far) drawn on ``progress``."""
    return lambda sent: progress.add(sent - progress.done)

