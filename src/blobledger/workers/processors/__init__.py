"""The processors a held document waits for (``BLOBLEDGER_PROCESSORS``): ``content-type``
(the declared type against the bytes, :mod:`.content_type`) and ``scan`` (an external
scanner, :mod:`.scanner`). See docs/pipeline.md."""

from __future__ import annotations

from blobledger.config import Settings
from blobledger.workers.processors.base import (
    ACCEPT,
    Processor,
    ProcessorFailed,
    Reader,
    Verdict,
    reject,
)
from blobledger.workers.processors.content_type import ContentTypeCheck
from blobledger.workers.processors.scanner import CommandScanner, HttpScanner


def configured(settings: Settings) -> dict[str, Processor]:
    """The processors the settings name, by name (ConfigError: one cannot run here)."""
    made: dict[str, Processor] = {}
    for name in settings.processors:
        if name == ContentTypeCheck.name:
            made[name] = ContentTypeCheck()
        elif settings.scan_command:
            made[name] = CommandScanner(settings.scan_command, settings.scan_timeout)
        else:
            assert settings.scan_url is not None  # the settings' own check
            made[name] = HttpScanner(settings.scan_url, settings.scan_timeout)
    return made


__all__ = ["ACCEPT", "CommandScanner", "ContentTypeCheck", "HttpScanner", "Processor",
           "ProcessorFailed", "Reader", "Verdict", "configured", "reject"]
