"""The read path against callers who name blobs and sign URLs themselves: a held or rejected
document is never readable, whatever the URL says and whichever token (or none) comes with
it; a query that names a blob is served only with the signature the service made for that
blob, version and expiry, with a key no caller holds; and the version in the path is the
version the blob was. In-process on SQLite and PostgreSQL, and against real ``blobledger
serve`` processes (SQLite with a local folder, PostgreSQL with Azurite)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import subprocess
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from blobledger import Ledger
from blobledger.api.auth import owner_of
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.errors import NotFound
from blobledger.protocol.keys import service_key
from blobledger.workers.processing import ProcessingWorker
from tests.api.conftest import client_for, problem
from tests.conftest import database_url, make_store
from tests.held.conftest import SCANNER
from tests.hostile.support import clean_env, serve
from tests.support.server import blobledger_command, fresh_database, running_server
from tests.support.services import Azurite

TOKENS = {"rw": frozenset({"read", "write"}), "other": frozenset({"read", "write"}),
          "ro": frozenset({"read"})}
#: what the scanner rejects, served inline (text/plain) if it were ever served
VIRUS = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
CALLERS: list[dict[str, str]] = [{"Authorization": "Bearer rw"},
                                 {"Authorization": "Bearer ro"}, {}]


def token_signed(token: str, doc_id: str, version: int, blob: str, expires: int,
                 by_in_message: bool) -> str:
    """A read URL's query signed with a key the caller holds (its own token), in the
    message form of a download link's past (without ``by``) or present (with it)."""
    by = owner_of(token)
    message = (f"blobledger-read\x00{doc_id}\x00{version}\x00{blob}\x00{by}\x00{expires}"
               if by_in_message else
               f"blobledger-read\x00{doc_id}\x00{version}\x00{blob}\x00{expires}")
    sig = hmac.new(token.encode(), message.encode(), hashlib.sha256).hexdigest()
    return urlencode({"blob": blob, "expires": expires, "by": by, "sig": sig})


def forged(doc_id: str, version: int, blob: str) -> list[str]:
    """Every query a caller who knows the id and the blob can write: unsigned, and signed
    with each token it holds."""
    expires = int(time.time()) + 60
    queries = [urlencode({"blob": blob, "expires": expires})]
    for token in ("rw", "ro"):
        for with_by in (False, True):
            queries.append(token_signed(token, doc_id, version, blob, expires, with_by))
    return queries


def assert_unreadable(answers: list[tuple[str, int, bytes]], secret: bytes) -> None:
    for what, status, body in answers:
        assert status in (401, 404, 410), (what, status)
        assert secret not in body, what


async def probe(client: httpx.AsyncClient, doc_id: str, version: int,
                blob: str) -> list[tuple[str, int, bytes]]:
    """What each forged URL of ``doc_id`` at ``version`` answers, with each caller."""
    answers = []
    for query in forged(doc_id, version, blob):
        for headers in CALLERS:
            for method in ("GET", "HEAD"):
                path = f"/documents/{doc_id}/versions/{version}/content?{query}"
                got = await client.request(method, path, headers=headers)
                answers.append((f"{method} {path} {headers}", got.status_code, got.content))
    return answers


@pytest.fixture(params=["sqlite", "postgresql"])
async def read_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Ledger]:
    """Tokens, a scanner rejecting EICAR, and a grace long enough for the service's own read
    URLs (240 s)."""
    kind = str(request.param)
    pg = request.getfixturevalue("pg_url") if kind == "postgresql" else None
    url = await database_url(kind, tmp_path, pg)
    store = await make_store("local", tmp_path, None)
    settings = Settings(database_url=url, store_url=store.url, upload_deadline=60,
                        sweep_after=180, delete_grace=300, api_tokens=TOKENS,
                        processors=("scan",), scan_command=SCANNER)
    async with Ledger(Database(url), store, settings) as ledger:
        yield ledger


async def test_a_held_or_rejected_document_is_never_readable(read_ledger: Ledger) -> None:
    """The writer knows the blob (its 201 names it): no URL it or a reader can make opens
    the bytes, before the scan nor after the scan rejected them; the ledger's own decision
    refuses them too."""
    async with client_for(read_ledger) as client:
        created = await client.post("/documents?name=eicar.txt&hold=true", content=VIRUS,
                                    headers={"Authorization": "Bearer rw",
                                             "Content-Type": "text/plain"})
        assert created.status_code == 201, created.text
        doc = created.json()
        assert doc["status"] == "held" and doc["blob"]
        with pytest.raises(NotFound):
            await read_ledger.former(doc["id"], 1, doc["blob"])
        assert_unreadable(await probe(client, doc["id"], 1, doc["blob"]), VIRUS)

        report = await ProcessingWorker(read_ledger).run_once()
        assert report.rejected == 1
        state = await read_ledger.hold_state(doc["id"])
        assert state is not None and state.status == "rejected"
        with pytest.raises(NotFound):
            await read_ledger.former(doc["id"], 1, doc["blob"])
        assert_unreadable(await probe(client, doc["id"], 1, doc["blob"]), VIRUS)
        # the bytes are still in the store (the grace): only the decision keeps them unread
        assert (await read_ledger.store.stat(doc["blob"])).size == len(VIRUS)
    # a held document the scan accepted is readable: only its own rejection refuses it
    clean = await read_ledger.create("clean.txt", b"clean bytes", content_type="text/plain",
                                     hold=True)
    assert (await ProcessingWorker(read_ledger).run_once()).ready == 1
    shown = await read_ledger.former(clean.id, 1, clean.blob)
    assert (shown.size, shown.blob) == (len(b"clean bytes"), clean.blob)


async def test_a_blob_is_read_only_at_the_version_it_was(read_ledger: Ledger) -> None:
    """A URL the service signed reads its version; moved to another version, or a blob named
    without the service's signature, is refused: never an older version's bytes under a
    version (and an immutable ETag) they never were."""
    doc = await read_ledger.create("v.txt", b"version one", content_type="text/plain")
    reader = {"Authorization": "Bearer ro"}
    async with client_for(read_ledger) as client:
        url = (await client.post(f"/documents/{doc.id}/url", headers=reader)).json()["url"]
        await read_ledger.replace(doc.id, b"version two", expected_version=1)
        got = await client.get(url)
        assert got.status_code == 200 and got.content == b"version one"
        assert got.headers["etag"] == '"1"'
        query = url.split("?", 1)[1]
        for version in (2, 999):
            moved = f"/documents/{doc.id}/versions/{version}/content?{query}"
            problem(await client.get(moved), 401, "unauthorized")
            problem(await client.get(moved, headers=reader), 401, "unauthorized")
            for forgery in forged(doc.id, version, doc.blob):
                for headers in CALLERS:
                    answer = await client.get(
                        f"/documents/{doc.id}/versions/{version}/content?{forgery}",
                        headers=headers)
                    assert answer.status_code == 401, (version, forgery, headers)
                    assert b"version one" not in answer.content
    open_ = Ledger(read_ledger.db, read_ledger.store,
                   read_ledger.settings.with_(api_tokens={}))
    async with client_for(open_, open_.settings) as client:  # no tokens: signed all the same
        unsigned = urlencode({"blob": doc.blob, "expires": int(time.time()) + 60})
        for version in (1, 999):
            problem(await client.get(f"/documents/{doc.id}/versions/{version}/content?"
                                     f"{unsigned}"), 401, "unauthorized")


async def test_a_read_url_is_signed_with_no_token_a_caller_holds(read_ledger: Ledger) -> None:
    """The service's key is its own: generated once, kept in the database, the same for
    every process (a second ledger on the same database checks the first's URLs), and not
    any configured token; ``BLOBLEDGER_SIGNING_KEY`` replaces it."""
    key = await read_ledger.signing_key()
    assert len(key) == 32 and all(token.encode() not in key for token in TOKENS)
    # processes asking for a key at once all read the one that was stored
    raced = await asyncio.gather(*(service_key(read_ledger.db, "raced") for _ in range(8)))
    assert len(set(raced)) == 1 and raced[0] != key
    again = Ledger(read_ledger.db, read_ledger.store, read_ledger.settings)
    assert await again.signing_key() == key
    doc = await read_ledger.create("k.txt", b"keyed", content_type="text/plain")
    async with client_for(read_ledger) as client:
        url = (await client.post(f"/documents/{doc.id}/url",
                                 headers={"Authorization": "Bearer ro"})).json()["url"]
    async with client_for(again) as client:
        assert (await client.get(url)).content == b"keyed"
    configured = Ledger(read_ledger.db, read_ledger.store, read_ledger.settings.with_(
        signing_key="k" * 40))
    assert await configured.signing_key() != key
    async with client_for(configured) as client:
        problem(await client.get(url), 401, "unauthorized")


async def test_a_held_name_tells_others_only_what_any_taken_name_does(
        read_ledger: Ledger) -> None:
    """Names are unique, so a writer creating a taken name learns that it is taken: for a
    held document exactly what it learns for a ready one or an upload in flight (the name
    it sent, nothing of the document: no id, no status, no owner). A reader learns nothing:
    every answer it gets about a held document's name is the one about a name nobody
    holds."""
    writer, other, reader = ({"Authorization": f"Bearer {t}"} for t in ("rw", "other", "ro"))
    async with client_for(read_ledger) as client:
        held = (await client.post("/documents?name=plans/one.txt&hold=true", content=b"h",
                                  headers={**writer, "Content-Type": "text/plain"})).json()
        await read_ledger.create("plans/two.txt", b"r", content_type="text/plain")
        answers = {}
        for name in ("plans/one.txt", "plans/two.txt"):
            again = await client.post(f"/documents?name={name}", content=b"x",
                                      headers={**other, "Content-Type": "text/plain"})
            body = problem(again, 409, "name-taken")
            assert held["id"] not in again.text and "held" not in again.text
            answers[name] = {k: str(v).replace(name, "NAME") for k, v in body.items()
                             if k != "instance"}
        assert answers["plans/one.txt"] == answers["plans/two.txt"]
        for prefix in ("plans/one", "plans/nobody"):
            listed = await client.get(f"/documents?prefix={prefix}", headers=reader)
            assert listed.status_code == 200 and listed.json()["items"] == [], prefix
        overview = await client.get("/ops/overview", headers=reader)
        assert overview.status_code == 200 and "plans/one" not in overview.text
        assert held["id"] not in overview.text


# -- real serve processes -------------------------------------------------------------------
SERVE_ENV = {"BLOBLEDGER_API_TOKENS": "rw:read+write,ro:read",
             "BLOBLEDGER_PROCESSORS": "scan", "BLOBLEDGER_SCAN_COMMAND": SCANNER,
             "BLOBLEDGER_PROCESSING_INTERVAL": "1h"}


@pytest.fixture(params=["sqlite-local", "postgresql-azure"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, Mapping[str, str]]]:
    """A ``blobledger serve`` whose processing waits (an hour), and the environment a
    ``blobledger sweep --once`` beside it runs with."""
    if request.param == "sqlite-local":
        with serve(env=SERVE_ENV) as server:
            yield server.url, clean_env(
                **SERVE_ENV, BLOBLEDGER_DATABASE_URL=f"sqlite:///{server.database}",
                BLOBLEDGER_STORE_URL=f"file://{server.folder / 'store'}")
        return
    azurite: Azurite = request.getfixturevalue("azurite")
    with fresh_database() as url, running_server(azurite, url, extra=SERVE_ENV) as server:
        yield server.url, server.env


def test_serve_never_opens_a_held_or_rejected_document(
        served: tuple[str, Mapping[str, str]]) -> None:
    url, env = served
    with httpx.Client(base_url=url, timeout=30) as client:
        created = client.post("/documents?name=eicar.txt&hold=true", content=VIRUS,
                              headers={"Authorization": "Bearer rw",
                                       "Content-Type": "text/plain"})
        assert created.status_code == 201, created.text
        doc: dict[str, Any] = created.json()
        assert doc["status"] == "held"

        def attempts() -> list[tuple[str, int, bytes]]:
            answers = []
            for query in forged(doc["id"], 1, doc["blob"]):
                for headers in CALLERS:
                    path = f"/documents/{doc['id']}/versions/1/content?{query}"
                    got = client.get(path, headers=headers)
                    answers.append((f"{path} {headers}", got.status_code, got.content))
            return answers

        assert_unreadable(attempts(), VIRUS)
        swept = subprocess.run(blobledger_command("sweep", "--once"), env=dict(env),
                               capture_output=True, timeout=120, check=False)
        assert swept.returncode == 0, swept.stderr.decode(errors="replace")
        told = client.get(f"/documents/{doc['id']}", headers={"Authorization": "Bearer rw"})
        assert told.status_code == 410, told.text  # rejected: its blob waits for the grace
        assert_unreadable(attempts(), VIRUS)
