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
    "rowcount:transitions:claim:lost-check-won": "an empty claim's update matches no row and "
        "returns none: the same answer",
    # an abandoned row's removal, after the abandoner's own delete succeeded
    "where:transitions:_drop_abandoned:blobs.state": "the name's row is deleting once "
        "abandoned, and nothing leaves deleting but removal",
    "where:transitions:_drop_abandoned:blobs.attempt": "runs only after the abandoner deleted "
        "the blob; a sweeper holding the row would delete an absent blob and remove the row",
    # writers and claims: no writer takes over a claimed intent (the _take_over term
    # `_unclaimed`, killed by tests/ledger/test_decisions.py), and a claimed intent is
    # decided by compare-and-set before anything is destroyed
    "where:transitions:_commit_blob:blobs.attempt": "C4 (R4, a roll-forward) after C3 may "
        "win on a pending row that is not its own: a sweeper's undecided claim (the "
        "roll-forward the sweeper would make, as _commit_claimed does) or a retry of the same "
        "key (same name, bytes checked by checksum); a row a sweeper decided to delete is "
        "deleting, which C4 never matches",
    "where:transitions:remove_swept:blobs.attempt": "a claimed row changes owner only to "
        "another sweeper past the lease (never to a writer), which removes the same rows after "
        "the same delete; the state term keeps removal to pending rows",
    # detach on the application's connection
    "where:transitions:detach_replaced:blobs.state": "an owner's rows are attached or deleting; "
        "marking a deleting one again only restarts its grace",
    # stores
    "store:stores/azure/store:set_tags:set_blob_tags-without-if_tags_match_condition":
        "Azurite ignores x-ms-if-tags on Set Blob Tags (the store compares the tags itself "
        "there), so only real Azure can tell; it needs a test against real Azure",
}
