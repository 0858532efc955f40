"""List Blobs, read lean: one page of a container's listing as :class:`BlobInfo` values.

The SDK's ``list_blobs`` turns every blob of a page into a generated model, then into a
``BlobProperties``, through a generic XML deserializer: measured on a 20,000-blob listing with
tags, that costs more CPU than the whole rest of a reconcile and holds five objects per blob
while a page is alive (which is why pages had to stay small, and small pages cost a request
each). This module sends the same request through the client's own pipeline (its
credential, retries and headers), streams the answer, and reads the few fields it needs
with a pull parser as the bytes arrive, dropping each ``<Blob>`` element once read: pages
can be the service's 5,000, and a page is never held whole (neither its body nor its
blobs).

It stands on two members of the SDK's generated layer (the request builder and the
pipeline); :func:`supported` says whether the installed SDK has them, and the store falls
back to ``list_blobs`` if not. ``tests/stores/test_azure_listing.py`` checks that both
readings of a container agree, field by field.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import unquote

from azure.core.exceptions import HttpResponseError, map_error

from blobledger.stores.base import BlobInfo

_build: Any
try:  # the generated layer of the installed SDK
    from azure.storage.blob._generated.operations._container_operations import (
        build_list_blob_flat_segment_request as _build,
    )
except ImportError:  # pragma: no cover - an SDK without it lists through list_blobs
    _build = None

#: the service's own maximum page
PAGE = 5000
#: bytes of an answer handed to the parser at a time
FEED = 64 * 1024


def supported(client: Any) -> bool:
    """Whether ``client`` (a ContainerClient) exposes what :func:`pages` needs."""
    operations = getattr(getattr(client, "_client", None), "container", None)
    return (_build is not None
            and hasattr(getattr(operations, "_client", None), "_pipeline")
            and hasattr(getattr(operations, "_config", None), "version"))


async def blobs(client: Any, prefix: str | None, include: Sequence[str],
                page: int = PAGE) -> AsyncIterator[BlobInfo]:
    """Every blob of the container's flat listing under ``prefix``, in the service's order,
    read from each answer as it streams in (a page is never held whole: memory stays one
    chunk of the answer and the blobs read from it). Errors are the SDK's own
    (``HttpResponseError`` and its mapped subclasses)."""
    operations = client._client.container
    marker: str | None = None
    while True:
        request = _build(
            url=operations._config.url, version=operations._config.version, prefix=prefix,
            marker=marker, maxresults=page, include=list(include) or None,
            restype="container", comp="list")
        request.url = operations._client.format_url(request.url)
        answer = await operations._client._pipeline.run(request, stream=True)
        response = answer.http_response
        try:
            if response.status_code != 200:
                await response.read()
                map_error(status_code=response.status_code, response=response, error_map={})
                raise HttpResponseError(response=response)
            reader = _Reader(tags="tags" in include)
            async for chunk in response.iter_bytes():
                for blob in reader.feed(chunk):
                    yield blob
            for blob in reader.close():
                yield blob
        finally:
            await response.close()
        marker = reader.marker
        if not marker:
            return


class _Reader:
    """One List Blobs answer, fed in pieces: the blobs each piece completes, and the
    NextMarker once it is closed. A read ``<Blob>`` is dropped from the tree at once."""

    def __init__(self, *, tags: bool) -> None:
        self._parser: Any = ET.XMLPullParser(events=("start", "end"))
        self._tags = tags
        self._blobs: Any = None  # the <Blobs> element, whose children are dropped once read
        self.marker: str | None = None

    def feed(self, data: bytes) -> list[BlobInfo]:
        self._parser.feed(data)
        return self._drain()

    def close(self) -> list[BlobInfo]:
        self._parser.close()
        return self._drain()

    def _drain(self) -> list[BlobInfo]:
        found: list[BlobInfo] = []
        for event, element in self._parser.read_events():
            if event == "start":
                if element.tag == "Blobs":
                    self._blobs = element
            elif element.tag == "Blob":
                found.append(_blob(element, self._tags))
                if self._blobs is not None:
                    self._blobs.remove(element)
            elif element.tag == "NextMarker":
                self.marker = element.text or None
        return found


def parse(body: bytes, *, tags: bool) -> tuple[list[BlobInfo], str | None]:
    """One whole List Blobs answer, fed in slices of ``FEED`` bytes: its blobs and its
    NextMarker (None on the last page)."""
    reader = _Reader(tags=tags)
    found: list[BlobInfo] = []
    view = memoryview(body)
    for start in range(0, len(view), FEED):
        found += reader.feed(bytes(view[start:start + FEED]))
    found += reader.close()
    return found, reader.marker


def _blob(element: ET.Element, with_tags: bool) -> BlobInfo:
    name_element = element.find("Name")
    name = (name_element.text or "") if name_element is not None else ""
    if name_element is not None and name_element.get("Encoded") == "true":
        name = unquote(name)
    properties = element.find("Properties")
    metadata = element.find("Metadata")
    meta = {} if metadata is None else {m.tag: m.text or "" for m in metadata}
    tags: dict[str, str] | None = None
    if with_tags:
        tags = {(t.findtext("Key") or ""): (t.findtext("Value") or "")
                for t in element.iterfind("Tags/TagSet/Tag")}
    etag = _text(properties, "Etag") or ""
    return BlobInfo(
        name=name,
        size=int(_text(properties, "Content-Length") or 0),
        last_modified=_date(_text(properties, "Last-Modified")),
        etag=etag if etag.startswith('"') else f'"{etag}"',
        content_type=_text(properties, "Content-Type") or None,
        sha256=meta.get("sha256"),
        md5=meta.get("md5"),
        tags=tags,
    )


def _text(parent: ET.Element | None, tag: str) -> str | None:
    return None if parent is None else parent.findtext(tag)


def _date(text: str | None) -> datetime:
    """Last-Modified (every listed blob has one; a malformed answer is a ValueError)."""
    return parsedate_to_datetime(text or "")
