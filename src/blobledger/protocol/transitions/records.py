"""What the steps of :mod:`blobledger.protocol.transitions` take and answer: a writer's
intent, an idempotency key's record, a resumable upload's row and its owner's quota, R4's
outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blobledger.protocol.documents import Document
from blobledger.protocol.models import DEFAULT_BUCKET, BlobKind, UploadMode
from blobledger.protocol.transitions.statements import ATTACHMENT_KEY


@dataclass
class Intent:
    """A pending blob row this process owns while ``attempt`` is still its token."""

    blob_name: str
    document_id: str
    kind: BlobKind
    attempt: str
    content_type: str
    expected_version: int | None = None  # a replacement's precondition
    old_blob: str | None = None  # the blob a replacement moves away from
    placeholder: str | None = None  # a creation recorded under a placeholder name
    deadline: float = 0.0  # the event loop's clock: the upload must finish by then
    hold: bool = False  # the writer asks C4 to make the creation held (docs/pipeline.md)
    owner: str | None = None  # who writes it (``api.auth.owner_of``), told its held state
    #: whether an idempotency key may hold this intent (C4 then records its first response;
    #: False only where C1 reserved none: C4 skips that statement)
    keyed: bool = True
    #: the document's name once known (C1's, or the confirm's rename of a placeholder)
    name: str | None = None
    #: the bucket C1 creates the document in (its name is unique there)
    bucket: str = DEFAULT_BUCKET
    #: the most bytes its upload may store (its bucket's limits; None: the service's)
    cap: int | None = None


@dataclass(frozen=True)
class KeyRecord:
    """What an idempotency key holds: an intent in flight or the first response."""

    key: str
    state: str
    blob_name: str
    document_id: str
    name: str | None
    content_type: str
    sha256: str | None
    response: Document | None


@dataclass(frozen=True)
class UploadRecord:
    """A resumable upload as the database holds it (``expired`` on the database's clock)."""

    id: str
    mode: UploadMode
    blob_name: str
    document_id: str
    attempt: str
    state: str
    length: int
    offset: int
    handle: str
    parts: list[str]
    meta: dict[str, str]
    expires_at: Any
    expired: bool
    sha256: str | None = None  # what the service verified from the stored bytes (before C3)

    @property
    def attachment(self) -> bool:
        """Whether the upload stages an attachment (A1-A3) rather than creating a
        document (its metadata holds the key ``attachment``)."""
        return ATTACHMENT_KEY in self.meta

    def intent(self, content_type: str) -> Intent:
        kind = BlobKind.ATTACHMENT if self.attachment else BlobKind.CREATE
        return Intent(self.blob_name, self.document_id, kind, self.attempt, content_type,
                      keyed=False)  # an upload reserves no idempotency key


@dataclass(frozen=True)
class UploadOwner:
    """Who creates an upload (``id``: a digest of its token, see
    ``blobledger.api.auth.owner_of``) and how many open uploads, and names reserved by
    document uploads among them, it may hold at once (QuotaExceeded beyond)."""

    id: str
    max_open: int
    max_names: int



@dataclass(frozen=True)
class ReplaceOutcome:
    """R4: the document as written, or why not (``lost``: the intent was taken; else the
    document moved on: ``current_version`` None if it is gone)."""

    document: Document | None = None
    lost: bool = False
    current_version: int | None = None

