"""``blobledger get ID [-o FILE]``: download a document's bytes (to stdout by default).

With ``-o`` the bytes go to a temporary file beside FILE that replaces it only once they are
complete and match the SHA-256 the service announced: never a half-written FILE. A FILE that
is replaced keeps its permission bits (and, where allowed, its owner); a new one gets the
usual ``0666`` less the umask. FILE is never replaced when it is not a plain file:

- a device or a FIFO (``-o /dev/null``, ``-o /dev/stdout``, a named pipe) is written to as
  a stream, in place;
- a regular file with other hard links is written in place, once the complete bytes have
  been checked in a temporary file, so that every link sees them;
- a symbolic link or a directory is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import IO

import click
import httpx

from blobledger.cli._client import (
    ClientError,
    Connection,
    Progress,
    check,
    connection_options,
    document_path,
    open_client,
    unreachable,
)
from blobledger.client._core import announced_sha256


def copy(response: httpx.Response, out: IO[bytes], progress: Progress) -> str:
    digest = hashlib.sha256()
    for chunk in response.iter_bytes():
        digest.update(chunk)
        out.write(chunk)
        progress.add(len(chunk))
    return digest.hexdigest()


@click.command(epilog="\b\nExamples:\n  blobledger get 0f3c... -o report.pdf\n"
               "  blobledger get 0f3c... | less")
@click.argument("doc_id", metavar="ID")
@click.option("-o", "--output", type=click.Path(path_type=Path), metavar="FILE",
              help="write here (atomically) instead of stdout")
@connection_options
def command(doc_id: str, output: Path | None, url: str | None, token: str | None) -> int:
    """Write the bytes of document ID to stdout or to FILE."""
    return download(doc_id, output, Connection.resolve(url, token))


def download(doc_id: str, target: Path | None, connection: Connection) -> int:
    with open_client(connection) as client:
        try:
            with client.http.stream("GET", document_path(doc_id, "/content")) as response:
                check(response)
                expected = announced_sha256(response)
                length = response.headers.get("content-length", "")
                known = length.isascii() and length.isdigit() and len(length) <= 19
                progress = Progress(doc_id, int(length) if known else None)
                if target is not None:
                    write_atomically(target, response, progress)
                    return 0
                progress.enabled = False
                got = copy(response, sys.stdout.buffer, progress)
                sys.stdout.buffer.flush()
                if expected is not None and got != expected:
                    raise ClientError(f"the bytes of {doc_id} do not match their SHA-256")
        except httpx.HTTPError as exc:
            raise unreachable(connection.url, exc) from None
    return 0


def write_atomically(target: Path, response: httpx.Response, progress: Progress) -> str:
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
            return _write_stream(target, response, progress)
    expected = announced_sha256(response)
    temp, got = _download_to_temp(target, response, progress)
    try:
        if expected is not None and got != expected:
            raise ClientError(f"the downloaded bytes do not match their SHA-256; {target} "
                              "left unchanged")
        if info is not None and info.st_nlink > 1:
            _copy_in_place(temp, target)
            temp.unlink()
            return got
        _take_over_metadata(temp, info)
        os.replace(temp, target)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise ClientError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return got


def _download_to_temp(target: Path, response: httpx.Response,
                      progress: Progress) -> tuple[Path, str]:
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
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise ClientError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp, got


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


def _write_stream(target: Path, response: httpx.Response, progress: Progress) -> str:
    """Write into a device or a FIFO as it arrives (it cannot be replaced, nor undone)."""
    expected = announced_sha256(response)
    flags = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        with os.fdopen(os.open(target, flags), "wb") as out:
            got = copy(response, out, progress)
        progress.finish()
    except OSError as exc:
        raise ClientError(f"cannot write {target}: {exc.strerror or exc}") from None
    if expected is not None and got != expected:
        raise ClientError(f"the bytes written to {target} do not match their SHA-256")
    return got
