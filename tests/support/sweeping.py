"""The sweeper run from inside a writer's operation: a failpoints hook that, the first time
the writer reaches ``point``, runs the sweeper with the clock past every upload's expiry and
the sweeper's cutoff (the upload expired while the writer was on its way there)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from blobledger.protocol.ledger import Ledger
from blobledger.workers.sweeper import Sweeper


def sweep_at(ledger: Ledger, point: str, then: Callable[[], None] | None = None
             ) -> tuple[Callable[[str], Awaitable[None]], list[int]]:
    """A hook for :func:`blobledger.failpoints.set_hook` and the list it appends what that
    one run took to (swept, and fenced: a staged attachment's intent is fenced); ``then``
    runs after the sweep, still at ``point``."""
    taken: list[int] = []

    async def hook(reached: str) -> None:
        if reached != point or taken:
            return
        ledger.transitions.offset = (ledger.settings.resumable_expiry
                                     + ledger.settings.sweep_after + 1)
        try:
            report = await Sweeper(ledger).run_once()
        finally:
            ledger.transitions.offset = 0
        taken.append(report.swept + report.fenced)
        if then is not None:
            then()

    return hook, taken
