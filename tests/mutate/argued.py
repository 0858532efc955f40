"""Survivors of ``scripts/mutate`` argued harmless, one line each (the argument, not a waiver:
a survivor missing here needs a test). Keyed by mutant id (``scripts/mutate --list``)."""

from __future__ import annotations

#: ``a < b`` made ``a <= b`` on the database clock: equal at its resolution only (the
#: microsecond on PostgreSQL, the millisecond on SQLite), which no lease, cutoff or retention
#: relies on
BOUNDARY = ("a boundary of the database clock, equal only to its resolution (the microsecond "
            "on PostgreSQL, the millisecond on SQLite): it decides only at the very instant a "
            "lease, age or retention ends, which no step relies on (the leases carry margins)")
#: the reconciler's ages: ``>`` made ``>=`` (or ``<=`` made ``<``) on an age it measures
AGE_BOUNDARY = ("an age the reconciler measures on the database's clock (the run's start "
                "minus a row's or a blob's time) equals the threshold only to the clocks' "
                "resolution: it decides only the report or fix at that very instant, as an "
                "instant later (the thresholds carry margins: older_than is at least the "
                "upload deadline)")
#: a held document's version in the processing steps' terms
HELD_VERSION = ("only a creation holds (Ledger.create's hold; begin_replace needs a ready "
                "document), so a held document is at version 1 and every processing row of a "
                "document is its version 1's (the last acceptance deletes them with its ready "
                "step): the document id alone names them")
#: the claim's token in a processing step's terms implies the row is pending
HELD_TOKEN = ("the token term implies it: a work row holds a claim's token only while pending "
              "(C4 inserts it pending with no token, the claim sets the token on a pending "
              "row, the verdict moves it out of pending and clears the token in the same "
              "statement, and no other statement writes processing rows), tokens are fresh "
              "per claim and NULL = token is never true: the term never filters a row the "
              "others match")
#: the keys a verdict writes: C4 moved them pending -> done when it made the document held
HELD_KEY = ("a key names its creation's blob only (blob names are fresh per attempt); the "
            "transaction that makes the document held (C4's commit_create for a keyed "
            "intent, or the sweeper's roll_forward) moves that key pending -> done "
            "(_key_done), so at a verdict every key naming the held document's blob is done: "
            "the term never filters a row the blob term matches")
#: the statement's result is returned but no caller reads it
UNREAD = "no caller reads the result; the next step's compare-and-set is the fence"

ARGUED: dict[str, str] = {
    # the S3 endpoint's listing reads the multipart shapes of the page's blobs (s3api/rows.py)
    "read:s3api/rows:shapes_of:objects.blob_name": "a listing's read of the multipart "
        "shapes of its page's blobs: without the term it reads every multipart object's "
        "row, and the page looks each of its blobs up by name in what was read, so it "
        "answers the same ETags (a cost, no wrong answer; nothing is written)",
    "read:s3api/rows:shapes_of:objects.etag": "the same read without its filter on "
        "multipart rows: a row without an ETag makes no shape (Shape.from_row answers None "
        "for it and the result drops it), so the listing answers the same ETags",
    # the S3 endpoint's conditions (s3api/deletes.py): DeleteObjects' key with an <ETag>
    "condition:s3api/deletes:_delete:refusal-skipped#2": "a key whose document was "
        "replaced between its read and its delete (R4's compare-and-set refused the delete "
        "at the version read): without the refusal the loop reads the key again and the "
        "ETag check before every delete compares the <ETag> with the new version's, "
        "refusing (PreconditionFailed) unless they are equal; an ETag is the first 128 bits "
        "of the bytes' SHA-256, so an equal one names the same bytes, the object the "
        "client's condition named, deleted at the version read (compare-and-set); a key "
        "deleted meanwhile is NoSuchKey, and a key that keeps changing OperationAborted, "
        "refusals both",
    # the SQLite re-stamp before COMMIT (protocol/grace.py)
    **dict.fromkeys((f"{kind}:grace:attached_names:blobs.{column}" for kind, column in (
        ("read", "owner_table"), ("read", "owner_key"), ("where", "owner_column"))),
        "the names noted are those attached to the owner row before its detach; without "
        "this term they are also other owners' attached blobs, which the re-stamp (only "
        "rows deleting at the commit) leaves alone unless they went deleting meanwhile, and "
        "on SQLite no other transaction detaches while this one holds the write lock from "
        "its detach to its COMMIT; a blob another transaction detached between this read "
        "and this one's first write has its stamp moved later, the safe way: its bytes are "
        "kept longer, never deleted earlier"),
    "where:grace:_restamp:blobs.state": "a name the transaction noted but left attached (a "
        "savepoint that rolled its detach back) gets changed_at and lease_until moved to the "
        "commit: no step reads an attached row's times (the sweeper's, the deletion path's, "
        "check's and the reconciler's ages select pending and deleting rows; the next detach "
        "stamps both anew)",
    # C4 in one statement writes its event only from a document made ready
    "read:single:c4_deferred:term": "the one-statement C4 runs only with no processor "
        "configured (Transitions.commit_create), where C4 makes every document ready "
        "(d_processing is ready): the term never filters a row; a held creation's C4 is a "
        "transaction, which writes no event for it",
    # the retag worker's claim: its update runs in the transaction whose read chose the
    # names (with the same terms), as the sweeper's claim does
    "where:transitions:claim_retags:blobs.state": "the names were read in this "
        "transaction committed and are held (see claim:blobs.state)",
    "where:transitions:claim_retags:blobs.retag_due": "the names were read in this "
        "transaction owing their retag and are held (see claim:blobs.state)",
    "where:transitions:claim_retags:blobs.lease_until": "the names were read in this "
        "transaction with `lease_until < NOW` and are held (see claim:blobs.lease_until)",
    "rowcount:transitions:claim_retags:lost-check-won": "an empty claim's update matches "
        "no row and returns none: the same answer",
    "lease:transitions:claim_retags:blobs.lease_until:lt-to-le": BOUNDARY,
    "lease:transitions:claim_retags:blobs.lease_until:lt-to-le#2": BOUNDARY,
    "where:transitions:record_retagged:blobs.state": "the claim token pins committed rows: "
        "a committed row leaves that state only through _to_deleting (replace, delete), "
        "which clears the token, and a claim token is new per claim",
    # the deferred retag's lag: MIN ignores NULL
    "read:transitions:retag_lag:blobs.retag_due": "MIN(retag_due) ignores NULL: without "
        "the term the same minimum is read (the term lets the index serve the read)",
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
    # a claim's update, in the transaction whose read chose the names (the read's state and
    # lease terms are killed by tests/sweeper/test_sweeper.py: older unclaimable rows)
    "where:transitions:claim:blobs.state": "the names were read in this transaction in "
        "that state and are held: locked FOR UPDATE on PostgreSQL until this transaction "
        "ends, and on SQLite no other writer runs inside a write transaction (BEGIN "
        "IMMEDIATE), so the update finds them in the state the read saw",
    "where:transitions:claim:blobs.lease_until": "the names were read in this transaction "
        "with `lease_until < NOW` and are held (see claim:blobs.state); NOW is the "
        "transaction's start on PostgreSQL and never earlier in a later statement on SQLite",
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
    "where:transitions:remove_swept:blobs.state": "the claim's token (new per claim) pins "
        "pending rows on the path that calls it (a store whose delete sees the state): a "
        "row leaves pending under a claim's token with the token kept only by fence_swept "
        "with keep_claim, which that path never calls (its fence of untagged blobs releases "
        "the claim); every other step out of pending clears the token",
    "where:transitions:remove_swept:blobs.attempt": "a claimed row changes owner only to "
        "another sweeper past the lease (never to a writer), which removes the same rows after "
        "the same delete; the state term keeps removal to pending rows",
    # a writer's token: minted per attempt or takeover (new_token, 128 random bits), put on
    # one row only, and cleared by every step out of pending (a claim replaces it)
    "where:transitions:_confirm:blobs.name": "the writer's token names one row by itself: "
        "minted per attempt or takeover and put on that intent's row only",
    "where:transitions:_confirm:blobs.state": "a writer's token is on its row only while it "
        "is pending: every step out of pending clears it or follows a claim that replaced "
        "it, and no step puts one on a row in another state",
    "where:transitions:_abandon:blobs.name": "the writer's token names one row by itself "
        "(see _confirm:blobs.name)",
    "where:transitions:_abandon:blobs.state": "a writer's token is on its row only while "
        "it is pending (see _confirm:blobs.state)",
    "where:transitions:_give_up:blobs.name": "the writer's token names one row by itself "
        "(see _confirm:blobs.name); the upload's subquery pins the same name besides",
    "where:transitions:_give_up:blobs.state": "a writer's token is on its row only while "
        "it is pending (see _confirm:blobs.state)",
    "where:transitions:_give_up:exists": "_drop_unverified_upload checks the same upload "
        "(open, unverified) later in the same transaction, under the row's lock, and undoes "
        "the whole give-up if it does not match; the upload is the intent's own (give_up "
        "passes an upload and the intent made from it)",
    "where:transitions:_confirm_staged:blobs.name": "the writer's token names one row by "
        "itself (see _confirm:blobs.name)",
    "where:transitions:_confirm_staged:blobs.state": "a writer's token is on its row only "
        "while it is pending (see _confirm:blobs.state)",
    "where:transitions:_commit_blob:blobs.state": "name and token pin a pending row: a "
        "writer's token lives only on its pending row; a claim's token (new per claim) stays "
        "on a deleting row only after fence_swept, for names that sweeper decided to delete "
        "and never rolls forward (and the deletion path's claim never rolls forward)",
    "where:transitions:_commit_claimed:blobs.kind": "runs only for an intent of kind create "
        "(commit_create short-circuits the others), and the row its name pins is that "
        "intent's own, inserted with that kind, which never changes",
    # a retry's takeover, in the transaction that read the row
    "where:transitions:_take_over:blobs.attempt": "the lease term implies it: every change "
        "of owner of a pending row (takeover, confirm, claim) sets lease_until past NOW, so "
        "a row whose owner changed since it was read matches `lease_until < NOW - margin` "
        "only if that owner too is dead past the margin, which a takeover may displace (a "
        "claim is excluded by _unclaimed); the name pins the intent that was read",
    "where:transitions:_take_over:blobs.state": "the token seen pins a pending row when it "
        "is a writer's (see _confirm:blobs.state); when it is NULL (an older release's row) "
        "the row leaves pending only through a claim whose step sets lease_until to NOW, "
        "which fails `< NOW - margin` unless this transaction stalled between its read and "
        "its update for the whole margin (PostgreSQL only); even then the retry's confirm "
        "requires pending and loses, and the stray token only delays the deletion path",
    "where:transitions:_rename:documents.id": "documents.name is unique and the placeholder "
        "embeds the document's id (PLACEHOLDER + id): no other document bears it",
    "where:transitions:_rename:documents.status": "runs after _confirm matched the "
        "creation's blob row pending under the attempt's token in the same transaction; a "
        "document is made ready only by C4 or a roll-forward, which commit that row first",
    "where:transitions:_rename:documents.name": "a pending document leaves its placeholder "
        "only through this rename, in a confirm that won: this attempt's (its placeholder is "
        "then cleared; a confirm run again after a lost connection renames to the same "
        "name) or an earlier owner's, whose renamed name the takeover read in its own "
        "transaction (a confirm after that read makes the takeover fail on the lease), so "
        "this attempt has no placeholder",
    "where:transitions:_key_done:keys.state": "runs right after its transaction committed "
        "the blob row (pending -> committed, once per blob); only _key_done makes a key "
        "done, so the key on that blob is still pending",
    "where:transitions:_to_deleting:blobs.state": "every caller names a committed row: the "
        "blob its own transaction just committed (R4 losing on the version, a roll-forward "
        "with no pending document) or the blob of a ready document it just deleted or moved "
        "away from by compare-and-set on the version (a ready document's blob is committed)",
    # a writer's failure path (abandon): after _abandon or _give_up matched the intent's
    # row pending under the attempt's token, in the same transaction (holding the row's
    # lock on PostgreSQL); C4 and the roll-forward commit that row before they make the
    # document ready, the key done or the upload done
    "where:transitions:_drop_unverified_upload:uploads.state": "_give_up saw the upload "
        "open and unverified in this transaction; it is closed since only by C4 or a "
        "roll-forward (which need the blob row this transaction holds), by finish_upload "
        "(which wins only after a record_verified won: sha256 set, which the sha256 term "
        "refuses) or by close_settled_upload (a ready document: its blob committed)",
    "where:transitions:_drop_pending_document:documents.id": "a pending document's "
        "blob_name is its own intent's blob, a new uuid4 name inserted in the same C1 as "
        "the blob row (its primary key): only this intent's document is pending on it",
    "where:transitions:_drop_pending_document:documents.status": "the blob row is still "
        "pending under this attempt, and a document is made ready only by C4 or a "
        "roll-forward, which commit that row first",
    "where:transitions:_drop_pending_document:documents.blob_name": "the id is the primary "
        "key, new per C1 (a takeover keeps id and blob together), and a pending document's "
        "blob_name is set once at C1 (only a ready document is repointed, by R4)",
    "where:transitions:_drop_pending_key:keys.state": "a key is made done only by C4 or a "
        "roll-forward, after committing its blob row, which is still pending under this "
        "attempt (and a committed row never returns to pending)",
    # A4 on the application's connection: the name and token come together from a
    # StagedBlob (ledger.stage's intent, or staged_upload's read of an attachment's row)
    "where:transitions:_attach:blobs.name": "the staging token names one row by itself "
        "(see _confirm:blobs.name), the row the StagedBlob was made from",
    "where:transitions:_attach:blobs.state": "a writer's token is on its row only while it "
        "is pending (see _confirm:blobs.state); A4 itself clears it",
    "where:transitions:_attach:blobs.kind": "a StagedBlob's token is an attachment's (A1 or "
        "begin_staged_upload inserted its row with kind attachment, which never changes; "
        "staged_upload reads only rows of that kind), and it names that one row",
    # an upload's row: its token is its intent's, minted for that upload alone
    "where:transitions:_record_parts:uploads.id": "the upload's token names one upload row "
        "by itself (begin_upload and begin_staged_upload put a new token on one upload and "
        "its blob row; no takeover applies to uploads)",
    "where:transitions:_record_parts:uploads.state": "a done upload is at its full length "
        "(completion requires offset == length) while a request records only after storing "
        "bytes past the offset it saw (seen < length), so `offset == seen` never matches a "
        "done upload (a document's is also refused by the subquery: its blob is committed)",
    "where:transitions:_record_parts:uploads.attempt": "uploads.attempt is set at the "
        "upload's insert and never updated, and the token compared is read from this "
        "upload's own row (find_upload by id)",
    "where:transitions:_record_parts:exists": "the intent's lease is at least the upload's "
        "expiry (both set from one LEASE at C1; only the confirm of a complete upload, at "
        "its full length where no request's `seen` is, moves it earlier), so a sweeper "
        "claims it only once the upload expired, which the expires_at term refuses; every "
        "other end of the intent (give-up, terminate, C4, finish, a sweeper's fence or "
        "removal) closes or deletes the upload's row. On PostgreSQL NOW is the transaction's "
        "start, so a claim committed between this transaction's BEGIN and its UPDATE can "
        "slip past: the part is then acknowledged on an upload at its expiry, as one just "
        "before it would be, and the sweeper drops all its parts by the handle",
    "where:transitions:_record_parts:sub.blobs.name": "weaker than dropping the whole "
        "subquery (see _record_parts:exists); besides, the upload's token is on its own "
        "intent's row only (see _confirm:blobs.name)",
    "where:transitions:_record_parts:sub.blobs.state": "weaker than dropping the whole "
        "subquery (see _record_parts:exists); besides, a writer's token is on its row only "
        "while it is pending (see _confirm:blobs.state)",
    "where:transitions:_record_parts:sub.blobs.attempt": "weaker than dropping the whole "
        "subquery (see _record_parts:exists: a claim, which replaces the token, comes only "
        "after the upload's expiry, which the expires_at term refuses)",
    "where:transitions:_confirm_received:uploads.id": "the upload's token names one "
        "upload row by itself (see _record_parts:uploads.id)",
    "where:transitions:_confirm_received:uploads.attempt": "uploads.attempt is never "
        "updated and the token compared is read from this upload's own row (see "
        "_record_parts:uploads.attempt); the subquery compares the blob's token besides",
    "where:transitions:_confirm_received:uploads.state": "it writes only changed_at; a done "
        "upload whose intent is still pending under its token is an attachment's whose "
        "completion (run beside this PUT, after its bytes landed) already staged these "
        "bytes: the PUT is then answered 201 instead of 410, and drop_lost, which deletes "
        "only a blob whose row is gone, deletes nothing either way",
    "where:transitions:_finish_upload:uploads.id": "the upload's token names one upload "
        "row by itself (see _record_parts:uploads.id)",
    "where:transitions:_finish_upload:uploads.attempt": "uploads.attempt is never updated "
        "and the token compared is read from this upload's own row",
    "where:transitions:_finish_upload:uploads.state": "an upload is open or done; setting "
        "a done one done again writes only changed_at, and no caller reads the count",
    "where:transitions:_close_settled_upload:uploads.id": "the upload's token names one "
        "upload row by itself (see _record_parts:uploads.id)",
    "where:transitions:_close_settled_upload:uploads.attempt": "uploads.attempt is never "
        "updated and the token compared is read from this upload's own row",
    "where:transitions:_close_settled_upload:uploads.state": "an upload is open or done; "
        "setting a done one done again writes only changed_at, and the caller, told it won, "
        "reads the upload again and answers the document it finds done",
    "where:transitions:_close_settled_upload:sub.documents.id": "only the upload's own "
        "document ever points at its blob: a new uuid4 name inserted with that document in "
        "C1, and R4 repoints documents only to a replacement's own new blob",
    "where:transitions:_close_settled_upload:sub.documents.blob_name": "the upload's "
        "document is made ready only by C4 or a roll-forward on the upload's own blob (a "
        "pending document's blob_name is set once at C1); ready on another blob, it was "
        "repointed by R4 after that, so the upload's creation is settled either way",
    "read:transitions:_upload_mine:blobs.name": "the upload's token names one blob row by "
        "itself (see _confirm:blobs.name)",
    "read:transitions:_upload_mine:blobs.state": "a writer's token is on its row only while "
        "it is pending (see _confirm:blobs.state)",
    # C4's document and R4's: after the blob row's compare-and-set won in the same
    # transaction
    "where:transitions:_ready_document:documents.id": "runs after _commit_blob or "
        "_commit_claimed committed b_name in this transaction; a pending document's "
        "blob_name is its own creation's blob, a new uuid4 name inserted in the same C1 as "
        "the blob row, so only that intent's document is pending on it (see "
        "_drop_pending_document:documents.id)",
    "where:transitions:_ready_document:documents.status": "the blob row this transaction "
        "just committed was pending: a document is made ready on a blob (C4, a "
        "roll-forward) or repointed to one (R4) only after that blob's row was committed, "
        "and a committed row never returns to pending, so no ready document points at it "
        "(and a document has no third status)",
    "where:transitions:_ready_document:documents.blob_name": "d_id is the creation's own "
        "document (the intent's, or in a roll-forward the blob row's document_id, set at C1), "
        "and a pending document's blob_name is set once at C1 (a takeover keeps id and blob "
        "together; only a ready document is repointed, by R4)",
    "where:transitions:_point_document:documents.status": "begin_replace read the document "
        "ready (PreconditionFailed otherwise); a document goes only pending -> ready, never "
        "back, and a deleted one's row is removed (ids are new per C1), so the row with "
        "this id is ready whenever it still exists",
    # what goes with swept intents (_drop_intents): the names are rows this transaction
    # just took out of pending under the claim's token (removed or fenced, holding them)
    "where:transitions:_drop_intents:keys.state": "a key is made done only by C4 or a "
        "roll-forward (_key_done), in the transaction that commits its blob row, and a "
        "committed row never returns to pending: every key on these names is pending",
    "where:transitions:_drop_intents:documents.id": "only a creation's own document is "
        "pending on its blob (a new uuid4 name inserted in the same C1 as the blob row; "
        "see _drop_pending_document:documents.id)",
    "where:transitions:_drop_intents:documents.blob_name": "the ids are the creations' own "
        "documents (the blob rows' document_id, set at C1), and a pending document's "
        "blob_name is set once at C1 (a takeover keeps id and blob together; only a ready "
        "document is repointed, by R4)",
    "where:transitions:_drop_intents:documents.status": "these blobs were pending until "
        "this transaction: a document is ready on a blob, or repointed to one, only after "
        "that blob's row was committed, and a committed row never returns to pending",
    # the give-up's upload subquery, each term of it: weaker than dropping it whole
    "where:transitions:_give_up:sub.uploads.id": "weaker than dropping the whole "
        "subquery (see _give_up:exists: _drop_unverified_upload re-checks this upload, "
        "open and unverified, in the same transaction and undoes the give-up otherwise)",
    "where:transitions:_give_up:sub.uploads.blob_name": "the upload given up is the "
        "intent's own (give_up passes an upload and the intent made from it); see "
        "_give_up:exists",
    "where:transitions:_give_up:sub.uploads.state": "_drop_unverified_upload re-checks "
        "the upload open in the same transaction and undoes the give-up otherwise (see "
        "_give_up:exists)",
    "where:transitions:_give_up:sub.uploads.sha256": "_drop_unverified_upload re-checks "
        "the upload unverified in the same transaction and undoes the give-up otherwise "
        "(see _give_up:exists)",
    # a claimed, self-tagged, never verified upload to the deletion path (the names term is
    # killed by tests/sweeper/test_sweeper.py: a committed creation in the same batch)
    "where:transitions:fence_swept:blobs.state": "the claim's token (new per claim) is on "
        "pending rows only, but for the names a fence moved to deleting keeping it, and a "
        "sweeper fences a name at most once: on S3 the fence of blobs read absent or "
        "pending and the fence of blobs read untagged take disjoint names (one tag read "
        "each), and on the other stores only the untagged fence runs",
    "where:transitions:discard_unverified:blobs.state": "the claim's token (new per claim) "
        "is on pending rows only, but for the names this same sweeper fenced to deleting "
        "(fence_swept), which it never passes here (they were read absent or pending, these "
        "committed: see hand_to_deletion:blobs.state)",
    "where:transitions:discard_unverified:blobs.attempt": "a claimed row changes owner only "
        "to another sweeper's claim past this one's lease (see hand_to_deletion:blobs."
        "attempt), which decides the same: the tag it reads is still committed (tags never "
        "go back) and the SHA-256 still unrecorded (record_verified needs the intent under "
        "the upload's token, which the first claim replaced for good; no completion got "
        "past its confirm, which comes after its own record_verified); whichever moves the "
        "row first, it ends deleting with its document and upload rows gone",
    "where:transitions:discard_unverified:documents.status": "these blobs were pending "
        "until this transaction: a document is ready on a blob, or repointed to one, only "
        "after that blob's row was committed (as _drop_intents:documents.status)",
    "read:transitions:unverified:uploads.blob_name": "the sweeper looks up only the names "
        "it passed; other uploads' entries are never read",
    "where:transitions:purge_keys:keys.state": "a pending key has no expires_at (NULL "
        "compares false), so only done keys can match",
    "where:transitions:confirm:keys.state": "runs after _confirm matched the intent's row "
        "pending under the attempt's token in the same transaction; a key is made done only "
        "by C4 or a roll-forward after committing its blob row, so the keys on this blob "
        "are pending (see _drop_pending_key:keys.state)",
    "read:transitions:owns:blobs.state": "a writer's token is on its row only while it is "
        "pending (see _confirm:blobs.state)",
    "read:transitions:take_over:blobs.state": "the takeover's update (_take_over) re-checks "
        "the row pending by compare-and-set in the same transaction and answers None when "
        "it does not match, as when this read finds nothing",
    "read:transitions:staged_blob:blobs.kind": "staged_upload reads the row of an "
        "attachment upload's own blob (it checked the upload first), inserted with kind "
        "attachment by begin_staged_upload; a row's kind never changes",
    "read:transitions:commit_replace:documents.status": "begin_replace read the document "
        "ready, and a document never returns to pending (see _point_document:documents."
        "status): the row with this id is ready whenever it still exists",
    # a writer's look at its own intent after a failed step (owns): the token term is
    # killed by tests/ledger/test_guards.py (a completion whose blob a claiming sweeper
    # deleted before its C3)
    "read:transitions:owns:blobs.name": "the writer's token names one row by itself (see "
        "_confirm:blobs.name)",
    # the store's handle of an upload, recorded once by the request that made the upload
    # (Resumable.create, DirectUploads.begin), right after C1 and before that request
    # answers with the upload's id: no other request knows the upload yet
    "where:transitions:set_handle:uploads.id": "the upload's token names one upload row by "
        "itself (see _record_parts:uploads.id)",
    "where:transitions:set_handle:uploads.attempt": "uploads.attempt is never updated and "
        "the token compared is read from this upload's own row (begin's find_upload)",
    "where:transitions:set_handle:uploads.state": "the upload is still open when its "
        "creating request records the handle: it is closed only by a completion (which "
        "needs the upload's id, not yet answered to anyone) or by a roll-forward (which "
        "needs its blob tagged committed, which needs a completion's C3); a sweeper that "
        "took it first removed its row, which neither form of the update matches",
    "where:transitions:set_handle:uploads.handle": "only set_handle writes a handle, and "
        "only the creating request calls it, once, or twice when the connection was lost "
        "under the first (once_more_if_lost): the second run then writes the handle the "
        "first wrote, the same value",
    # the verified SHA-256 of an upload (record_verified): read only (a) by the sweeper,
    # for a claimed creation whose blob it found tagged committed (unverified), (b) by
    # the give-up (_give_up, _drop_unverified_upload), which needs the upload open and
    # its intent pending under the upload's token, (c) by a completion that read the
    # upload open (direct.complete: whether a committed tag is its own, `ours`)
    "where:transitions:record_verified:uploads.id": "the upload's token names one upload "
        "row by itself (see _record_parts:uploads.id)",
    "where:transitions:record_verified:uploads.attempt": "uploads.attempt is never "
        "updated and the token compared is read from this upload's own row (see "
        "_record_parts:uploads.attempt); the subquery compares the blob's token besides",
    "where:transitions:record_verified:uploads.state": "a done upload whose intent is "
        "still pending under its token is an attachment's that a twin completion staged "
        "(finish_upload; a document's upload is closed only with its blob committed, which "
        "the subquery refuses); its SHA-256 is read by none of (a)-(c): the sweeper reads "
        "creations only, the give-up needs the upload open, and a completion answers a done "
        "upload from what it made (_made) before it looks at the SHA-256",
    "where:transitions:record_verified:exists": "a verification recorded after the intent "
        "left this upload changes no decision: every step that takes the intent but a "
        "claim deletes or closes the upload's row in the same transaction (nothing or a "
        "done upload matches: see record_verified:uploads.state); under a claim, (b) fails "
        "on the token the claim replaced for good, and (a) and (c) read the SHA-256 only "
        "for a blob tagged committed, which is written only by C3, after its completion's "
        "confirm and so after that completion's own record_verified won (recorded before "
        "the claim, of the same create-only bytes), or by a client at its PUT (S3's "
        "x-amz-tagging), which every completion reads before it hashes and refuses",
    "where:transitions:record_verified:sub.blobs.name": "weaker than dropping the whole "
        "subquery (see record_verified:exists); besides, the upload's token is on its own "
        "intent's row only (see _confirm:blobs.name)",
    "where:transitions:record_verified:sub.blobs.state": "weaker than dropping the whole "
        "subquery (see record_verified:exists)",
    "where:transitions:record_verified:sub.blobs.attempt": "weaker than dropping the whole "
        "subquery (see record_verified:exists)",
    # a sweeper's claimed rows to the deletion path (hand_to_deletion): the names term is
    # killed by tests/sweeper/test_sweeper.py (a staged attachment and a rolled-forward
    # creation in one batch)
    "where:transitions:hand_to_deletion:blobs.state": "the claim's token (new per claim) "
        "is on pending rows only, but for the names this same sweeper fenced to deleting "
        "(fence_swept), which it never passes here (staged attachments and committed "
        "replacements are other rows of its batch); the deletion path's claim never calls it",
    "where:transitions:hand_to_deletion:blobs.attempt": "a claimed row changes owner only "
        "to another sweeper's claim past this one's lease (no writer takes over a claim: "
        "_unclaimed; A4, C4 and R4 need the writer's token; _commit_claimed only creations), "
        "and that sweeper decides the same for these rows (a staged attachment, a "
        "replacement tagged committed: tags never go back): whichever moves the row first, "
        "it ends deleting with its upload rows gone, and the state term stops the other",
    "where:transitions:delete_document:documents.status": "ledger.delete read the document "
        "ready first (NotFound otherwise) and deletes it at the version it read; a document "
        "goes only pending -> ready, never back, and ids are new per C1, so the row with "
        "this id is ready whenever it still exists (as _point_document:documents.status)",
    # the instant a lease, an age or a retention ends, on the database clock
    "lease:transitions:_take_over:blobs.lease_until:lt-to-le": BOUNDARY,
    "lease:transitions:_record_parts:uploads.expires_at:gt-to-ge": BOUNDARY,
    "lease:transitions:purge_keys:keys.expires_at:le-to-lt": BOUNDARY,
    "lease:transitions:upload_live:uploads.expires_at:gt-to-ge": BOUNDARY,
    "lease:transitions:claim:blobs.changed_at:lt-to-le": BOUNDARY,
    "lease:transitions:claim:blobs.lease_until:lt-to-le": BOUNDARY,
    "lease:transitions:claim:blobs.lease_until:lt-to-le#2": BOUNDARY,
    "lease:transitions:find_key:keys.expires_at:gt-to-ge": BOUNDARY,
    "lease:transitions:find_upload:uploads.expires_at:le-to-lt": BOUNDARY,
    "lease:reconciler:past_cutoff:value:gt-to-ge": AGE_BOUNDARY,
    "lease:reconciler:orphan:older_than:gt-to-ge": AGE_BOUNDARY,
    "lease:reconciler:uncommitted:older_than:gt-to-ge": AGE_BOUNDARY,
    "lease:reconciler:uncommitted:deadline:le-to-lt": AGE_BOUNDARY + "; at an age equal to "
        "the deadline an uncommitted upload is reported, never discarded (that needs an age "
        "past older_than)",
    # a token's share of uploads
    "lease:transitions:_open_uploads:uploads.expires_at:gt-to-ge": BOUNDARY,
    # detach on the application's connection
    "where:transitions:detach_replaced:blobs.state": "an owner's rows are attached or deleting; "
        "marking a deleting one again only restarts its grace",
    "where:transitions:detach_owner:blobs.state": "an owner's rows are attached or deleting; "
        "marking a deleting one again only restarts its grace (as detach_replaced:blobs.state)",
    "where:transitions:remove_deleted:blobs.state": "the claim's token (new per claim) "
        "is on deleting rows only when passed here: the deletion path's claim takes "
        "deleting rows, and the sweeper passes only names fence_swept moved to deleting "
        "under that token; nothing leaves deleting but removal, and a later claim replaces "
        "the token, which then matches nothing",
    "where:transitions:remove_deleted:blobs.attempt": "callers pass only names whose blob "
        "they have just deleted or found absent, and a deleting row is final with a name "
        "never reused (a new uuid4 per intent), so the row goes only once its blob is gone, "
        "whoever holds the claim now; a sweeper that claimed it past this one's lease "
        "deletes an absent blob and removes nothing (as _drop_abandoned:blobs.attempt)",
    # the owner column's check on the application's connection
    "read:transitions:attached_to:blobs.name": "sync_owner_column only subtracts the "
        "result from the names it passed (missing = held - attached_to(...)): the owner's "
        "other attached names never change that difference",
    # Django's staging inside the application's transaction
    "rowcount:transitions:confirm_staged_in:won": "begin_stage_in inserted the row in the "
        "same open transaction (the application's savepoint), which no sweeper sees or waits "
        "past until it commits: the confirm always matches its own row (staging.py raises "
        "IntentLost for a case that cannot happen)",
    # the local disk's re-check under the lock: a blob's name is linked once (the
    # create-only os.link) and, once unlinked, never linked again (a new uuid4 name per
    # intent), so the inode under the name never differs from the one opened
    "store:stores/local:_locked:inode-check-skipped": "a blob's name is linked once (os.link, "
        "create-only) and never again after its unlink (names are new per intent), so the "
        "name never holds another inode than the one opened; the comparison (with its stat) "
        "only notices a name that vanished between open and flock: the mutant then acts on "
        "the unlinked inode, where a retag is lost with the deleted bytes (the writer's next "
        "compare-and-set decides, and the sweeper that deleted them removed the row) and a "
        "second delete's unlink raises FileNotFoundError, a failed delete retried (then "
        "absent)",
    # Azure's single put: overwrite=False is create-only by itself when no other access
    # condition is passed
    "store:stores/azure/store:put:upload_blob-without-unpacked": "upload_blob is also called "
        "with overwrite=False, which the SDK sends as If-None-Match: * when no other access "
        "condition is passed, and this call passes none: the put stays create-only "
        "(test_second_create_keeps_first_bytes passes on Azurite); **CREATE_ONLY keeps it so "
        "if a condition is ever added (Put Block List, which has no overwrite, needs it: "
        "its mutants are killed)",
    # the headers a direct upload's client is told to send on Azure: the SAS itself is
    # create-only
    "store:stores/azure/store:direct_put:dict-without-If-None-Match": "the SAS grants the "
        "create permission alone (c), with which the service writes the blob only while it "
        "does not exist and refuses an overwrite whatever the request's headers (see "
        "direct_put): the If-None-Match: * the client is told to send asks the same again, "
        "and a client that leaves it out is refused by the permission",
    # an event's marks: a delivery claim's token (claim_token: "e:" and 120 random bits,
    # new per claim) is written only by _claim, on pending rows, and every step out of
    # pending (_delivered, _dead) clears it, as _failed and _replay do: a row carrying the
    # token is pending
    "where:events:_delivered:events.state": "a claim's token (new per claim) is put only on "
        "pending events by the claim, and every step out of pending clears it (delivered, "
        "dead; a failure and a replay clear it too): an event bearing the token is pending",
    "where:events:_failed:events.state": "an event bearing the claim's token is pending "
        "(see _delivered:events.state)",
    "where:events:_dead:events.state": "an event bearing the claim's token is pending "
        "(see _delivered:events.state)",
    # the delivery claim's update, in the transaction whose read (_due) chose the ids with
    # the same terms, as the sweeper's claim does
    "where:events:_claim:events.state": "the ids were read pending in this transaction and "
        "are held: locked FOR UPDATE (SKIP LOCKED) on PostgreSQL until it ends, and on "
        "SQLite no other writer runs inside a write transaction, so the update finds them "
        "pending (as where:transitions:claim:blobs.state)",
    "where:events:_claim:events.lease_until": "the ids were read in this transaction by "
        "_due with lease_until <= NOW and are held until it ends (FOR UPDATE SKIP LOCKED on "
        "PostgreSQL: a row another claim holds is skipped, not read; on SQLite BEGIN "
        "IMMEDIATE: no other writer runs until it commits), so no claim can renew a lease "
        "between the read and the update; NOW is the same in both statements (PostgreSQL's "
        "now() is the transaction's start, with the same offset bound) or later (SQLite's "
        "'now' per statement), so the term holds again for every id: another worker's live "
        "lease is refused by the read (read:events:_due:events.lease_until is killed by "
        "test_a_claim_passes_over_an_event_another_workers_lease_holds)",
    "lease:events:_claim:events.lease_until:le-to-lt": "the term itself never filters an id "
        "the claim's read chose (see _claim:events.lease_until); made strict it refuses, at "
        "most, an id whose lease ends at the very instant NOW, to the clock's resolution (the "
        "event is claimed by the next run): " + BOUNDARY,
    "rowcount:events:claim:lost-check-won": "with no id read, the claim's update (ids IN an "
        "empty list) matches no row and returns none: the same answer, an empty claim "
        "(as rowcount:transitions:claim:lost-check-won)",
    # an operator's replay (blobledger events replay)
    "where:events:replay:deliveries.outcome": "only succeeded_targets reads a log line's "
        "outcome, and it reads \"ok\" alone: a failed line marked replayed is skipped by it "
        "as before, so every retry sends to the same targets",
    "where:events:replay:exists": "it only matters for an event neither dead nor "
        "delivered, which _replay then refuses (the command says so): that pending event's "
        "successes marked replayed make its next attempt send again to targets that took it, "
        "a duplicate that at-least-once delivery allows and receivers drop by its "
        "webhook-id; nothing is lost or reordered",
    "where:events:replay:sub.events.event_id": "the statement already names the event's own "
        "log lines (deliveries.event_id == event_id); without the term the EXISTS holds "
        "whenever any event is dead or delivered, so it differs from the full condition only "
        "when this event is neither: the case of where:events:replay:exists (a pending event, "
        "which _replay then refuses; at worst a duplicate at-least-once allows)",
    "where:events:replay:sub.events.state": "the EXISTS then holds whenever the event exists: "
        "it differs only for an event neither dead nor delivered, the case of "
        "where:events:replay:exists (which _replay then refuses; at worst a duplicate "
        "at-least-once allows)",
    # the retag worker's verdict on a blob gone between its refused update and its read
    "retag:retagger:_retag:moved_on-answered-tagged#2": "the blob was deleted after the "
        "conditioned update was refused: a committed row's blob is never deleted (only a "
        "pending intent's, a deleting row's or an orphan's), and a row that left committed "
        "never returns to it, so record_retagged (state committed and the claim's token) "
        "matches nothing: the name is counted lost instead of moved_on and no row changes "
        "(the answer of moved_on-answered-tagged, killed, when the update itself finds the "
        "blob absent)",
    # the stale check of the Django integration (a save writing back the name it loaded)
    "read:transitions:column_blobs:blobs.state": "without the term the read returns the "
        "owner column's rows in every state; the verdict reads the attached ones (filtered "
        "by state again in _refuse_stale) and whether the name's own row is among them, "
        "which the term's second arm (the name itself) read in every state already: the "
        "other rows it adds (detached ones, deleting) change neither",
    "integration:django/staging:stage_in_transaction:refusal-ignored": "the confirm always "
        "matches the row begin_stage_in inserted in the same open savepoint, which no "
        "sweeper sees before it commits (see rowcount:transitions:confirm_staged_in:won): "
        "the refusal it ignores cannot happen",
    # a signed read's decision (Ledger.former): a rejected document's bytes are never read
    "read:transitions:pointed_blob:processing.state": "a document's processing rows other "
        "than rejected ones exist only while it is held (only a creation holds; the last "
        "acceptance deletes them with its ready step), when former refuses it anyway (not "
        "readable), or after a held document was deleted before its verdict: a document "
        "never ready, whose blob no URL the service signs ever named (it signs a ready "
        "document's current blob only). The mutant only refuses more, and only reads never "
        "signed (processing.document_id is killed by "
        "test_a_held_or_rejected_document_is_never_readable)",
    # a version's variants detached by R4 and the delete
    "where:variant_owner:_detach:blobs.owner_table": "the owner key names one document "
        "version, '<document id>:<version>' with the id a new random one; an application's "
        "owner key is its row's primary key, never that string, so no other table's row "
        "matches the key (owner_key is killed by "
        "test_a_replace_or_a_delete_detaches_its_own_versions_variants_only)",
    "where:variant_owner:_detach:blobs.state": "a variant row of that version not attached "
        "is a maker's intent (pending: its V4 not done) or already deleting: the first moved "
        "to deleting makes its maker lose at its next compare-and-set, as its V4 refuses a "
        "version ended anyway (VersionEnded: test_a_version_ended_while_its_variant_was_made "
        "passes with the mutant), its blob then removed by the deletion path; the second "
        "only gets a later changed_at (its grace starts again)",
    # a variant's steps (V1, confirm, V4): a claim is a row with a fresh blob name and a
    # fresh token, both new per claim and never reused
    "read:variant_steps:_attached:blobs.owner_table": "the owner key names one document "
        "version (see where:variant_owner:_detach:blobs.owner_table): no other table's row "
        "has that key",
    "read:variant_steps:_live:blobs.owner_table": "the owner key names one document "
        "version (see where:variant_owner:_detach:blobs.owner_table): no other table's row "
        "has that key",
    "read:variant_steps:_lock_version:documents.status": "the maker read the document ready "
        "at that version before V1, and a document never returns to pending (see "
        "_point_document:documents.status): the row with that id and version is never "
        "pending",
    "where:variant_steps:_fence_lapsed:blobs.name": "the token seen names one row by itself "
        "(minted per claim, inserted with that claim's own new row only)",
    "where:variant_steps:_fence_lapsed:blobs.state": "a maker's token is on its row only "
        "while it is pending: the fence and V4 clear it, nothing puts one on another state",
    "where:variant_steps:_fence_lapsed:blobs.attempt": "the blob name names one claim's row "
        "(new per claim, never reused), read in this transaction with the token compared",
    "where:variant_steps:_confirm:blobs.name": "the maker's token names its own row by "
        "itself (see _fence_lapsed:blobs.name)",
    "where:variant_steps:_confirm:blobs.state": "a maker's token is on its row only while it "
        "is pending (see _fence_lapsed:blobs.state)",
    "where:variant_steps:_confirm:blobs.attempt": "the blob name is the maker's own claim's "
        "(new per claim, never reused): pending, the row is still its claim (a fence or a "
        "sweeper's claim moves it to deleting, refused by the state term)",
    "where:variant_steps:_attach:blobs.name": "the maker's token names its own row by itself "
        "(see _fence_lapsed:blobs.name)",
    "where:variant_steps:_attach:blobs.state": "a maker's token is on its row only while it "
        "is pending (see _fence_lapsed:blobs.state)",
    "where:variant_steps:_attach:blobs.attempt": "the blob name is the maker's own claim's "
        "(see _confirm:blobs.attempt): pending, it is still its claim",
    "where:variant_steps:_attach:blobs.kind": "V1 inserted the claim's row with kind "
        "attachment, and a row's kind never changes",
    "rowcount:variant_steps:claim:lost-check-won": "a claim made for a version that ended "
        "is refused at V4, which repeats the version check under the same lock (as when the "
        "version ends after V1: test_a_version_ended_while_its_variant_was_made); the "
        "claim's row then goes as a lost maker's does",
    "recheck:variant_steps:claim:ignored": "the fence repeats the lease check in its own "
        "terms (lease_until < NOW): a live row is not fenced (rowcount 0) and the answer is "
        "busy, as before",
    "lease:variant_steps:_fence_lapsed:blobs.lease_until:lt-to-le": BOUNDARY,
    "lease:variant_steps:_live:blobs.lease_until:lt-to-le": BOUNDARY,
    # a held document's version: only creations hold
    "read:held:_lock_held:documents.version": HELD_VERSION,
    "read:held:_undecided:processing.version": HELD_VERSION,
    "where:held:_drop_held:documents.version": HELD_VERSION,
    "where:held:_drop_mine:processing.version": HELD_VERSION,
    "where:held:_to_ready:documents.version": HELD_VERSION,
    "where:held:_verdict:processing.version": HELD_VERSION,
    "where:held:accept:processing.version": HELD_VERSION,
    "where:held:reject:processing.version": HELD_VERSION,
    "read:held:document:documents.version": HELD_VERSION,
    "where:held:failed:processing.version": HELD_VERSION,
    "where:held:claim:processing.version": HELD_VERSION,
    # the processing claim's update, in the transaction whose read chose the rows
    "where:held:claim:processing.state": "the row was read pending in this transaction (FOR "
        "UPDATE SKIP LOCKED on PostgreSQL, BEGIN IMMEDIATE on SQLite) and is held until it "
        "ends: the update finds it pending (as where:events:_claim:events.state)",
    "where:held:claim:processing.lease_until": "the row was read in this transaction with "
        "lease_until <= NOW and is held until it ends, NOW the same or later (as "
        "where:events:_claim:events.lease_until)",
    # a work row carries a token only while pending: the claim's update sets it on a
    # pending row, and the statements that move a row out of pending (the verdict) clear
    # it in the same statement (attempt=None); tokens are fresh per claim, NULL = token is
    # never true
    "where:held:_drop_mine:processing.state": HELD_TOKEN,
    "where:held:_verdict:processing.state": HELD_TOKEN,
    "where:held:failed:processing.state": HELD_TOKEN,
    # the key of a held document's creation is done since C4
    "where:held:accept:keys.state": HELD_KEY,
    "where:held:reject:keys.state": HELD_KEY,
    "lease:held:claim:processing.lease_until:le-to-lt": BOUNDARY,
    "lease:held:claim:processing.lease_until:le-to-lt#2": BOUNDARY,
    "lease:held:purge:processing.changed_at:lt-to-le": BOUNDARY,
    "where:held:_to_ready:documents.status": "the transaction's first statement "
        "(_lock_held) read the row held at that version and holds it (FOR UPDATE on "
        "PostgreSQL, the write lock on SQLite) until it ends: the update finds it held (as "
        "where:events:_claim:events.state)",
    "where:held:_drop_held:documents.status": "the transaction's first statement "
        "(_lock_held) read the row held and holds it until it ends (see "
        "_to_ready:documents.status)",
    # the deletion path's judgement of a blob its conditioned tag update refused
    "tag:sweeper:_tag_deleting:judged-tagged": "the blob read back is tagged neither "
        "committed (the update was refused on it), pending nor untagged (both answered "
        "before); judged tagged, it is deleted conditioned on deleting, which the store "
        "refuses unless its tag is deleting (the verdict the code gives): counted refused "
        "as before, the blob and its row kept for the next run; only the log line differs "
        "(test_the_deletion_path_never_retags_a_blob_tagged_otherwise passes with it)",
    # the reconciler's retag of an attached row's pending blob
    "recheck:reconciler:retag_attached:still-forced": "the scan read the row attached; it can "
        "since only have gone deleting (detach, owner deletion) or been removed (its blob "
        "deleted first): the retag, conditioned on pending, moves a deleting row's blob to "
        "committed as the writer's A3 would have (tags only go forward; the deletion path "
        "deletes a committed blob as a pending one, and a delete conditioned on pending "
        "that the retag overtook is refused and done by its next run), and a deleted blob "
        "answers not found, counted as an error; names are never reused",
}


#: survivors that are NOT harmless, whose killing test is being written: the record says so
#: (no argument stands for them), keyed by mutant id, valued by what the test must show
PENDING: dict[str, str] = {
}
