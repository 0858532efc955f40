"""Survivors of ``scripts/mutate`` argued harmless, one line each (the argument, not a waiver:
a survivor missing here needs a test). Keyed by mutant id (``scripts/mutate --list``)."""

from __future__ import annotations

#: ``a < b`` made ``a <= b`` on the database clock: equal at microsecond resolution only,
#: which no lease, cutoff or retention relies on
BOUNDARY = "a boundary of the database clock, equal only to the microsecond: no guard relies on it"
#: the statement's result is returned but no caller reads it
UNREAD = "no caller reads the result; the next step's compare-and-set is the fence"

ARGUED: dict[str, str] = {
    # rowcount results nobody reads
    "rowcount:transitions:set_handle:inverted": UNREAD + " (a lost upload fails at find)",
    "rowcount:transitions:set_handle:won": UNREAD + " (a lost upload fails at find)",
    "rowcount:transitions:record_verified:inverted": UNREAD + " (confirm, C3 and C4 follow)",
    "rowcount:transitions:record_verified:won": UNREAD + " (confirm, C3 and C4 follow)",
    "rowcount:transitions:finish_upload:inverted": UNREAD + " (C4 already decided the upload)",
    "rowcount:transitions:finish_upload:won": UNREAD + " (C4 already decided the upload)",
    "rowcount:transitions:remove_abandoned:inverted": UNREAD + " (the deletion path removes "
                                                      "a row left behind)",
    "rowcount:transitions:remove_abandoned:won": UNREAD + " (the deletion path removes a row "
                                                 "left behind)",
    # the idempotency key's C1 clean-up
    "where:transitions:_drop_expired_key:keys.key": "drops other keys past their retention "
        "too, which purge_keys drops anyway; a live key is never dropped",
    "where:transitions:_drop_expired_key:keys.state": "a pending key has no expires_at (NULL "
        "compares false), so only done keys can match",
    "lease:transitions:_drop_expired_key:keys.expires_at:le-to-lt": BOUNDARY,
    # stores
    "store:stores/azure/store:set_tags:set_blob_tags-without-if_tags_match_condition":
        "Azurite ignores x-ms-if-tags on Set Blob Tags (the store compares the tags itself "
        "there), so only real Azure can tell; it needs a test against real Azure",
}
