"""Public storages (static files, public downloads): ``OPTIONS={"public": True}`` gives URLs
by name that never expire, served by the app's public view with ``Cache-Control: public``,
or under a ``base_url`` (a CDN); no other storage is served by that view."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.template import Context, Template
from django.test import Client, override_settings

from blobledger.django import LedgerStorage
from blobledger.errors import ConfigError
from tests.dj.conftest import sweep

ON_DISK = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
DOC = Path(__file__).resolve().parents[2] / "docs" / "django.md"


def _stores(**public: object) -> dict[str, dict[str, object]]:
    return {"default": {"BACKEND": "blobledger.django.LedgerStorage"},
            "staticfiles": {"BACKEND": "blobledger.django.LedgerStorage",
                            "OPTIONS": {"public": True, **public}}}


@ON_DISK
def test_a_public_storage_serves_by_name_without_expiry(backend: str) -> None:
    with override_settings(STORAGES=_stores(max_age=120)):
        name = staticfiles_storage.save("css/site.css", ContentFile(b"body{}"))
        url = Template('{% load static %}{% static "css/site.css" %}').render(Context())
        assert url == "/files/public/staticfiles/css/site.css" == staticfiles_storage.url(name)
        client = Client()
        first = client.get(url)
        assert first.status_code == 200 and first.getvalue() == b"body{}"
        assert first["Cache-Control"] == "public, max-age=120"
        assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
        with staticfiles_storage.open(name, "wb") as handle:  # replaced under its name
            handle.write(b"body{color:red}")
        assert client.get(url).getvalue() == b"body{color:red}"  # the same URL, new bytes
        sweep(3600.0)  # far past any signed link's lifetime: the name still opens
        assert client.get(url).getvalue() == b"body{color:red}"
        staticfiles_storage.delete(name)
        assert client.get(url).status_code == 404
        private = default_storage.save("exports/x.csv", ContentFile(b"secret"))
        assert "?s=" in default_storage.url(private)  # the default storage stays signed
        assert client.get(f"/files/public/default/{private}").status_code == 404
        assert client.get(f"/files/public/nothing/{private}").status_code == 404


@ON_DISK
def test_a_base_url_gives_cdn_urls(backend: str) -> None:
    with override_settings(STORAGES=_stores(base_url="https://cdn.example.com/static")):
        assert staticfiles_storage.url("css/a b.css") == \
            "https://cdn.example.com/static/css/a%20b.css"
    with pytest.raises(ConfigError, match="public=True"):
        LedgerStorage(base_url="https://cdn.example.com/")


@ON_DISK
def test_the_docs_block(backend: str) -> None:
    block = next(found for found in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
                 if '"public": True' in found)
    namespace: dict[str, Any] = {"STORAGES": {
        "default": {"BACKEND": "blobledger.django.LedgerStorage"}}}
    exec(block, namespace)
    with override_settings(STORAGES=namespace["STORAGES"]):
        assert staticfiles_storage.url("a.css") == "/files/public/staticfiles/a.css"
