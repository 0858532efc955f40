"""Case J: a delete guarded by ``x-ms-if-tags``: the service deletes a blob still tagged
``pending`` and refuses (412) to delete one already tagged ``committed``."""

from __future__ import annotations

from azure.core.exceptions import HttpResponseError

from blobledger.experiments.common import CaseResult, Context, http
from blobledger.stores.azure import tag_condition

PENDING = {"state": "pending"}
COMMITTED = {"state": "committed"}
# Readable names, as the article prints them; the protocol's own names come from names.py.
NAMES = {"still-pending": "still-pending.txt", "already-committed": "already-committed.txt"}


async def case_j(ctx: Context, result: CaseResult) -> None:
    await ctx.container.get_blob_client(NAMES["still-pending"]).upload_blob(
        b"abandoned upload", tags=PENDING)
    await ctx.container.get_blob_client(NAMES["already-committed"]).upload_blob(
        b"a live document", tags=COMMITTED)
    guard = tag_condition(PENDING)
    outcomes: dict[str, str] = {}
    for label, name in NAMES.items():
        try:
            await ctx.container.get_blob_client(name).delete_blob(
                if_tags_match_condition=guard)
        except HttpResponseError as exc:
            outcomes[label] = str(exc.status_code)
            result.say(f"delete {label:<17} -> {http(exc)}")
        else:
            outcomes[label] = "deleted"
            result.say(f"delete {label:<17} -> deleted=True")
    remaining = sorted(await ctx.blob_names())
    result.say(f"remaining: {', '.join(remaining) or '(none)'}")
    result.figures.update(guard=guard, outcomes=outcomes, remaining=remaining)
