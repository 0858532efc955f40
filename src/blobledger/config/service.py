"""The HTTP service: how it answers downloads, its connections' and bodies' limits, the
uploads one token may hold open, who may call it (tokens, ``Host`` names, browser origins)
and the URLs it hands out and signs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator

from blobledger._base.hosts import parse_allowed_host, parse_origin, parse_public_url, split_list
from blobledger._base.scopes import parse_scopes
from blobledger.config.fields import Count, Duration, Size, not_negative, positive, setting
from blobledger.errors import ConfigError

#: the shortest ``BLOBLEDGER_SIGNING_KEY`` accepted (characters)
SIGNING_KEY_MIN = 32


def parse_tokens(text: str) -> dict[str, frozenset[str]]:
    """``tok1:read,tok2:write,tok3:read+write,tok4:write@photos`` → {token: scopes}; write
    implies read; ``@bucket`` limits a token to that bucket (``_base/scopes.py``)."""
    tokens: dict[str, frozenset[str]] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        token, sep, scope_text = item.rpartition(":")
        if not sep or not token:
            raise ConfigError(f"BLOBLEDGER_API_TOKENS: {item[:4]}… needs a scope (TOKEN:read)")
        try:
            tokens[token] = parse_scopes(scope_text)
        except ConfigError as exc:
            raise ConfigError(f"BLOBLEDGER_API_TOKENS: {exc}") from None
    return tokens


def _tokens(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_tokens(value)
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("BLOBLEDGER_API_TOKENS: ")) from None
    return value


def _hosts(value: object) -> object:
    return tuple(parse_allowed_host(item.lower()) for item in split_list(value))


def _origins(value: object) -> object:
    return tuple(dict.fromkeys(parse_origin(item) for item in split_list(value)))


def _public_url(value: object) -> object:
    if isinstance(value, str):
        return parse_public_url(value) if value.strip() else None
    return value


def _signing_key(value: object) -> object:
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
        if len(value) < SIGNING_KEY_MIN:
            raise ValueError(f"must be at least {SIGNING_KEY_MIN} characters "
                             "(e.g. `openssl rand -hex 32`)")
    return value


Tokens = Annotated[dict[str, frozenset[str]], BeforeValidator(_tokens)]
Hosts = Annotated[tuple[str, ...], BeforeValidator(_hosts)]
Origins = Annotated[tuple[str, ...], BeforeValidator(_origins)]
PublicUrl = Annotated[str | None, BeforeValidator(_public_url)]
SigningKey = Annotated[str | None, BeforeValidator(_signing_key)]


class ServiceSettings(BaseModel):
    """What ``blobledger serve`` and the ASGI application answer, and to whom."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: how ``GET /documents/{id}/content`` answers: streamed (proxy) or 307 to a signed URL
    downloads: Literal["proxy", "redirect"] = setting(
        "proxy", "`proxy` (stream through the service) or `redirect` (307 to a signed URL)")
    body_timeout: Duration = setting(
        60.0, "an upload that sends no byte for this long gets a 408 (`serve --body-timeout` "
        "overrides)")
    idempotency_retention: Duration = setting(
        86400.0, "how long a finished create's first response is kept for retries under its "
        "`Idempotency-Key`")
    header_timeout: Duration = setting(
        10.0, "a connection must complete its request head within this long after it opens "
        "or its last response ends (408 for a partial head, a silent one is closed)")
    keep_alive_timeout: Duration = setting(
        5.0, "an idle kept-alive connection is closed after this long")
    max_connections: Count = setting(
        1000, "open connections `serve` keeps; beyond it the longest-idle connection is "
        "closed, or, when all are busy, the newcomer gets a 503 with `Retry-After`. `serve` "
        "raises its descriptor limit to 2 per connection + the backlog + 64, and refuses to "
        "start when the hard limit is lower")
    max_uploads: Count = setting(
        100, "concurrent uploads (POST/PUT); beyond it a 503 `too-many-uploads` with "
        "`Retry-After`")
    #: a request body slower than this (bytes per second, judged over each
    #: ``body_rate_window`` the service spends waiting for it) is refused (408); 0: no minimum
    min_body_rate: Size = setting(
        1024, "a request body slower than this many bytes per second, judged over each "
        "`BLOBLEDGER_BODY_RATE_WINDOW` spent waiting for it, gets a 408 `body-too-slow` and "
        "the connection ends (`1024`, `1KiB`; `0`: no minimum)")
    body_rate_window: Duration = setting(
        10.0, "the window over which the body rate is judged")
    #: per token: uploads (tus and direct) created and not yet completed, expired or
    #: abandoned, and among them the document uploads, which each hold a name (429 beyond)
    max_open_uploads: Count = setting(
        100, "uploads (tus and direct) one token may hold open, not completed, terminated or "
        "expired; beyond it a 429 `too-many-open-uploads` (without tokens, all clients share "
        "one count)")
    max_reserved_names: Count = setting(
        20, "document names one token's open uploads may hold; beyond it a 429 "
        "`too-many-reserved-names`")
    api_tokens: Tokens = setting({}, "`token:read,token2:write` bearer tokens (`admin` also "
                                 "manages buckets; `write@photos` limits one to a bucket)")
    #: the ``Host`` names served (any port); empty: the loopback names. The host of
    #: ``public_url`` (or of the address a connection came in on) is always served
    allowed_hosts: Hosts = setting(
        (), "the `Host` names the service answers to, any port "
        "(`docs.example.com,.corp.example`; `*` for any); any other `Host` gets a 400. The "
        "host of `BLOBLEDGER_PUBLIC_URL` (or the address a connection came in on) is always "
        "allowed", "`localhost`, `127.0.0.1`, `[::1]`")
    #: origins whose pages may call the service from a browser (CORS); empty: none
    cors_origins: Origins = setting(
        (), "origins whose pages may call the service from a browser "
        "(`https://app.example`, exact, `*` refused)", "unset: no CORS")
    #: the base of the URLs the service hands out; None: the address a connection came in on
    public_url: PublicUrl = setting(
        None, "the base of the URLs the service hands out (a direct-upload URL; tus "
        "`Location` when set), e.g. `https://docs.example.com` behind a proxy",
        "the address a connection came in on; tus `Location` a path")
    #: the key of the service's own read URLs and download links; None: one generated at
    #: first use and kept in the database (``service_keys``), shared by every instance
    signing_key: SigningKey = setting(
        None, "the key of the service's own read URLs and download links (at least 32 "
        "characters, e.g. `openssl rand -hex 32`); a secret no client holds",
        "generated once, kept in the database")

    @field_validator("body_timeout", "idempotency_retention", "header_timeout",
                     "keep_alive_timeout", "max_connections", "max_uploads",
                     "body_rate_window", "max_open_uploads", "max_reserved_names")
    @classmethod
    def _service_positive(cls, value: float) -> float:
        return positive(value)

    @field_validator("min_body_rate")
    @classmethod
    def _rate_not_negative(cls, value: float) -> float:
        return not_negative(value)
