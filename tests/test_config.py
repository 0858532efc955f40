"""Configuration, durations, names: bad input gets one clear error before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from blobledger._base.durations import parse_duration, parse_size
from blobledger._base.names import (
    check_blob_name,
    check_content_type,
    check_document_name,
    extension_of,
    new_blob_name,
)
from blobledger.config import (
    Settings,
    from_env,
    load_settings,
    minimum_sweep_after,
    parse_tokens,
)
from blobledger.errors import ConfigError, InvalidInput, InvalidName
from blobledger.stores.azure.settings import AzureSettings


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("250ms", 0.25),
    (" 1.5h ", 5400),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "-5", "5 years", "1h30"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ConfigError, match="not a duration"):
        parse_duration(text, what="BLOBLEDGER_UPLOAD_DEADLINE")


@pytest.mark.parametrize(("text", "size"), [
    ("1024", 1024), ("64MiB", 64 << 20), ("5GiB", 5 << 30), ("5G", 5 << 30), ("5GB", 5 * 10**9),
])
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(("text", "size"), [("1.5GiB", 3 << 29), ("2kB", 2000), ("3 mib", 3 << 20)])
def test_sizes_read_as_pydantic_byte_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_a_bad_size_is_one_line_naming_the_setting() -> None:
    with pytest.raises(ConfigError) as caught:
        from_env({"BLOBLEDGER_MAX_UPLOAD_BYTES": "5 parsecs"})
    assert str(caught.value) == ("BLOBLEDGER_MAX_UPLOAD_BYTES: '5 parsecs' is not a size "
                                 "(use e.g. 1048576, 64MiB, 5GiB)")


def test_a_mistake_across_settings_is_named_where_it_was_written(tmp_path: Path) -> None:
    """A TOML file's values are named ``file: key``; durations are told in the unit they
    were written in (else a natural one: ``26.4h``, not ``1584m``)."""
    toml = tmp_path / "blobledger.toml"
    toml.write_text('upload_deadline = "24h"\nsweep_after = "25h"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings({}, env_file=None, config_file=toml)
    assert str(caught.value) == (f"{toml}: sweep_after (25h) must exceed upload_deadline "
                                 "(24h) by a margin: at least 26.4h")
    with pytest.raises(ConfigError) as caught:
        from_env({"BLOBLEDGER_UPLOAD_DEADLINE": "1440m", "BLOBLEDGER_SWEEP_AFTER": "1500m"})
    assert str(caught.value) == ("BLOBLEDGER_SWEEP_AFTER (1500m) must exceed "
                                 "BLOBLEDGER_UPLOAD_DEADLINE (1440m) by a margin: at least "
                                 "1584m")
    with pytest.raises(ConfigError) as caught:
        Settings(upload_deadline=86400, sweep_after=90000)
    assert str(caught.value).endswith("(1d) by a margin: at least 26.4h")


def test_sweep_after_must_exceed_the_deadline_by_a_margin() -> None:
    with pytest.raises(ConfigError, match=r"BLOBLEDGER_SWEEP_AFTER \(2h\) must exceed"):
        from_env({"BLOBLEDGER_UPLOAD_DEADLINE": "2h", "BLOBLEDGER_SWEEP_AFTER": "2h"})
    with pytest.raises(ConfigError, match="must exceed"):
        Settings(upload_deadline=3600, sweep_after=3600 + 59)
    assert minimum_sweep_after(60) == 120
    assert minimum_sweep_after(7200) == 7920
    ok = from_env({"BLOBLEDGER_UPLOAD_DEADLINE": "15m", "BLOBLEDGER_SWEEP_AFTER": "1h"})
    assert (ok.upload_deadline, ok.sweep_after) == (900, 3600)


def test_a_read_urls_expiry_is_held_within_the_delete_grace() -> None:
    assert Settings(delete_grace=300, read_url_expiry=240).read_url_expiry == 240
    with pytest.raises(ConfigError, match=r"BLOBLEDGER_READ_URL_EXPIRY .* must never outlive"):
        Settings(delete_grace=300, read_url_expiry=241)


def test_a_scan_is_set_up_once_and_ends_within_its_lease() -> None:
    with pytest.raises(ConfigError, match="BLOBLEDGER_PROCESSORS names scan"):
        Settings(processors="scan")
    with pytest.raises(ConfigError, match="not both"):
        Settings(processors="scan", scan_command="true", scan_url="http://127.0.0.1:9/scan")
    with pytest.raises(ConfigError, match="must exceed BLOBLEDGER_SCAN_TIMEOUT"):
        Settings(processors="scan", scan_command="true", scan_timeout=700)
    ok = Settings(processors="scan", scan_command="true")
    assert ok.processing_lease > ok.scan_timeout


def test_defaults_are_the_embedded_store() -> None:
    settings = from_env({})
    assert settings.database_url.startswith("sqlite:///")
    assert settings.store_url.startswith("file://")
    assert settings.max_upload_bytes == 5 << 30


def test_tokens() -> None:
    assert parse_tokens("r1:read, w1:write") == {
        "r1": frozenset({"read"}), "w1": frozenset({"read", "write"})}
    with pytest.raises(ConfigError, match="needs a scope"):
        parse_tokens("justatoken")
    with pytest.raises(ConfigError, match="unknown scope"):
        parse_tokens("t:owner")


@pytest.mark.parametrize("name", ["report.pdf", "a/b/c.txt", "ünïcödé 文書.docx", "x" * 1024,
                                  "with space", "a..b"])
def test_good_document_names(name: str) -> None:
    assert check_document_name(name) == name


@pytest.mark.parametrize(("name", "reason"), [
    ("", "empty"), ("x" * 1025, "longer than 1024"), ("a\x00b", "control character"),
    ("a\x7fb", "control character"), ("line\nbreak", "control character"),
    ("../etc/passwd", "path segments"), ("a/../b", "path segments"), ("/abs", "start with '/'"),
    ("a\\b", "backslash"), ("\ud800", "surrogate"), (" x", "whitespace"),
])
def test_bad_document_names(name: str, reason: str) -> None:
    with pytest.raises(InvalidName, match=reason):
        check_document_name(name)


def test_blob_names_come_from_one_place() -> None:
    name = new_blob_name("documents", "../../Report.PDF")
    assert name.startswith("documents/") and name.endswith(".pdf")
    assert check_blob_name(name) == name
    assert extension_of("archive.tar.gz") == ".gz"
    assert extension_of("weird.ext$") == ""
    assert extension_of("noext") == ""
    assert extension_of("dir.d/file") == ""


def test_content_types() -> None:
    assert check_content_type(None) == "application/octet-stream"
    assert check_content_type("text/plain; charset=utf-8") == "text/plain; charset=utf-8"
    for bad in ["text", "text/plain\r\nX: y", "a/b" + "c" * 300]:
        with pytest.raises(InvalidInput):
            check_content_type(bad)


def test_body_timeout() -> None:
    assert from_env({}).body_timeout == 60
    assert from_env({"BLOBLEDGER_BODY_TIMEOUT": "2m"}).body_timeout == 120
    with pytest.raises(ConfigError, match="BLOBLEDGER_BODY_TIMEOUT"):
        from_env({"BLOBLEDGER_BODY_TIMEOUT": "soon"})
    with pytest.raises(ConfigError, match="BLOBLEDGER_BODY_TIMEOUT must be positive"):
        from_env({"BLOBLEDGER_BODY_TIMEOUT": "0"})


def test_every_mistake_is_one_line_naming_its_variable() -> None:
    with pytest.raises(ConfigError) as caught:
        from_env({"BLOBLEDGER_UPLOAD_DEADLINE": "soon", "BLOBLEDGER_MAX_UPLOADS": "0",
                  "BLOBLEDGER_S3_ADDRESSING": "sideways", "BLOBLEDGER_API_TOKENS": "t:owner"})
    lines = str(caught.value).splitlines()
    assert sorted(line.split()[0].rstrip(":") for line in lines) == [
        "BLOBLEDGER_API_TOKENS", "BLOBLEDGER_MAX_UPLOADS", "BLOBLEDGER_S3_ADDRESSING",
        "BLOBLEDGER_UPLOAD_DEADLINE"]


def test_backends_settings_are_nested_models() -> None:
    settings = from_env({"BLOBLEDGER_AZURE_CONNECTION_STRING": "UseDevelopmentStorage=true",
                         "BLOBLEDGER_S3_ADDRESSING": "path", "AWS_DEFAULT_REGION": "eu-west-1",
                         "AWS_PROFILE": "ops"})
    assert settings.azure == AzureSettings(connection_string="UseDevelopmentStorage=true")
    assert (settings.s3.path_style, settings.s3.region, settings.s3.profile) == (
        True, "eu-west-1", "ops")
    assert from_env({"AWS_REGION": "a", "BLOBLEDGER_S3_REGION": "b"}).s3.region == "b"


def test_the_s3_single_put_limit_is_a_size_a_put_can_have() -> None:
    assert from_env({}).s3.single_put_limit == 8 << 20
    assert from_env({"BLOBLEDGER_S3_SINGLE_PUT_LIMIT": "64MiB"}).s3.single_put_limit == 64 << 20
    assert from_env({"BLOBLEDGER_S3_SINGLE_PUT_LIMIT": "64m"}).s3.single_put_limit == 64 << 20
    assert from_env({"BLOBLEDGER_S3_SINGLE_PUT_LIMIT": "5G"}).s3.single_put_limit == 5 << 30
    for refused, why in (("0", "must be more than 0 and at most 5GiB"),
                         ("6GiB", "must be more than 0 and at most 5GiB"),
                         ("lots", "'lots' is not a size")):
        with pytest.raises(ConfigError) as caught:
            from_env({"BLOBLEDGER_S3_SINGLE_PUT_LIMIT": refused})
        assert len(str(caught.value).splitlines()) == 1
        assert str(caught.value).startswith("BLOBLEDGER_S3_SINGLE_PUT_LIMIT")
        assert why in str(caught.value)


def test_priority_environment_dotenv_toml(tmp_path: Path) -> None:
    toml = tmp_path / "blobledger.toml"
    toml.write_text('upload_deadline = "15m"\nsweep_after = "1h"\nblob_prefix = "from-toml"\n'
                    'delete_grace = "1m"\n[s3]\nregion = "toml-region"\n')
    dotenv = tmp_path / ".env"
    dotenv.write_text("BLOBLEDGER_BLOB_PREFIX=from-dotenv\nBLOBLEDGER_DELETE_GRACE=2m\n")
    settings = load_settings({"BLOBLEDGER_DELETE_GRACE": "3m"}, env_file=dotenv,
                             config_file=toml)
    assert (settings.upload_deadline, settings.sweep_after) == (900, 3600)
    assert (settings.blob_prefix, settings.delete_grace) == ("from-dotenv", 180)
    assert settings.s3.region == "toml-region"
    toml.write_text("no_such_setting = 1\n")
    with pytest.raises(ConfigError, match=r"blobledger\.toml: no_such_setting is not a setting"):
        load_settings({}, env_file=None, config_file=toml)


def test_a_toml_mistake_names_the_file_and_the_key(tmp_path: Path) -> None:
    toml = tmp_path / "blobledger.toml"
    toml.write_text('bogus_key = 1\nupload_deadline = "soon"\n[s3]\naddressing = "sideways"\n'
                    'shoe_size = 9\n')
    with pytest.raises(ConfigError) as caught:
        load_settings({"BLOBLEDGER_MAX_UPLOADS": "0"}, env_file=None, config_file=toml)
    assert sorted(str(caught.value).splitlines()) == sorted([
        f"{toml}: bogus_key is not a setting",
        f"{toml}: upload_deadline: 'soon' is not a duration (use e.g. 90, 90s, 15m, 2h)",
        f"{toml}: s3.addressing must be path, virtual or auto",
        f"{toml}: s3.shoe_size is not a setting",
        "BLOBLEDGER_MAX_UPLOADS must be positive"])


def test_a_value_the_environment_overrides_is_named_by_its_variable(tmp_path: Path) -> None:
    toml = tmp_path / "blobledger.toml"
    toml.write_text('upload_deadline = "1h"\n[blobledger]\nbody_timeout = "soon"\n')
    with pytest.raises(ConfigError) as caught:  # [blobledger] is read instead of the top
        load_settings({"BLOBLEDGER_BODY_TIMEOUT": "0"}, env_file=None, config_file=toml)
    assert str(caught.value) == "BLOBLEDGER_BODY_TIMEOUT must be positive"
    dotenv = tmp_path / ".env"
    dotenv.write_text("BLOBLEDGER_S3_ADDRESSING=sideways\n")
    with pytest.raises(ConfigError, match=r"^BLOBLEDGER_S3_ADDRESSING must be"):
        load_settings({}, env_file=dotenv, config_file=toml)


def test_an_unreadable_toml_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read .*missing\.toml: No such file"):
        load_settings({}, env_file=None, config_file=tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("upload_deadline = \n")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        load_settings({}, env_file=None, config_file=tmp_path / "bad.toml")


def test_masked_hides_secrets() -> None:
    shown = Settings(api_tokens={"s3cret": frozenset({"read"})}, token="t0ken",
                     database_url="postgresql://app:pw@db/x",
                     azure=AzureSettings(connection_string="AccountName=a;AccountKey=k3y")
                     ).masked()
    text = repr(shown)
    assert not any(secret in text for secret in ("s3cret", "t0ken", ":pw@", "k3y"))
    assert shown["azure"]["connection_string"] == "AccountName=a;AccountKey=****"


def test_the_signing_key_is_read_checked_and_masked() -> None:
    key = "k" * 31 + "-signing-key-value"
    settings = load_settings({"BLOBLEDGER_SIGNING_KEY": key}, env_file=None)
    assert settings.signing_key == key
    assert key not in repr(settings.masked()) and settings.masked()["signing_key"] == "****"
    assert load_settings({"BLOBLEDGER_SIGNING_KEY": " "}, env_file=None).signing_key is None
    with pytest.raises(ConfigError, match="BLOBLEDGER_SIGNING_KEY must be at least 32 characters"):
        load_settings({"BLOBLEDGER_SIGNING_KEY": "short"}, env_file=None)


def test_settings_are_frozen_and_with_checks_again() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.blob_prefix = "x"
    assert settings.with_(upload_deadline=60, sweep_after=120).sweep_after == 120
    with pytest.raises(ConfigError, match="must exceed"):
        settings.with_(upload_deadline=7200)


def test_the_settings_object_is_the_only_reader_of_the_environment() -> None:
    import re

    src = Path(__file__).resolve().parents[1] / "src" / "blobledger"
    readers = re.compile(r"os\.environ|os\.getenv|environ\.get|getenv\(")
    found = sorted(str(path.relative_to(src)) for path in src.rglob("*.py")
                   if readers.search(path.read_text()))
    # the settings' sources read it, and the table layout, read once at import (embedded.py);
    # protocol.py hands its whole environment to a child process, settings written over it
    assert found == ["config/embedded.py", "config/sources.py", "experiments/protocol.py"], \
        found
