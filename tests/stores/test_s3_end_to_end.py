"""``BLOBLEDGER_STORE_URL=s3://bucket/prefix`` end to end, on PostgreSQL and moto's S3
server, in real processes: ``serve`` (upload, read, replace, delete), ``sweep``,
``reconcile``, ``check``, ``doctor`` and ``lifecycle-policy``."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from blobledger.workers.doctor.checks import (
    CREATE_ONLY,
    ETAG_DELETE,
    GAP,
    GUARDED_DELETE,
    GUARDED_TAGS,
)
from tests.experiments.support import cli
from tests.support.server import fresh_database, running_server
from tests.support.services import Azurite, MotoS3


def s3_env(moto: MotoS3, database_url: str, bucket: str) -> dict[str, str]:
    # the commands' start-up probe waits 2 s by default: moto, shared with the rest of a
    # parallel run, may take longer to answer, which is not what this test is about
    return {"BLOBLEDGER_DATABASE_URL": database_url,
            "BLOBLEDGER_STORE_URL": f"s3://{bucket}/app", "BLOBLEDGER_S3_PROBE_TIMEOUT": "30",
            **moto.environment()}


@pytest.mark.slow
def test_the_service_and_the_workers_on_s3(moto: MotoS3, azurite: Azurite) -> None:
    bucket = f"e2e{uuid.uuid4().hex[:16]}"
    with fresh_database() as url:
        env = s3_env(moto, url, bucket)
        with running_server(azurite, url, extra=env) as server:
            created = httpx.post(f"{server.url}/documents", params={"name": "q1.pdf"},
                                 content=b"%PDF-1.7 quarterly",
                                 headers={"Content-Type": "application/pdf"})
            assert created.status_code == 201, created.text
            doc = created.json()
            content = httpx.get(f"{server.url}/documents/{doc['id']}/content")
            assert content.content == b"%PDF-1.7 quarterly"
            replaced = httpx.put(f"{server.url}/documents/{doc['id']}/content",
                                 content=b"%PDF-1.7 corrected", headers={"If-Match": '"1"'})
            assert replaced.status_code == 200, replaced.text
            ranged = httpx.get(f"{server.url}/documents/{doc['id']}/content",
                               headers={"Range": "bytes=9-17"})
            assert (ranged.status_code, ranged.content) == (206, b"corrected")
            kept = httpx.post(f"{server.url}/documents", params={"name": "kept.txt"},
                              content=b"stays")
            assert kept.status_code == 201
            gone = httpx.delete(f"{server.url}/documents/{doc['id']}",
                                headers={"If-Match": '"2"'})
            assert gone.status_code == 204
        later = {**env, "BLOBLEDGER_CLOCK_OFFSET": "36000"}  # past every cutoff
        swept = cli(["sweep", "--once"], later)
        assert swept.returncode == 0, swept.stderr
        assert json.loads(swept.stdout.strip().splitlines()[-1])["deleted"] == 2
        reconciled = cli(["reconcile", "--json"], env)
        assert reconciled.returncode == 0, reconciled.stdout + reconciled.stderr
        checked = cli(["check", "--settled"], later)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        doctor = cli(["doctor", "--json"], env)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        status = {c["name"]: c["status"] for c in json.loads(doctor.stdout)["checks"]}
        assert status[CREATE_ONLY] == "pass" and status[ETAG_DELETE] == "pass"
        assert status[GUARDED_DELETE] == "info"  # S3 has no tag-conditioned delete
        assert status[GUARDED_TAGS] == GAP
        policy = cli(["lifecycle-policy", "--days", "7"], env)
        assert policy.returncode == 0, policy.stderr
        rules = json.loads(policy.stdout)["Rules"]
        assert {r["ID"] for r in rules} == {"blobledger-pending-documents-7d",
                                            "blobledger-deleting-documents-7d",
                                            "blobledger-incomplete-documents-7d"}
        assert rules[0]["Filter"]["And"]["Prefix"] == "app/documents/"
