"""What says retry, and for how long to wait: shared by the client and the command line.

A connection failure, a 5xx of :data:`RETRY_STATUSES`, or a response of
:data:`RETRY_AFTER_STATUSES` that carries ``Retry-After`` (a 429, a 503, the 409 of an
attempt under the same idempotency key still running) says retry; its ``Retry-After`` (in
seconds or an HTTP date) is honoured, cut to :data:`MAX_DELAY`. Any other answer is final.
"""

from __future__ import annotations

import random
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
