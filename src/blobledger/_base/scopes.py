"""What a bearer token or an S3 access key may do, and where: its scopes (``read``,
``write``, ``admin``) and, optionally, the buckets it is limited to.

A scope text is ``read``, ``write``, ``read+write``, ``admin`` or ``write+admin``, followed
by ``@bucket`` once per bucket the credential is limited to (``write@photos@invoices``);
without ``@`` it reaches every bucket. ``write`` implies ``read``; ``admin`` (creating and
deleting buckets, within its own buckets if it is limited to some) implies ``read``. The
buckets are held in the same set as the scopes, each as ``bucket:NAME``, so that every
holder of a credential's scopes keeps one ``frozenset[str]``.
"""

from __future__ import annotations

import re

from blobledger.errors import ConfigError

#: every scope a credential can hold
SCOPES = frozenset({"read", "write", "admin"})
#: how a bucket a credential is limited to is held among its scopes
BUCKET_PREFIX = "bucket:"
#: the bucket of documents that name none: today's routes and every older caller's
DEFAULT_BUCKET = "default"
#: S3's rule for a bucket name (path-style addressing): 3-63 lower-case letters, digits,
#: dots and hyphens, starting and ending with a letter or a digit
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def is_bucket_name(name: object) -> bool:
    """Whether ``name`` is a bucket name (S3's rule, no ``..``, not an IP address)."""
    return (isinstance(name, str) and bool(BUCKET_NAME.match(name)) and ".." not in name
            and not re.match(r"^\d+\.\d+\.\d+\.\d+$", name))


def parse_scopes(text: str) -> frozenset[str]:
    """``write@photos`` → ``{"read", "write", "bucket:photos"}`` (ConfigError if a scope
    or a bucket name is not one)."""
    scope_text, *buckets = text.split("@")
    scopes = set(scope_text.split("+"))
    if not scopes <= SCOPES:
        raise ConfigError(f"unknown scope in {scope_text!r} (read, write, admin, joined "
                          "by +)")
    if scopes & {"write", "admin"}:
        scopes.add("read")
    for bucket in buckets:
        if not is_bucket_name(bucket):
            raise ConfigError(f"{bucket!r} after @ is not a bucket name (3-63 lower-case "
                              "letters, digits, '.' and '-')")
        scopes.add(BUCKET_PREFIX + bucket)
    return frozenset(scopes)


def buckets_of(scopes: frozenset[str]) -> frozenset[str] | None:
    """The buckets a credential with these scopes is limited to; None: every bucket."""
    found = frozenset(s.removeprefix(BUCKET_PREFIX) for s in scopes
                      if s.startswith(BUCKET_PREFIX))
    return found or None


def reaches(scopes: frozenset[str], bucket: str) -> bool:
    """Whether a credential with these scopes reaches ``bucket``."""
    limited = buckets_of(scopes)
    return limited is None or bucket in limited


def scope_text(scopes: frozenset[str]) -> str:
    """The inverse of :func:`parse_scopes`: ``read+write@photos``."""
    plain = "+".join(sorted(s for s in scopes if not s.startswith(BUCKET_PREFIX)))
    return plain + "".join(f"@{b}" for b in sorted(buckets_of(scopes) or ()))
