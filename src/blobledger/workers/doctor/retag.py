"""What ``blobledger doctor`` adds about the deferred retag: the lag, read from the database.

With ``BLOBLEDGER_RETAG=deferred`` a ready document's blob stays tagged ``pending`` until the
retag worker tags it ``committed``; the lifecycle rule deletes blobs tagged ``pending`` once
they are old enough. The check warns (never fails) when the oldest owed retag is older than
``BLOBLEDGER_RETAG_WARN_AFTER``.
"""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from blobledger.config import Settings
from blobledger.errors import BlobLedgerError
from blobledger.protocol.ledger import Ledger
from blobledger.workers.doctor.checks import INFO, PASS, UNKNOWN, WARN, Report
from blobledger.workers.invariants import retag_warning

RETAG_LAG = "retag lag (BLOBLEDGER_RETAG_WARN_AFTER)"


async def retag_check(settings: Settings, report: Report) -> None:
    """Add the retag lag check to ``report`` (n/a when the retag is inline)."""
    if settings.retag != "deferred":
        report.add(RETAG_LAG, False, INFO, "n/a: BLOBLEDGER_RETAG=inline")
        return
    try:
        async with Ledger.from_settings(settings, migrate=False, create=False) as ledger:
            lag = await ledger.transitions.retag_lag()
    except (BlobLedgerError, SQLAlchemyError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        report.add(RETAG_LAG, False, UNKNOWN, f"database not readable: {first[:200]}")
        return
    warning = retag_warning(lag, settings.retag_warn_after)
    if warning is not None:
        report.add(RETAG_LAG, False, WARN, warning)
    else:
        report.add(RETAG_LAG, False, PASS, f"oldest owed retag: {lag:.0f} s")
