"""A4 and the detach in the row's own transaction, on Django's connection.

For every model with a ``FileField`` (or ``ImageField``) on a :class:`LedgerStorage`,
:func:`hook` arranges, when the app is ready:

- the field's files stage their bytes (A1-A3) when Django saves them (``pre_save``, or
  ``instance.pdf.save(...)``), and ``instance.pdf.delete()`` only clears the field (on
  SQLite inside a transaction, A1 on Django's connection and A3 after the commit:
  :mod:`blobledger.django.staging`);
- the model's ``save_base`` runs inside ``atomic(savepoint=False)`` (as Django does for a
  model with parents), so that the row's INSERT or UPDATE and the ``post_save`` receiver
  below share one transaction even in autocommit mode;
- ``post_save``: for each changed field, A4 for the blob it now holds and the detach
  (``attached -> deleting``) of the one it held before, on the save's connection, after the
  row's write (which locks the row); a field written back unchanged is checked against the
  column's attached blob, and a stale instance's save (another save changed the file since
  it was loaded) is refused;
- ``post_delete`` (sent for ``Model.delete``, cascades and ``QuerySet.delete``: a receiver
  turns Django's fast delete off for the model): the owner's blobs go ``attached ->
  deleting``, inside the delete's transaction.

On SQLite the detached names are stamped ``deleting`` again just before the commit, so
their grace counts from it (:mod:`blobledger.django.grace`; PostgreSQL's trigger does it
there).

A rolled-back ``atomic()`` (or savepoint) rolls the attach and the detach back with the row;
the staged bytes stay ``pending`` for the sweeper. ``QuerySet.update``, ``bulk_create``,
``bulk_update``, raw SQL and ``loaddata`` (raw saves) send no signal: they attach and detach
nothing (``blobledger_check`` reports attached blobs their owner no longer holds).
"""

from __future__ import annotations

import contextvars
import functools
import posixpath
from collections.abc import Callable
from typing import Any

from django.db import connections, models, router, transaction
from django.db.models.fields.files import FieldFile, FileField
from django.db.models.signals import post_delete, post_init, post_save

from blobledger.django.conf import failpoint
from blobledger.django.grace import note_detached
from blobledger.django.sql import DjangoConnection
from blobledger.django.staging import tag_after_commit
from blobledger.django.storage import LedgerStorage, using
from blobledger.errors import InvalidInput
from blobledger.protocol.attachments import StagedBlob
from blobledger.protocol.grace import attached_names
from blobledger.protocol.owners import Owner, owner_key
from blobledger.protocol.transitions.attachments import (
    column_blobs,
    detach_owner,
    sync_owner_column,
)
from blobledger.protocol.transitions.statements import ATTACHED

#: instance attributes: the blobs its fields staged, the names its fields held when loaded
STAGED = "_blobledger_staged"
LOADED = "_blobledger_loaded"
_saving: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "blobledger_saving", default=None)
_fields: dict[type[models.Model], list[FileField]] = {}
_file_classes: dict[type[FieldFile], type[FieldFile]] = {}


def ledger_fields(model: type[models.Model]) -> list[FileField]:
    """The model's file fields whose storage is a :class:`LedgerStorage` (cached)."""
    found = _fields.get(model)
    if found is None:
        found = [field for field in model._meta.concrete_fields
                 if isinstance(field, FileField) and isinstance(field.storage, LedgerStorage)]
        _fields[model] = found
    return found


def _name(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return str(getattr(value, "name", "") or "")


class LedgerFieldFile(FieldFile):
    """A field's file on the ledger: saving stages, deleting clears the field."""

    def save(self, name: str, content: Any, save: bool = True) -> None:
        storage = self.storage
        assert isinstance(storage, LedgerStorage)
        original = name
        name = self.field.generate_filename(self.instance, name)
        alias = _saving.get() or router.db_for_write(type(self.instance),
                                                     instance=self.instance)
        staged = storage.stage(name, content, alias=alias,
                               filename=posixpath.basename(original or ""),
                               max_length=self.field.max_length)
        self.instance.__dict__.setdefault(STAGED, {})[self.field.attname] = staged
        self.name = staged.name
        self._set_instance_attribute(self.name, content)  # type: ignore[attr-defined]
        self._committed = True
        if save:
            self.instance.save()

    def _alias(self) -> str:
        return self.instance._state.db or router.db_for_read(type(self.instance),
                                                             instance=self.instance)

    def _get_file(self) -> Any:
        with using(self._alias()):
            return super()._get_file()  # type: ignore[misc]

    file = property(_get_file, FieldFile._set_file,  # type: ignore[attr-defined]
                    FieldFile._del_file)  # type: ignore[attr-defined]

    def open(self, mode: str | None = "rb", *args: Any, **kwargs: Any) -> LedgerFieldFile:
        with using(self._alias()):
            super().open(mode or "rb")
        return self

    @property
    def size(self) -> int:
        with using(self._alias()):
            return super().size

    @property
    def url(self) -> str:
        with using(self._alias()):
            return super().url

    def delete(self, save: bool = True) -> None:
        if not self:
            return
        if hasattr(self, "_file"):
            self.close()
            del self.file
        self.name = None
        setattr(self.instance, self.field.attname, self.name)
        self._committed = False
        if save:
            self.instance.save()


def _file_class(base: type[FieldFile]) -> type[FieldFile]:
    found = _file_classes.get(base)
    if found is None:
        if issubclass(base, LedgerFieldFile):
            found = base
        else:
            found = type(f"Ledger{base.__name__}", (LedgerFieldFile, base), {})
        _file_classes[base] = found
    return found


def hook(model: type[models.Model]) -> bool:
    """Arrange A4 and the detach for one model (nothing if it has no ledger file field)."""
    fields = ledger_fields(model)
    if not fields or model._meta.abstract:
        return False
    for field in fields:
        field.attr_class = _file_class(field.attr_class)
    if not getattr(model.save_base, "_blobledger", False):
        model.save_base = _atomic(model.save_base)  # type: ignore[method-assign]
    uid = f"blobledger:{model._meta.label}"
    post_init.connect(_loaded, sender=model, weak=False, dispatch_uid=uid)
    post_save.connect(_saved, sender=model, weak=False, dispatch_uid=uid)
    post_delete.connect(_deleted, sender=model, weak=False, dispatch_uid=uid)
    return True


def _atomic(save_base: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(save_base)
    def atomic_save_base(self: models.Model, *args: Any, **kwargs: Any) -> Any:
        using = kwargs.get("using") or router.db_for_write(type(self), instance=self)
        kwargs["using"] = using
        token = _saving.set(using)
        try:
            with transaction.atomic(using=using, savepoint=False):
                return save_base(self, *args, **kwargs)
        finally:
            _saving.reset(token)

    atomic_save_base._blobledger = True  # type: ignore[attr-defined]
    return atomic_save_base


def _loaded(sender: type[models.Model], instance: models.Model, **_: Any) -> None:
    values = instance.__dict__
    values[LOADED] = {field.attname: _name(values[field.attname])
                      for field in ledger_fields(sender) if field.attname in values}


def _owner(field: FileField, instance: models.Model) -> Owner:
    meta = field.model._meta
    return Owner(meta.db_table, owner_key((getattr(instance, meta.pk.attname),)),
                 str(field.column))


def _offset(field: FileField, alias: str) -> float:
    storage = field.storage
    assert isinstance(storage, LedgerStorage)
    return float(storage.settings_for(alias).clock_offset)


def _saved(sender: type[models.Model], instance: models.Model, created: bool, raw: bool,
           using: str, update_fields: frozenset[str] | None, **_: Any) -> None:
    if raw:
        return
    values = instance.__dict__
    loaded: dict[str, str] = values.setdefault(LOADED, {})
    staged: dict[str, StagedBlob] = values.get(STAGED, {})
    conn: DjangoConnection | None = None
    done: dict[str, str] = {}
    sqlite = connections[using].vendor == "sqlite"  # the grace from the commit: grace.py
    for field in ledger_fields(sender):
        if field.attname not in values:
            continue  # deferred: not written
        if update_fields is not None and field.name not in update_fields \
                and field.attname not in update_fields:
            continue
        name = _name(values[field.attname])
        mine = staged.get(field.attname)
        attempt = mine.attempt if mine is not None and mine.name == name else None
        if attempt is None and created and not name:
            continue
        conn = conn or DjangoConnection(using)
        if attempt is None and not created and loaded.get(field.attname) == name:
            _refuse_stale(conn, field, instance, name)  # unchanged here: unchanged there?
            continue
        owner = _owner(field, instance)
        before = set() if created or not sqlite else attached_names(
            conn, owner.table, owner.key, owner.column)
        sync_owner_column(conn, owner, [(name, attempt)] if name else [],
                          _offset(field, using), new=created)
        note_detached(using, before - {name}, functools.partial(_offset, field, using))
        done[field.attname] = name
    if done:
        transaction.on_commit(lambda: _committed(values, done), using=using)
        failpoint("django.after_attach")


def _refuse_stale(conn: DjangoConnection, field: FileField, instance: models.Model,
                  name: str) -> None:
    """The field writes back the name it held when loaded: InvalidInput (a ValueError) if
    another save has changed the column's file since (the instance is stale). Read after the
    row's UPDATE, which holds the row's lock until the commit: a save or delete of this row
    in flight has committed before it (read committed: this statement sees it), or waits for
    this transaction."""
    found = column_blobs(conn, _owner(field, instance), name)
    attached = sorted(blob for blob, state in found.items() if state == ATTACHED)
    if (attached and attached != [name]) or (name and not attached and name in found):
        raise InvalidInput(
            f"{instance._meta.label} {instance.pk!r}: another save changed its "
            f"{field.name} since this instance was loaded (the row's file is now "
            f"{attached[0] if attached else 'none'}); saving it would write back "
            f"{name or 'no file'}: reload it (refresh_from_db()) and save again")


def _committed(values: dict[str, Any], done: dict[str, str]) -> None:
    """After the commit: these names are the row's, attached (no A4 on the next save)."""
    failpoint("django.after_commit")
    values.setdefault(LOADED, {}).update(done)
    staged: dict[str, StagedBlob] = values.get(STAGED, {})
    for attname, name in done.items():
        if attname in staged and staged[attname].name == name:
            tag_after_commit(staged.pop(attname))  # staged inside the transaction: A3 now


def _deleted(sender: type[models.Model], instance: models.Model, using: str,
             **_: Any) -> None:
    fields = ledger_fields(sender)
    conn = DjangoConnection(using)
    sqlite = connections[using].vendor == "sqlite"
    for table, field in {field.model._meta.db_table: field for field in fields}.items():
        meta = field.model._meta
        key = owner_key((getattr(instance, meta.pk.attname),))
        before = attached_names(conn, table, key) if sqlite else set()
        detach_owner(conn, table, key, _offset(field, using))
        note_detached(using, before, functools.partial(_offset, field, using))
