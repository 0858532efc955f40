"""The old flat paths of the modules that moved into the layer packages.

Each old module (``blobledger/sweeper.py``…) is a stub whose module ``__getattr__`` calls
:func:`moved`: ``from blobledger.sweeper import Sweeper`` still works for this release, warns
(``DeprecationWarning`` naming the new path) and gives the object from its new home. The stubs
go in the next release; :data:`MOVED` is the list (tests/test_public_api.py pins it).
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

#: old module path -> new module path
MOVED: dict[str, str] = {
    "blobledger.aio": "blobledger._base.aio",
    "blobledger.attachments": "blobledger.protocol.attachments",
    "blobledger.clock": "blobledger.protocol.clock",
    "blobledger.direct": "blobledger.uploads.direct",
    "blobledger.doctor": "blobledger.workers.doctor",
    "blobledger.documents": "blobledger.protocol.documents",
    "blobledger.experiments": "blobledger.workers.experiments",
    "blobledger.invariants": "blobledger.workers.invariants",
    "blobledger.ledger": "blobledger.protocol.ledger",
    "blobledger.lifecycle": "blobledger.workers.lifecycle",
    "blobledger.metrics": "blobledger._base.metrics",
    "blobledger.migrate": "blobledger.protocol.migrate",
    "blobledger.models": "blobledger.protocol.models",
    "blobledger.names": "blobledger._base.names",
    "blobledger.owners": "blobledger.protocol.owners",
    "blobledger.reconciler": "blobledger.workers.reconciler",
    "blobledger.resumable": "blobledger.uploads.resumable",
    "blobledger.scan": "blobledger.workers.scan",
    "blobledger.stores.azure.doctor": "blobledger.workers.doctor.azure",
    "blobledger.stores.azure.lifecycle": "blobledger.workers.lifecycle.azure",
    "blobledger.stores.s3.doctor": "blobledger.workers.doctor.s3",
    "blobledger.stores.s3.lifecycle": "blobledger.workers.lifecycle.s3",
    "blobledger.sweeper": "blobledger.workers.sweeper",
    "blobledger.transitions": "blobledger.protocol.transitions",
}


def moved(old: str, name: str) -> Any:
    """``name`` from the new home of the module ``old``, with a DeprecationWarning."""
    if name.startswith("__"):
        raise AttributeError(name)
    new = MOVED[old]
    warnings.warn(f"{old} is deprecated and goes in the next release: import {name} from {new}",
                  DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)
    try:
        return getattr(module, name)
    except AttributeError:  # a submodule of a moved package (blobledger.experiments.runner)
        return importlib.import_module(f"{new}.{name}")
