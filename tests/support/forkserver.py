"""The fork server of the tests that kill real processes (``multiprocessing`` ``forkserver``):
one per test process, started by the first child, importing every module its callers named
before it forks anything, so that a child costs a fork, not an import of blobledger (nor of
aiobotocore and botocore's service model for an S3 target: :mod:`tests.support.s3warm`).

``multiprocessing`` keeps a single preload list for its one server, and each
``set_forkserver_preload`` replaces it: callers go through :func:`forkserver_context`,
which adds to it instead, so the modules of every test file collected are preloaded."""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import ForkServerContext

_PRELOAD: list[str] = ["tests.support.s3warm"]


def forkserver_context(*preload: str) -> ForkServerContext:
    """The forkserver context, with ``preload`` added to what its server imports first."""
    for module in preload:
        if module not in _PRELOAD:
            _PRELOAD.insert(len(_PRELOAD) - 1, module)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(_PRELOAD))
    return context
