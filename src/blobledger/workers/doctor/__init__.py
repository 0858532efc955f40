"""``blobledger doctor``: probe a store for what the protocol needs of it.

The checks every backend shares are in :mod:`.checks`; the cloud backends' own probes in
:mod:`.azure` and :mod:`.s3`. This module picks the probes for ``settings.store_url``.
"""

from __future__ import annotations

from blobledger.config import Settings
from blobledger.stores import open_store
from blobledger.workers.doctor.checks import Report, store_report
from blobledger.workers.doctor.delivery import delivery_check
from blobledger.workers.doctor.retag import retag_check

__all__ = ["Report", "run_doctor"]


async def run_doctor(settings: Settings, *, create: bool = True) -> Report:
    """Probe the store named by ``settings.store_url`` (and, with the deferred retag, the
    database's retag lag; with webhooks, the oldest pending event's wait); never leaves a
    probe behind.
    ``create`` False: a local store's folder that does not exist is a StoreMissing, not
    made."""
    report = await _store_report(settings, create)
    await retag_check(settings, report)
    await delivery_check(settings, report)
    return report


async def _store_report(settings: Settings, create: bool) -> Report:
    # each cloud backend's probes import its SDK (its extra): loaded for its URL only
    if settings.store_url.startswith("azure://"):
        from blobledger.workers.doctor.azure import azure_report

        return await azure_report(settings)
    store = open_store(settings.store_url, settings, create=create)
    try:
        await store.ping()
        if settings.store_url.startswith("s3://"):
            from blobledger.workers.doctor.s3 import s3_extras

            return await store_report(store, s3_extras(
                store, settings.retag_warn_after if settings.retag == "deferred" else None))
        return await store_report(store)
    finally:
        await store.close()
