"""The endpoint's settings: the keys parsed, each mistake one line naming the variable, the
secrets never shown."""

from __future__ import annotations

import os
import subprocess

import pytest

from blobledger.config import Settings, load_settings, parse_access_keys
from blobledger.errors import ConfigError
from tests.support.server import blobledger_command


def test_keys_parse_with_their_scopes() -> None:
    keys = parse_access_keys("AKIDONE:s3cr3t/with+plus:chars:write, AKIDTWO:another-secret-00:read")
    assert keys == {"AKIDONE": ("s3cr3t/with+plus:chars", frozenset({"read", "write"})),
                    "AKIDTWO": ("another-secret-00", frozenset({"read"}))}


@pytest.mark.parametrize(("variable", "value", "said"), [
    ("BLOBLEDGER_S3API_KEYS", "AKIDONE:short:read", "at least 16 characters"),
    ("BLOBLEDGER_S3API_KEYS", "AKIDONE:a-long-enough-secret:owner", "unknown scope"),
    ("BLOBLEDGER_S3API_KEYS", "AKIDONE:a-long-enough-secret", "needs a secret and a scope"),
    ("BLOBLEDGER_S3API_KEYS", "AKIDONE", "needs a secret and a scope"),
    ("BLOBLEDGER_S3API_BUCKET", "Not_A_Bucket", "S3 bucket name"),
    ("BLOBLEDGER_S3API_PREFIX", "s3/", "a path such as /s3"),
    ("BLOBLEDGER_S3API_HOST", "http://s3.example.com", "a host name such as"),
    ("BLOBLEDGER_S3API_HOST", "s3.example.com:9000", "no port"),
])
def test_a_mistake_is_one_line_naming_the_variable(variable: str, value: str,
                                                   said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(env={variable: value})
    text = str(refused.value)
    assert text.startswith(variable) and said in text and "\n" not in text, text


def test_the_secrets_are_masked() -> None:
    settings = Settings(s3api_keys="AKIDONE:the-secret-itself-0:write")
    assert settings.s3api_keys["AKIDONE"][0] == "the-secret-itself-0"
    assert settings.masked()["s3api_keys"] == ["AKIDONE:****:read+write"]
    shown = subprocess.run(blobledger_command("config", "--json"), capture_output=True,
                           text=True, check=True, env={
                               **{k: v for k, v in os.environ.items()
                                  if not k.startswith("BLOBLEDGER_")},
                               "BLOBLEDGER_S3API_KEYS": "AKIDONE:the-secret-itself-0:write"})
    assert "AKIDONE" in shown.stdout and "the-secret-itself-0" not in shown.stdout


def test_the_endpoint_host_is_a_lower_case_name() -> None:
    assert load_settings(env={"BLOBLEDGER_S3API_HOST": "S3.Example.com"}).s3api_host == \
        "s3.example.com"
    assert load_settings(env={}).s3api_host == ""
