"""``blobledger doctor`` against Azurite and the local-disk store: the table, the exit code,
the known emulator gap, and that every probe is gone afterwards; and the bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

from azure.storage.blob import BlobServiceClient

from blobledger.config import Settings
from blobledger.stores.azure.settings import AzureSettings
from blobledger.workers.doctor import run_doctor
from blobledger.workers.doctor.checks import (
    CREATE_ONLY,
    ETAG_DELETE,
    FAIL,
    GAP,
    GUARDED_DELETE,
    GUARDED_TAGS,
    INFO,
    LIFECYCLE,
    PASS,
    SOFT_DELETE,
    TAG_WRITE,
    TAGS,
    UNKNOWN,
    WARN,
)
from blobledger.workers.doctor.delivery import DELIVERY_LAG
from blobledger.workers.doctor.retag import RETAG_LAG
from tests.experiments.support import (
    blob_names,
    cli,
    containers_with_prefix,
    no_tag_sas_connection_string,
    unique_base,
    unreachable_connection_string,
)
from tests.support.services import Azurite


def azure_env(base: str, connection_string: str) -> dict[str, str]:
    return {"BLOBLEDGER_STORE_URL": f"azure://{base}",
            "BLOBLEDGER_AZURE_CONNECTION_STRING": connection_string}


async def test_doctor_on_azurite_reports_the_emulator_gap(azurite: Azurite) -> None:
    base = unique_base()
    report = await run_doctor(Settings(store_url=f"azure://{base}",
                                       azure=AzureSettings(
                                           connection_string=azurite.connection_string)))
    status = {check.name: check.status for check in report.checks}
    assert status == {CREATE_ONLY: PASS, TAGS: PASS, TAG_WRITE: PASS, GUARDED_DELETE: PASS,
                      GUARDED_TAGS: GAP, SOFT_DELETE: INFO, LIFECYCLE: INFO, RETAG_LAG: INFO,
                      DELIVERY_LAG: INFO}
    detail = {check.name: check.detail for check in report.checks}
    assert "HTTP 409 BlobAlreadyExists" in detail[CREATE_ONLY]
    assert "HTTP 412 ConditionNotMet" in detail[GUARDED_DELETE]
    assert "known emulator gap" in detail[GUARDED_TAGS]
    assert detail[SOFT_DELETE].startswith("off")
    assert report.failed == []
    assert containers_with_prefix(azurite, base) == []  # created for the run, then deleted


def test_doctor_cli_keeps_an_existing_container_and_removes_its_probes(
    azurite: Azurite,
) -> None:
    base = unique_base()
    with BlobServiceClient.from_connection_string(azurite.connection_string) as service:
        service.create_container(base).upload_blob("documents/kept.txt", b"live")
    result = cli(["doctor"], azure_env(base, azurite.connection_string))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == f"store: azure://{base} (Azurite emulator)"
    assert lines[-1] == "all must-have checks passed"
    assert any(line.startswith(GUARDED_TAGS) and " GAP " in line for line in lines)
    assert blob_names(azurite, base) == ["documents/kept.txt"]
    result = cli(["doctor", "--json"], azure_env(base, azurite.connection_string))
    data = json.loads(result.stdout)
    assert data["ok"] is True and len(data["checks"]) == 9
    assert blob_names(azurite, base) == ["documents/kept.txt"]


async def test_doctor_on_local_disk_passes_through_the_store_contract(tmp_path: Path) -> None:
    root = tmp_path / "store"
    report = await run_doctor(Settings(store_url=f"file://{root}"))
    status = {check.name: check.status for check in report.checks}
    assert status == {CREATE_ONLY: PASS, TAGS: PASS, TAG_WRITE: PASS, GUARDED_DELETE: PASS,
                      ETAG_DELETE: PASS, GUARDED_TAGS: PASS, SOFT_DELETE: INFO,
                      LIFECYCLE: INFO, RETAG_LAG: INFO, DELIVERY_LAG: INFO}
    assert report.failed == []
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "blobs", "uploads"]
    result = cli(["doctor"], {"BLOBLEDGER_STORE_URL": f"file://{root}"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "all must-have checks passed"


def test_doctor_without_tag_permission_fails_in_one_line(azurite: Azurite) -> None:
    base = unique_base()
    result = cli(["doctor"], azure_env(base, no_tag_sas_connection_string(azurite)))
    assert result.returncode == 1
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1
    assert errors[0].startswith(f"blobledger: error: must-have checks failed: {TAG_WRITE}:")
    assert "permission 't'" in errors[0]
    table = result.stdout.splitlines()
    assert any(line.startswith(TAG_WRITE) and f" {FAIL.upper()} " in line for line in table)
    assert any(line.startswith(CREATE_ONLY) and f" {PASS.upper()} " in line for line in table)
    assert any(line.startswith(GUARDED_TAGS) and f" {UNKNOWN.upper()} " in line
               for line in table)
    assert containers_with_prefix(azurite, base) == []


def test_doctor_on_an_unreachable_endpoint_is_one_line() -> None:
    result = cli(["doctor"], azure_env("unreachable", unreachable_connection_string()))
    assert result.returncode == 3  # unreachable: retry later
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("blobledger: error: storage unreachable")


def test_doctor_on_an_unusable_local_store_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = cli(["doctor"], {"BLOBLEDGER_STORE_URL": f"file://{blocker}/store"})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"no folder {blocker}/store" in lines[0]


async def test_doctor_warns_about_an_old_owed_retag(tmp_path: Path) -> None:
    """Deferred retag: the oldest owed retag read from the database, a warning (never a
    failure) past BLOBLEDGER_RETAG_WARN_AFTER; a database it cannot read is unknown."""
    from blobledger.protocol.ledger import Ledger

    settings = Settings(store_url=f"file://{tmp_path / 'store'}", retag="deferred",
                        database_url=f"sqlite:///{tmp_path / 'ledger.db'}")
    async with Ledger.from_settings(settings) as ledger:
        await ledger.create("owed.txt", b"still tagged pending")
    fresh = await run_doctor(settings)
    assert {c.name: c.status for c in fresh.checks}[RETAG_LAG] == PASS
    late = await run_doctor(settings.with_(clock_offset=settings.retag_warn_after + 60))
    check = {c.name: c for c in late.checks}[RETAG_LAG]
    assert check.status == WARN and "owed retag" in check.detail, check
    assert late.failed == []
    missing = await run_doctor(settings.with_(
        database_url=f"sqlite:///{tmp_path / 'none.db'}"))
    assert {c.name: c.status for c in missing.checks}[RETAG_LAG] == UNKNOWN
