"""``put --direct``: the bytes straight to the store, where ``POST /uploads`` says, but only
as the client expects them to go: the server's answer is checked before anything is sent
(:func:`blobledger.client._direct.checked_target`: a ``PUT``, to ``https`` or the server's
own origin or loopback beside a loopback server, with only the headers a store needs);
anything else is refused in one line and nothing is sent.

The bytes go by a client of their own: without the CLI's token, the environment's proxies
or ``.netrc``, and never following a redirect (a 3xx is a refusal).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from blobledger.cli._client import (
    ClientError,
    Progress,
    TryAgain,
    describe,
    read_chunks,
    retrying,
    unreachable,
)
from blobledger.client._answers import DirectTarget, DocumentAnswer, read
from blobledger.client._direct import STORE_RETRY_STATUSES, Target, checked_target
from blobledger.client._retry import delay


def direct_upload(url: str, retries: int, client: httpx.Client, path: Path, name: str,
                  content_type: str, size: int, sha256: str) -> object | None:
    """POST /uploads, PUT the bytes where it says (if allowed), complete: the document's
    JSON; None if the server offers no direct uploads."""
    try:
        began = client.post("/uploads", json={"name": name, "size": size,
                                              "content_type": content_type, "sha256": sha256})
    except httpx.TransportError as exc:
        raise unreachable(url, exc) from None
    if began.status_code in (404, 405):
        return None  # a server without direct uploads
    if began.status_code != 201:
        raise ClientError(describe(began))
    answer, _ = read(DirectTarget, began, "a direct upload's target")
    target = checked_target(answer, url, size)
    _send(target, retries, path, name, size)
    completion = f"/uploads/{quote(target.id, safe='')}/complete"
    try:
        for completing in retrying(retries, url):
            with completing:
                done = TryAgain.check(client.post(completion))
    except TryAgain as exc:
        last = str(exc)
    except httpx.TransportError as exc:
        last = str(unreachable(url, exc))
    else:
        document: object = read(DocumentAnswer, done, "a document")[1]
        return document
    raise ClientError(f"completing the upload of {os.fspath(path)} failed: {last}")


def _send(target: Target, retries: int, path: Path, name: str, size: int) -> None:
    """PUT the file to the target, retrying what the store says to retry. Kept by hand: a
    refusal is success on a retry (the create-only PUT found its bytes)."""
    last = ""
    for attempt in range(retries + 1):
        response: httpx.Response | None = None
        progress = Progress(name, size)
        try:
            with path.open("rb") as handle, httpx.Client(
                    timeout=None, trust_env=False, follow_redirects=False) as storage:
                response = storage.put(target.url, headers=target.headers,
                                       content=read_chunks(handle, progress))
        except httpx.TransportError as exc:
            last = f"the store was unreachable: {exc}"
        except OSError as exc:
            raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from None
        finally:
            progress.finish()
        # 403/409/412 on a retry: the create-only put refused, the bytes are there already
        if response is not None and (response.status_code < 300 or (
                attempt > 0 and response.status_code in (403, 409, 412))):
            return
        if response is not None and 300 <= response.status_code < 400:
            raise ClientError(f"the store answered {response.status_code}, a redirect (not "
                              "followed)")
        if response is not None and response.status_code not in STORE_RETRY_STATUSES:
            text = " ".join(response.text[:200].split())
            raise ClientError(f"the store refused the upload: HTTP {response.status_code} "
                              f"{text}")
        if response is not None:
            last = f"HTTP {response.status_code}"
        if attempt < retries:
            time.sleep(delay(attempt, response))
    raise ClientError(f"direct upload of {os.fspath(path)} failed: {last}")
