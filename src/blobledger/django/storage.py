"""``LedgerStorage``: a Django storage whose files are the ledger's, in Django's database.

    STORAGES = {"default": {"BACKEND": "blobledger.django.LedgerStorage"}}

Two kinds of file, as Django has two kinds of save:

- a ``FileField``'s (and ``ImageField``'s) save **stages** the bytes (A1-A3: a pending row
  first, a create-only upload hashed while streaming, tagged committed) under a new blob
  name ``<blob prefix>/<upload_to folder>/<uuid>.<ext>``, which the field stores; the row's
  own transaction attaches it (A4, :mod:`blobledger.django.signals`). Until then it belongs
  to nobody, and the sweeper removes it once ``BLOBLEDGER_SWEEP_AFTER`` has passed. On
  SQLite, inside a transaction, it stages on Django's connection instead
  (:mod:`blobledger.django.staging`);
- a standalone ``storage.save(name, content)`` (exports, caches: no model behind it) makes a
  **document** under that name, durable at once (create-only; the name as given when free,
  else Django's ``get_available_name``). Opened for writing, a document is created or
  replaced when the file is closed.

Reads, sizes and times come from the ledger's rows; ``delete`` of a document sends it to the
deletion path; ``delete`` of an attachment does nothing (an attachment is released by its
owner's transaction: clearing the field, replacing the file or deleting the row).
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import mimetypes
import posixpath
import re
import threading
import weakref
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from tempfile import SpooledTemporaryFile
from typing import IO, Any, cast

from django.conf import settings as django_settings
from django.core.exceptions import SuspiciousFileOperation
from django.core.files import File
from django.core.files.storage import Storage
from django.utils import timezone
from django.utils.deconstruct import deconstructible

from blobledger.blocking import BlockingLedger
from blobledger.config import Settings, read_url_lifetime, url_expiry_problem
from blobledger.django.conf import blocking_ledger, ledger_settings
from blobledger.django.links import file_url, public_url
from blobledger.django.staging import (
    in_transaction,
    refuse_in_transaction,
    stage_in_transaction,
)
from blobledger.errors import ConfigError, InvalidName, NameTaken, NotFound
from blobledger.protocol.attachments import StagedBlob
from blobledger.protocol.documents import Document

#: what a file read spools in memory before it goes to a temporary file
SPOOL_BYTES = 8 * 1024 * 1024
_SEGMENT = re.compile(r"[^A-Za-z0-9._-]+")
_GENERATED = re.compile(r"^[0-9a-f]{32}(\.[a-z0-9]{1,16})?$")
#: the staged blobs of this process, by name (held strongly by the model instance that
#: staged them): readable before the row's transaction commits
_staged: weakref.WeakValueDictionary[str, StagedBlob] = weakref.WeakValueDictionary()
_storages: weakref.WeakSet[LedgerStorage] = weakref.WeakSet()
#: the Django database of the file being read (a field's file: its row's)
_using: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "blobledger_using", default=None)


@contextlib.contextmanager
def using(alias: str | None) -> Iterator[None]:
    """Every storage call inside reads the ledger of the Django database ``alias`` (a
    model's files live in its row's database; a storage's own is its ``database``)."""
    token = _using.set(alias)
    try:
        yield
    finally:
        _using.reset(token)


def folder_of(name: str) -> str:
    """The blob-name folder for a Django file name's directory: each segment made of the
    characters a blob name allows (others become ``-``)."""
    parts = []
    for segment in posixpath.dirname(name).split("/"):
        cleaned = _SEGMENT.sub("-", segment).strip("-.")
        if cleaned:
            parts.append(cleaned[:64])
    return "/".join(parts)


@deconstructible(path="blobledger.django.LedgerStorage")
class LedgerStorage(Storage):
    """Files kept by the ledger. ``database`` is the Django alias of standalone saves (a
    field's save uses its row's database); every other option is a blobledger setting
    (``store_url``, ``sweep_after``, ...) over ``settings.BLOBLEDGER`` and ``BLOBLEDGER_*``.
    ``url_expiry`` is the lifetime, in seconds, of the URLs :meth:`url` signs: by default
    the service's (``BLOBLEDGER_READ_URL_EXPIRY``, else the delete grace less the clock
    skew); held to the same rule (:func:`blobledger.config.url_expiry_problem`).

    ``public`` (static files, public downloads): :meth:`url` gives a URL by name that does
    not expire and opens the name's current bytes: ``base_url`` (a CDN, a custom domain)
    followed by the name, else the app's public view (``files/public/<storage>/<name>``),
    which serves only a public storage's files, with ``Cache-Control: public`` for
    ``max_age`` seconds (see docs/django.md for what a cache then keeps)."""

    def __init__(self, database: str = "default", url_expiry: float | None = None, *,
                 public: bool = False, base_url: str | None = None, max_age: int = 300,
                 **options: Any) -> None:
        self.database = database
        self._url_expiry = None if url_expiry is None else float(url_expiry)
        if base_url is not None and not public:
            raise ConfigError("LedgerStorage's base_url gives unsigned URLs: set public=True "
                              "too (every file of the storage is then readable by name)")
        self.public = bool(public)
        self.base_url = None if base_url is None else base_url.rstrip("/") + "/"
        self.max_age = int(max_age)
        self.options: Mapping[str, Any] = options
        self._settings: dict[str, Settings] = {}
        self._lock = threading.Lock()
        _storages.add(self)

    # -- the ledger ------------------------------------------------------------------------
    def settings_for(self, alias: str | None = None) -> Settings:
        """blobledger's settings for a Django database (cached until settings change)."""
        alias = alias or _using.get() or self.database
        with self._lock:
            found = self._settings.get(alias)
            if found is None:
                found = self._settings[alias] = ledger_settings(alias, self.options)
            return found

    def url_lifetime(self, alias: str | None = None) -> int:
        """Seconds the URLs :meth:`url` signs stay valid; ConfigError if ``url_expiry`` could
        let one outlive its blob (the service's rule, with the storage's option named)."""
        settings = self.settings_for(alias)
        if self._url_expiry is None:
            return int(read_url_lifetime(settings))
        problem = url_expiry_problem(self._url_expiry, settings.delete_grace,
                                     setting="LedgerStorage's url_expiry")
        if problem is not None:
            raise ConfigError(problem)
        return int(self._url_expiry)

    def alias(self) -> str:
        """The Django database of the calls in progress (a field's: its row's)."""
        return _using.get() or self.database

    def ledger(self, alias: str | None = None) -> BlockingLedger:
        """The process's connected ledger on a Django database."""
        return blocking_ledger(self.settings_for(alias))

    def forget_settings(self) -> None:
        with self._lock:
            self._settings.clear()

    # -- a field's save: A1-A3 -------------------------------------------------------------
    def stage(self, name: str, content: Any, *, alias: str | None = None,
              filename: str | None = None, max_length: int | None = None) -> StagedBlob:
        """Stage ``content`` (A1-A3) for a file field whose generated name is ``name``; the
        row's transaction attaches it. ``filename`` is the uploaded file's own name."""
        settings = self.settings_for(alias)
        folder = folder_of(name)
        base = posixpath.basename(filename or name) or "file"
        extension = posixpath.splitext(base)[1][:17]
        longest = len(settings.blob_prefix) + len(folder) + 34 + len(extension)
        if max_length is not None and longest > max_length:
            raise SuspiciousFileOperation(
                f"the blob name for {name!r} needs {longest} characters; the field allows "
                f"{max_length}: raise its max_length")
        content_type = getattr(content, "content_type", None) \
            or mimetypes.guess_type(base)[0]
        alias = alias or _using.get() or self.database
        if in_transaction(alias):  # SQLite: its one writer is Django's transaction
            staged = stage_in_transaction(
                self.ledger(alias), alias, _as_data(content), content_type=content_type,
                filename=_filename(base), folder=folder or None)
        else:
            staged = self.ledger(alias).stage(
                _as_data(content), content_type=content_type, filename=_filename(base),
                folder=folder or None)
        _staged[staged.name] = staged
        return staged

    # -- a standalone save: a document -----------------------------------------------------
    def _save(self, name: str, content: Any) -> str:
        ledger = self.ledger()
        content_type = getattr(content, "content_type", None) \
            or mimetypes.guess_type(name)[0]
        for _ in range(8):
            refuse_in_transaction(self.alias(), f"storage.save({name!r})")
            try:
                return ledger.create(name, _as_data(content), content_type=content_type).name
            except NameTaken:  # taken between get_available_name and now: another one
                name = self.get_available_name(name)
        raise SuspiciousFileOperation(f"no free name like {name!r} after 8 attempts")

    def _open(self, name: str, mode: str = "rb") -> File[Any]:
        if any(flag in mode for flag in "wax+"):
            if self._attachment(name) is not None:
                raise PermissionError(f"{name}: an attachment is never written again")
            return _WritableFile(self, name, mode)
        spool: IO[bytes] = SpooledTemporaryFile(max_size=SPOOL_BYTES, mode="w+b")  # noqa: SIM115
        for chunk in self._chunks(name):
            spool.write(chunk)
        spool.seek(0)
        handle: Any = spool if "b" in mode else io.TextIOWrapper(
            spool, encoding="utf-8", newline=None)
        return _ReadFile(self, handle, name, mode)

    def write_document(self, name: str, data: bytes, content_type: str | None = None) -> None:
        """Create the document ``name`` with ``data``, or replace its bytes if it exists."""
        ledger = self.ledger()
        doc = self._document(name)
        content_type = content_type or mimetypes.guess_type(name)[0]
        refuse_in_transaction(self.alias(), f"writing {name!r}")
        if doc is None:
            ledger.create(name, data, content_type=content_type)
        else:
            ledger.run(ledger.ledger.replace(doc.id, data, expected_version=doc.version,
                                             content_type=content_type))

    # -- what a name is --------------------------------------------------------------------
    def _attachment(self, name: str) -> tuple[str, int, datetime | None] | None:
        """(name, size, attached at) of a staged (this process) or attached blob."""
        if not _GENERATED.match(posixpath.basename(name)):
            return None
        staged = _staged.get(name)
        if staged is not None:
            return staged.name, staged.size, None
        ledger = self.ledger()
        row = ledger.run(ledger.ledger.transitions.attachment(name))
        if row is None or row.size is None:
            return None
        return row.name, int(row.size), row.changed_at

    def _document(self, name: str) -> Document | None:
        ledger = self.ledger()
        try:
            found = ledger.run(ledger.ledger.page(prefix=name, limit=1))
        except InvalidName:
            return None
        return found[0] if found and found[0].name == name else None

    def _chunks(self, name: str) -> Iterator[bytes]:
        ledger = self.ledger()
        staged = _staged.get(name)
        if staged is not None:
            reader = ledger.run(ledger.ledger.store.open(staged.name))
            return ledger.stream(reader.chunks)
        if self._attachment(name) is not None:
            return ledger.read_attachment(name)
        doc = self._document(name)
        if doc is None:
            raise FileNotFoundError(f"no file {name!r}")
        return ledger.stream(ledger.ledger.read(doc.id))

    # -- the Storage API -------------------------------------------------------------------
    def exists(self, name: str) -> bool:
        """A file (attachment or document) by that name, or, as on a file system, a folder
        holding documents (``""`` too: what ``collectstatic --clear`` asks first)."""
        if name.strip("/") and (self._attachment(name) is not None
                                or self._document(name) is not None):
            return True
        return self._folder(name)

    def _folder(self, name: str) -> bool:
        prefix = name.strip("/") + "/" if name.strip("/") else ""
        ledger = self.ledger()
        try:
            found = ledger.run(ledger.ledger.page(prefix=prefix, limit=1))
        except InvalidName:
            return False
        return bool(found) and found[0].name.startswith(prefix)

    def delete(self, name: str) -> None:
        if not name or self._attachment(name) is not None:
            return  # released by its owner's transaction, never here
        doc = self._document(name)
        if doc is not None:
            refuse_in_transaction(self.alias(), f"storage.delete({name!r})")
            ledger = self.ledger()
            with contextlib.suppress(NotFound):
                ledger.run(ledger.ledger.delete(doc.id))

    def size(self, name: str) -> int:
        found = self._attachment(name)
        if found is not None:
            return found[1]
        doc = self._document(name)
        if doc is None or doc.size is None:
            raise FileNotFoundError(f"no file {name!r}")
        return int(doc.size)

    def listdir(self, path: str) -> tuple[list[str], list[str]]:
        """The folders and documents directly under ``path`` (attachments are listed by
        their owners' rows, not here)."""
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        ledger = self.ledger()
        names: list[str] = ledger.run(_names(ledger, prefix))
        dirs: set[str] = set()
        files: list[str] = []
        for full in names:
            rest = full[len(prefix):]
            head, slash, _ = rest.partition("/")
            if slash:
                dirs.add(head)
            else:
                files.append(rest)
        return sorted(dirs), files

    def get_modified_time(self, name: str) -> datetime:
        return self._time(name, created=False)

    def get_created_time(self, name: str) -> datetime:
        return self._time(name, created=True)

    def _time(self, name: str, *, created: bool) -> datetime:
        found = self._attachment(name)
        value: datetime | None
        if found is not None:
            value = found[2] or datetime.now(UTC).replace(tzinfo=None)
        else:
            doc = self._document(name)
            if doc is None:
                raise FileNotFoundError(f"no file {name!r}")
            value = doc.created_at if created else doc.updated_at
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value
        if django_settings.USE_TZ:
            return aware
        return timezone.make_naive(aware)

    def url(self, name: str | None) -> str:
        if not name:
            raise ValueError("this file has no name")
        if self.public:
            return public_url(self, name)
        return file_url(self, name)


async def _names(ledger: BlockingLedger, prefix: str) -> list[str]:
    return [doc.name async for doc in ledger.ledger.list(prefix)]


def _filename(base: str) -> str | None:
    """The uploaded file's name as the row records it (None if the ledger would refuse
    it: the blob's name does not depend on it)."""
    from blobledger._base.names import check_document_name

    try:
        return check_document_name(base)
    except InvalidName:
        return None


def _as_data(content: Any) -> IO[bytes]:
    """A Django file as the ledger reads it (a binary file object from its start)."""
    return cast(IO[bytes], _Reader(content))


class _Reader:
    """A Django file as the byte stream the ledger reads (text files encoded as UTF-8),
    from its start."""

    def __init__(self, content: Any) -> None:
        self.content = content
        seek = getattr(content, "seek", None)
        if callable(seek):
            with contextlib.suppress(OSError, ValueError):
                seek(0)

    def read(self, size: int = -1) -> bytes:
        chunk = self.content.read(size)
        return chunk.encode() if isinstance(chunk, str) else bytes(chunk or b"")


class _ReadFile(File):  # type: ignore[type-arg]
    """A file read from the ledger; closed, ``open()`` reads it again."""

    def __init__(self, storage: LedgerStorage, handle: Any, name: str, mode: str) -> None:
        super().__init__(handle, name=name)
        self._storage = storage
        self.mode = mode

    def open(self, mode: str | None = None, *args: Any, **kwargs: Any) -> _ReadFile:
        if not self.closed:
            self.seek(0)
        else:
            self.file = self._storage._open(str(self.name), mode or self.mode).file
        return self


class _WritableFile(File):  # type: ignore[type-arg]
    """A document opened for writing: its bytes go to the ledger when it is closed."""

    def __init__(self, storage: LedgerStorage, name: str, mode: str) -> None:
        spool: IO[bytes] = SpooledTemporaryFile(max_size=SPOOL_BYTES, mode="w+b")  # noqa: SIM115
        if "a" in mode and storage.exists(name):
            for chunk in storage._chunks(name):
                spool.write(chunk)
        self._storage = storage
        self._binary = "b" in mode
        self._spool = spool
        self._done = False
        handle: Any = spool if self._binary else io.TextIOWrapper(
            spool, encoding="utf-8", write_through=True)
        super().__init__(handle, name=name)
        self.mode = mode

    def close(self) -> None:
        if not self._done:
            self._done = True
            if not self._binary and self.file is not None:
                self.file.flush()
            self._spool.seek(0)
            self._storage.write_document(str(self.name), self._spool.read())
        if self.file is not None:
            self.file.close()


def forget_all_settings() -> None:
    """Every storage re-reads its settings on next use (Django's settings changed)."""
    for storage in list(_storages):
        storage.forget_settings()
