"""Why a variant cannot be served: each with the HTTP status and problem type it answers."""

from __future__ import annotations

from blobledger.errors import BlobLedgerError, InvalidInput, NotFound


class UnknownVariant(NotFound):
    """No variant of that name is configured, or the document is not an image (404)."""

    kind = "no-variant"


class ImageRefused(InvalidInput):
    """The source image is refused: ``status`` 415 (not one of the formats read) or 422 (too
    many pixels, too many bytes, or bytes that do not decode); ``kind`` the problem type."""

    def __init__(self, message: str, *, status: int, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class VersionEnded(NotFound):
    """The document version a variant was asked of was replaced or deleted meanwhile."""

    kind = "version-gone"


class VariantBusy(BlobLedgerError):
    """Another maker held the variant longer than this request would wait (503, retry)."""
