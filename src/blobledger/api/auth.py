"""Bearer tokens (``BLOBLEDGER_API_TOKENS``): read scope for GET/HEAD, write scope for changes,
admin scope for creating and deleting buckets; a token limited to some buckets
(``write@photos``) makes the ledger reach only those for the rest of its request
(:data:`blobledger.protocol.buckets.SCOPE`: another bucket's documents are not found).

With no tokens configured every request is allowed (``blobledger serve`` then refuses a
non-loopback address unless told otherwise). Tokens are compared in constant time.

A route states the scope it needs with ``dependencies=[Depends(require("write"))]``. That
scope is checked on the request head, before any body byte is read, by
:class:`blobledger.api.guard.Guard` (:func:`admit`), which finds the route the request goes
to (:func:`route_scope`); the dependency checks again inside the route. A token is named in
the database only by :func:`owner_of`, a short digest. A route made with
``require("read", links=True)`` also admits a download link (:mod:`blobledger.api.links`)
in place of a token; the route alone checks it.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.routing import Match
from starlette.types import Scope

from blobledger._base.scopes import buckets_of
from blobledger.api.links import carries_link, link_admits
from blobledger.api.problems import Problem
from blobledger.config import read_url_lifetime
from blobledger.protocol.buckets import SCOPE

_bearer = HTTPBearer(auto_error=False, description="a token from BLOBLEDGER_API_TOKENS")
#: the attribute of a :func:`require` check that names its scope (read by route_scope)
SCOPE_ATTRIBUTE = "blobledger_scope"
#: the attribute of a :func:`require` check that also admits download links
LINKS_ATTRIBUTE = "blobledger_links"
#: the owner of what is created when no tokens are configured (one population)
ANONYMOUS = "anonymous"
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="blobledger"'}


def scopes_of(tokens: Mapping[str, frozenset[str]], presented: str) -> frozenset[str] | None:
    """The scopes of the presented token, or None if it is not one of ours."""
    found: frozenset[str] | None = None
    for token, scopes in tokens.items():
        if hmac.compare_digest(token.encode(), presented.encode()):
            found = scopes
    return found


def owner_of(token: str) -> str:
    """How the database names a token (``uploads.owner``): 16 hex digits of a digest, from
    which the token cannot be recovered."""
    return hashlib.sha256(b"blobledger-owner\x00" + token.encode()).hexdigest()[:16]


def _refusal(tokens: Mapping[str, frozenset[str]], presented: str | None,
             scope: str) -> Problem | None:
    if presented is None:
        return Problem(401, "unauthorized", "a bearer token is required", headers=CHALLENGE)
    scopes = scopes_of(tokens, presented)
    if scopes is None:
        return Problem(401, "unauthorized", "the bearer token is not valid", headers=CHALLENGE)
    if scope not in scopes:
        return Problem(403, "forbidden", f"the token lacks the {scope!r} scope")
    return None


async def signing_key(request: Request) -> bytes:
    """The service's signing key (:meth:`~blobledger.protocol.ledger.Ledger.signing_key`),
    which signs and checks every link and read URL it makes."""
    ledger = request.app.state.ledger
    if ledger is None:
        raise Problem(503, "unavailable", "the service is starting or stopping",
                      headers={"Retry-After": "1"})
    key: bytes = await ledger.signing_key()
    return key


def require(scope: str, links: bool = False) -> Callable[..., Awaitable[None]]:
    """A dependency that admits the request only with a token holding ``scope`` (or, with
    ``links``, a valid download link to the route's ``doc_id``)."""

    async def check(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
    ) -> None:
        tokens: Mapping[str, frozenset[str]] = request.app.state.settings.api_tokens
        if not tokens:
            return
        if links and carries_link(request.query_params):
            if not link_admits(await signing_key(request), tokens, owner_of,
                               request.path_params.get("doc_id", ""),
                               request.query_params, time.time(),
                               request.path_params.get("version"),
                               read_url_lifetime(request.app.state.settings)):
                raise Problem(401, "unauthorized", "the download link is not valid or has "
                              "expired: ask for a new one", headers=CHALLENGE)
            return
        presented = credentials.credentials if credentials else None
        if problem := _refusal(tokens, presented, scope):
            raise problem
        # the ledger reaches only the token's buckets for the rest of this request
        SCOPE.set(buckets_of(scopes_of(tokens, presented or "") or frozenset()))

    setattr(check, SCOPE_ATTRIBUTE, scope)
    setattr(check, LINKS_ATTRIBUTE, links)
    return check


#: every scope a token can hold (all of them are granted when no tokens are configured)
ALL_SCOPES = frozenset({"read", "write", "admin"})


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


# -- on the request head (the Guard) ------------------------------------------------------
def routes_of(router: Any) -> Iterator[Any]:
    """The routes of a router, those of the routers it includes among them (``create_app``
    includes its routers without a prefix: their routes carry their whole paths)."""
    for route in getattr(router, "routes", ()):
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from routes_of(included)
        else:
            yield route


def route_scope(app: Any, scope: Scope) -> str | None:
    """The scope the route that will serve this request requires; None for a public route,
    for a request no route serves (404, 405: nothing is read for them), and for a download
    link to a route that admits them (it has no body; the route checks the link)."""
    for route in routes_of(getattr(app, "router", None)):
        match, _ = route.matches(scope)
        if match is Match.FULL:
            if admits_links(route) and _presents_link(scope):
                return None
            return declared_scope(route)
    return None


def declared_scope(route: Any) -> str | None:
    """The scope a route declares with :func:`require` (None: a public route)."""
    for dependency in getattr(route, "dependencies", ()):
        needed = getattr(dependency.dependency, SCOPE_ATTRIBUTE, None)
        if isinstance(needed, str):
            return needed
    return None


def admits_links(route: Any) -> bool:
    """Whether a route's :func:`require` admits download links in place of a token."""
    return any(getattr(dependency.dependency, LINKS_ATTRIBUTE, False)
               for dependency in getattr(route, "dependencies", ()))


def _presents_link(scope: Scope) -> bool:
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    return carries_link(dict(parse_qsl(query)))


def presented_token(scope: Scope) -> str | None:
    """The bearer token of the request's Authorization header (None: none, or another
    scheme)."""
    for key, value in scope.get("headers", []):
        if key.lower() == b"authorization":
            kind, _, token = bytes(value).decode("latin-1").strip().partition(" ")
            return (token.strip() or None) if kind.lower() == "bearer" else None
    return None


@dataclass(frozen=True)
class Admission:
    """The verdict on a request head: ``problem`` (401/403) or admitted, with the ``owner``
    of what it creates (:func:`owner_of` the token; :data:`ANONYMOUS` without tokens)."""

    problem: Problem | None
    owner: str | None


def admit(app: Any, scope: Scope) -> Admission:
    """Whether the request head carries what its route requires."""
    settings = getattr(getattr(app, "state", None), "settings", None)
    tokens: Mapping[str, frozenset[str]] = getattr(settings, "api_tokens", {}) or {}
    presented = presented_token(scope)
    needed = route_scope(app, scope)
    if not tokens:
        return Admission(None, ANONYMOUS)
    if needed is not None and (problem := _refusal(tokens, presented, needed)):
        return Admission(problem, None)
    if presented is not None and scopes_of(tokens, presented) is not None:
        return Admission(None, owner_of(presented))
    return Admission(None, None)
