"""The HTTP service: ``create_app(ledger)`` returns an ASGI app (FastAPI)."""

from blobledger.api.app import create_app

__all__ = ["create_app"]
