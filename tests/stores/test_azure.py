"""The Azure backend on Azurite joins the conformance suite, plus the SDK traps pinned."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from blobledger.stores.azure import AzureStore
from tests.conftest import new_container
from tests.stores.contract import StoreContract
from tests.support.services import Azurite


class TestAzureStore(StoreContract):
    big = 600 * 1024

    @pytest.fixture
    async def store(self, azurite: Azurite) -> AsyncIterator[AzureStore]:
        store = AzureStore(new_container(), connection_string=azurite.connection_string,
                           single_put_limit=256 * 1024, block_size=100 * 1024)
        await store.prepare()
        async with store:
            yield store
