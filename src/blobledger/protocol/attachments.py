"""Attachments as values: what a staged blob is, and what an owner row's column holds.

:class:`Attachment` is the metadata of a blob that belongs (or will belong) to a row of the
application: its blob name (the id), size, checksums, content type and original filename.
:class:`StagedBlob` is what :meth:`Ledger.stage` returns after A1-A3: an attachment that no
owner holds yet, carrying the token that staged it (A4 needs it; it is never written to the
owner's row). :class:`StagedUpload` is the same for a blob a client staged through a direct
or resumable upload (:meth:`Ledger.staged_upload`), with the upload's id and ``target``.
The JSON form (:meth:`Attachment.to_json`) is what an owner column stores.

This module holds no I/O: staging lives in :mod:`blobledger.protocol.ledger`, A4 and the
detach steps in :mod:`blobledger.protocol.transitions`, the session events
in :mod:`blobledger.sqlalchemy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Attachment:
    """An attachment's metadata; ``id`` is its blob's name (write-once, never reused)."""

    name: str
    size: int
    sha256: str
    md5: str
    content_type: str
    filename: str | None = None

    @property
    def id(self) -> str:
        return self.name

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "sha256": self.sha256, "md5": self.md5,
                "content_type": self.content_type, "filename": self.filename}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attachment:
        return cls(name=str(data["name"]), size=int(data["size"]), sha256=str(data["sha256"]),
                   md5=str(data["md5"]), content_type=str(data["content_type"]),
                   filename=data.get("filename"))

    def plain(self) -> Attachment:
        """The metadata alone (a staged blob without its token)."""
        return Attachment(self.name, self.size, self.sha256, self.md5, self.content_type,
                          self.filename)


@dataclass(frozen=True)
class StagedBlob(Attachment):
    """A blob uploaded and tagged committed (A1-A3) that no owner holds yet. Assign it to an
    attachment attribute; the application's flush attaches it (A4) or fails. Never attached,
    the sweeper removes it after ``BLOBLEDGER_SWEEP_AFTER``."""

    attempt: str = field(default="", repr=False, compare=False)


@dataclass(frozen=True)
class StagedUpload(StagedBlob):
    """A staged blob that a client uploaded itself (``POST /uploads`` or tus, marked as an
    attachment): the upload's id and the ``target`` the client declared (opaque text such as
    ``invoices/42/pdf``; blobledger never interprets it, the application checks it before
    attaching)."""

    upload_id: str = field(default="", compare=False)
    target: str | None = field(default=None, compare=False)

    def to_response(self, state: str = "staged") -> dict[str, Any]:
        """The JSON a completed attachment upload answers with (never the token)."""
        return {"id": self.upload_id, "blob": self.name, "size": self.size,
                "sha256": self.sha256, "md5": self.md5, "content_type": self.content_type,
                "filename": self.filename, "target": self.target, "state": state}
