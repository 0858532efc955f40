"""The Azure backend's settings: ``settings.azure`` of :class:`blobledger.config.Settings`.

==================================  ===============================================
variable                            meaning
==================================  ===============================================
BLOBLEDGER_AZURE_CONNECTION_STRING  connection string (a secret: masked when shown)
BLOBLEDGER_AZURE_ACCOUNT_URL        account URL, signed in with DefaultAzureCredential
==================================  ===============================================
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class AzureSettings(BaseModel):
    """How to reach the storage account of an ``azure://container`` store."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connection_string: str | None = None
    account_url: str | None = None
