"""``blobledger variants make``, the eager path from the command line (a subprocess on SQLite
and a local store): every image's variants made, a refused image reported on stderr with exit
status 1 while the others are made, usage mistakes one line with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

from blobledger.config import Settings
from blobledger.db import Database
from blobledger.protocol.ledger import Ledger
from blobledger.stores.local import LocalStore
from tests.cli.test_commands import run
from tests.variants.conftest import variant_rows
from tests.variants.images import VARIANTS, png


async def test_make_all(tmp_path: Path) -> None:
    url, store = f"sqlite:///{tmp_path / 'l.db'}", tmp_path / "blobs"
    settings = Settings(database_url=url, store_url=f"file://{store}", variants=VARIANTS)
    async with Ledger(Database(url), LocalStore(str(store)), settings) as ledger:
        image = await ledger.create("a.png", png(), content_type="image/png")
        await ledger.create("b.txt", b"text", content_type="text/plain")
        fake = await ledger.create("c.png", b"not a png", content_type="image/png")
    env = {"BLOBLEDGER_DATABASE_URL": url, "BLOBLEDGER_STORE_URL": f"file://{store}",
           "BLOBLEDGER_VARIANTS": VARIANTS}
    done = run("variants", "make", "--all", "--json", cwd=tmp_path, **env)
    assert done.returncode == 1, done.stderr
    made = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted((m["document_id"], m["name"]) for m in made) == [
        (image.id, "square"), (image.id, "thumb")]
    assert done.stderr.startswith(f"blobledger: error: {fake.id}: ") and \
        len(done.stderr.splitlines()) == 1
    again = run("variants", "make", image.id, "--name", "thumb", cwd=tmp_path, **env)
    assert again.returncode == 0 and again.stdout.split("\t")[:3] == [image.id, "v1", "thumb"]
    wrong = run("variants", "make", image.id, "--name", "huge", cwd=tmp_path, **env)
    assert wrong.returncode == 2 and len(wrong.stderr.splitlines()) == 1, wrong.stderr
    async with Ledger(Database(url), LocalStore(str(store)), settings) as ledger:
        assert set((await variant_rows(ledger)).values()) == {"attached"}
        assert len(await variant_rows(ledger)) == 2
