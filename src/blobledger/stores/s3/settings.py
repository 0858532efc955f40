"""The S3 backend's settings, ``settings.s3`` of :class:`blobledger.config.Settings`
(``BLOBLEDGER_S3_*``): :class:`S3Settings`, defined with the other backends' settings in
:mod:`blobledger.config.backends`, below the stores (the settings compose it)."""

from __future__ import annotations

from blobledger.config.backends import S3Settings

__all__ = ["S3Settings"]
