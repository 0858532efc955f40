"""The S3 endpoint's write conditions when another writer gets there between the condition's
check and the commit: requests signed as boto3 signs them, sent through the service's own app
in process (``tests.explore.s3writers``), the failpoints' hook holding the request at its
step while the other writer runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from blobledger import failpoints
from blobledger.protocol.ledger import Ledger
from blobledger.s3api.lookup import etag_of
from tests.explore.s3writers import S3Endpoint, S3Refused, visible

#: one backend: the race is the endpoint's own, whatever the store
pytestmark = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _at(point: str, meanwhile: Callable[[], Awaitable[None]]) -> None:
    """Run ``meanwhile`` once, when the request reaches ``point``."""
    pending = [point]

    async def hook(reached: str) -> None:
        if pending and reached == pending[0]:
            pending.clear()
            await meanwhile()

    failpoints.set_hook(hook)


async def test_if_match_refuses_a_replace_raced_by_another_writer(ledger: Ledger) -> None:
    """``If-Match`` checked against version 1; another writer replaces it before this
    request's R4: the request is ``412 PreconditionFailed`` (the version it matched is gone),
    and the other writer's bytes stay."""
    first = await ledger.create("raced.txt", _chunks(b"one"))
    s3 = S3Endpoint(ledger, ledger.settings)

    async def other_writer() -> None:
        await ledger.replace(first.id, _chunks(b"two"), expected_version=1)

    _at("replace.after_insert", other_writer)
    try:
        with pytest.raises(S3Refused) as refused:
            await s3._send("PUT", "raced.txt", b"three", {"If-Match": etag_of(first)})
    finally:
        failpoints.set_hook(None)
        await s3.close()
    assert (refused.value.status, refused.value.code) == (412, "PreconditionFailed")
    now = await visible(ledger, "raced.txt")
    assert now is not None and now.version == 2
    assert b"".join([c async for c in ledger.read(first.id)]) == b"two"
