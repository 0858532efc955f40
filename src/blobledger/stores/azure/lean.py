"""The two requests the protocol's create sends per blob, each as one HTTP request of its
own, without the SDK's request pipeline: the single Put Blob (C2's create-only upload of a
body up to the single-put limit) and Set Blob Tags (the retag: C3, the retag worker, the
deletion path's ``deleting``).

Through the SDK each costs this process about 0.7-0.9 ms of CPU (its sixteen policies, the
generated operation's request and body, a blob client built per name, aiohttp), several
times what the request needs: about 0.2 ms, measured against Azurite (``bench/RESULTS.md``).
So they are sent here as the service documents them, with the headers the SDK sends for the
same call (``x-ms-version`` the SDK's, ``x-ms-date``, the put's ``If-None-Match: *``, tags,
metadata and content settings, the retag's ``x-ms-if-tags`` and its tags as XML), signed by
the container client's own credential policy (shared key, or a SAS credential) or under the
SAS that the client's URL carries, on the store's aiohttp session, with the same timeouts
and the same retries as the SDK's (``LinearRetry``: the same statuses, the same waits).

A token credential (Entra ID) signs them too, through the client's own bearer-token policy
(its token cache and refresh); a 401 answer, the service's challenge (a token for another
tenant, claims it asks for), is the SDK's to answer: the request reports it not sent and
the store makes the SDK's call, whose policy answers the challenge (a request answered 401
was not applied). Not taken (:meth:`LeanRequests.of` answers None, or :func:`observed` is
true), and the SDK's call used instead: a store built with SDK options other than the
timeouts and the retry count (hooks, policies, proxies: they apply to every request the SDK
sends), and while anybody watches the SDK's requests: azure-core's tracing set, or the
SDK's HTTP logging at INFO (`blobledger --log-level DEBUG`; it stays at WARNING under INFO).

An answer other than 2xx is raised as :class:`Answered` (an ``HttpResponseError`` with the
status and the service's ``x-ms-error-code``), which :func:`~.errors.map_errors`
translates exactly as the SDK's own error for the same answer.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import uuid
from collections.abc import Mapping
from email.utils import formatdate
from typing import Any
from urllib.parse import quote, urlsplit
from xml.sax.saxutils import escape

import aiohttp
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.pipeline.transport import AioHttpTransport, HttpRequest
from azure.core.settings import settings as core_settings
from azure.storage.blob.aio import ContainerClient

from blobledger._base.logs import AZURE_HTTP_LOG

#: the SDK's HTTP logging (a line for every request at INFO)
HTTP_LOG = logging.getLogger(AZURE_HTTP_LOG)


def retried(status: int) -> bool:
    """Whether the SDK's retry policy retries an answer: 408, and 5xx but 501 and 505."""
    return status == 408 or (status >= 500 and status not in (501, 505))


class Answered(HttpResponseError):
    """The service's answer other than 2xx to a request sent here."""

    def __init__(self, status: int, code: str, name: str) -> None:
        super().__init__(f"storage answered {status} {code} for {name}".rstrip())
        self.status_code = status
        self.error_code = code


def observed() -> bool:
    """Whether anybody watches the SDK's requests: azure-core's tracing, or its HTTP log."""
    return (core_settings.tracing_implementation() is not None
            or HTTP_LOG.isEnabledFor(logging.INFO))


def tags_header(tags: Mapping[str, str]) -> str:
    """The ``x-ms-tags`` header of a put, encoded as the SDK encodes it."""
    return "&".join(f"{quote(key, safe='.-')}={quote(value, safe='.-')}"
                    for key, value in tags.items())


def tags_body(tags: Mapping[str, str]) -> bytes:
    """The request body of Set Blob Tags."""
    items = "".join(f"<Tag><Key>{escape(key)}</Key><Value>{escape(value)}</Value></Tag>"
                    for key, value in tags.items())
    return (f'<?xml version="1.0" encoding="utf-8"?><Tags><TagSet>{items}</TagSet></Tags>'
            .encode())


class LeanRequests:
    """Put Blob and Set Blob Tags on one container's blobs, signed as its client signs."""

    def __init__(self, container: ContainerClient, policy: Any, transport: AioHttpTransport,
                 session: aiohttp.ClientSession, *, retries: int, backoff: float,
                 jitter: float, connection_timeout: float, read_timeout: float) -> None:
        parts = urlsplit(container.url)
        self._base = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}/"
        self._query = parts.query  # a SAS in the client's URL
        self._version = container.api_version
        self._policy = policy
        #: a token's policy (its own challenges: a 401 is left to the SDK)
        self._bearer = inspect.iscoroutinefunction(getattr(policy, "on_request", None))
        self._context = PipelineContext(transport)  # signs the path as aiohttp sends it
        self._session = session
        self._retries = retries
        self._backoff = backoff
        self._jitter = jitter
        self._timeout = aiohttp.ClientTimeout(sock_connect=connection_timeout,
                                              sock_read=read_timeout)

    @classmethod
    def of(cls, container: ContainerClient, transport: AioHttpTransport,
           session: aiohttp.ClientSession, **options: Any) -> LeanRequests | None:
        """The requests for ``container``'s blobs, or None where only the SDK may send
        them: a client without the credential policy this was written against."""
        policy = getattr(container, "_credential_policy", False)
        if policy is False or (policy is not None and not hasattr(policy, "on_request")):
            return None  # not the SDK this was written against: leave it to the SDK
        return cls(container, policy, transport, session, **options)

    async def upload_blob(self, name: str, data: bytes, *, tags: Mapping[str, str],
                          metadata: Mapping[str, str], content_type: str | None,
                          content_md5: str, if_none_match: str | None = None) -> bool:
        """Put Blob: ``data`` as a block blob, with its tags, metadata, content type and
        MD5 (base64) as the SDK's ``upload_blob`` sends them; ``if_none_match="*"``: only
        while the name holds no blob (412 or 409 otherwise, as for the SDK's call). False:
        not sent, the token challenged (the SDK's call answers the challenge)."""
        conditions = {"If-None-Match": if_none_match} if if_none_match else {}
        headers = {"x-ms-blob-type": "BlockBlob", "x-ms-blob-content-md5": content_md5,
                   "x-ms-tags": tags_header(tags), "Content-Type": "application/octet-stream",
                   **{f"x-ms-meta-{key}": value for key, value in metadata.items()},
                   **({"x-ms-blob-content-type": content_type} if content_type else {}),
                   **conditions}
        return await self._request(name, self._url(name, ""), data, headers)

    async def set_blob_tags(self, name: str, tags: Mapping[str, str], *,
                            if_tags_match_condition: str | None = None) -> bool:
        """Set ``name``'s tags to ``tags`` under the condition (None: unconditioned). False:
        not sent, the token challenged (the SDK's call answers the challenge)."""
        conditions = ({"x-ms-if-tags": if_tags_match_condition}
                      if if_tags_match_condition is not None else {})
        headers = {"Content-Type": "application/xml; charset=utf-8", **conditions}
        return await self._request(name, self._url(name, "comp=tags"), tags_body(tags),
                                   headers)

    def _url(self, name: str, query: str) -> str:
        both = "&".join(filter(None, (query, self._query)))
        return f"{self._base}{quote(name, safe='~/')}" + (f"?{both}" if both else "")

    async def _request(self, name: str, url: str, body: bytes,
                       headers: Mapping[str, str]) -> bool:
        """PUT ``body`` to ``url``, retried as the SDK retries; an answer other than 2xx
        raised as :class:`Answered`, but a token's 401 (False: left to the SDK)."""
        attempt = 0
        while True:
            try:
                status, code = await self._send(url, body, headers)
            except (aiohttp.ClientError, TimeoutError, ConnectionError):
                if attempt >= self._retries:
                    raise
            else:
                if 200 <= status < 300:
                    return True
                if status == 401 and self._bearer:
                    return False
                if not retried(status) or attempt >= self._retries:
                    raise Answered(status, code, name)
            attempt += 1
            await asyncio.sleep(self._backoff + random.uniform(-self._jitter, self._jitter))

    async def _send(self, url: str, body: bytes,
                    headers: Mapping[str, str]) -> tuple[int, str]:
        request = HttpRequest("PUT", url, headers={
            "x-ms-version": self._version, "x-ms-date": formatdate(usegmt=True),
            "x-ms-client-request-id": str(uuid.uuid4()), "Content-Length": str(len(body)),
            **headers})
        if self._policy is not None:
            signed = self._policy.on_request(PipelineRequest(request, self._context))
            if inspect.isawaitable(signed):  # a token's policy: its token, got or refreshed
                await signed
        async with self._session.put(request.url, data=body, headers=request.headers,
                                     timeout=self._timeout) as answer:
            await answer.read()
            return answer.status, answer.headers.get("x-ms-error-code", "")
