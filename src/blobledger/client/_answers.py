"""What the client reads from the server, checked before anything is done with it.

The server is not trusted: a body that is not what the client expects is an error of one
line (:class:`BadAnswer`), never a traceback nor a guess.

- An error answer's body is a problem document (RFC 9457): a JSON object whose ``type``,
  ``title``, ``detail`` and ``instance`` are strings and whose ``status`` is an integer HTTP
  status (extension members are ignored). Anything else, or more than :data:`MAX_PROBLEM`
  bytes, is told as "the server answered <status> with a body that is not a problem
  document".
- A success body is read into a strict pydantic model (no coercion: ``"3"`` is not a
  version): a document, a page of documents, a direct upload's target; anything else is
  :class:`BadAnswer`, "the server answered 201 with a body that is not a document (...)".
- No body is read whole whatever it holds: an error answer's first :data:`MAX_PROBLEM`
  bytes, a success answer's first :data:`MAX_ANSWER` (decoded: a compressed answer is
  counted as it inflates), a document's bytes only as a stream.
"""

from __future__ import annotations

from datetime import datetime
from http import HTTPStatus
from typing import Any, TypeVar

import httpx
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from blobledger.errors import BlobLedgerError

#: the most of an error answer's body that is read (a problem document is small)
MAX_PROBLEM = 64 * 1024
#: the most of a success answer's body that is read, decoded (a page of 1000 documents
#: with long names and metadata stays far below it); a longer one is :class:`BadAnswer`
MAX_ANSWER = 16 * 1024 * 1024
#: the longest detail shown (the rest is cut)
MAX_DETAIL = 500

M = TypeVar("M", bound="_Strict")


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    _raw: Any = PrivateAttr(default=None)

    @property
    def raw(self) -> Any:
        """The JSON value this was read from, as the server sent it."""
        return self._raw


class Problem(_Strict):
    """RFC 9457's members, each of its type when present."""

    type: str = "about:blank"
    title: str | None = None
    status: int | None = Field(default=None, ge=100, le=599)
    detail: str | None = None
    instance: str | None = None


class DocumentAnswer(_Strict):
    """A document as the service answers it (``blobledger.client.DocumentInfo``): the
    members the client uses, checked; any other member is kept (``model_extra``)."""

    id: str = Field(min_length=1, max_length=1024)
    name: str = Field(max_length=4096)
    version: int
    size: int | None = None
    sha256: str | None = None
    #: the MD5 of its bytes (absent from an older service)
    md5: str | None = None
    content_type: str | None = None
    status: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    #: the bucket it lives in (absent from an older service: the default bucket)
    bucket: str | None = Field(default=None, max_length=63)


class Page(_Strict):
    """One page of ``GET /documents``."""

    items: list[DocumentAnswer]
    next_cursor: str | None = Field(default=None, max_length=4096)


class DirectTarget(_Strict):
    """``POST /uploads``'s answer: where and how to send the bytes (checked further by
    :mod:`blobledger.client._direct` before anything is sent)."""

    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")
    method: str
    url: str = Field(max_length=8192)
    headers: dict[str, str]
    size: int | None = None


def status_text(status: int) -> str:
    """``HTTP 404 Not Found``: the phrase is the standard one, never the server's."""
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def error_body(response: httpx.Response) -> bytes | None:
    """The body of an error answer, at most :data:`MAX_PROBLEM` bytes (None: longer)."""
    try:
        body = response.content
    except httpx.ResponseNotRead:
        collected = bytearray()
        for chunk in response.iter_bytes():
            collected += chunk
            if len(collected) > MAX_PROBLEM:
                break
        body = bytes(collected)
    return body if len(body) <= MAX_PROBLEM else None


def problem(response: httpx.Response) -> Problem | None:
    """The error answer's problem document; None for an empty body; ValueError for a body
    that is not one."""
    body = error_body(response)
    if body is None:
        raise ValueError("too long")
    if not body.strip():
        return None
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in ("application/problem+json", "application/json"):
        raise ValueError(f"content type {kind!r}")
    return Problem.model_validate(_json(body))


def describe(response: httpx.Response) -> str:
    """One line for an error answer: the problem's detail (or title) and the status."""
    status = response.status_code
    try:
        found = problem(response)
    except (ValueError, ValidationError):
        return f"the server answered {status} with a body that is not a problem document"
    text = (found.detail or found.title or "") if found is not None else ""
    text = " ".join(text.split())
    if len(text) > MAX_DETAIL:
        text = text[:MAX_DETAIL] + "…"
    return f"{text} (HTTP {status})" if text else status_text(status)


class BadAnswer(BlobLedgerError):
    """A success answer whose body is not what the client expects."""


def too_long(response: httpx.Response) -> BadAnswer:
    """A success answer whose body holds more than :data:`MAX_ANSWER` bytes."""
    return BadAnswer(f"the server answered {response.status_code} with a body of more than "
                     f"{MAX_ANSWER} bytes")


def read(model: type[M], response: httpx.Response, what: str) -> tuple[M, Any]:
    """A success body as ``model`` and as the JSON value it was read from; BadAnswer, one
    line naming what was expected, otherwise."""
    try:
        data = _json(response.content)
        found = model.model_validate(data)
        found._raw = data
        if isinstance(found, Page):
            for item, value in zip(found.items, data["items"], strict=True):
                item._raw = value
        return found, data
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the body"
        reason = f"{where}: {first['msg']}"
    except ValueError as exc:
        reason = str(exc)
    raise BadAnswer(f"the server answered {response.status_code} with a body that is not "
                    f"{what} ({reason})")


def _json(body: bytes) -> Any:
    """The JSON value (pydantic's parser: bounded nesting, no NaN; ValueError otherwise)."""
    try:
        return pydantic_core.from_json(body, allow_inf_nan=False)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None


class Link(_Strict):
    """``GET /documents/{id}/link``: a URL that opens the content without the token. Either
    a signed link (``signed``), which opens it for ``expires_in`` seconds, or, from a
    service with no tokens configured, the content's plain URL (``expires_in`` None): it
    needs no token because the service asks for none, and opens the content for as long
    as the document is there."""

    url: str = Field(min_length=1, max_length=8192)
    expires_in: int | None = Field(default=None, ge=0)

    @property
    def signed(self) -> bool:
        """The URL carries its own authorization, for ``expires_in`` seconds (False: the
        plain content URL of a service that asks for no token)."""
        return self.expires_in is not None


class ReadURL(_Strict):
    """``POST /documents/{id}/url``: a URL that reads the document's current bytes with no
    credential (Range honoured), signed by the store where it signs one (an Azure SAS, an S3
    presigned GET), else by the service; it stops at ``expires_at`` (None: it does not, from
    a service with no tokens configured on a store that signs nothing)."""

    url: str = Field(min_length=1, max_length=16384)
    expires_at: datetime | None = Field(default=None, strict=False)
