"""What says retry, and for how long to wait: shared by the client and the command line.

A connection failure, a 5xx of :data:`RETRY_STATUSES`, or a response of
:data:`RETRY_AFTER_STATUSES` that carries ``Retry-After`` (a 429, a 503, the 409 of an
attempt under the same idempotency key still running) says retry; its ``Retry-After`` (in
seconds or an HTTP date) is honoured, cut to :data:`MAX_DELAY`. Any other answer is final.

How many times is a request's :class:`Policy`: its retries, fewer for a connection that
cannot be made at all if it says so (a service that is not there is not waited for), no
retry whose wait would end past its total time, and a hook told of every attempt that said
retry (:class:`Retried`: with the wait before the next one, or with none when it is given up).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

#: statuses retried with or without Retry-After
RETRY_STATUSES = frozenset({500, 502, 503, 504})
#: statuses retried only when they carry Retry-After
RETRY_AFTER_STATUSES = frozenset({409, 429, 503})
#: the longest wait between two attempts (a longer Retry-After is cut to it)
MAX_DELAY = 10.0
#: the first wait of the exponential backoff, in seconds
FIRST_DELAY = 0.25


def retry_after(response: httpx.Response, now: datetime | None = None) -> float | None:
    """The wait a ``Retry-After`` asks for, in seconds (delay-seconds or an HTTP date)."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isascii() and value.isdigit():
        return float(value[:7])
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def says_retry(response: httpx.Response) -> bool:
    """Whether an answer says to send the request again."""
    status = response.status_code
    return status in RETRY_STATUSES or (
        status in RETRY_AFTER_STATUSES and retry_after(response) is not None)


def backoff(attempt: int) -> float:
    """The wait before retry ``attempt`` (0 first): exponential, with jitter."""
    return min(FIRST_DELAY * 2.0**attempt, MAX_DELAY) * random.uniform(0.8, 1.2)


def delay(attempt: int, response: httpx.Response | None) -> float:
    """Retry-After if the answer gave one, else :func:`backoff`."""
    after = retry_after(response) if response is not None else None
    return min(after, MAX_DELAY) if after is not None else backoff(attempt)


@dataclass(frozen=True)
class Retried:
    """An attempt that said retry (an answer that says so, or a transport error that may be
    sent again): ``retry`` is the number of the retry it asks for, ``of`` how many the
    policy allows for its cause; ``wait`` the seconds before it is sent again, None when it
    is not (the retries or the total time are spent: the request is given up)."""

    cause: httpx.Response | httpx.TransportError
    retry: int
    of: int
    wait: float | None


@dataclass(frozen=True)
class Policy:
    """How a request is retried: at most ``retries`` times; a connection that cannot be
    made at all (``httpx.ConnectError``) at most ``connect_retries`` times (None: as
    ``retries``); no retry whose wait would end more than ``total`` seconds after the
    first attempt was sent (None: no limit); ``on_retry`` told of each attempt that said
    retry, before the wait."""

    retries: int
    connect_retries: int | None = None
    total: float | None = None
    on_retry: Callable[[Retried], None] | None = None

    def allowed(self, cause: httpx.Response | httpx.TransportError) -> int:
        """The retries allowed for ``cause``."""
        if isinstance(cause, httpx.ConnectError) and self.connect_retries is not None:
            return min(self.connect_retries, self.retries)
        return self.retries

    def tell(self, cause: httpx.Response | httpx.TransportError, retry: int,
             wait: float | None) -> None:
        if self.on_retry is not None:
            self.on_retry(Retried(cause, retry, self.allowed(cause), wait))
