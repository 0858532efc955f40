"""Every measured case on Azurite, with the figures the article printed, end to end via the
CLI (JSON) and in process; and the bad inputs: no Azure store, an unreachable endpoint,
credentials without tag permission."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blobledger.config import Settings
from blobledger.errors import ConfigError, StoreError
from blobledger.experiments import (
    LETTERS,
    CaseResult,
    render_text,
    run_experiments,
    select_cases,
)
from blobledger.experiments.common import case_container
from blobledger.stores.azure.settings import AzureSettings
from tests.experiments.support import (
    cli,
    containers_with_prefix,
    no_tag_sas_connection_string,
    unique_base,
    unreachable_connection_string,
)
from tests.support.services import Azurite

UPLOAD_OUTCOMES = {
    "upload_blob(data)": "409",
    "upload_blob(data, overwrite=False)": "409",
    "upload_blob(data, overwrite=True)": "overwrote",
    "upload_blob(data, tags={...})": "409",
    "upload_blob(data, metadata={...})": "409",
    "upload_blob(data, max_concurrency=4)": "409",
    "upload_blob(data, content_settings=...)": "409",
    "upload_blob(data, etag=current, IfNotModified)": "overwrote",
    "upload_blob(data, etag=current, IfModified)": "412",
    "upload_blob(data, etag=other, IfModified)": "overwrote",
    "upload_blob(data, if_modified_since=2000-01-01)": "overwrote",
    "upload_blob(data, if_unmodified_since=2100-01-01)": "overwrote",
    "upload_blob(data, overwrite=False, if_modified_since=2000-01-01)": "overwrote",
    "upload_blob(data, match_condition=IfMissing)": "409",
    "upload_blob(stream)": "409",
    "upload_blob(stream above max_single_put_size)": "409",
    "upload_blob(iterator, length unknown)": "409",
}


def assert_figures(cases: dict[str, dict[str, Any]]) -> None:
    """The article's figures, measured on Azurite 3.37.0 with azure-storage-blob 12.31."""
    assert sorted(cases) == sorted(LETTERS)
    for letter, case in cases.items():
        assert case["error"] is None, (letter, case["error"])
    assert cases["E"]["lines"] == ["rows=0 blobs=1"]
    assert cases["A"]["lines"][-1] == "rows=1 blobs=1 orphaned=1"
    assert "UNIQUE constraint failed: documents.name" in cases["A"]["lines"][0]
    assert cases["B"]["lines"] == ["compensating delete (if exists) returned True",
                                   "rows=1 blobs=0"]
    assert cases["F"]["lines"] == ["hook: after_rollback fired for IntegrityError",
                                   "rows=1 blobs=0"]
    assert cases["C"]["lines"][:2] == ["before sweep: rows=2 pending=1 blobs=2",
                                       "after sweep:  rows=1 blobs=1 swept=1"]
    calls = {call["call"]: call["outcome"] for call in cases["I"]["figures"]["calls"]}
    assert calls == UPLOAD_OUTCOMES
    assert len(cases["I"]["lines"]) == len(UPLOAD_OUTCOMES)
    assert cases["G"]["lines"][0] == "won=1 conflict409=4 other=[] blobs=1"
    assert cases["G"]["figures"]["conflict412"] == 0
    assert cases["G"]["figures"]["winner_kept"] is True
    k = cases["K"]["figures"]
    assert (k["status"], k["committed_blocks"], k["uncommitted_blocks"]) == ("409", 3, 3)
    assert k["first_intact"] is True
    assert cases["K"]["lines"][1:3] == ["second staged upload -> HTTP 409 BlobAlreadyExists",
                                        "blocks left uncommitted: 3"]
    assert cases["J"]["lines"] == ["delete still-pending     -> deleted=True",
                                   "delete already-committed -> HTTP 412 ConditionNotMet",
                                   "remaining: already-committed.txt"]


def settings_for(azurite: Azurite, base: str, connection_string: str | None = None
                 ) -> Settings:
    return Settings(store_url=f"azure://{base}",
                    azure=AzureSettings(
                        connection_string=connection_string or azurite.connection_string))


def env_for(base: str, connection_string: str) -> dict[str, str]:
    return {"BLOBLEDGER_STORE_URL": f"azure://{base}",
            "BLOBLEDGER_AZURE_CONNECTION_STRING": connection_string}


@pytest.mark.slow
def test_cli_runs_every_case_and_prints_json(azurite: Azurite) -> None:
    base = unique_base()
    result = cli(["experiments", "--json"], env_for(base, azurite.connection_string))
    assert result.returncode == 0, result.stderr
    cases = {case["case"]: case for case in json.loads(result.stdout)}
    assert_figures(cases)
    assert cases["C"]["figures"]["sweeper"] == "blobledger.sweeper.Sweeper"
    assert containers_with_prefix(azurite, base) == []


@pytest.mark.slow
async def test_runner_in_process_prints_the_article_headings(azurite: Azurite) -> None:
    base = unique_base()
    results = await run_experiments(settings_for(azurite, base))
    assert_figures({r.letter: r.to_json() for r in results})
    text = render_text(results)
    headings = [line for line in text.splitlines() if line.startswith("##### ")]
    assert headings == [f"##### {r.letter} {r.title}" for r in results]
    assert [r.letter for r in results] == ["E", "A", "B", "F", "C", "I", "G", "K", "J"]
    assert "##### E DB transaction rollback does not undo the upload\nrows=0 blobs=1\n" in text
    assert containers_with_prefix(azurite, base) == []


async def test_only_selects_cases_in_order(azurite: Azurite) -> None:
    base = unique_base()
    results = await run_experiments(settings_for(azurite, base), ["j,E", "g"])
    assert [r.letter for r in results] == ["E", "G", "J"]
    assert all(isinstance(r, CaseResult) and r.error is None for r in results)


def test_only_rejects_unknown_letters() -> None:
    assert [e.letter for e in select_cases(["a, k", "A"])] == ["A", "K"]
    with pytest.raises(ConfigError, match="unknown experiment 'Z'"):
        select_cases(["A,Z"])
    result = cli(["experiments", "--only", "Q"], {"BLOBLEDGER_STORE_URL": "azure://abc"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "blobledger: error: unknown experiment 'Q': choose from E, A, B, F, C, I, G, K, J"]


def test_case_containers_are_valid_names() -> None:
    long = "a" * 63
    name = case_container(long, "K", "0123456789")
    assert len(name) == 63 and name.endswith("-k0123456789")
    assert case_container("ab-", "E", "0123456789") == "ab-e0123456789"
    assert case_container("a" * 50 + "-" + "b" * 12, "E", "0123456789").count("--") == 0


def test_no_azure_store_is_one_line(tmp_path: Any) -> None:
    result = cli(["experiments"], {"BLOBLEDGER_STORE_URL": f"file://{tmp_path}/blobs"})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs an Azure store" in lines[0]
    assert "BLOBLEDGER_STORE_URL=azure://" in lines[0]
    assert result.stdout == ""
    result = cli(["experiments"], {"BLOBLEDGER_STORE_URL": "azure://abcd"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "blobledger: error: azure:// store needs BLOBLEDGER_AZURE_CONNECTION_STRING "
        "or BLOBLEDGER_AZURE_ACCOUNT_URL"]


def test_unreachable_endpoint_is_one_line() -> None:
    result = cli(["experiments"], env_for("unreachable", unreachable_connection_string()))
    assert result.returncode == 3  # unreachable: retry later
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("blobledger: error: storage unreachable")


async def test_missing_tag_permission_is_one_line_and_leaves_nothing(azurite: Azurite) -> None:
    base = unique_base()
    sas = no_tag_sas_connection_string(azurite)
    result = cli(["experiments"], env_for(base, sas))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "may not write blob index tags" in lines[0] and "permission 't'" in lines[0]
    assert containers_with_prefix(azurite, base) == []
    with pytest.raises(StoreError, match="permission 't'"):
        await run_experiments(settings_for(azurite, base, sas), ["J"])
    assert containers_with_prefix(azurite, base) == []
