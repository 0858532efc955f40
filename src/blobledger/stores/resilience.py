"""The circuit breaker of a remote store (Azure, S3): when it is not asked at all.

:class:`Breaker` is the circuit breaker of one store. After ``breaker_failures`` consecutive
operations ended without any answer from the store (connection refused or reset, timeouts),
every operation fails at once with StoreUnavailable for ``breaker_cooldown``; then
operations go through again (half-open) and probe the store: an answer of any kind (a 404
too) closes the breaker, one more failure opens it again for a cool-down. Each backend's
``map_errors`` consults it, so that a dead store costs a request microseconds, not its SDK's
timeouts and retries.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from blobledger._base.durations import format_duration
from blobledger.errors import BlobLedgerError, StoreMissing, StoreUnavailable
from blobledger.stores.limits import StoreLimits


class Breaker:
    """The circuit breaker of one store (see the module); one per store object, used from
    one event loop. ``breaker_failures`` 0 turns it off."""

    @classmethod
    def of(cls, what: str, limits: StoreLimits) -> Breaker:
        """The breaker of the store ``what`` (its URL, named in the errors)."""
        return cls(what, limits.breaker_failures, limits.breaker_cooldown)

    def __init__(self, what: str, failures: int, cooldown: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.threshold = failures
        self.cooldown = cooldown
        self._clock = clock
        self._failures = 0
        self._open_until = 0.0

    @property
    def is_open(self) -> bool:
        """Operations fail fast now (a cool-down runs)."""
        return bool(self.threshold) and self._failures >= self.threshold \
            and self._clock() < self._open_until

    def admit(self) -> None:
        """Let an operation go to the store, or raise StoreUnavailable while the breaker is
        open. Once the cool-down has passed, operations go through again (half-open): the
        first of them to end tells whether the breaker closes or opens again."""
        if self.is_open:
            raise StoreUnavailable(
                f"store {self.what} unreachable: {self._failures} operations in a row got no "
                f"answer; not asked again for {format_duration(self.cooldown)} after the last")

    def answered(self) -> None:
        """The store answered (whatever it said): the breaker closes."""
        self._failures = 0

    def unreachable(self) -> None:
        """An operation got no answer from the store (after its retries)."""
        self._failures += 1
        if self.threshold and self._failures >= self.threshold:
            self._open_until = self._clock() + self.cooldown


@contextmanager
def breaker_watch(breaker: Breaker | None,
                  status_of: Callable[[BaseException], int | None]) -> Iterator[None]:
    """Around one store operation whose SDK errors are translated inside the block: fail at
    once while ``breaker`` is open; afterwards, tell it whether the store answered. A
    StoreUnavailable whose cause carries no HTTP status (``status_of`` is None: refused,
    reset, timed out) is "no answer"; any other outcome that came from the store is an
    answer; an error of this side (a checksum mismatch, a cancellation) tells nothing."""
    if breaker is None:
        yield
        return
    breaker.admit()
    try:
        yield
    except BlobLedgerError as exc:
        cause = exc.__cause__
        if cause is not None and not getattr(exc, _TOLD, False):
            setattr(exc, _TOLD, True)  # nested blocks (a stat inside an open) tell once
            if isinstance(exc, StoreUnavailable) and not isinstance(exc, StoreMissing) \
                    and status_of(cause) is None:
                breaker.unreachable()
            else:
                breaker.answered()
        raise
    else:
        breaker.answered()


_TOLD = "_blobledger_breaker_told"
