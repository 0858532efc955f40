"""The S3 endpoint's writers as actors: its own functions called with a request of their
own (a Starlette ``Request`` over a scope and a body, never the app's routing or signature
check), each writer a process of its own (a ledger of its own), on the run's database and
store.

- ``s3_putter``: PutObject through :func:`blobledger.s3api.writes.write` on a few keys
  (``s3-a``, ``s3-b``): ``If-None-Match: *`` (a create only), ``If-Match`` with the ETag of
  the version it was acknowledged (a replace only, at that version), and DeleteObject
  (:func:`blobledger.s3api.objects.delete_object`, whatever version the key names).
- ``s3_multipart``: CreateMultipartUpload, UploadPart, then two CompleteMultipartUpload of
  the upload at once (a client's retried completion reaching a second process), and now and
  then an AbortMultipartUpload racing them.

Each answer is what the endpoint would send: a raised error is mapped as the app maps it
(:func:`blobledger.s3api.errors.from_ledger`; one it does not map is an ``InternalError``,
which the model takes for a violation only where the checks say so). The checks: a
create-only write answered is version 1 of a document of its own; a replace answered under
``If-Match`` is the next version of the document it matched; two completions of one upload
answer one ETag, of the bytes sent; a completion is never told that nothing was stored
(``RequestTimeout``) or an ``InternalError`` while its upload's document was made; an abort
answered success leaves its upload not open. (An abort whose termination's COMMIT was lost
with its connection, and whose re-read finds the upload completed meanwhile, answers success
beside the completion's document, as tus answers a DELETE of a finished upload; one that
finds the completion's C4 first answers NoSuchUpload. Neither removes the document.)
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.requests import Request

from blobledger.errors import BlobLedgerError
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import UploadState
from blobledger.s3api import multipart, objects
from blobledger.s3api.call import Call
from blobledger.s3api.errors import from_ledger
from blobledger.s3api.sigv4 import UNSIGNED_PAYLOAD, Signed
from blobledger.s3api.writes import write

if TYPE_CHECKING:
    from tests.sim.sim import Doc, _Run

KEYS = ("s3-a", "s3-b")
#: the one access key the simulated clients sign with
SIGNED = Signed("sim-key", frozenset({"read", "write"}), UNSIGNED_PAYLOAD)


class Answered(BlobLedgerError):
    """The S3 error a request was answered (``code``), as the app maps what was raised."""

    def __init__(self, code: str, cause: BaseException) -> None:
        super().__init__(f"{code}: {cause}")
        self.code = code


def call(ledger: Ledger, key: str, *, method: str = "PUT",
         query: tuple[tuple[str, str], ...] = (), headers: dict[str, str] | None = None,
         body: bytes = b"") -> Call:
    """One request to the endpoint as its operations see it: ``body`` arrives in one
    message."""
    bucket = ledger.settings.s3api_bucket
    app = SimpleNamespace(state=SimpleNamespace(ledger=ledger, body_timeout=60.0))
    sent = {"headers": dict(headers or {})}
    if method in ("PUT", "POST"):
        sent["headers"].setdefault("content-length", str(len(body)))
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    scope = {"type": "http", "method": method, "scheme": "http", "server": ("sim", 80),
             "path": f"/{bucket}/{key}", "root_path": "", "app": app,
             "query_string": urlencode(query).encode(),
             "headers": [(k.encode(), v.encode()) for k, v in sent["headers"].items()]}
    return Call(Request(scope, receive), ledger.settings, bucket, key, list(query), SIGNED,
                "sim")


def answered(work: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
    """``work`` whose raised error is answered as the endpoint answers it (``Answered``)."""
    async def go() -> Any:
        try:
            return await work()
        except Exception as exc:
            error = from_ledger(exc)
            raise Answered("InternalError" if error is None else error.code, exc) from exc
    return go


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _code(outcome: str, value: Any) -> str:
    if outcome == "ok":
        return "ok"
    return value.code if isinstance(value, Answered) else outcome


# -- PutObject and DeleteObject ------------------------------------------------------------
async def s3_putter(run: _Run, n: int) -> None:
    """Conditional PutObject and DeleteObject on a few keys; the key's documents in the
    model (``run.docs``), so the read-back and the invariants check them too."""
    ledger = run.ledger()
    for i in range(run.config.ops):
        key = run.rng.choice(KEYS)
        mine = [d for d in run.s3_keys.setdefault(key, [])
                if not d.deleted and not d.maybe_deleted]
        choice = run.rng.random()
        if mine and choice < 0.4:
            await _replace(run, ledger, n, key, mine[-1])
        elif mine and choice < 0.55:
            await _delete(run, ledger, n, key)
        else:
            await _create(run, ledger, n, i, key)


async def _create(run: _Run, ledger: Ledger, n: int, i: int, key: str) -> None:
    from tests.sim.sim import Doc, Violation, _short

    data = f"s{n} put{i} {run.rng.getrandbits(32)}".encode()
    sha = _sent(run, data)
    run.note(f"s{n} put {key} If-None-Match:* sha={sha[:8]}")
    outcome, value = await run.op(f"s{n}.put", answered(lambda: write(
        call(ledger, key), key, _body(data), content_type="text/plain",
        meta={"writer": f"s{n}"}, if_none_match="*")))
    run.note(f"s{n} put {key}: {outcome} {_code(outcome, value)} {_short(value)}")
    if outcome != "ok":
        return
    run.result.acknowledged += 1
    if value.version != 1 or value.sha256 != sha or value.id in run.docs:
        raise Violation(f"a create-only PutObject of {key} answered {value.id} "
                        f"v{value.version} {value.sha256} (sent {sha}): not a document of "
                        "its own")
    doc = run.docs.setdefault(value.id, Doc(value.id, value.version, sha))
    doc.maybe_deleted = run.s3_deleting.get(key, 0) > 0  # a delete of the key in flight
    run.s3_keys[key].append(doc)


async def _replace(run: _Run, ledger: Ledger, n: int, key: str, doc: Doc) -> None:
    from tests.sim.sim import Violation, _short

    data = f"s{n} replace {run.rng.getrandbits(32)}".encode()
    sha = _sent(run, data)
    etag, version = f'"{run.s3_md5[doc.sha256]}"', doc.version  # a single PUT's: its MD5
    run.note(f"s{n} put {key} If-Match:{etag[1:9]} (v{version}) sha={sha[:8]}")
    doc.busy += 1
    doc.maybe.add(sha)
    try:
        outcome, value = await run.op(f"s{n}.replace", answered(lambda: write(
            call(ledger, key), key, _body(data), content_type="text/plain", meta={},
            if_match=etag)))
    finally:
        doc.busy -= 1
    run.note(f"s{n} put {key} If-Match: {outcome} {_code(outcome, value)} {_short(value)}")
    if outcome != "ok":
        return
    run.result.acknowledged += 1
    if value.id != doc.id or value.version != version + 1:
        raise Violation(f"PutObject of {key} If-Match {etag} (v{version} of {doc.id}) "
                        f"answered {value.id} v{value.version}: not the version it matched")
    if value.version > doc.version:
        doc.version, doc.sha256 = value.version, sha


async def _delete(run: _Run, ledger: Ledger, n: int, key: str) -> None:
    """DeleteObject deletes whatever version the key names when it runs: every document of
    the key known now, or acknowledged while it runs, may be gone."""
    from tests.sim.sim import _short

    run.note(f"s{n} delete {key}")
    for doc in run.s3_keys[key]:
        doc.maybe_deleted = True
    run.s3_deleting[key] = run.s3_deleting.get(key, 0) + 1
    try:
        outcome, value = await run.op(f"s{n}.delete", answered(
            lambda: objects.delete_object(call(ledger, key, method="DELETE"))))
    finally:
        run.s3_deleting[key] -= 1
    run.note(f"s{n} delete {key}: {outcome} {_code(outcome, value)} {_short(value)}")
    if outcome == "ok":
        run.result.acknowledged += 1


# -- multipart uploads ---------------------------------------------------------------------
async def s3_multipart(run: _Run, n: int) -> None:
    """Multipart uploads of keys of their own, each completed by two processes at once, an
    abort sent beside them one time in four."""
    here, there = run.ledger(), run.ledger()
    for i in range(run.config.ops):
        key = f"s3-m{n}.{i}"
        data = f"m{n} upload{i} {run.rng.getrandbits(32)}".encode()
        await _multipart(run, n, here, there, key, data)


async def _multipart(run: _Run, n: int, here: Ledger, there: Ledger, key: str,
                     data: bytes) -> None:
    from tests.sim.sim import Doc, Violation, _short

    sha = hashlib.sha256(data).hexdigest()
    md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
    run.note(f"m{n} multipart {key} sha={sha[:8]}")

    async def begin() -> tuple[str, str]:
        made = await multipart.create_multipart_upload(
            call(here, key, method="POST", query=(("uploads", ""),)))
        upload_id = re.search(rb"<UploadId>(\w+)</UploadId>", made.body)
        assert upload_id is not None
        uid = upload_id.group(1).decode()
        await multipart.upload_part(call(here, key, query=(
            ("partNumber", "1"), ("uploadId", uid)), body=data))
        found = await here.transitions.find_upload(uid)
        assert found is not None
        return uid, found.document_id

    outcome, value = await run.op(f"m{n}.begin", answered(begin))
    run.note(f"m{n} multipart {key}: {outcome} {value if outcome == 'ok' else _short(value)}")
    if outcome != "ok":
        return
    upload_id, doc_id = value
    listed = (f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
              f'<ETag>"{md5}"</ETag></Part></CompleteMultipartUpload>').encode()

    def complete(side: Ledger) -> Callable[[], Awaitable[Any]]:
        return answered(lambda: multipart.complete_multipart_upload(call(
            side, key, method="POST", query=(("uploadId", upload_id),), body=listed)))

    racing = [run.op(f"m{n}.complete", complete(here)),
              run.op(f"m{n}.complete'", complete(there))]
    abort = run.rng.random() < 0.25
    if abort:
        racing.append(run.op(f"m{n}.abort", answered(lambda: multipart.abort_multipart_upload(
            call(there, key, method="DELETE", query=(("uploadId", upload_id),))))))
    answers = list(await asyncio.gather(*racing))
    run.note(f"m{n} {upload_id} answers: "
             + ", ".join(f"{o} {_code(o, v)}" for o, v in answers))
    completions = answers[:2]
    etags = {_etag(v) for o, v in completions if o == "ok"}
    if len(etags) > 1:
        raise Violation(f"two completions of upload {upload_id} answered ETags {etags}")
    upload = await here.transitions.find_upload(upload_id)
    made = upload is not None and upload.state == UploadState.DONE
    for o, v in completions:
        if o == "error" and made and _code(o, v) in ("RequestTimeout", "InternalError"):
            raise Violation(f"a completion of upload {upload_id} was answered "
                            f"{_code(o, v)} ({v.__cause__}), though its document was made")
    # (an abort may answer success beside a completion answered too: see the module)
    if (abort and answers[2][0] == "ok" and upload is not None
            and upload.state == UploadState.OPEN and not upload.expired):
        raise Violation(f"upload {upload_id}: its abort answered success, the upload is "
                        "still open")
    if etags:
        run.result.acknowledged += 1
        run.docs.setdefault(doc_id, Doc(doc_id, 1, sha))
        # S3's multipart ETag: the MD5 of the parts' MD5s, and their number
        whole = hashlib.md5(bytes.fromhex(md5), usedforsecurity=False).hexdigest()
        if etags != {f'"{whole}-1"'}:
            raise Violation(f"upload {upload_id} answered {etags}, sent {sha}")


def _sent(run: _Run, data: bytes) -> str:
    """The SHA-256 of bytes a writer sends, their MD5 noted for the ETag they will have."""
    sha = hashlib.sha256(data).hexdigest()
    run.s3_md5[sha] = hashlib.md5(data, usedforsecurity=False).hexdigest()
    return sha


def _etag(response: Any) -> str:
    found = re.search(rb"<ETag>([^<]*)</ETag>", response.body)
    return found.group(1).decode().replace("&quot;", '"') if found else ""
