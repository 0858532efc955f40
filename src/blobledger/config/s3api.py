"""The S3-compatible endpoint (docs/s3.md): where ``blobledger serve`` mounts it, the name it
gives the default bucket, the access keys that sign its requests (each limited to some
buckets if its scope says so: ``_base/scopes.py``), and those that are each an account of
their own (S3's other users: ``s3api/access.py``)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator

from blobledger._base.scopes import is_bucket_name, parse_scopes
from blobledger.config.fields import setting
from blobledger.errors import ConfigError

_HOST = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_KEY_ID = re.compile(r"^[A-Za-z0-9_-]{3,128}$")
#: the shortest secret accepted (characters)
S3_SECRET_MIN = 16


def parse_access_keys(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """``KEYID:SECRET:read,KEYID2:SECRET2:write@photos`` → {key id: (secret, scopes)}; write
    implies read, ``@bucket`` limits the key to that bucket, ``admin`` creates and deletes
    buckets. A secret may hold any character but a comma (AWS's hold ``/`` and ``+``)."""
    keys: dict[str, tuple[str, frozenset[str]]] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key_id, _, rest = item.partition(":")
        secret, sep, scope_text = rest.rpartition(":")
        if not sep or not key_id or not secret:
            raise ConfigError(f"{key_id[:4]}… needs a secret and a scope (KEYID:SECRET:read)")
        if not _KEY_ID.match(key_id):
            raise ConfigError(f"access key id {key_id[:4]}… must be 3-128 letters, digits, "
                              "'_' or '-'")
        if len(secret) < S3_SECRET_MIN:
            raise ConfigError(f"the secret of {key_id} must be at least {S3_SECRET_MIN} "
                              "characters")
        scopes = parse_scopes(scope_text)
        if key_id in keys:
            raise ConfigError(f"access key id {key_id} is given twice")
        keys[key_id] = (secret, scopes)
    return keys


def _keys(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_access_keys(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return value


AccessKeys = Annotated[dict[str, tuple[str, frozenset[str]]], BeforeValidator(_keys)]


def _key_ids(value: object) -> object:
    if isinstance(value, str):
        value = [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            if not isinstance(item, str) or not _KEY_ID.match(item):
                raise ValueError(f"{str(item)[:4]}… is not an access key id (3-128 letters, "
                                 "digits, '_' or '-')")
        return frozenset(value)
    return value


KeyIds = Annotated[frozenset[str], BeforeValidator(_key_ids)]


class S3ApiSettings(BaseModel):
    """The S3-compatible endpoint of ``blobledger serve``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    s3api_keys: AccessKeys = setting(
        {}, "access keys of the S3-compatible endpoint, `KEYID:SECRET:read,KEYID2:SECRET2:"
        "write@photos` (a secret of at least 16 characters; write implies read; `admin` creates "
        "and deletes buckets; `@bucket` limits a key to that bucket); `serve` mounts the "
        "endpoint only when some are set (docs/s3.md)", "unset: no S3 endpoint")
    s3api_accounts: KeyIds = setting(
        frozenset(), "access key ids of `BLOBLEDGER_S3API_KEYS` that are each an S3 account "
        "of their own, S3's other users: such a key owns the buckets it creates and reaches "
        "another bucket only as its scope names it (`@bucket`) or its ACL allows, and other "
        "keys reach its buckets only as their ACL allows (docs/buckets.md)", "unset: every "
        "key is of the service's one account, which owns every bucket")
    s3api_bucket: str = setting(
        "blobledger", "the name the S3 endpoint gives the default bucket (the documents of "
        "today's routes, docs/buckets.md)")
    s3api_prefix: str = setting(
        "/s3", "the path `serve` mounts the S3 endpoint at (path-style addressing: "
        "`http://host:port/s3/BUCKET/KEY`)")
    s3api_host: str = setting(
        "", "the S3 endpoint's own host name: a request to this `Host` is S3's at the root "
        "(`http://HOST/BUCKET/KEY`), one to `BUCKET.HOST` virtual-host-style "
        "(`http://BUCKET.HOST/KEY`); both must be allowed hosts (`BLOBLEDGER_ALLOWED_HOSTS="
        "HOST,.HOST`)", "unset: the endpoint only under `BLOBLEDGER_S3API_PREFIX`")

    @field_validator("s3api_bucket")
    @classmethod
    def _bucket_name(cls, value: str) -> str:
        if not is_bucket_name(value):
            raise ValueError("must be an S3 bucket name: 3-63 lower-case letters, digits, "
                             "'.' and '-', starting and ending with a letter or a digit")
        return value

    @field_validator("s3api_host")
    @classmethod
    def _host(cls, value: str) -> str:
        value = value.strip().lower()
        if value and not _HOST.match(value):
            raise ValueError("must be a host name such as s3.example.com (no port, no "
                             "scheme)")
        return value

    @field_validator("s3api_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not re.match(r"^(/[A-Za-z0-9._-]+)+$", value):
            raise ValueError("must be a path such as /s3 (no trailing '/')")
        return value
