"""The background workers: the sweeper and the readiness of ``serve``'s workers, the
delivery of events to webhooks, and the deferred retag's worker."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator

from blobledger._base.hosts import split_list
from blobledger.config.fields import Count, Duration, positive, setting

#: how a Standard Webhooks secret begins (the rest is base64)
WEBHOOK_SECRET_PREFIX = "whsec_"
#: the longest wait between two delivery attempts of one event
MAX_EVENT_BACKOFF = 3600.0


def _webhook_urls(value: object) -> object:
    urls = tuple(dict.fromkeys(item.strip() for item in split_list(value)))
    for url in urls:
        if not url.startswith(("http://", "https://")) or len(url) > 1000:
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
    return urls


def _webhook_secret(value: object) -> object:
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
        body = value.removeprefix(WEBHOOK_SECRET_PREFIX)
        try:
            key = base64.b64decode(body, validate=True)
        except (ValueError, binascii.Error):
            key = b""
        if not value.startswith(WEBHOOK_SECRET_PREFIX) or len(key) < 16:
            raise ValueError("must be whsec_ followed by at least 16 bytes in base64 "
                             "(e.g. whsec_ + `openssl rand -base64 32`)")
    return value


WebhookUrls = Annotated[tuple[str, ...], BeforeValidator(_webhook_urls)]
WebhookSecret = Annotated[str | None, BeforeValidator(_webhook_secret)]


class WorkerSettings(BaseModel):
    """How often the workers run, how long their claims last, when one counts as down."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ``serve`` sweeps (and runs the deletion path) this often; 0 or None: no sweeper in
    #: ``serve`` (another process runs ``blobledger sweep``)
    sweep_interval: Duration | None = setting(
        60.0, "run the sweeper (stale intents and the deletion path) inside `serve` this "
        "often; `0`: no sweeper in `serve` (run `blobledger sweep` elsewhere)")
    #: a background worker of ``serve`` that has been down, or completed no run, for twice
    #: its interval plus this makes ``/readyz`` answer 503 naming it
    worker_grace: Duration = setting(
        60.0, "a background worker of `serve` down, or without a completed run, for twice "
        "its interval plus this makes `/readyz` answer 503 naming it")
    #: events are POSTed to these, signed per Standard Webhooks with ``webhook_secret``
    webhook_urls: WebhookUrls = setting(
        (), "events are POSTed to these (comma-separated), signed per Standard Webhooks; "
        "`serve` delivers while set ([docs/pipeline.md](docs/pipeline.md))",
        "unset: no webhooks")
    webhook_secret: WebhookSecret = setting(
        None, "the signing secret, `whsec_` and base64 (at least 16 bytes); required with "
        "webhook URLs")
    #: an event whose delivery failed this many times is ``dead`` (``events replay``)
    event_max_attempts: Count = setting(
        10, "an event whose delivery failed this many times is `dead` (`blobledger events "
        "replay`)")
    #: the wait after the first failed attempt; doubled after each (MAX_EVENT_BACKOFF at most)
    event_backoff: Duration = setting(
        5.0, "the wait after a first failed delivery, doubled after each (an hour at most)")
    event_lease: Duration = setting(
        60.0, "how long a delivery worker's claim lasts (longer than the timeout)")
    event_batch: Count = setting(100, "events one claim takes")
    event_timeout: Duration = setting(10.0, "one webhook call's limit")
    event_interval: Duration = setting(
        1.0, "how often `serve` (or `events deliver --interval`) delivers")
    #: deferred: how often ``serve``'s retag worker looks for owed retags (it is also woken
    #: by every C4/R4 of its own process)
    retag_interval: Duration = setting(
        1.0, "deferred: how often `serve`'s retag worker looks for owed retags (it is also "
        "woken by every create and replace of its own process)")
    #: deferred: an owed retag older than this is warned about (``check``, ``doctor``); the
    #: lifecycle rule's age must be far beyond it (``lifecycle-policy``)
    retag_warn_after: Duration = setting(
        300.0, "an owed retag older than this is warned about by `blobledger check` and "
        "`blobledger doctor`; `lifecycle-policy` refuses a rule younger than 100 times it")

    @field_validator("worker_grace", "event_max_attempts", "event_backoff", "event_lease",
                     "event_batch", "event_timeout", "event_interval", "retag_interval",
                     "retag_warn_after")
    @classmethod
    def _workers_positive(cls, value: float) -> float:
        return positive(value)

    @field_validator("sweep_interval")
    @classmethod
    def _interval(cls, value: float | None) -> float | None:
        return value if value else None  # 0: no sweeper, as unset
