"""What both clients are made of: the service's URL, the token, the retries, and the
options of their httpx clients (never following a redirect, never reading the
environment's proxies or ``.netrc``)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import httpx

from blobledger.client._retry import Policy
from blobledger.errors import InvalidInput


@dataclass(frozen=True)
class Setup:
    base: httpx.URL
    headers: dict[str, str]
    policy: Policy

    @classmethod
    def of(cls, url: str, token: str | None, policy: Policy, user_agent: str | None) -> Setup:
        text = url.rstrip("/")
        if not text.startswith(("http://", "https://")):
            raise InvalidInput(f"the service's URL must be an http:// or https:// URL, "
                               f"not {url!r}")
        if policy.retries < 0 or (policy.connect_retries or 0) < 0:
            raise InvalidInput("retries must be 0 or more")
        headers = {"User-Agent": user_agent or f"blobledger-client/{version('blobledger')}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return cls(httpx.URL(text), headers, policy)

    def options(self, timeout: float) -> dict[str, Any]:
        return {"base_url": self.base, "headers": self.headers, "trust_env": False,
                "follow_redirects": False,
                "timeout": httpx.Timeout(timeout, read=max(timeout, 300.0))}

    @staticmethod
    def store_options() -> dict[str, Any]:
        """A store's client: no token, no base URL, no redirects."""
        return {"trust_env": False, "follow_redirects": False, "timeout": None}


def bounded(response: httpx.Response, body: bytes) -> httpx.Response:
    """An answer whose body was read already (its encoding undone)."""
    headers = [(k, v) for k, v in response.headers.multi_items()
               if k.lower() not in ("content-encoding", "transfer-encoding")]
    return httpx.Response(response.status_code, headers=headers, content=body,
                          request=response.request)
