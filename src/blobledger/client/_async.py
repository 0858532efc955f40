"""The async client: :mod:`._core`'s operations, run on ``httpx.AsyncClient``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any, Self

import httpx

from blobledger.client import _core
from blobledger.client._answers import (
    MAX_ANSWER,
    MAX_PROBLEM,
    DocumentAnswer,
    Link,
    Page,
    ReadURL,
    too_long,
)
from blobledger.client._core import Call, Data, Operation, Progress, Sleep
from blobledger.client._retry import Policy, Retried, backoff
from blobledger.client._setup import Setup, bounded


class AsyncClient:
    """:class:`~blobledger.client.Client`'s operations, awaited (the same checks, errors
    and retries). A file given as ``data`` is read in the event loop's thread."""

    def __init__(self, url: str, token: str | None = None, *, retries: int = _core.RETRIES,
                 connect_retries: int | None = None, retry_time: float | None = None,
                 on_retry: Callable[[Retried], None] | None = None,
                 timeout: float = 30.0, user_agent: str | None = None) -> None:
        self._setup = Setup.of(url, token, Policy(retries, connect_retries, retry_time,
                                                  on_retry), user_agent)
        self.http = httpx.AsyncClient(**self._setup.options(timeout))
        self._store = httpx.AsyncClient(**Setup.store_options())

    @property
    def url(self) -> str:
        return str(self._setup.base)

    async def aclose(self) -> None:
        await self.http.aclose()
        await self._store.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    async def create(self, name: str, data: Data, *, content_type: str | None = None,
                     idempotency_key: str | None = None, hold: bool = False,
               bucket: str | None = None,
                     progress: Progress | None = None) -> DocumentAnswer:
        return await self._run(_core.create(name, data, content_type, idempotency_key,
                                            self._setup.policy, progress, hold, bucket))

    async def replace(self, doc_id: str, data: Data, *, if_match: int | str,
                      content_type: str | None = None,
                      progress: Progress | None = None) -> DocumentAnswer:
        return await self._run(_core.replace(doc_id, data, if_match, content_type,
                                             self._setup.policy, progress))

    async def get(self, doc_id: str) -> DocumentAnswer:
        return await self._run(_core.get(doc_id, self._setup.policy))

    async def delete(self, doc_id: str, *, if_match: int | str | None = None) -> None:
        await self._run(_core.delete(doc_id, if_match, self._setup.policy))

    async def link(self, doc_id: str) -> Link:
        return await self._run(_core.link(doc_id, self._setup.base, self._setup.policy))

    async def read_url(self, doc_id: str) -> ReadURL:
        return await self._run(_core.read_url(doc_id, self._setup.base, self._setup.policy))

    async def pages(self, prefix: str = "", *, page_size: int = 100,
                    bucket: str | None = None) -> AsyncIterator[Page]:
        cursor = _core.Cursor(prefix, page_size, bucket)
        while not cursor.done:
            yield await self._run(cursor.page(self._setup.policy))

    async def documents(self, prefix: str = "", *, page_size: int = 100,
                        bucket: str | None = None) -> AsyncIterator[DocumentAnswer]:
        async for page in self.pages(prefix, page_size=page_size, bucket=bucket):
            for item in page.items:
                yield item

    async def upload_direct(self, name: str, data: Data, *, content_type: str | None = None,
                            progress: Progress | None = None) -> DocumentAnswer:
        return await self._run(_core.direct_upload(name, data, content_type, self.url,
                                                   self._setup.policy, progress))

    async def upload_tus(self, name: str, data: Data, *, content_type: str | None = None,
                         upload_url: str | None = None,
                         chunk_size: int = _core.TUS_CHUNK) -> DocumentAnswer:
        return await self._run(_core.tus_upload(name, data, content_type, self._setup.base,
                                                upload_url, chunk_size, self._setup.policy))

    async def read(self, doc_id: str, *, start: int = 0, end: int | None = None) -> bytes:
        return b"".join([chunk async for chunk in self.stream(doc_id, start=start, end=end)])

    def stream(self, doc_id: str, *, start: int = 0, end: int | None = None) -> AsyncReading:
        """As :meth:`Client.stream <blobledger.client.Client.stream>`."""
        download = _core.Download(doc_id, start, end)
        return AsyncReading(download, self._chunks(download))

    async def _chunks(self, download: _core.Download) -> AsyncIterator[bytes]:
        failures = 0
        while True:
            reached = download.offset
            try:
                async with self._stream(download.call()) as response:
                    download.answered(await self._read(response)
                                      if response.status_code >= 300 else response)
                    async for chunk in response.aiter_bytes():
                        yield download.take(chunk)
                if download.complete():
                    break
            except httpx.TransportError:
                failures = 0 if download.offset > reached else failures + 1
                if failures > self._setup.policy.retries:
                    raise
                await asyncio.sleep(backoff(failures))
        download.finish()

    def _stream(self, call: Call) -> Any:
        return self.http.stream(call.method, call.path, params=call.params,
                                headers=call.headers)

    async def _run(self, operation: Operation[_core.T]) -> _core.T:
        try:
            step = next(operation)
            while True:
                outcome: _core.Outcome = None
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                else:
                    try:
                        outcome = await self._send(step)
                    except httpx.TransportError as exc:
                        outcome = exc
                step = operation.send(outcome)
        except StopIteration as stop:
            result: _core.T = stop.value
            return result

    async def _send(self, call: Call) -> httpx.Response:
        client = self._store if call.store else self.http
        request = client.build_request(call.method, call.path, params=call.params,
                                       headers=call.headers, content=call.acontent(),
                                       json=call.json)
        return await self._read(await client.send(request, stream=True))

    @staticmethod
    async def _read(response: httpx.Response) -> httpx.Response:
        """The answer, read (an error answer's body: at most MAX_PROBLEM bytes and one; a
        success answer's: BadAnswer past MAX_ANSWER bytes)."""
        try:
            error = response.status_code >= 300
            limit = MAX_PROBLEM if error else MAX_ANSWER
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    if not error:
                        raise too_long(response)
                    break
        finally:
            await response.aclose()
        return bounded(response, bytes(body))


class AsyncReading(AsyncIterator[bytes]):
    """:class:`~blobledger.client.Reading`, for ``async for``; ``aclose()`` it when it is
    left before its end (an ``async with`` block does)."""

    def __init__(self, download: _core.Download, chunks: AsyncIterator[bytes]) -> None:
        self._download = download
        self._chunks = chunks

    @property
    def size(self) -> int | None:
        return self._download.size

    @property
    def sha256(self) -> str | None:
        return self._download.sha256

    async def __anext__(self) -> bytes:
        return await anext(self._chunks)

    async def aclose(self) -> None:
        close = getattr(self._chunks, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()
