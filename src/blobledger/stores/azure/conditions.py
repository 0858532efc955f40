"""The conditions the Azure store sends, and the writes they condition: create-only
(``If-None-Match: *``), the ``x-ms-if-tags`` of a retag and of a delete (or ``If-Match`` on
the ETag, never both), one delete or a batch of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from azure.core import MatchConditions
from azure.storage.blob.aio import BlobClient, ContainerClient

from blobledger import failpoints
from blobledger._base.names import check_blob_name
from blobledger.errors import BlobNotFound, ConditionNotMet, StoreError
from blobledger.stores.base import Condition, DeleteOutcome, Store, Tags, tags_match

if TYPE_CHECKING:
    from blobledger.stores.azure.lean import LeanRequests

#: names per Blob Batch request (the service's limit)
BATCH_LIMIT = 256
# If-None-Match: * (IfMissing takes no etag: passing one leaks it into the transport).
CREATE_ONLY: dict[str, Any] = {"match_condition": MatchConditions.IfMissing}
# A tag condition no blob can satisfy: the condition on the delete that clears a name holding
# only uncommitted blocks. Measured on Azurite 3.37: x-ms-if-tags is not evaluated against a
# name holding only uncommitted blocks (the delete goes through and clears them) and is
# evaluated against a committed blob, tagged or not (412). If-None-Match: * does not do this
# there (a committed blob is deleted under it), and If-Match always fails on such a name.
NO_COMMITTED_BLOB = "\"state\" = 'pending' AND \"state\" = 'committed'"


def tag_condition(tags: Tags | None) -> str | None:
    """The ``x-ms-if-tags`` expression for an equality condition (``"state" = 'pending'``)."""
    if not tags:
        return None
    for key, value in tags.items():
        if "'" in value or '"' in key:
            raise ValueError(f"tag condition {key}={value} holds a quote")
    return " AND ".join(f"\"{key}\" = '{value}'" for key, value in sorted(tags.items()))


def _quoted(etag: str) -> str:
    """ETags as HTTP quotes them: listings return them bare, properties quoted."""
    return etag if etag.startswith('"') else f'"{etag}"'


def _delete_options(condition: Condition) -> dict[str, Any]:
    """The Delete Blob condition: x-ms-if-tags, or If-Match on the ETag (one of them)."""
    if condition.tags:
        return {"if_tags_match_condition": tag_condition(condition.tags)}
    return {"etag": _quoted(condition.etag or ""), "match_condition": MatchConditions.IfNotModified}


PENDING_TAG: Tags = {"state": "pending"}


def _untagged_pending(current: Mapping[str, str], if_tags: Tags | None) -> bool:
    """A blob with no tags at all meets the condition ``pending`` (and nothing else)."""
    return not current and if_tags == PENDING_TAG



class ConditionalWrites(Store):
    """Set Blob Tags and Delete Blob (one, or a batch), each with its condition."""

    if TYPE_CHECKING:  # the store's own (:class:`~blobledger.stores.azure.store.AzureStore`)
        container_name: str

        def _client(self) -> ContainerClient: ...

        def _retag_blob(self, name: str) -> BlobClient: ...

        def _lean_requests(self, name: str) -> LeanRequests | None: ...

        async def _only_uncommitted(self, name: str) -> bool: ...

        def _mapped(self, name: str, *, put: bool = False) -> AbstractContextManager[None]: ...

    async def set_tags(self, name: str, tags: Tags, *, if_tags: Tags | None = None) -> None:
        """Retag under ``x-ms-if-tags``; a condition ``pending`` is also met by a blob with no
        tags at all (a direct upload's, created untagged: :meth:`direct_put`)."""
        check_blob_name(name)
        if if_tags and not self.capabilities.state_conditioned_transition:
            current = await self.get_tags(name)  # the service ignores the condition
            if not tags_match(current, if_tags) and not _untagged_pending(current, if_tags):
                raise ConditionNotMet(name, f"tags are {current}")
            await failpoints.hit("store.set_tags.after_read")
        try:
            await self._set_blob_tags(name, tags, if_tags)
        except ConditionNotMet:
            if not _untagged_pending(await self.get_tags(name), if_tags):
                raise
            # Untagged: nobody writes ``pending`` on such a blob, so this write (C3's
            # ``committed``) cannot undo another actor's retag; see docs/backends.md.
            await self._set_blob_tags(name, tags, None)

    async def _set_blob_tags(self, name: str, tags: Tags, if_tags: Tags | None) -> None:
        with self._mapped(name):
            lean = self._lean_requests(name)
            if lean is not None and await lean.set_blob_tags(
                    name, tags, if_tags_match_condition=tag_condition(if_tags)):
                return
            await self._retag_blob(name).set_blob_tags(
                dict(tags), if_tags_match_condition=tag_condition(if_tags)
            )

    async def _delete(self, name: str, condition: Condition) -> bool:
        check_blob_name(name)
        try:
            with self._mapped(name):
                await self._client().get_blob_client(name).delete_blob(
                    delete_snapshots="include", **_delete_options(condition)
                )
        except BlobNotFound:
            return False
        except ConditionNotMet:
            # If-Match on an absent blob is a 412 (Azurite), not a 404: absent is absent.
            if condition.etag and await self._only_uncommitted(name):
                return False
            raise
        return True

    async def _delete_many(self, items: Sequence[tuple[str, Condition]]) -> list[DeleteOutcome]:
        """Blob Batch deletes, 256 per request, each with its own condition."""
        outcomes: list[DeleteOutcome] = []
        for start in range(0, len(items), BATCH_LIMIT):
            chunk = items[start : start + BATCH_LIMIT]
            for name, _ in chunk:
                check_blob_name(name)
            requests = [
                {"name": name, "delete_snapshots": "include", **_delete_options(cond)}
                for name, cond in chunk
            ]
            with self._mapped(self.container_name):
                responses = await self._client().delete_blobs(
                    *requests, raise_on_any_failure=False
                )
                answers = [r async for r in responses]
            for (name, _), response in zip(chunk, answers, strict=True):
                status = response.status_code
                if status in (200, 202):
                    outcomes.append(DeleteOutcome(name, deleted=True))
                elif status == 404:
                    outcomes.append(DeleteOutcome(name))
                elif status == 412:
                    outcomes.append(DeleteOutcome(name, error=ConditionNotMet(name, "batch")))
                elif status >= 500 or status in (408, 429):
                    outcomes.append(DeleteOutcome(
                        name, error=StoreError(f"storage answered {status} in a batch")))
                else:
                    outcomes.append(DeleteOutcome(
                        name, error=StoreError(f"storage answered {status} for {name}")))
        return outcomes
