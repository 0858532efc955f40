"""Credentials kept out of what is written: logs, listings, the effective settings.

One place for the rule: :func:`redact` for a request target (the access log),
:func:`redact_url` for a URL or a text that holds one (a webhook's URL in the attempt log,
the effective settings, an error's message).
"""

from __future__ import annotations

import re

#: the arguments of uvicorn's access-log record, in its order (the target, third, is what
#: :func:`redact` rewrites; the JSON lines name each)
ACCESS_FIELDS = ("http.client", "http.method", "http.target", "http.version", "http.status")
#: a query parameter whose value is a credential, and its value (up to ``&``, ``#`` or a space)
_CREDENTIAL = re.compile(
    r"(?i)([?&](?:token|access_token|sig|x-amz-signature|x-amz-security-token|"
    r"x-amz-credential)=)[^&#\s]*")


#: a URL's password (``scheme://user:password@``)
_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@?#]*:)[^\s/?#]*@")


def redact(target: str) -> str:
    """A request target with the value of every credential query parameter replaced."""
    return _CREDENTIAL.sub(r"\1REDACTED", target)


def redact_url(text: str) -> str:
    """A URL (or a text holding URLs: an error's message) with no credential left in it:
    a password is written ``****`` (``https://user:****@host``) and every credential query
    parameter's value ``REDACTED`` as in :func:`redact` (``?token=REDACTED``)."""
    return redact(_PASSWORD.sub(r"\1****@", text))
