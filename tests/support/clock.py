"""Moving a ledger's clock in tests: every lease and age comparison of that ledger (and of
the sweeper and reconciler running on it) then happens ``seconds`` later than the
database's clock."""

from __future__ import annotations

from blobledger.protocol.ledger import Ledger


def set_clock_offset(ledger: Ledger, seconds: float) -> None:
    """Put the ledger's clock ``seconds`` ahead of the database's (not cumulative)."""
    ledger.clock_offset = seconds
