"""The ledger for synchronous applications: the same steps, behind blocking calls.

    from blobledger.blocking import BlockingLedger
    with BlockingLedger.from_urls("postgresql://…", "file:///srv/blobs") as ledger:
        staged = ledger.stage(open("inv.pdf", "rb"), filename="inv.pdf")
        invoice.pdf = staged; session.commit()          # A4 in the application's flush
        for chunk in ledger.read_attachment(invoice.pdf): ...

A :class:`BlockingLedger` runs one :class:`~blobledger.Ledger` on an event loop of its
own, in a daemon thread, and waits for each call: a sync web framework's worker threads may
share one. It adds no step and no state of its own; every guarantee is the async ledger's.
Never call it from inside that loop (a coroutine of the ledger itself): it would wait for
itself.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

from blobledger.protocol.attachments import Attachment, StagedBlob, StagedUpload
from blobledger.protocol.documents import Data, Document
from blobledger.protocol.ledger import Ledger

T = TypeVar("T")


class BlockingLedger:
    """A connected :class:`Ledger` behind blocking calls (``close()`` or ``with`` ends it)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="blobledger",
                                        daemon=True)
        self._thread.start()
        try:
            self._call(ledger.connect())
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_urls(cls, database_url: str, store_url: str, **kwargs: Any) -> BlockingLedger:
        return cls(Ledger.from_urls(database_url, store_url, **kwargs))

    @classmethod
    def from_env(cls, *, migrate: bool = True) -> BlockingLedger:
        return cls(Ledger.from_env(migrate=migrate))

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Any coroutine of this ledger (``ledger.ledger.get(...)``), run on its loop."""
        return self._call(coro)

    def stream(self, chunks: AsyncIterator[bytes]) -> Iterator[bytes]:
        """An async byte stream of this ledger's (a ``BlobReader``, ``ledger.read``), read
        chunk by chunk from blocking code."""
        iterator = aiter(chunks)
        try:
            while True:
                try:
                    yield self._call(_next(iterator))
                except StopAsyncIteration:
                    return
        finally:
            close = getattr(iterator, "aclose", None)
            if close is not None:
                self._call(close())

    # -- attachments ----------------------------------------------------------------------
    def stage(self, data: Data, *, content_type: str | None = None,
              filename: str | None = None, sha256: str | None = None,
              md5: str | None = None, folder: str | None = None) -> StagedBlob:
        """:meth:`Ledger.stage` (A1-A3); a file object is read off the calling thread."""
        return self._call(self.ledger.stage(data, content_type=content_type,
                                            filename=filename, sha256=sha256, md5=md5,
                                            folder=folder))

    def staged_upload(self, upload_id: str) -> StagedUpload:
        """:meth:`Ledger.staged_upload`: the blob a client's attachment upload staged."""
        return self._call(self.ledger.staged_upload(upload_id))

    def attachment(self, blob_name: str) -> Attachment:
        return self._call(self.ledger.attachment(blob_name))

    def read_attachment(self, attachment: Attachment | str, start: int = 0,
                        length: int | None = None) -> Iterator[bytes]:
        """The attached blob's bytes, streamed chunk by chunk (the read stays open until the
        iterator is exhausted or closed)."""
        _, reader = self._call(self.ledger.open_attachment(attachment, start, length))
        chunks = aiter(reader)
        try:
            while True:
                try:
                    yield self._call(_next(chunks))
                except StopAsyncIteration:
                    return
        finally:
            self._call(reader.aclose())

    # -- documents ------------------------------------------------------------------------
    def create(self, name: str, data: Data, **kwargs: Any) -> Document:
        return self._call(self.ledger.create(name, data, **kwargs))

    def get(self, doc_id: str) -> Document:
        return self._call(self.ledger.get(doc_id))

    # -- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            if self._thread.is_alive():
                self._call(self.ledger.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def __enter__(self) -> BlockingLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _next(chunks: Any) -> bytes:
    return bytes(await anext(chunks))
