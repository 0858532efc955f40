"""The blocking client: :mod:`._core`'s operations, run on ``httpx.Client``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
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


class Client:
    """The blobledger service at ``url``, with ``token`` (sent as ``Authorization:
    Bearer``). Every answer is checked before it is used; an error answer is raised as
    blobledger's own exception (``NotFound``, ``PreconditionFailed``, ``NameTaken``, …;
    ``ServiceError`` for the others); a body that is not what was asked for is
    ``BadAnswer``; a connection that failed after ``retries`` retries is httpx's
    ``TransportError``. Use it as a context manager, or ``close()`` it.

    Retries: ``retries`` of each request, at most
    ``connect_retries`` of them for a connection that cannot be made at all (default: as
    many), none whose wait would end ``retry_time`` seconds after the first attempt
    (default: no limit); ``on_retry`` is told of each attempt that said retry
    (:class:`blobledger.client.Retried`)."""

    def __init__(self, url: str, token: str | None = None, *, retries: int = _core.RETRIES,
                 connect_retries: int | None = None, retry_time: float | None = None,
                 on_retry: Callable[[Retried], None] | None = None,
                 timeout: float = 30.0, user_agent: str | None = None) -> None:
        self._setup = Setup.of(url, token, Policy(retries, connect_retries, retry_time,
                                                  on_retry), user_agent)
        self.http = httpx.Client(**self._setup.options(timeout))
        self._store = httpx.Client(**Setup.store_options())

    @property
    def url(self) -> str:
        return str(self._setup.base)

    def close(self) -> None:
        self.http.close()
        self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def create(self, name: str, data: Data, *, content_type: str | None = None,
               idempotency_key: str | None = None, hold: bool = False,
               bucket: str | None = None,
               progress: Progress | None = None) -> DocumentAnswer:
        """A new document ``name`` holding ``data`` (bytes or a binary file), every attempt
        under one idempotency key (``idempotency_key``, else one made here); ``hold``: held
        until the service's processors accepted it (its ``status`` says); ``bucket``: in that
        bucket (docs/buckets.md), else the default one; ``progress`` is told the bytes sent
        so far by each attempt."""
        return self._run(_core.create(name, data, content_type, idempotency_key,
                                      self._setup.policy, progress, hold, bucket))

    def replace(self, doc_id: str, data: Data, *, if_match: int | str,
                content_type: str | None = None,
                progress: Progress | None = None) -> DocumentAnswer:
        """The document's new bytes, if it is still at version ``if_match``
        (``PreconditionFailed`` with the current version, if not)."""
        return self._run(_core.replace(doc_id, data, if_match, content_type,
                                       self._setup.policy, progress))

    def get(self, doc_id: str) -> DocumentAnswer:
        """The document's metadata."""
        return self._run(_core.get(doc_id, self._setup.policy))

    def delete(self, doc_id: str, *, if_match: int | str | None = None) -> None:
        """Delete the document (only at version ``if_match``, if given)."""
        self._run(_core.delete(doc_id, if_match, self._setup.policy))

    def link(self, doc_id: str) -> Link:
        """A URL that opens the document's content without the token: signed for
        ``expires_in`` seconds, or the plain URL of a service with no tokens
        (``Link.signed`` says which)."""
        return self._run(_core.link(doc_id, self._setup.base, self._setup.policy))

    def read_url(self, doc_id: str) -> ReadURL:
        """A URL reading the document's current bytes with no credential, signed by the
        store where it can sign one (else by the service), until ``expires_at``."""
        return self._run(_core.read_url(doc_id, self._setup.base, self._setup.policy))

    def pages(self, prefix: str = "", *, page_size: int = 100,
              bucket: str | None = None) -> Iterator[Page]:
        """The pages of the ready documents whose names start with ``prefix`` (of
        ``bucket``, else of the default bucket)."""
        cursor = _core.Cursor(prefix, page_size, bucket)
        while not cursor.done:
            yield self._run(cursor.page(self._setup.policy))

    def documents(self, prefix: str = "", *, page_size: int = 100,
                  bucket: str | None = None) -> Iterator[DocumentAnswer]:
        """Every ready document whose name starts with ``prefix``, in name order."""
        for page in self.pages(prefix, page_size=page_size, bucket=bucket):
            yield from page.items

    def upload_direct(self, name: str, data: Data, *, content_type: str | None = None,
                      progress: Progress | None = None) -> DocumentAnswer:
        """A new document, its bytes sent straight to the store (``POST /uploads``), only
        to a target the client accepts (else ``Refused``, nothing sent: a ``PUT``, to
        https, the service's own origin or a loopback store beside a loopback service, with
        the headers a store needs; without the token, never following a redirect).
        ``NoDirectUploads`` if the server offers none; ``StoreFailed`` if the store did not
        take the bytes; ``progress`` is told the bytes each store attempt sent so far."""
        return self._run(_core.direct_upload(name, data, content_type, self.url,
                                             self._setup.policy, progress))

    def upload_tus(self, name: str, data: Data, *, content_type: str | None = None,
                   upload_url: str | None = None,
                   chunk_size: int = _core.TUS_CHUNK) -> DocumentAnswer:
        """A new document by tus, in parts of ``chunk_size``, resumed after a broken part
        (and, given ``upload_url``, an upload begun before)."""
        return self._run(_core.tus_upload(name, data, content_type, self._setup.base,
                                          upload_url, chunk_size, self._setup.policy))

    def read(self, doc_id: str, *, start: int = 0, end: int | None = None) -> bytes:
        """The document's bytes (``start`` to ``end``, inclusive, if given)."""
        return b"".join(self.stream(doc_id, start=start, end=end))

    def stream(self, doc_id: str, *, start: int = 0, end: int | None = None) -> Reading:
        """The document's bytes as they come (a :class:`Reading`: its ``size`` is known
        once the first bytes came); a broken connection is resumed from the offset
        reached, if the document is still the same version (else ``PreconditionFailed``);
        the whole document is checked against its SHA-256 (``IntegrityError``, raised after
        its last bytes)."""
        download = _core.Download(doc_id, start, end)
        return Reading(download, self._chunks(download))

    def _chunks(self, download: _core.Download) -> Iterator[bytes]:
        failures = 0
        while True:
            reached = download.offset
            try:
                with self._stream(download.call()) as response:
                    download.answered(self._read(response) if response.status_code >= 300
                                      else response)
                    for chunk in response.iter_bytes():
                        yield download.take(chunk)
                if download.complete():
                    break
            except httpx.TransportError:
                failures = 0 if download.offset > reached else failures + 1
                if failures > self._setup.policy.retries:
                    raise
                time.sleep(backoff(failures))
        download.finish()

    def _stream(self, call: Call) -> Any:
        return self.http.stream(call.method, call.path, params=call.params,
                                headers=call.headers)

    def _run(self, operation: Operation[_core.T]) -> _core.T:
        try:
            step = next(operation)
            while True:
                outcome: _core.Outcome = None
                if isinstance(step, Sleep):
                    time.sleep(step.seconds)
                else:
                    try:
                        outcome = self._send(step)
                    except httpx.TransportError as exc:
                        outcome = exc
                step = operation.send(outcome)
        except StopIteration as stop:
            result: _core.T = stop.value
            return result

    def _send(self, call: Call) -> httpx.Response:
        client = self._store if call.store else self.http
        request = client.build_request(call.method, call.path, params=call.params,
                                       headers=call.headers, content=call.content(),
                                       json=call.json)
        return self._read(client.send(request, stream=True))

    @staticmethod
    def _read(response: httpx.Response) -> httpx.Response:
        """The answer, read (an error answer's body: at most MAX_PROBLEM bytes and one; a
        success answer's: BadAnswer past MAX_ANSWER bytes)."""
        try:
            error = response.status_code >= 300
            limit = MAX_PROBLEM if error else MAX_ANSWER
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > limit:
                    if not error:
                        raise too_long(response)
                    break
        finally:
            response.close()
        return bounded(response, bytes(body))


class Reading(Iterator[bytes]):
    """A download under way (:meth:`Client.stream`): its bytes as they come. ``size``
    (the bytes it will hold, None until the first answer, or if the server did not say)
    and ``sha256`` (what the server announced) are known once the first bytes came.
    ``close()`` it when it is left before its end (a ``with`` block does)."""

    def __init__(self, download: _core.Download, chunks: Iterator[bytes]) -> None:
        self._download = download
        self._chunks = chunks

    @property
    def size(self) -> int | None:
        return self._download.size

    @property
    def sha256(self) -> str | None:
        return self._download.sha256

    def __next__(self) -> bytes:
        return next(self._chunks)

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
