"""The event settings: checked like every other, one line per mistake naming the variable;
the secret is masked wherever settings are shown."""

from __future__ import annotations

import pytest

from blobledger.config import load_settings
from blobledger.errors import ConfigError

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_webhooks_read_and_masked() -> None:
    settings = load_settings({"BLOBLEDGER_WEBHOOK_URLS": "http://a.example/x, https://b.example",
                              "BLOBLEDGER_WEBHOOK_SECRET": SECRET,
                              "BLOBLEDGER_EVENT_BACKOFF": "30s"}, env_file=None)
    assert settings.webhook_urls == ("http://a.example/x", "https://b.example")
    assert settings.event_backoff == 30.0
    assert settings.masked()["webhook_secret"] == "whsec_****"


@pytest.mark.parametrize(("env", "line"), [
    ({"BLOBLEDGER_WEBHOOK_URLS": "ftp://a/x", "BLOBLEDGER_WEBHOOK_SECRET": SECRET},
     "BLOBLEDGER_WEBHOOK_URLS: 'ftp://a/x' is not an http:// or https:// URL"),
    ({"BLOBLEDGER_WEBHOOK_URLS": "http://a/x"},
     "BLOBLEDGER_WEBHOOK_URLS needs BLOBLEDGER_WEBHOOK_SECRET"),
    ({"BLOBLEDGER_WEBHOOK_SECRET": "whsec_short"},
     "BLOBLEDGER_WEBHOOK_SECRET must be whsec_ followed by at least 16 bytes in base64"),
    ({"BLOBLEDGER_EVENT_MAX_ATTEMPTS": "0"}, "BLOBLEDGER_EVENT_MAX_ATTEMPTS must be positive"),
    ({"BLOBLEDGER_EVENT_LEASE": "5s"},
     "BLOBLEDGER_EVENT_LEASE (5s) must exceed BLOBLEDGER_EVENT_TIMEOUT (10s)"),
])
def test_mistakes_are_one_line_each(env: dict[str, str], line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env, env_file=None)
    lines = str(caught.value).splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), lines
