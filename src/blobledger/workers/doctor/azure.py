"""The doctor's Azure probes, made with the SDK directly to report the service's own answers.

Probe blobs go under ``doctor/`` in the configured container (created for the run and deleted
again if it did not exist). Every probe blob is deleted at the end, whatever happened. The
client uses bounded retries and timeouts, so an unreachable endpoint fails in seconds.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import AzureError, HttpResponseError
from azure.storage.blob.aio import BlobClient, BlobServiceClient, ContainerClient

from blobledger._base.names import new_blob_name
from blobledger.config import Settings
from blobledger.stores.azure import CREATE_ONLY as IF_NONE_MATCH_ANY
from blobledger.stores.azure import AzureStore, tag_condition
from blobledger.workers.doctor.azure_client import (
    TAG_HINT,
    azure_container,
    error_code,
    fatal,
    http,
    service_client,
)
from blobledger.workers.doctor.checks import (
    COMMITTED,
    CREATE_ONLY,
    FAIL,
    GAP,
    GUARDED_DELETE,
    GUARDED_TAGS,
    INFO,
    LIFECYCLE,
    NO_MATCH,
    PASS,
    PENDING,
    PROBE_PREFIX,
    SOFT_DELETE,
    TAG_WRITE,
    TAGS,
    UNKNOWN,
    Report,
)
from blobledger.workers.lifecycle import STATES

DELETING = {"state": "deleting"}


class _Probes:
    """The probe blobs of one run, so that each is deleted at the end."""

    def __init__(self, container: ContainerClient) -> None:
        self.container = container
        self.written: dict[str, str] = {}  # probe name -> the ETag its upload returned

    async def upload(self, tags: dict[str, str] | None = None,
                     data: bytes = b"blobledger doctor probe") -> BlobClient:
        name = new_blob_name(PROBE_PREFIX, "probe.bin")
        blob = self.container.get_blob_client(name)
        answer = await blob.upload_blob(data, tags=tags, **IF_NONE_MATCH_ANY)
        self.written[name] = str(answer["etag"])
        return blob

    async def remove_all(self) -> None:
        """Delete the probes, each conditioned on the ETag of the doctor's own upload."""
        for name, etag in self.written.items():
            with contextlib.suppress(AzureError):
                await self.container.get_blob_client(name).delete_blob(
                    delete_snapshots="include", etag=etag,
                    match_condition=MatchConditions.IfNotModified)


def _is_emulator(name: str, settings: Settings) -> bool:
    return AzureStore(name, connection_string=settings.azure.connection_string,
                      account_url=settings.azure.account_url).is_emulator


async def azure_report(settings: Settings) -> Report:
    name = azure_container(settings, "blobledger doctor")
    emulator = _is_emulator(name, settings)
    service = service_client(settings)
    container = service.get_container_client(name)
    report = Report(f"azure://{name}" + (" (Azurite emulator)" if emulator else ""))
    probes = _Probes(container)
    created = False
    try:
        try:
            if not await container.exists():
                await container.create_container()
                created = True
            await _blob_checks(probes, report, emulator)
            await _account_checks(service, report, emulator, settings.blob_prefix)
        except (AzureError, OSError) as exc:
            raise fatal(exc, f"container {name}") from None
    finally:
        with contextlib.suppress(AzureError, OSError):
            await probes.remove_all()
            if created:
                await container.delete_container()
        await service.close()
    return report


async def _blob_checks(probes: _Probes, report: Report, emulator: bool) -> None:
    # create-only
    first = await probes.upload()
    try:
        await first.upload_blob(b"other bytes", **IF_NONE_MATCH_ANY)
        report.add(CREATE_ONLY, True, FAIL, "a second create-only upload overwrote the blob")
    except HttpResponseError as exc:
        ok = exc.status_code in (409, 412)
        report.add(CREATE_ONLY, True, PASS if ok else FAIL,
                   f"second create refused: {http(exc)}" if ok else f"answered {http(exc)}")

    # index tags, and permission to write them
    try:
        tagged: BlobClient | None = await probes.upload(tags=dict(PENDING))
    except HttpResponseError as exc:
        tagged = None
        report.add(TAGS, True, FAIL, f"upload with tags refused: {http(exc)}")
    if tagged is not None:
        try:
            tags = await tagged.get_blob_tags()
            report.add(TAGS, True, PASS if tags == PENDING else FAIL, f"read back {tags}")
        except HttpResponseError as exc:
            status = UNKNOWN if exc.status_code == 403 else FAIL
            report.add(TAGS, True, status, f"tags not readable: {http(exc)}")
        try:
            await tagged.set_blob_tags(dict(COMMITTED))
            report.add(TAG_WRITE, True, PASS, "Set Blob Tags accepted")
        except HttpResponseError as exc:
            detail = (f"refused ({error_code(exc) or 403}): {TAG_HINT}"
                      if exc.status_code == 403 else f"refused: {http(exc)}")
            report.add(TAG_WRITE, True, FAIL, detail)

    # delete guarded by x-ms-if-tags
    guarded = await probes.upload(tags=dict(COMMITTED))
    try:
        await guarded.delete_blob(if_tags_match_condition=tag_condition(PENDING))
        report.add(GUARDED_DELETE, True, FAIL,
                   "a blob tagged committed was deleted under state = 'pending'")
    except HttpResponseError as exc:
        if exc.status_code == 412:
            await guarded.delete_blob(if_tags_match_condition=tag_condition(COMMITTED))
            report.add(GUARDED_DELETE, True, PASS,
                       f"wrong tag refused: {http(exc)}; matching tag deleted")
        else:
            report.add(GUARDED_DELETE, True, FAIL, f"answered {http(exc)}")

    # tag update guarded by x-ms-if-tags
    if tagged is None:
        report.add(GUARDED_TAGS, True, UNKNOWN, "no tagged probe blob (see index tags)")
        return
    try:
        await tagged.set_blob_tags(dict(DELETING), if_tags_match_condition=tag_condition(NO_MATCH))
        if emulator:
            report.add(GUARDED_TAGS, True, GAP, "known emulator gap: Azurite ignores x-ms-if-tags"
                       " on Set Blob Tags (the real service enforces it)")
        else:
            report.add(GUARDED_TAGS, True, FAIL, "a tag update under a wrong condition was "
                       "accepted")
    except HttpResponseError as exc:
        if exc.status_code == 412:
            report.add(GUARDED_TAGS, True, PASS, f"wrong tag refused: {http(exc)}")
        elif exc.status_code == 403:
            report.add(GUARDED_TAGS, True, UNKNOWN, f"not measurable without tag permission "
                       f"({error_code(exc) or 403})")
        else:
            report.add(GUARDED_TAGS, True, FAIL, f"answered {http(exc)}")


async def _account_checks(service: BlobServiceClient, report: Report, emulator: bool,
                          prefix: str) -> None:
    hierarchical = False
    try:
        info: dict[str, Any] = await service.get_account_information()
        hierarchical = bool(info.get("is_hns_enabled"))
    except HttpResponseError:
        pass  # account information needs account-level rights; it only adds notes
    if hierarchical:
        report.checks[:] = [
            replace(c, detail=c.detail + "; hierarchical namespace: index tags are a preview "
                    "feature there") if c.name == TAGS else c for c in report.checks]

    try:
        properties = await service.get_service_properties()
        policy = properties.get("delete_retention_policy")
        if policy is not None and getattr(policy, "enabled", False):
            days = getattr(policy, "days", None)
            report.add(SOFT_DELETE, False, INFO,
                       f"on, {days} days" if days is not None else "on")
        else:
            note = ("; the emulator does not implement soft delete" if emulator else
                    "; enable blob soft delete so a mistaken delete can be undone")
            report.add(SOFT_DELETE, False, INFO, "off (service properties)" + note)
    except HttpResponseError as exc:
        report.add(SOFT_DELETE, False, UNKNOWN, f"service properties not readable: {http(exc)}")

    if emulator:
        report.add(LIFECYCLE, False, INFO, "n/a: the emulator has no lifecycle management")
    elif hierarchical:
        report.add(LIFECYCLE, False, INFO, "n/a: lifecycle blob index filters need a flat "
                   "namespace; this account has a hierarchical one")
    else:
        report.add(LIFECYCLE, False, UNKNOWN,
                   "unknown (needs management API): the lifecycle policy is not readable with "
                   "data-plane credentials; expect one rule per state "
                   f"({' / '.join(STATES)}) as printed by `blobledger lifecycle-policy "
                   f"--prefix {prefix} --days N`")
