"""What every room of :mod:`blobledger.protocol.transitions` builds on: the database,
the settings and the bound times, and a held creation's rows (C4's and the roll-forward's)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from blobledger.config import Settings, held_by_settings, sweep_margin
from blobledger.db import Database
from blobledger.protocol.models import DocumentStatus, UploadMode
from blobledger.protocol.transitions.records import Intent
from blobledger.protocol.transitions.statements import NOW, _insert_work


class Steps:
    """The named compare-and-set steps' common ground: one database, one ledger's
    settings, the clock offset, and the bound times every statement takes."""

    def __init__(self, db: Database, settings: Settings, offset: float = 0.0) -> None:
        self.db = db
        self.settings = settings
        self.offset = offset

    # -- time parameters ------------------------------------------------------------------
    def times(self, *, lease: float | None = None, cutoff: float | None = None,
              expires: float | None = None) -> dict[str, float]:
        """Bound seconds for NOW, LEASE (now + lease), CUTOFF (now - cutoff), EXPIRES."""
        values = {"now_s": self.offset}
        if lease is not None:
            values["lease_s"] = self.offset + lease
        if cutoff is not None:
            values["cutoff_s"] = self.offset - cutoff
        if expires is not None:
            values["expires_s"] = self.offset + expires
        return values

    @property
    def deferred(self) -> bool:
        """Whether C4/R4 leave the retag to the retag worker (``BLOBLEDGER_RETAG``)."""
        return self.settings.retag == "deferred"

    @property
    def takeover_margin(self) -> float:
        """How long past its lease a retry waits before displacing an attempt: the margin
        the sweeper keeps past the upload deadline (``config.sweep_margin``)."""
        return sweep_margin(self.settings.upload_deadline)

    async def now(self) -> Any:
        async with self.db.transaction(readonly=True) as conn:
            return (await conn.execute(select(NOW), self.times())).scalar_one()


    def _holding(self, intent: Intent, name: str) -> dict[str, object]:
        """C1's hold decision (asked by the writer, or the settings' policy for the name; a
        placeholder is judged again when it is renamed) and the writer's name."""
        hold = intent.hold or (intent.placeholder is None
                               and held_by_settings(self.settings, name))
        return {"hold": hold, "owner": intent.owner}

    def _settle(self) -> dict[str, str]:
        """C4's parameter: what a held creation becomes (``held`` while processors are
        configured; with none there is nothing to wait for)."""
        status = DocumentStatus.HELD if self.settings.processors else DocumentStatus.READY
        return {"d_processing": status.value}

    async def _hold(self, conn: Any, row: Any) -> None:
        """In C4's transaction: a document made ``held`` gets its pending work, one row per
        configured processor, for its version."""
        if row.status != DocumentStatus.HELD:
            return
        await conn.execute(_insert_work, [dict(
            document_id=row.id, version=row.version, processor=name, owner=row.owner,
            name=row.name, **self.times()) for name in self.settings.processors])

    def _expiry(self, mode: UploadMode) -> float:
        return (self.settings.resumable_expiry if mode in (UploadMode.TUS, UploadMode.S3)
                else self.settings.direct_upload_expiry)

