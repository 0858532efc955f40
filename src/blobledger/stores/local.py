"""The local-disk backend (``file:///path``): the embedded default.

Layout under the root folder::

    blobs/<blob name>                 committed blobs (write-once)
    uploads/<quoted name>.<id>.part   bytes being written, never visible under blobs/
                                      (a staged upload's parts too: ``<number>-<token>``)

Publishing is temp file + fsync + ``os.link`` (never rename, never check-then-write): the
link fails with EEXIST if the name is taken, so exactly one of many racing creators wins.
Tags and checksums live in extended attributes set on the temp file *before* the link, so
they appear atomically with the name. Tag changes and conditional deletes hold ``flock`` on
the blob and re-check the inode under the lock. Every path is built by :meth:`_path`, which
accepts only names that passed ``check_blob_name``: traversal is impossible by construction.

Blocking work runs in worker threads through :func:`_in_thread` only, which never lets a
thread outlive the coroutine that started it: a cancelled caller (a client gone, a deadline)
still waits for the thread's call to return before it unwinds. So a descriptor is closed,
and its number reused by another upload, only after the last thread writing to it is done;
without this a write stalled in a slow disk lands in whatever file next gets that number.

Deletes are conditioned on the tags or the ETag (inode and modification time), checked
under the blob's ``flock``. Between a conditional call's read of its condition and its act
(the retag's write, the delete's unlink) lie the failpoints ``store.set_tags.after_read``
and ``delete.after_check``: a worker thread passes them on the caller's loop, holding the
``flock``, so a test can slow one call there and let another race it.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import contextvars
import errno
import fcntl
import json
import os
import uuid
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
    Sequence,
)
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeVar
from urllib.parse import quote, unquote

from blobledger import failpoints
from blobledger._base.names import check_blob_name
from blobledger.errors import (
    BlobAlreadyExists,
    BlobNotFound,
    ConditionNotMet,
    ConfigError,
    Digests,
    StoreMissing,
    StoreUnavailable,
)
from blobledger.stores.base import (
    BlobInfo,
    BlobReader,
    ByteReader,
    Condition,
    Hasher,
    Store,
    Tags,
    UncommittedInfo,
    tags_match,
    verify,
)

TAGS_XATTR = "user.blobledger.tags"
META_XATTR = "user.blobledger.meta"
WRITE_CHUNK = 1024 * 1024
READ_CHUNK = 256 * 1024
LIST_BATCH = 256
T = TypeVar("T")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_json_xattr(target: int | str | Path, key: str) -> dict[str, str]:
    try:
        raw = os.getxattr(target, key)
    except OSError as exc:
        if exc.errno == errno.ENODATA:
            return {}
        raise
    value = json.loads(raw)
    return {str(k): str(v) for k, v in value.items()}


def _mtime(st: os.stat_result) -> datetime:
    return datetime.fromtimestamp(st.st_mtime, UTC)


def _etag(st: os.stat_result) -> str:
    """The inode and the modification time: another file under the name has another ETag
    (tag changes touch only the ctime, as on Azure, where they leave the ETag alone)."""
    return f'"{st.st_ino:x}-{st.st_mtime_ns:x}"'


class LocalStore(Store):
    """Blobs as files under one root folder."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        """``create``: make the folders if missing (False: a store that does not exist yet
        is a ConfigError naming it, and nothing is made)."""
        self.root = Path(root).expanduser().absolute()
        self.url = f"file://{self.root}"
        self._blobs = self.root / "blobs"
        self._uploads = self.root / "uploads"
        if not create and not self._blobs.is_dir():
            missing = self._blobs if self.root.is_dir() else self.root
            raise StoreMissing(f"store {self.url} does not exist (no folder {missing}); set "
                               "BLOBLEDGER_STORE_URL to the store in use")
        try:
            self._blobs.mkdir(parents=True, exist_ok=True)
            self._uploads.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"store folder {self.root} is not usable: {exc.strerror}") from exc

    # -- paths: the only place a blob name becomes a path ---------------------------------
    def _path(self, name: str) -> Path:
        check_blob_name(name)
        path = self._blobs / name
        if not path.is_relative_to(self._blobs):  # unreachable after check_blob_name
            raise ConfigError(f"blob path escapes the store: {name!r}")
        return path

    def _upload_path(self, name: str) -> Path:
        check_blob_name(name)
        return self._uploads / f"{quote(name, safe='')}.{uuid.uuid4().hex}.part"

    # -- put ------------------------------------------------------------------------------
    async def put(
        self,
        name: str,
        data: AsyncIterable[bytes],
        *,
        tags: Tags,
        content_type: str | None = None,
        expected_sha256: str | None = None,
        expected_md5: str | None = None,
    ) -> Digests:
        final = self._path(name)
        temp = self._upload_path(name)
        hasher = Hasher()
        fd = await _io(os.open, temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640,
                       abandon=lambda opened: self._cleanup(opened, temp))
        try:
            reader = ByteReader(data)
            while chunk := await reader.read(WRITE_CHUNK):
                await _io(self._write, fd, hasher, chunk)
            digests = hasher.digests()
            verify(digests, expected_sha256, expected_md5)
            meta = {"sha256": digests.sha256, "md5": digests.md5, "size": str(digests.size)}
            if content_type:
                meta["content_type"] = content_type
            await failpoints.hit("put.before_commit")
            try:
                await _io(self._publish, fd, temp, final, dict(tags), meta)
            except FileExistsError as exc:
                raise BlobAlreadyExists(name, digests) from exc
            await failpoints.hit("put.after_commit")
            return digests
        finally:
            # Every thread that used fd has returned (see _in_thread): closing it is safe.
            await _in_thread(self._cleanup, fd, temp)

    @staticmethod
    def _write(fd: int, hasher: Hasher, chunk: bytes) -> None:
        hasher.update_sync(chunk)
        view = memoryview(chunk)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def _publish(
        self, fd: int, temp: Path, final: Path, tags: dict[str, str], meta: dict[str, str]
    ) -> None:
        os.setxattr(fd, TAGS_XATTR, json.dumps(tags).encode())
        os.setxattr(fd, META_XATTR, json.dumps(meta).encode())
        os.fsync(fd)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.link(temp, final)  # atomic, create-only: EEXIST if the name is taken
        _fsync_dir(final.parent)

    @staticmethod
    def _cleanup(fd: int, temp: Path) -> None:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)

    # -- metadata -------------------------------------------------------------------------
    async def stat(self, name: str) -> BlobInfo:
        path = self._path(name)
        return await _in_thread(self._stat, name, path)

    def _stat(self, name: str, path: Path, fd: int | None = None) -> BlobInfo:
        target: int | Path = path if fd is None else fd
        try:
            st = os.stat(target)
            meta = _read_json_xattr(target, META_XATTR)
            tags = _read_json_xattr(target, TAGS_XATTR)
        except FileNotFoundError as exc:
            raise BlobNotFound(name) from exc
        except NotADirectoryError as exc:
            raise BlobNotFound(name) from exc
        if not os.path.isfile(path) and fd is None:
            raise BlobNotFound(name)
        return BlobInfo(
            name=name,
            size=st.st_size,
            last_modified=_mtime(st),
            etag=_etag(st),
            content_type=meta.get("content_type"),
            sha256=meta.get("sha256"),
            md5=meta.get("md5"),
            tags=tags,
        )

    async def get_tags(self, name: str) -> dict[str, str]:
        info = await self.stat(name)
        return dict(info.tags or {})

    def _locked(self, name: str) -> int:
        """Open the blob and hold an exclusive flock on it, checking the name still links it."""
        path = self._path(name)
        while True:
            try:
                fd = os.open(path, os.O_RDONLY)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
                raise BlobNotFound(name) from exc
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                os.close(fd)
                raise BlobNotFound(name) from None
            if same:
                return fd
            os.close(fd)  # replaced between open and lock: cannot happen (write-once), retry

    async def set_tags(self, name: str, tags: Tags, *, if_tags: Tags | None = None) -> None:
        await _in_thread(self._set_tags, name, dict(tags), if_tags, _armed_loop())

    def _set_tags(self, name: str, tags: dict[str, str], if_tags: Tags | None,
                  loop: asyncio.AbstractEventLoop | None) -> None:
        fd = self._locked(name)
        try:
            if not tags_match(_read_json_xattr(fd, TAGS_XATTR), if_tags):
                raise ConditionNotMet(name, _describe(if_tags, None))
            if loop is not None:
                _pass(loop, failpoints.hit("store.set_tags.after_read"))
            os.setxattr(fd, TAGS_XATTR, json.dumps(tags).encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    async def _delete(self, name: str, condition: Condition) -> bool:
        return await _in_thread(self._delete_sync, name, condition, _armed_loop())

    def _delete_sync(self, name: str, condition: Condition,
                     loop: asyncio.AbstractEventLoop | None) -> bool:
        path = self._path(name)
        try:
            fd = self._locked(name)
        except BlobNotFound:
            return False
        try:
            if condition.tags:
                holds = tags_match(_read_json_xattr(fd, TAGS_XATTR), condition.tags)
            else:
                holds = _etag(os.fstat(fd)).strip('"') == (condition.etag or "").strip('"')
            if not holds:
                raise ConditionNotMet(name, _describe(condition.tags, condition.etag))
            if loop is not None:
                _pass(loop, failpoints.hit("delete.after_check"))
            os.unlink(path)
            _fsync_dir(path.parent)
            return True
        finally:
            os.close(fd)

    # -- reads ----------------------------------------------------------------------------
    async def open(self, name: str, start: int = 0, length: int | None = None) -> BlobReader:
        path = self._path(name)
        try:
            fd = await _in_thread(os.open, path, os.O_RDONLY, abandon=os.close)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
            raise BlobNotFound(name) from exc
        try:
            info = await _in_thread(self._stat, name, path, fd)
        except BaseException:
            os.close(fd)
            raise
        start = max(0, min(start, info.size))
        available = info.size - start
        length = available if length is None else max(0, min(length, available))
        return BlobReader(info, start, length, self._chunks(fd, start, length))

    @staticmethod
    async def _chunks(fd: int, start: int, length: int) -> AsyncIterator[bytes]:
        try:
            offset, remaining = start, length
            while remaining > 0:
                chunk = await _in_thread(os.pread, fd, min(READ_CHUNK, remaining), offset)
                if not chunk:
                    break
                offset += len(chunk)
                remaining -= len(chunk)
                yield chunk
        finally:
            os.close(fd)

    # -- listing --------------------------------------------------------------------------
    def _walk(self, folder: Path, prefix_path: str) -> Iterator[tuple[str, Path]]:
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return
        # Sorting a folder's entries with "/" appended to sub-folders yields the global
        # lexical order of full names: every name under "a/" sorts between "a." and "a0".
        keyed = sorted(
            ((e.name + "/" if e.is_dir(follow_symlinks=False) else e.name), e) for e in entries
        )
        for key, entry in keyed:
            full = prefix_path + entry.name
            if key.endswith("/"):
                yield from self._walk(Path(entry.path), full + "/")
            elif entry.is_file(follow_symlinks=False):
                yield full, Path(entry.path)

    def _list_sync(self, prefix: str) -> Iterator[tuple[str, Path]]:
        # Start from the deepest folder the prefix names completely.
        folder_part = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        base = self._blobs / folder_part if folder_part else self._blobs
        if folder_part and not base.resolve().is_relative_to(self._blobs.resolve()):
            return
        for full, path in self._walk(base, folder_part):
            if full.startswith(prefix):
                yield full, path

    async def list(
        self, prefix: str = "", *, tags: bool = True, checksums: bool = True
    ) -> AsyncIterator[BlobInfo]:
        iterator = self._list_sync(prefix)

        def next_batch() -> builtins.list[BlobInfo]:
            batch: builtins.list[BlobInfo] = []
            for full, path in iterator:
                try:
                    batch.append(self._stat(full, path))
                except BlobNotFound:
                    continue
                if len(batch) >= LIST_BATCH:
                    break
            return batch

        while batch := await _in_thread(next_batch):
            for info in batch:
                yield info if tags else BlobInfo(**{**info.__dict__, "tags": None})

    async def list_uncommitted(self, prefix: str = "") -> AsyncIterator[UncommittedInfo]:
        """The part files under ``uploads/``, one entry per name. A name whose parts were all
        removed between the listing and their ``stat`` (a sweep, a tus termination) is
        skipped."""
        grouped = await _in_thread(self._part_files, prefix)
        for name in sorted(grouped):
            await failpoints.hit("scan.uncommitted")
            info = await _in_thread(self._uncommitted_sync, name, grouped[name])
            if info is not None:
                yield info

    def _part_files(self, prefix: str) -> dict[str, builtins.list[str]]:
        grouped: dict[str, builtins.list[str]] = {}
        for entry in os.scandir(self._uploads):
            name = unquote(entry.name.rsplit(".", 2)[0])
            if name.startswith(prefix):
                grouped.setdefault(name, []).append(entry.path)
        return grouped

    def _uncommitted_sync(self, name: str, paths: builtins.list[str]) -> UncommittedInfo | None:
        stats = []
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                stats.append(os.stat(path))
        if not stats:
            return None
        return UncommittedInfo(
            name=name,
            blocks=len(stats),
            size=sum(s.st_size for s in stats),
            committed=(self._blobs / name).is_file(),
            last_modified=max(_mtime(s) for s in stats),
        )

    async def discard_uncommitted(self, name: str) -> bool:
        """Unlink the name's temp files under ``uploads/``; never a path under ``blobs/``."""
        check_blob_name(name)
        quoted = quote(name, safe="") + "."

        def discard() -> bool:
            removed = False
            for entry in os.scandir(self._uploads):
                if entry.name.startswith(quoted) and entry.name.endswith(".part"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                        removed = True
            return removed

        return await _in_thread(discard)

    # -- staged uploads: one fsynced file per part, concatenated by a create-only put --------
    async def begin_staged(self, name: str, *, tags: Tags,
                           content_type: str | None = None) -> str:
        check_blob_name(name)
        return ""

    async def stage(self, name: str, handle: str, number: int, data: bytes) -> str:
        check_blob_name(name)
        part = f"{number:06d}-{uuid.uuid4().hex[:16]}"
        path = self._part_path(name, part)

        def write() -> None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            _fsync_dir(self._uploads)

        await _in_thread(write)
        return part

    def _part_path(self, name: str, part: str) -> Path:
        if not part or not all(c.isalnum() or c == "-" for c in part):
            raise ValueError(f"not a part id: {part!r}")
        return self._uploads / f"{quote(name, safe='')}.{part}.part"

    async def commit_staged(
        self, name: str, handle: str, parts: Sequence[str], *,
        tags: Tags, content_type: str | None = None,
    ) -> Digests:
        """The parts, read back in order and hashed, published by the create-only put (a
        temp file linked under the name); then the parts are removed. A publication that
        failed (a full disk, EFBIG) keeps every part, so that a retried completion can
        publish them; the parts of an abandoned upload go with its termination or its
        sweep (``abort_staged``)."""
        paths = [self._part_path(name, part) for part in parts]

        async def chunks() -> AsyncIterator[bytes]:
            for path in paths:
                f: BinaryIO = await _in_thread(open, path, "rb")
                try:
                    while chunk := await _in_thread(f.read, WRITE_CHUNK):
                        yield chunk
                finally:
                    await _in_thread(f.close)

        await failpoints.hit("staged.before_commit")
        try:
            digests = await self.put(name, chunks(), tags=tags, content_type=content_type)
        except FileNotFoundError as exc:
            raise BlobNotFound(f"{name} (a part is missing)") from exc
        except BlobAlreadyExists:
            await self.discard_uncommitted(name)  # published already: the parts are spare
            raise
        await self.discard_uncommitted(name)
        return digests

    async def abort_staged(self, name: str, handle: str) -> None:
        await self.discard_uncommitted(name)

    async def ping(self) -> None:
        ok = await _in_thread(os.access, self._blobs, os.W_OK | os.X_OK)
        if not ok:
            raise StoreUnavailable(f"store folder {self._blobs} is not writable")


def _armed_loop() -> asyncio.AbstractEventLoop | None:
    """The running loop, for a worker thread to pass failpoints on, while any failpoint or
    hook is armed; None (nothing to pass) otherwise."""
    return asyncio.get_running_loop() if failpoints.armed() else None


def _pass(loop: asyncio.AbstractEventLoop, point: Coroutine[Any, Any, None]) -> None:
    """Pass a failpoint from a worker thread: run it on ``loop`` and wait for it (a hook that
    holds it holds the thread, and the blob's ``flock`` with it; ``raise`` raises here).

    It runs in a context of its own, not the calling task's: a hook that stops whichever
    operation its task's context names at every step (tests/explore) must not stop one
    inside the lock, where another operation it then steps would wait for the lock and reach
    no step of its own. A hook that holds by the point's name (a test) holds it all the
    same."""
    contextvars.Context().run(asyncio.run_coroutine_threadsafe, point, loop).result()


async def _in_thread(
    func: Callable[..., T], *args: Any, abandon: Callable[[T], object] | None = None
) -> T:
    """Run ``func(*args)`` in a worker thread; return only once the call has returned.

    A thread cannot be stopped. When the caller is cancelled meanwhile, the call goes on
    (shielded) and this waits for it before re-raising the cancellation, so nothing the
    call uses (a descriptor above all) is released while it still runs. ``abandon`` gets
    a result that the cancelled caller will never see, e.g. a descriptor to close.
    """
    call = asyncio.ensure_future(asyncio.to_thread(func, *args))
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        await _settle(call)
        failed = call.cancelled() or call.exception() is not None  # retrieves the error
        if abandon is not None and not failed:
            abandon(call.result())
        raise


async def _settle(call: asyncio.Future[Any]) -> None:
    """Wait until ``call`` is done, through any number of further cancellations (the
    caller re-raises its own cancellation afterwards)."""
    while not call.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((call,))


async def _io(
    func: Callable[..., T], *args: Any, abandon: Callable[[T], object] | None = None
) -> T:
    """:func:`_in_thread` for file work whose OS errors (not EEXIST) mean unavailable."""
    try:
        return await _in_thread(func, *args, abandon=abandon)
    except FileExistsError:
        raise
    except OSError as exc:
        raise StoreUnavailable(f"local store I/O failed: {exc.strerror or exc}") from exc


def _describe(tags: Tags | None, etag: str | None) -> str:
    if tags:
        return " and ".join(f"{k}={v}" for k, v in tags.items())
    return f"etag={etag}" if etag else ""
