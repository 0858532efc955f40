"""The Azure backend's settings, ``settings.azure`` of :class:`blobledger.config.Settings`
(``BLOBLEDGER_AZURE_*``): :class:`AzureSettings`, defined with the other backends' settings
in :mod:`blobledger.config.backends`, below the stores (the settings compose it)."""

from __future__ import annotations

from blobledger.config.backends import AzureSettings

__all__ = ["AzureSettings"]
