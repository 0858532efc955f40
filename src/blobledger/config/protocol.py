"""The protocol's limits and timings: how large and how long an upload may be, when a
pending intent counts as stale, how long an old blob outlives its replacement and every
signed read URL issued for it, and where the retag to ``committed`` happens.

``sweep_after`` must exceed ``upload_deadline`` by at least :data:`SWEEP_MARGIN` (and by 10%):
an upload still running when the sweeper judges its row stale would race the sweeper.
``delete_grace`` must be at least ``read_url_expiry`` plus :data:`CLOCK_SKEW`: a replaced or
deleted document's old blob outlives every signed read URL issued for it (docs/protocol.md).
The rules are here; :class:`blobledger.config.Settings` checks them with the others.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from blobledger._base.durations import format_duration
from blobledger.config.fields import Duration, Size, not_negative, positive, setting

SWEEP_MARGIN = 60.0
#: how far the storage's clock (which ends a signed URL) and the database's (which ends a
#: grace) may disagree; the deletion grace covers a URL's lifetime plus this
CLOCK_SKEW = 60.0


class ProtocolSettings(BaseModel):
    """The uploads' limits, the sweeper's and the deletion path's timings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_upload_bytes: Size = setting(5 * 1024**3, "largest upload (`5GiB`, `64MiB`, bytes)")
    upload_deadline: Duration = setting(
        3600.0, "uploads running longer are aborted (`90`, `90s`, `15m`, `2h`)")
    sweep_after: Duration = setting(
        7200.0, "pending intents older than this are swept; must exceed the deadline by a "
        "margin")
    delete_grace: Duration = setting(
        300.0, "wait before an old blob is deleted; at least a signed read URL's lifetime "
        "plus 60 s of clock skew")
    #: how long a signed read URL opens its blob; None: ``delete_grace`` less CLOCK_SKEW
    read_url_expiry: Duration | None = setting(
        None, "how long a store-signed read URL lasts (redirects, "
        "`POST /documents/{id}/url`); with the 60 s skew, within the grace",
        "the grace less 60 s")
    #: how long a tus upload may take, all requests
    resumable_expiry: Duration = setting(
        86400.0, "a resumable (tus) upload left unfinished this long is gone (410) and swept")
    #: how long a direct-upload URL stays valid
    direct_upload_expiry: Duration = setting(
        3600.0, "how long a direct-upload URL (and its intent's lease) lasts")
    #: where C3/R3 (the retag to ``committed``) happens: on the writer's path (``inline``),
    #: or after C4/R4 by the retag worker (``deferred``; docs/protocol.md)
    retag: Literal["inline", "deferred"] = setting(
        "inline", "`inline`: a create retags its blob `committed` before C4; `deferred`: C4 "
        "commits with the retag owed and a worker (in `serve`, and in every `blobledger "
        "sweep`) does it after (docs/protocol.md, \"The deferred retag\")")

    @field_validator("max_upload_bytes", "upload_deadline", "resumable_expiry",
                     "direct_upload_expiry")
    @classmethod
    def _protocol_positive(cls, value: float) -> float:
        return positive(value)

    @field_validator("delete_grace")
    @classmethod
    def _grace_not_negative(cls, value: float) -> float:
        return not_negative(value)


def sweep_margin(upload_deadline: float) -> float:
    """The margin kept past an upload's deadline before its intent counts as dead: a
    minute, or a tenth of the deadline if that is longer. The sweeper keeps at least this
    (``sweep_after``); a retry waits this long past a dead attempt's lease."""
    return max(SWEEP_MARGIN, upload_deadline * 0.1)


def minimum_sweep_after(upload_deadline: float) -> float:
    """The smallest ``sweep_after`` allowed for an upload deadline."""
    return upload_deadline + sweep_margin(upload_deadline)


def url_expiry_problem(expiry: float, delete_grace: float,
                       setting: str = "BLOBLEDGER_READ_URL_EXPIRY") -> str | None:
    """Why a signed read URL living ``expiry`` seconds could outlive its blob (None if it
    cannot): the one rule for every URL blobledger signs, the service's and Django's. A
    replaced or deleted blob stays ``delete_grace`` on the database's clock; the URL's expiry
    is read on the store's, which may run :data:`CLOCK_SKEW` behind."""
    if expiry > 0 and expiry + CLOCK_SKEW <= delete_grace:
        return None
    return (f"{setting} ({format_duration(expiry)}) must be positive and, with "
            f"{format_duration(CLOCK_SKEW)} of clock skew, within BLOBLEDGER_DELETE_GRACE "
            f"({format_duration(delete_grace)}): a signed URL must never outlive its blob")


def read_url_lifetime(settings: ProtocolSettings) -> float:
    """How long a signed read URL opens its blob: ``read_url_expiry``, or else
    ``delete_grace`` less :data:`CLOCK_SKEW` (0 or less: stores hand out no signed URL)."""
    if settings.read_url_expiry is not None:
        return settings.read_url_expiry
    return settings.delete_grace - CLOCK_SKEW
