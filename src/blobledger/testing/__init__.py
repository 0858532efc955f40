"""The store conformance suite, for any backend (``pip install pytest pytest-asyncio``).

    from blobledger.testing import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        async def store(self): ...

Run with ``pytest --asyncio-mode=auto``. See docs/backends.md, "Writing a backend".
"""

from blobledger.testing.conformance import StoreContract

__all__ = ["StoreContract"]
