"""The CLI client runs against a real ``blobledger serve`` (PostgreSQL + Azurite)."""

from tests.support.server import live_service

__all__ = ["live_service"]
