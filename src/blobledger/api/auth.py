"""Bearer tokens (``BLOBLEDGER_API_TOKENS``): read scope for GET/HEAD, write scope for changes.

With no tokens configured every request is allowed (``blobledger serve`` then refuses a
non-loopback address unless told otherwise). Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from blobledger.api.problems import Problem

_bearer = HTTPBearer(auto_error=False, description="a token from BLOBLEDGER_API_TOKENS")


def scopes_of(tokens: Mapping[str, frozenset[str]], presented: str) -> frozenset[str] | None:
    """The scopes of the presented token, or None if it is not one of ours."""
    found: frozenset[str] | None = None
    for token, scopes in tokens.items():
        if hmac.compare_digest(token.encode(), presented.encode()):
            found = scopes
    return found


def require(scope: str) -> Callable[..., Awaitable[None]]:
    """A dependency that admits the request only with a token holding ``scope``."""

    async def check(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
    ) -> None:
        tokens: Mapping[str, frozenset[str]] = request.app.state.settings.api_tokens
        if not tokens:
            return
        challenge = {"WWW-Authenticate": 'Bearer realm="blobledger"'}
        if credentials is None:
            raise Problem(401, "unauthorized", "a bearer token is required", headers=challenge)
        scopes = scopes_of(tokens, credentials.credentials)
        if scopes is None:
            raise Problem(401, "unauthorized", "the bearer token is not valid",
                          headers=challenge)
        if scope not in scopes:
            raise Problem(403, "forbidden", f"the token lacks the {scope!r} scope")

    return check


#: every scope a token can hold (all of them are granted when no tokens are configured)
ALL_SCOPES = frozenset({"read", "write"})


def scopes_presented(request: Request) -> frozenset[str]:
    """The scopes the request's bearer token holds: every scope when no tokens are
    configured, none without a valid token. For a route that answers more (or does more)
    for a caller that may write than for one that may only read."""
    tokens: Mapping[str, frozenset[str]] = request.app.state.settings.api_tokens
    if not tokens:
        return ALL_SCOPES
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        return frozenset()
    return scopes_of(tokens, presented.strip()) or frozenset()
