"""``collectstatic`` into a ``LedgerStorage`` (``STORAGES["staticfiles"]``), end to end on
SQLite + disk: each static file becomes a document under its own name; a second run skips
the unmodified ones (it compares modified times); a changed source is deleted and saved
again (a new document under the same name, the old bytes to the deletion path); ``--clear``
empties the storage first."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.management import call_command
from django.test import override_settings

from tests.dj.conftest import state, storage, sweep

ON_DISK = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
FILES = {"css/site.css": b"body { color: #222 }\n", "js/app.js": b"console.log(1);\n",
         "img/dot.svg": b"<svg xmlns='http://www.w3.org/2000/svg'/>\n"}


@pytest.fixture
def sources(tmp_path: Path) -> Iterator[Path]:
    for name, data in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
        os.utime(tmp_path / name, (time.time() - 3600, time.time() - 3600))
    stores = {"default": {"BACKEND": "blobledger.django.LedgerStorage"},
              "staticfiles": {"BACKEND": "blobledger.django.LedgerStorage",
                              "OPTIONS": {"database": "default"}}}
    with override_settings(STORAGES=stores, STATICFILES_DIRS=[str(tmp_path)],
                           STATICFILES_FINDERS=[
                               "django.contrib.staticfiles.finders.FileSystemFinder"]):
        yield tmp_path


def collect(*args: str) -> str:
    out = io.StringIO()
    call_command("collectstatic", "--noinput", *args, stdout=out)
    return out.getvalue()


@ON_DISK
def test_collectstatic_writes_documents_and_overwrites(backend: str, sources: Path) -> None:
    assert "3 static files copied" in collect()
    for name, data in FILES.items():
        assert staticfiles_storage.exists(name)
        with staticfiles_storage.open(name) as handle:
            assert handle.read() == data
    assert staticfiles_storage.listdir("") == (["css", "img", "js"], [])
    assert staticfiles_storage.listdir("css") == ([], ["site.css"])
    url = staticfiles_storage.url("css/site.css")  # {% static %}: a signed link (disk: the view)
    assert url.startswith("/files/css/site.css?s=")

    assert "0 static files copied" in collect() and "3 unmodified" in collect()

    (sources / "css/site.css").write_bytes(b"body { color: #000 }\n")  # edited after that
    later = time.time() + 5  # (collectstatic compares whole seconds)
    os.utime(sources / "css/site.css", (later, later))
    assert staticfiles_storage.get_modified_time("css/site.css").timestamp() < later
    old = storage()._document("css/site.css")
    assert old is not None
    done = collect()
    assert "1 static file copied" in done and "2 unmodified" in done, done
    with staticfiles_storage.open("css/site.css") as handle:
        assert handle.read() == b"body { color: #000 }\n"
    new = storage()._document("css/site.css")
    assert new is not None and new.id != old.id  # deleted, then saved: a new document
    assert state(old.blob) == "deleting"  # the old bytes go by the deletion path
    sweep(3600)
    assert state(old.blob) is None

    assert "3 static files copied" in collect("--clear")
    assert sorted(doc.name for doc in _documents()) == sorted(FILES)


def _documents() -> list:  # type: ignore[type-arg]
    ledger = storage().ledger("default")

    async def listed() -> list:  # type: ignore[type-arg]
        return [doc async for doc in ledger.ledger.list("")]

    return ledger.run(listed())
