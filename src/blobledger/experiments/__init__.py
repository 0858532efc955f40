"""The article's measured cases, runnable against the configured Azure account.

Nine cases (E, A, B, F, C, I, G, K, J) re-measure the behaviours the protocol rests on:
what a rollback does not undo, what the naive handler leaves, what compensation fixes, how
the pending protocol survives a crash, which ``upload_blob`` calls overwrite, how racing
creates resolve, what a losing staged upload leaves, and how a tag-guarded delete protects a
committed blob. Each case runs in its own container, deleted afterwards
(``blobledger experiments``; :func:`run_experiments` in code).
"""

from blobledger.experiments.common import CaseResult
from blobledger.experiments.runner import (
    EXPERIMENTS,
    LETTERS,
    render_json,
    render_text,
    run_experiments,
    select_cases,
)

__all__ = ["EXPERIMENTS", "LETTERS", "CaseResult", "render_json", "render_text",
           "run_experiments", "select_cases"]
