"""``blobledger get NAME|ID [-o FILE]``: download a document's bytes (to stdout by default),
found by its name or its id as ``show`` finds it (:mod:`._lookup`).

With ``-o`` the bytes go to a temporary file beside FILE that replaces it only once they are
complete and match the SHA-256 the service announced: never a half-written FILE. A FILE that
is replaced keeps its permission bits (and, where allowed, its owner); a new one gets the
usual ``0666`` less the umask. FILE is never replaced when it is not a plain file:

- a device or a FIFO (``-o /dev/null``, ``-o /dev/stdout``, a named pipe) is written to as
  a stream, in place;
- a regular file with other hard links is written in place, once the complete bytes have
  been checked in a temporary file, so that every link sees them;
- a symbolic link or a directory is refused.

The bytes come by :meth:`blobledger.client.Client.stream`: a download whose connection
breaks after some bytes is resumed from there (``Range`` with ``If-Range``: a document
replaced meanwhile is never spliced), and the whole is checked against its SHA-256.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import click
import httpx

from blobledger.cli._client import (
    ClientError,
    Connection,
    Progress,
    connection_options,
    open_client,
    unreachable,
)
from blobledger.cli._lookup import find
from blobledger.errors import IntegrityError


def copy(chunks: Iterator[bytes], out: IO[bytes], progress: Progress) -> None:
    for chunk in chunks:
        out.write(chunk)
        progress.add(len(chunk))


@click.command(epilog="\b\nExamples:\n  blobledger get reports/2026/q1.pdf -o report.pdf\n"
               "  blobledger get 0f3c... | less")
@click.argument("key", metavar="NAME|ID")
@click.option("-o", "--output", type=click.Path(path_type=Path), metavar="FILE",
              help="write here (atomically) instead of stdout")
@connection_options
def command(key: str, output: Path | None, url: str | None, token: str | None) -> int:
    """Write the bytes of the document named NAME (or whose id is ID) to stdout or to
    FILE."""
    return download(key, output, Connection.resolve(url, token))


def download(key: str, target: Path | None, connection: Connection) -> int:
    with open_client(connection) as client:
        try:
            doc_id = find(client, key)[0].id
            with client.stream(doc_id) as reading:
                first = next(reading, None)  # the answer, checked before anything is written
                chunks = itertools.chain(() if first is None else (first,), reading)
                progress = Progress(doc_id, reading.size)
                if target is not None:
                    write_atomically(target, chunks, progress)
                    return 0
                progress.enabled = False
                copy(chunks, sys.stdout.buffer, progress)
                sys.stdout.buffer.flush()
        except httpx.HTTPError as exc:
            raise unreachable(connection.url, exc) from None
    return 0


def write_atomically(target: Path, chunks: Iterator[bytes], progress: Progress) -> None:
    """Write the download to ``target`` as described in the module's docstring."""
    try:
        info: os.stat_result | None = os.lstat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise ClientError(f"cannot write {target}: {exc.strerror or exc}") from None
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise ClientError(f"{target} is a symbolic link; give the path it points to")
        if stat.S_ISDIR(info.st_mode):
            raise ClientError(f"{target} is a directory")
        if not stat.S_ISREG(info.st_mode):  # a device, a FIFO, a socket: write into it
            _write_stream(target, chunks, progress)
            return
    try:
        temp = _download_to_temp(target, chunks, progress)
    except IntegrityError:
        raise ClientError(f"the downloaded bytes do not match their SHA-256; {target} "
                          "left unchanged") from None
    try:
        if info is not None and info.st_nlink > 1:
            _copy_in_place(temp, target)
            temp.unlink()
            return
        _take_over_metadata(temp, info)
        os.replace(temp, target)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise ClientError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _download_to_temp(target: Path, chunks: Iterator[bytes], progress: Progress) -> Path:
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".part")
    except OSError as exc:
        raise ClientError(f"cannot write {target}: {exc.strerror or exc}") from None
    temp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            copy(chunks, handle, progress)
            handle.flush()
            os.fsync(handle.fileno())
        progress.finish()
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise ClientError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _take_over_metadata(temp: Path, replaced: os.stat_result | None) -> None:
    """The permission bits (and owner, where allowed) of the file being replaced; for a new
    file, 0666 less the umask (``mkstemp`` makes it 0600)."""
    if replaced is None:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)
        return
    if (replaced.st_uid, replaced.st_gid) != (os.getuid(), os.getgid()):
        with contextlib.suppress(OSError):
            os.chown(temp, replaced.st_uid, replaced.st_gid)
    os.chmod(temp, stat.S_IMODE(replaced.st_mode))


def _copy_in_place(source: Path, target: Path) -> None:
    flags = os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with source.open("rb") as src, os.fdopen(os.open(target, flags), "wb") as out:
        while chunk := src.read(1024 * 1024):
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())


def _write_stream(target: Path, chunks: Iterator[bytes], progress: Progress) -> None:
    """Write into a device or a FIFO as it arrives (it cannot be replaced, nor undone)."""
    flags = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        with os.fdopen(os.open(target, flags), "wb") as out:
            copy(chunks, out, progress)
        progress.finish()
    except OSError as exc:
        raise ClientError(f"cannot write {target}: {exc.strerror or exc}") from None
    except IntegrityError:
        raise ClientError(f"the bytes written to {target} do not match their "
                          "SHA-256") from None
