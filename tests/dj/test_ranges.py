"""The file view reads Range with the service's own parser (``blobledger._base.ranges``) and
the conditional headers with Django's: a huge position is past the end (416, never a 500),
digits are ASCII only, and a tag list without spaces still matches."""

from __future__ import annotations

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client

ON_DISK = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)


@pytest.fixture
def link(backend: str) -> str:
    return default_storage.url(default_storage.save("r/ten.txt", ContentFile(b"0123456789")))


@ON_DISK
def test_a_huge_range_position_is_past_the_end(link: str) -> None:
    client = Client()
    huge = client.get(link, HTTP_RANGE="bytes=" + "9" * 5000 + "-")
    assert huge.status_code == 416 and huge["Content-Range"] == "bytes */10"
    tail = client.get(link, HTTP_RANGE="bytes=-" + "9" * 5000)  # a suffix: the whole file
    assert tail.status_code == 206 and tail.getvalue() == b"0123456789"
    end = client.get(link, HTTP_RANGE="bytes=2-" + "9" * 5000)
    assert end.status_code == 206 and end.getvalue() == b"23456789"


@ON_DISK
def test_range_digits_are_ascii_only(link: str) -> None:
    client = Client()
    arabic = client.get(link, HTTP_RANGE="bytes=\u0662-\u0664")  # Arabic-Indic 2 and 4
    assert arabic.status_code == 200 and arabic.getvalue() == b"0123456789"  # ignored
    assert client.get(link, HTTP_RANGE="bytes=-0").status_code == 416
    part = client.get(link, HTTP_RANGE="bytes=2-4")
    assert part.status_code == 206 and part.getvalue() == b"234"


@ON_DISK
def test_conditional_headers_are_read_as_django_reads_them(link: str) -> None:
    client = Client()
    tag = client.get(link)["ETag"]
    assert client.get(link, HTTP_IF_NONE_MATCH=f'"other",{tag}').status_code == 304
    assert client.get(link, HTTP_IF_NONE_MATCH="*").status_code == 304
    assert client.get(link, HTTP_IF_MATCH='"other"').status_code == 412
