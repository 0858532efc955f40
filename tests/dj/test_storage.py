"""The Storage API as Django documents it (and as Django's own tests hold its in-memory
storage to it), for standalone saves (documents) and a field's files (attachments); URLs on
every backend; the streaming view's ranges and conditional GETs."""

from __future__ import annotations

import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client, override_settings

from tests.dj.conftest import state, storage
from tests.dj.invoices.models import Invoice

#: standalone saves go to the storage's own database (SQLite here); the URL test covers the
#: stores that sign
ON_DISK = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)


@ON_DISK
def test_save_open_exists_size_delete(backend: str) -> None:
    assert not default_storage.exists("exports/report.csv")
    name = default_storage.save("exports/report.csv", ContentFile(b"a,b\n1,2\n"))
    assert name == "exports/report.csv"  # the name as given when free
    assert default_storage.exists(name) and default_storage.size(name) == 8
    with default_storage.open(name) as handle:
        assert handle.read() == b"a,b\n1,2\n"
    with default_storage.open(name, "r") as handle:
        assert handle.read() == "a,b\n1,2\n"
    default_storage.delete(name)
    assert not default_storage.exists(name)
    default_storage.delete(name)  # deleting what is gone is not an error
    with pytest.raises(FileNotFoundError):
        default_storage.open(name)
    with pytest.raises(FileNotFoundError):
        default_storage.size(name)


@ON_DISK
def test_a_taken_name_gets_an_available_one(backend: str) -> None:
    first = default_storage.save("dup.txt", ContentFile("one"))
    second = default_storage.save("dup.txt", ContentFile("two"))
    assert first == "dup.txt" and second != first
    assert second.startswith("dup_") and second.endswith(".txt")
    assert default_storage.open(first).read() == b"one"
    assert default_storage.open(second).read() == b"two"


@ON_DISK
def test_open_for_writing_creates_then_replaces(backend: str) -> None:
    with default_storage.open("notes/w.txt", "w") as handle:
        handle.write("hello")
    assert default_storage.open("notes/w.txt").read() == b"hello"
    with default_storage.open("notes/w.txt", "wb") as handle:
        handle.write(b"bye")
    with default_storage.open("notes/w.txt", "a") as handle:
        handle.write("!")
    assert default_storage.open("notes/w.txt", "r").read() == "bye!"


@ON_DISK
def test_listdir(backend: str) -> None:
    for name in ("lst/a.txt", "lst/b.txt", "lst/sub/c.txt", "lst/sub/deeper/d.txt"):
        default_storage.save(name, ContentFile(b"x"))
    assert default_storage.listdir("lst") == (["sub"], ["a.txt", "b.txt"])
    assert default_storage.listdir("lst/sub/") == (["deeper"], ["c.txt"])


@ON_DISK
def test_times_are_aware_with_use_tz(backend: str) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    name = default_storage.save("times.txt", ContentFile(b"t"))
    created = default_storage.get_created_time(name)
    modified = default_storage.get_modified_time(name)
    assert created.tzinfo is not None and before <= created <= modified
    invoice = Invoice.objects.create(number="T-1", pdf=ContentFile(b"t", name="t.pdf"))
    assert default_storage.get_modified_time(str(invoice.pdf.name)) >= before
    with override_settings(USE_TZ=False):
        assert default_storage.get_modified_time(name).tzinfo is None


@ON_DISK
def test_a_fields_file_through_the_api(backend: str) -> None:
    invoice = Invoice.objects.create(number="API-1", pdf=ContentFile(b"pdf!", name="a.pdf"))
    name = str(invoice.pdf.name)
    assert default_storage.exists(name) and default_storage.size(name) == 4
    assert default_storage.open(name).read() == b"pdf!"
    default_storage.delete(name)  # an attachment goes with its owner only
    assert state(name) == "attached" and default_storage.exists(name)
    with pytest.raises(PermissionError):
        default_storage.open(name, "wb")
    assert default_storage.generate_filename("a dir/My File?.pdf") == "a dir/My_File.pdf"


@pytest.mark.parametrize("backend", ["postgresql-azure", "postgresql-s3"], indirect=True)
def test_url_is_the_stores_signed_read(backend: str) -> None:
    invoice = Invoice.objects.create(number="U-1", pdf=ContentFile(b"signed", name="my inv.pdf"))
    url = invoice.pdf.url
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.read() == b"signed"
        assert "my%20inv.pdf" in response.headers.get("Content-Disposition", "")


@ON_DISK
def test_url_streams_through_the_view_on_disk(backend: str) -> None:
    invoice = Invoice.objects.create(number="V-1", pdf=ContentFile(b"0123456789", name="v.pdf"))
    url = invoice.pdf.url
    assert url.startswith("/files/" + str(invoice.pdf.name) + "?s=")
    client = Client()
    whole = client.get(url)
    assert whole.status_code == 200 and whole.getvalue() == b"0123456789"
    assert whole["Content-Disposition"].startswith('inline; filename="v.pdf"')  # as the service
    assert whole["Content-Security-Policy"] == "default-src 'none'; sandbox"
    part = client.get(url, HTTP_RANGE="bytes=2-4")
    assert part.status_code == 206 and part.getvalue() == b"234"
    assert part["Content-Range"] == "bytes 2-4/10"
    assert client.get(url, HTTP_RANGE="bytes=-3").getvalue() == b"789"
    assert client.get(url, HTTP_RANGE="bytes=20-").status_code == 416
    same = client.get(url, HTTP_IF_NONE_MATCH=whole["ETag"])
    assert same.status_code == 304
    later = client.get(url, HTTP_IF_MODIFIED_SINCE=whole["Last-Modified"])
    assert later.status_code == 304
    assert client.get(url.replace("?s=", "?s=x")).status_code == 404  # a forged signature
    assert client.post(url).status_code == 405
    doc = default_storage.save("pub/readme.txt", ContentFile(b"doc"))
    assert client.get(default_storage.url(doc)).getvalue() == b"doc"
    page = default_storage.save("pub/page.html", ContentFile(b"<script>x</script>"))
    assert client.get(default_storage.url(page))["Content-Disposition"].startswith(
        'attachment; filename="page.html"')  # what can script is never rendered
    invoice.delete()  # detached: the link no longer reads it
    assert client.get(url).status_code == 404


@ON_DISK
def test_a_text_content_file_is_saved_as_utf8(backend: str) -> None:
    invoice = Invoice.objects.create(number="X-1", pdf=ContentFile("héllo", name="h.txt"))
    assert storage().size(str(invoice.pdf.name)) == len("héllo".encode())
    assert invoice.pdf.read() == "héllo".encode()


@ON_DISK
def test_url_expiry_is_held_to_the_grace_rule(backend: str) -> None:
    """The storage's ``url_expiry`` obeys the service's rule (``url_expiry_problem``): with
    the clock skew, within the delete grace (5 minutes here); by default the service's
    lifetime (the grace less the skew)."""
    from django.core import checks

    from blobledger.django.apps import check_storages
    from blobledger.django.storage import LedgerStorage
    from blobledger.errors import ConfigError

    assert storage().url_lifetime() == 240  # 300 s of grace less 60 s of skew
    assert LedgerStorage(url_expiry=240).url_lifetime() == 240
    for wrong in (241, 300, 0):
        with pytest.raises(ConfigError, match=r"url_expiry .* within BLOBLEDGER_DELETE_GRACE"):
            LedgerStorage(url_expiry=wrong).url_lifetime()
    invoice = Invoice.objects.create(number="U1", pdf=ContentFile(b"%PDF", name="u.pdf"))
    with override_settings(STORAGES={
            "default": {"BACKEND": "blobledger.django.LedgerStorage",
                        "OPTIONS": {"url_expiry": 600}},
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}):
        from django.core.files.storage import storages

        with pytest.raises(ConfigError, match="url_expiry"):
            storages["default"].url(invoice.pdf.name)
        errors = check_storages()
        assert [error.id for error in errors] == ["blobledger.E001"]
        assert errors[0].level == checks.ERROR and "must never outlive" in errors[0].msg
    assert check_storages() == []


def test_manage_py_check_refuses_a_feature_this_machine_cannot_run() -> None:
    """The one requirements check (blobledger._base.extras) is Django's too: a
    scanner program that is not installed is an error of ``manage.py check``."""
    from django.conf import settings

    from blobledger.django.apps import check_storages

    block = {**settings.BLOBLEDGER, "PROCESSORS": "scan",
             "SCAN_COMMAND": "no-such-scanner-program {path}"}
    with override_settings(BLOBLEDGER=block):
        errors = check_storages()
    assert [error.id for error in errors] == ["blobledger.E001"]
    assert "'no-such-scanner-program' is not an executable program" in errors[0].msg
    assert check_storages() == []
