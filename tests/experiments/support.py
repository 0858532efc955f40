"""Helpers for the experiments and doctor tests: the CLI in a subprocess, container listings,
a SAS without tag permission, an endpoint nobody listens on."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

from azure.storage.blob import (
    AccountSasPermissions,
    BlobServiceClient,
    ResourceTypes,
    generate_account_sas,
)

from tests.support.services import ACCOUNT, KEY, Azurite, connection_string, free_port

CLI_TIMEOUT = 120  # a hang guard, not a timing assertion


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``blobledger ARGS`` in a fresh process; BLOBLEDGER_* comes only from ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-c", "from blobledger.cli import run; run()", *args],
        env=clean, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False)


def unique_base() -> str:
    return f"x{uuid.uuid4().hex[:12]}"


def containers_with_prefix(azurite: Azurite, prefix: str) -> list[str]:
    with BlobServiceClient.from_connection_string(azurite.connection_string) as service:
        return [c.name for c in service.list_containers(name_starts_with=prefix)]


def blob_names(azurite: Azurite, container: str) -> list[str]:
    with BlobServiceClient.from_connection_string(azurite.connection_string) as service:
        return list(service.get_container_client(container).list_blob_names())


def no_tag_sas_connection_string(azurite: Azurite) -> str:
    """An account SAS with every blob permission except ``t`` (index tags)."""
    sas = generate_account_sas(
        ACCOUNT, KEY, ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True,
                              create=True),
        expiry=datetime.now(UTC) + timedelta(hours=1))
    return f"BlobEndpoint=http://127.0.0.1:{azurite.port}/{ACCOUNT};SharedAccessSignature={sas}"


def unreachable_connection_string() -> str:
    """Valid credentials for a loopback port nothing listens on."""
    return connection_string(free_port())
