"""A tus upload whose publication fails for real on local disk: the completion runs in a
``blobledger`` process whose file-size limit (``RLIMIT_FSIZE``) is smaller than the file, so
writing the published copy fails with EFBIG, as on a full disk. Every acknowledged part must
survive, and a completion retried afterwards (a HEAD) must make the document."""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blobledger import Ledger
from blobledger.uploads.resumable import Resumable
from tests.api.conftest import client_for

SEGMENT = 64 * 1024
#: what the completing process may write per file: more than a part, less than the file
FILE_LIMIT = 4 * SEGMENT
ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, sys
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.protocol.ledger import Ledger
from blobledger.uploads.resumable import Resumable
from blobledger.stores.local import LocalStore

async def main(database_url: str, root: str, upload_id: str) -> None:
    store = LocalStore(root)
    settings = Settings(database_url=database_url, store_url=store.url)
    async with Ledger(Database(database_url), store, settings, migrate=False) as ledger:
        resumable = Resumable(ledger)
        try:
            await resumable.complete(await resumable.find(upload_id))
        except Exception as exc:
            print(type(exc).__name__)
            return
        print("completed")

asyncio.run(main(*sys.argv[1:]))
"""


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def complete_with_a_small_file_limit(ledger: Ledger, root: Path, upload_id: str) -> str:
    """Complete the upload in a process that cannot write a file past ``FILE_LIMIT`` (Python
    ignores SIGXFSZ: the write fails with EFBIG); what it was told."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, ledger.settings.database_url, str(root), upload_id],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        preexec_fn=_limit_file_size)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), SEGMENT):
        yield data[start:start + SEGMENT]
        await asyncio.sleep(0)


async def test_a_failed_publication_keeps_the_parts(ledger: Ledger, tmp_path: Path) -> None:
    if not ledger.store.url.startswith("file:"):
        pytest.skip("the local store's publication (the parts concatenated into a file)")
    resumable = Resumable(ledger, segment=SEGMENT)
    data = os.urandom(16 * SEGMENT + 123)
    upload = await resumable.create(len(data), {"name": "big.bin"})
    assert await resumable.append(upload, 0, chunks(data)) == len(data)

    told = await asyncio.to_thread(complete_with_a_small_file_limit, ledger,
                                   tmp_path / "store", upload.id)
    assert told == "StoreUnavailable", told  # EFBIG while writing the published copy
    left = [u async for u in ledger.store.list_uncommitted()]
    assert [(u.name, u.blocks, u.size) for u in left] == [
        (upload.blob_name, 17, len(data))], left  # every acknowledged part is still there

    async with client_for(ledger) as client:
        head = await client.head(f"/files/{upload.id}", headers={"Tus-Resumable": "1.0.0"})
        assert head.status_code == 200, head.text
        doc_id = head.headers["Blobledger-Document"]
        content = await client.get(f"/documents/{doc_id}/content")
    assert content.content == data
    assert [u async for u in ledger.store.list_uncommitted()] == []
