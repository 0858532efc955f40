"""The simulation's in-memory store passes the conformance suite the real backends pass."""

from __future__ import annotations

import pytest

from tests.sim.store import MemoryStore
from tests.stores.contract import StoreContract


class TestMemoryStore(StoreContract):
    @pytest.fixture
    async def store(self) -> MemoryStore:
        return MemoryStore()
