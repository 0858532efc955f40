"""The client's logic, once, for :class:`~blobledger.client.Client` and
:class:`~blobledger.client.AsyncClient`: every operation is a generator that yields what to
do (a :class:`Call` to send, a :class:`Sleep` to wait) and is sent what came of it (the
answer, or the transport error); the two clients only run these steps, one with httpx's
blocking client, the other with its async one. A download is a :class:`Download`, fed the
chunks as they come.

Retries (:func:`send`): a call is sent again when the answer says retry
(:mod:`._retry`) or the connection failed; a call that may have done its work before the
connection broke (``Retry.ONCE``: a replace, a tus part) is sent again only when the
connection could not be made at all. Any other answer is final: a 4xx is never retried.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import enum
import hashlib
import io
import time
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar
from urllib.parse import quote

import httpx

from blobledger.client import _retry
from blobledger.client._answers import (
    BadAnswer,
    DirectTarget,
    DocumentAnswer,
    Link,
    Page,
    ReadURL,
    describe,
    read,
)
from blobledger.client._direct import (
    STORE_RETRY_STATUSES,
    NoDirectUploads,
    StoreFailed,
    Target,
    checked_target,
)
from blobledger.client._problems import error_for
from blobledger.client._retry import Policy
from blobledger.errors import IntegrityError, PreconditionFailed, ServiceError

T = TypeVar("T")
CHUNK = 1024 * 1024
#: retries after a failed attempt, unless the client is told otherwise
RETRIES = 4
#: the bytes of one tus ``PATCH``
TUS_CHUNK = 8 * 1024 * 1024
TUS_VERSION = "1.0.0"
DOCUMENT_HEADER = "blobledger-document"

#: what a document's bytes may be given as: bytes, or a binary file open for reading
Data = bytes | IO[bytes]
#: told the bytes of a body sent so far by the current attempt (0 as each attempt begins)
Progress = Callable[[int], None]


class Retry(enum.Enum):
    SAFE = "safe"  # sent again after any transport failure, and when the answer says so
    ONCE = "once"  # sent again only if it never left (no connection), or the answer says so
    NEVER = "never"  # sent once (a store's PUT, which retries by itself)


@dataclass(frozen=True)
class Body:
    """Bytes to send, which can be sent again from their start: bytes, or a file read
    from where it stood when given."""

    data: Data
    size: int
    start: int = 0

    @classmethod
    def of(cls, data: Data) -> Body:
        if isinstance(data, (bytes, bytearray, memoryview)):
            return cls(bytes(data), len(data))
        start = data.tell()
        size = data.seek(0, io.SEEK_END) - start
        data.seek(start)
        return cls(data, size, start)

    def chunks(self, offset: int = 0, length: int | None = None) -> Iterator[bytes]:
        """The bytes from ``offset`` (``length`` of them: default all the rest)."""
        end = self.size if length is None else min(self.size, offset + length)
        if isinstance(self.data, bytes):
            for at in range(offset, end, CHUNK):
                yield self.data[at:min(at + CHUNK, end)]
            return
        self.data.seek(self.start + offset)
        left = end - offset
        while left > 0 and (chunk := self.data.read(min(CHUNK, left))):
            left -= len(chunk)
            yield chunk

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for chunk in self.chunks():
            digest.update(chunk)
        return digest.hexdigest()


@dataclass
class Call:
    """One request: to the service (``path`` under its URL, with the token), or, when
    ``store``, to a store's absolute URL (without the token)."""

    method: str
    path: str
    params: dict[str, str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: Body | None = None
    offset: int = 0
    length: int | None = None
    json: Any = None
    retry: Retry = Retry.SAFE
    store: bool = False
    #: told the bytes of the body sent so far by this attempt, as they go
    progress: Progress | None = None

    def content(self) -> Iterator[bytes] | None:
        """The body's bytes to send (each attempt from its start), told to ``progress``."""
        if self.body is None:
            return None
        chunks = self.body.chunks(self.offset, self.length)
        return chunks if self.progress is None else _told(chunks, self.progress)

    def acontent(self) -> AsyncIterator[bytes] | None:
        """:meth:`content`, for an async client."""
        chunks = self.content()
        return None if chunks is None else _atold(chunks)


def _told(chunks: Iterator[bytes], progress: Progress) -> Iterator[bytes]:
    sent = 0
    progress(sent)
    for chunk in chunks:
        yield chunk
        sent += len(chunk)
        progress(sent)


async def _atold(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


@dataclass(frozen=True)
class Sleep:
    seconds: float


Step = Call | Sleep
Outcome = httpx.Response | httpx.TransportError | None
Operation = Generator[Step, Outcome, T]


def document_path(doc_id: str, suffix: str = "") -> str:
    return f"/documents/{quote(doc_id, safe='')}{suffix}"


def etag(version: int | str) -> str:
    """``"3"``, the ETag of version 3 (a version given as text is quoted if it is not)."""
    text = str(version).strip()
    return text if text.startswith(('"', "W/")) else f'"{text}"'


def send(call: Call, policy: Policy) -> Operation[httpx.Response]:
    """The answer to ``call``, sent again as :mod:`this module <._core>` and ``policy``
    say; the last transport error is raised when the retries are spent."""
    attempt = 0  # the retries sent so far
    refused = 0  # of which after a connection that could not be made
    began = time.monotonic()
    while True:
        outcome = yield call
        if isinstance(outcome, httpx.Response):
            if call.retry is Retry.NEVER or not _retry.says_retry(outcome):
                return outcome
        elif isinstance(outcome, httpx.TransportError):
            connect = isinstance(outcome, httpx.ConnectError)
            if call.retry is Retry.NEVER or not (call.retry is Retry.SAFE or connect):
                raise outcome
        else:  # pragma: no cover - the runners answer every call
            raise TypeError("a call was answered with nothing")
        cause = outcome
        connect = isinstance(cause, httpx.ConnectError)
        number = (refused if connect else attempt) + 1
        wait = _retry.delay(attempt, cause if isinstance(cause, httpx.Response) else None)
        late = policy.total is not None and time.monotonic() - began + wait > policy.total
        if attempt >= policy.retries or number > policy.allowed(cause) or late:
            policy.tell(cause, number, None)
            if isinstance(cause, httpx.Response):
                return cause
            raise cause
        policy.tell(cause, number, wait)
        yield Sleep(wait)
        attempt += 1
        refused += int(connect)


def checked(response: httpx.Response, *expected: int) -> httpx.Response:
    """The answer if its status is one of ``expected`` (default: any 2xx); else the error it
    stands for (:mod:`._problems`)."""
    if response.status_code >= 400:
        raise error_for(response)
    if (expected and response.status_code not in expected) or response.status_code >= 300:
        raise ServiceError(f"the server answered {response.status_code}, which the client "
                           "does not expect here", response.status_code)
    return response


def document(response: httpx.Response, doc_id: str | None = None) -> DocumentAnswer:
    found, _ = read(DocumentAnswer, response, "a document")
    if doc_id is not None and found.id != doc_id:
        raise BadAnswer(f"the server answered the document {found.id!r} for the id "
                        f"{doc_id!r}")
    return found


def digest_header(sha256: str) -> str:
    return f"sha-256=:{base64.b64encode(bytes.fromhex(sha256)).decode()}:"


def documents_path(bucket: str | None) -> str:
    """Where a bucket's documents are created and listed (None: the default bucket's)."""
    return "/documents" if bucket is None else f"/buckets/{quote(bucket, safe='')}/documents"


def create(name: str, data: Data, content_type: str | None, idempotency_key: str | None,
           policy: Policy, progress: Progress | None = None,
           hold: bool = False, bucket: str | None = None) -> Operation[DocumentAnswer]:
    """``POST /documents``: every attempt under one idempotency key (made here if none is
    given), so a retry after a lost answer returns the document the first one made
    (``hold``: held until the service's processors accepted it, docs/pipeline.md)."""
    body = Body.of(data)
    headers = {"Idempotency-Key": idempotency_key or uuid.uuid4().hex,
               "Content-Type": content_type or "application/octet-stream",
               "Content-Length": str(body.size), "Repr-Digest": digest_header(body.sha256())}
    params = {"name": name, **({"hold": "true"} if hold else {})}
    call = Call("POST", documents_path(bucket), params=params, headers=headers, body=body,
                progress=progress)
    return document(checked((yield from send(call, policy)), 200, 201))


def replace(doc_id: str, data: Data, if_match: int | str, content_type: str | None,
            policy: Policy, progress: Progress | None = None) -> Operation[DocumentAnswer]:
    """``PUT /documents/{id}/content`` with ``If-Match``: PreconditionFailed (with the
    current version) if the document is no longer at that version."""
    body = Body.of(data)
    headers = {"If-Match": etag(if_match), "Content-Length": str(body.size),
               "Repr-Digest": digest_header(body.sha256())}
    if content_type:
        headers["Content-Type"] = content_type
    call = Call("PUT", document_path(doc_id, "/content"), headers=headers, body=body,
                retry=Retry.ONCE, progress=progress)
    return document(checked((yield from send(call, policy)), 200), doc_id)


def get(doc_id: str, policy: Policy) -> Operation[DocumentAnswer]:
    return document(checked((yield from send(Call("GET", document_path(doc_id)), policy)),
                            200), doc_id)


def delete(doc_id: str, if_match: int | str | None, policy: Policy) -> Operation[None]:
    headers = {"If-Match": etag(if_match)} if if_match is not None else {}
    call = Call("DELETE", document_path(doc_id), headers=headers, retry=Retry.ONCE)
    checked((yield from send(call, policy)))


def link(doc_id: str, base: httpx.URL, policy: Policy) -> Operation[Link]:
    """A URL to the content that needs no token (resolved against the service's URL)."""
    found, _ = read(Link, checked((yield from send(Call("GET", document_path(doc_id, "/link")),
                                                   policy)), 200), "a download link")
    url = base.join(found.url)
    if url.scheme not in ("http", "https") or not url.host or url.userinfo:
        raise BadAnswer(f"the server answered a link that is not a plain http(s) URL: "
                        f"{found.url[:200]!r}")
    return found.model_copy(update={"url": str(url)})


def read_url(doc_id: str, base: httpx.URL, policy: Policy) -> Operation[ReadURL]:
    """A signed URL that reads the document's current bytes (resolved against the service's
    URL where the service signs it itself)."""
    call = Call("POST", document_path(doc_id, "/url"))  # reads nothing, changes nothing
    found, _ = read(ReadURL, checked((yield from send(call, policy)), 200), "a read URL")
    url = base.join(found.url)
    if url.scheme not in ("http", "https") or not url.host or url.userinfo:
        raise BadAnswer(f"the server answered a read URL that is not a plain http(s) URL: "
                        f"{found.url[:200]!r}")
    return found.model_copy(update={"url": str(url)})


class Cursor:
    """The pages of a listing, in order: a cursor the server gave before (a listing that
    would never end) is refused, once the page that carried it was given."""

    def __init__(self, prefix: str, page_size: int, bucket: str | None = None) -> None:
        self.prefix = prefix
        self.bucket = bucket
        self.page_size = page_size
        self.cursor: str | None = None
        self.seen: set[str] = set()
        self.number = 0
        self.done = False
        self.refusal: BadAnswer | None = None

    def page(self, policy: Policy) -> Operation[Page]:
        if self.refusal is not None:
            self.done = True
            raise self.refusal
        params = {"prefix": self.prefix, "limit": str(self.page_size)}
        if self.cursor:
            params["cursor"] = self.cursor
        answer = checked((yield from send(Call("GET", documents_path(self.bucket),
                                               params=params), policy)), 200)
        found, _ = read(Page, answer, "a page of documents")
        self.number += 1
        self.cursor = found.next_cursor
        if not self.cursor:
            self.done = True
        elif self.cursor in self.seen:
            self.refusal = BadAnswer(f"the server gave page {self.number} the cursor of an "
                                     "earlier page: the listing would never end; stopped")
        else:
            self.seen.add(self.cursor)
        return found


def direct_upload(name: str, data: Data, content_type: str | None, server: str,
                  policy: Policy, progress: Progress | None = None
                  ) -> Operation[DocumentAnswer]:
    """``POST /uploads`` (NoDirectUploads if the server has none), the bytes PUT where it
    says (if the target passes :func:`._direct.checked_target`; retried as the store says,
    StoreFailed when it does not take them), then ``POST /uploads/{id}/complete``."""
    body = Body.of(data)
    began = yield from send(Call("POST", "/uploads", json={
        "name": name, "size": body.size, "sha256": body.sha256(),
        "content_type": content_type or "application/octet-stream"}), policy)
    if began.status_code in (404, 405):
        raise NoDirectUploads(f"the server offers no direct uploads ({describe(began)})",
                              began.status_code)
    answer, _ = read(DirectTarget, checked(began, 201), "a direct upload's target")
    target = checked_target(answer, server, body.size)
    yield from _store_put(target, body, policy, progress)
    completion = Call("POST", f"/uploads/{quote(target.id, safe='')}/complete")
    return document(checked((yield from send(completion, policy)), 200, 201))


def _store_put(target: Target, body: Body, policy: Policy,
               progress: Progress | None) -> Operation[None]:
    """The bytes PUT to the store, without the token, never following a redirect; what
    the store says to retry is sent again (``policy.retries`` times), and a refusal of a
    retry is success (the create-only PUT found the bytes an earlier attempt stored)."""
    last = ""
    for attempt in range(policy.retries + 1):
        outcome = yield Call("PUT", str(target.url), headers=dict(target.headers), body=body,
                             retry=Retry.NEVER, store=True, progress=progress)
        if isinstance(outcome, httpx.Response):
            status = outcome.status_code
            # 403/409/412 on a retry: the create-only put refused, the bytes are there already
            if status < 300 or (attempt > 0 and status in (403, 409, 412)):
                return
            if 300 <= status < 400:
                raise StoreFailed(f"the store answered {status}, a redirect (not followed)",
                                  status)
            if status not in STORE_RETRY_STATUSES:
                text = " ".join(outcome.text[:200].split())
                raise StoreFailed(f"the store refused the upload: HTTP {status} {text}",
                                  status)
            last = f"HTTP {status}"
        elif isinstance(outcome, httpx.TransportError):
            last = f"the store was unreachable: {outcome}"
        if attempt < policy.retries:
            yield Sleep(_retry.delay(attempt, outcome if isinstance(outcome, httpx.Response)
                                     else None))
    status = outcome.status_code if isinstance(outcome, httpx.Response) else 0
    raise StoreFailed(f"the store did not take the upload after {policy.retries + 1} "
                      f"attempts: {last}", status, last) from (
        outcome if isinstance(outcome, httpx.TransportError) else None)


def tus_upload(name: str, data: Data, content_type: str | None, base: httpx.URL,
               upload_url: str | None, chunk_size: int,
               policy: Policy) -> Operation[DocumentAnswer]:
    """A tus upload: created (unless ``upload_url`` names one begun before), then sent in
    parts of ``chunk_size``; after a broken part the offset the server holds is asked for
    (``HEAD``) and the upload goes on from there. The upload's URL must be on the service's
    own origin (the token goes there)."""
    body = Body.of(data)
    tus = {"Tus-Resumable": TUS_VERSION}
    if upload_url is None:
        meta = {"name": name, "content_type": content_type or "application/octet-stream"}
        created = checked((yield from send(Call("POST", "/files/", headers={
            **tus, "Upload-Length": str(body.size),
            "Upload-Metadata": ",".join(f"{k} {base64.b64encode(v.encode()).decode()}"
                                        for k, v in meta.items())}), policy)), 201)
        upload_url = created.headers.get("location", "")
        done = created.headers.get(DOCUMENT_HEADER)
        if done is not None:
            return (yield from get(done, policy))
    url = base.join(upload_url)
    if (url.scheme, url.host, url.port) != (base.scheme, base.host, base.port):
        raise BadAnswer(f"the server answered an upload URL on another origin: "
                        f"{upload_url[:200]!r}")
    where = url.raw_path.decode("ascii")
    offset = yield from _tus_offset(where, tus, body.size, policy)
    broken = 0
    while True:
        if offset == body.size:
            head = checked((yield from send(Call("HEAD", where, headers=tus), policy)), 200)
            done = head.headers.get(DOCUMENT_HEADER)
            if done is None:
                raise BadAnswer("the server holds every byte of the upload but names no "
                                "document")
            return (yield from get(done, policy))
        part = min(chunk_size, body.size - offset)
        outcome = yield Call("PATCH", where, headers={
            **tus, "Upload-Offset": str(offset), "Content-Length": str(part),
            "Content-Type": "application/offset+octet-stream"},
            body=body, offset=offset, length=part, retry=Retry.NEVER)
        if isinstance(outcome, httpx.Response) and outcome.status_code == 204:
            new = _number(outcome.headers.get("upload-offset"))
            if new is None or not offset < new <= body.size:
                raise BadAnswer(f"the server answered the offset {new} after a part from "
                                f"{offset}")
            offset, broken = new, 0
            done = outcome.headers.get(DOCUMENT_HEADER)
            if offset == body.size and done is not None:
                return (yield from get(done, policy))
            continue
        if isinstance(outcome, httpx.Response) and not (
                _retry.says_retry(outcome) or outcome.status_code == 409):
            checked(outcome)
        if broken >= policy.retries:
            if isinstance(outcome, httpx.TransportError):
                raise outcome
            assert outcome is not None
            raise error_for(outcome)
        yield Sleep(_retry.delay(broken, outcome if isinstance(outcome, httpx.Response)
                                 else None))
        broken += 1
        offset = yield from _tus_offset(where, tus, body.size, policy)


def _tus_offset(where: str, tus: dict[str, str], size: int,
                policy: Policy) -> Operation[int]:
    head = checked((yield from send(Call("HEAD", where, headers=tus), policy)), 200)
    offset = _number(head.headers.get("upload-offset"))
    length = _number(head.headers.get("upload-length"))
    if offset is None or offset > size or (length is not None and length != size):
        raise BadAnswer(f"the server holds an upload of {length} bytes at offset {offset}, "
                        f"not one of {size} bytes")
    return offset


def _number(value: str | None) -> int | None:
    if value is not None and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)
    return None


def announced_sha256(response: httpx.Response) -> str | None:
    """The SHA-256 a ``Repr-Digest`` announces, as hex (None: none, or not readable)."""
    for item in response.headers.get("repr-digest", "").split(","):
        algorithm, _, value = item.strip().partition("=")
        if algorithm.lower() == "sha-256" and value.startswith(":") and value.endswith(":"):
            with contextlib.suppress(binascii.Error, ValueError):
                return base64.b64decode(value[1:-1], validate=True).hex()
    return None


class Download:
    """A download's state: the request to send (first, or to resume from the offset
    reached, with ``If-Range`` on the ETag of the first answer; always streamed by the
    service, ``?redirect=false``, never a 307 to a store), every answer checked
    (a resumed answer must be the same version, from the same offset; a changed document
    is never spliced: PreconditionFailed), and the bytes of a whole download checked
    against the SHA-256 the first answer announced (IntegrityError)."""

    def __init__(self, doc_id: str, start: int = 0, end: int | None = None) -> None:
        self.doc_id = doc_id
        self.start = start
        self.end = end  # inclusive, as in a Range header
        self.offset = start
        self.etag: str | None = None
        self.sha256: str | None = None
        self.total: int | None = None
        self.digest = hashlib.sha256()

    def call(self) -> Call:
        headers: dict[str, str] = {}
        if self.offset > 0 or self.end is not None:
            headers["Range"] = f"bytes={self.offset}-{'' if self.end is None else self.end}"
        if self.etag is not None:
            headers["If-Range"] = self.etag
        # streamed by the service whatever BLOBLEDGER_DOWNLOADS says: its answer carries the
        # SHA-256 checked here and the version a resume is conditioned on
        return Call("GET", document_path(self.doc_id, "/content"), headers=headers,
                    params={"redirect": "false"})

    def answered(self, response: httpx.Response) -> None:
        """Check an answer before its bytes are taken."""
        resumed = self.etag is not None
        if response.status_code >= 400 or response.status_code not in (200, 206):
            checked(response, 200, 206)
        tag = response.headers.get("etag")
        if resumed and (response.status_code != 206 or tag != self.etag):
            raise PreconditionFailed(f"the document {self.doc_id} changed while it was read "
                                     f"(ETag {self.etag} then {tag}); nothing was spliced")
        if response.status_code == 206:
            first, last, _ = _content_range(response.headers.get("content-range", ""))
            if first != self.offset or (self.end is not None and last > self.end):
                raise BadAnswer(f"the server answered bytes {first}-{last}, not from "
                                f"{self.offset}")
            self.total = last + 1
        elif self.offset > 0 or self.end is not None:
            raise BadAnswer("the server answered the whole document to a Range request")
        else:
            length = _number(response.headers.get("content-length"))
            self.total = length
        if not resumed:
            self.etag = tag
            self.sha256 = announced_sha256(response)

    @property
    def size(self) -> int | None:
        """The bytes this download will hold in all (from ``start``), once the first answer
        came: None before, or when the server did not say."""
        return None if self.total is None else self.total - self.start

    def take(self, chunk: bytes) -> bytes:
        self.offset += len(chunk)
        if self.total is not None and self.offset > self.total:
            raise BadAnswer("the server sent more bytes than it announced")
        self.digest.update(chunk)
        return chunk

    def complete(self) -> bool:
        """Whether every byte asked for came (else the download resumes)."""
        return self.total is None or self.offset >= self.total

    def finish(self) -> None:
        whole = self.start == 0 and self.end is None
        if whole and self.sha256 is not None and self.digest.hexdigest() != self.sha256:
            raise IntegrityError(f"the bytes of {self.doc_id} do not match their SHA-256")


def _content_range(value: str) -> tuple[int, int, int | None]:
    unit, _, rest = value.strip().partition(" ")
    span, _, size = rest.partition("/")
    first, _, last = span.partition("-")
    numbers = _number(first), _number(last)
    if unit != "bytes" or numbers[0] is None or numbers[1] is None or numbers[1] < numbers[0]:
        raise BadAnswer(f"the server answered a Content-Range that is not one: {value[:80]!r}")
    return numbers[0], numbers[1], _number(size)
