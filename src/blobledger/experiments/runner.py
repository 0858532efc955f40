"""Run the measured cases: each in its own fresh container, deleted afterwards.

Before the first case, the run checks that the endpoint answers (bounded retries) and that
the credentials may write index tags; either failure ends the run with one blobledger error
and nothing left behind.
"""

from __future__ import annotations

import inspect
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.storage.blob.aio import BlobServiceClient

from blobledger.config import Settings
from blobledger.errors import BlobLedgerError, ConfigError
from blobledger.experiments.common import (
    Case,
    CaseResult,
    Context,
    azure_container,
    case_container,
    check_tag_permission,
    fatal,
    first_line,
    new_run_id,
    service_client,
)
from blobledger.experiments.guard import case_j
from blobledger.experiments.protocol import case_c
from blobledger.experiments.transactions import case_a, case_b, case_e, case_f
from blobledger.experiments.uploads import case_g, case_i, case_k


@dataclass(frozen=True)
class Experiment:
    letter: str
    title: str
    run: Case


EXPERIMENTS = [
    Experiment("E", "DB transaction rollback does not undo the upload", case_e),
    Experiment("A", "naive: upload then commit fails", case_a),
    Experiment("B", "compensating delete in except", case_b),
    Experiment("F", "after_rollback session event hook runs the compensating delete", case_f),
    Experiment("C", "pending row -> upload -> mark ready, with a crash before the mark",
               case_c),
    Experiment("I", "create-only or overwrite, per upload_blob parameterisation", case_i),
    Experiment("G", "five concurrent conditional creates of the same blob name", case_g),
    Experiment("K", "conditional create on a staged multi-block upload", case_k),
    Experiment("J", "conditional delete guarded by x-ms-if-tags", case_j),
]
LETTERS = [e.letter for e in EXPERIMENTS]


def select_cases(only: Iterable[str] | None) -> list[Experiment]:
    """The experiments named by ``--only`` values (letters, repeatable or comma-separated)."""
    if not only:
        return list(EXPERIMENTS)
    wanted: set[str] = set()
    for value in only:
        for letter in value.replace(" ", "").split(","):
            if not letter:
                continue
            if letter.upper() not in LETTERS:
                raise ConfigError(f"unknown experiment {letter!r}: choose from "
                                  f"{', '.join(LETTERS)}")
            wanted.add(letter.upper())
    if not wanted:
        raise ConfigError(f"--only names no experiment: choose from {', '.join(LETTERS)}")
    return [e for e in EXPERIMENTS if e.letter in wanted]


async def run_experiments(settings: Settings, only: Iterable[str] | None = None
                          ) -> list[CaseResult]:
    """Run the chosen cases against the configured Azure account; one result per case."""
    base = azure_container(settings, "blobledger experiments")
    chosen = select_cases(only)
    run_id = new_run_id()
    workdir = Path(tempfile.mkdtemp(prefix="blobledger-experiments-"))
    service = service_client(settings)
    results: list[CaseResult] = []
    try:
        for index, experiment in enumerate(chosen):
            results.append(await _run_one(service, settings, base, run_id, workdir,
                                          experiment, preflight=index == 0))
    finally:
        await _close(service)
        shutil.rmtree(workdir, ignore_errors=True)
    return results


async def _run_one(service: BlobServiceClient, settings: Settings, base: str, run_id: str,
                   workdir: Path, experiment: Experiment, *, preflight: bool) -> CaseResult:
    name = case_container(base, experiment.letter, run_id)
    container = service.get_container_client(name)
    result = CaseResult(experiment.letter, experiment.title)
    created = False
    folder = workdir / experiment.letter.lower()
    folder.mkdir()
    try:
        try:
            await container.create_container()
            created = True
            if preflight:
                await check_tag_permission(container)
        except (AzureError, OSError) as exc:
            raise fatal(exc, f"container {name}") from None
        try:
            await experiment.run(Context(service, container, folder, settings), result)
        except (AzureError, BlobLedgerError, OSError) as exc:
            result.error = f"{type(exc).__name__}: {first_line(exc)}"
            result.say(f"error: {result.error}")
    finally:
        if created:
            try:
                await container.delete_container()
            except ResourceNotFoundError:
                pass
            except AzureError as exc:
                raise fatal(exc, f"deleting container {name}") from None
    return result


async def _close(service: BlobServiceClient) -> None:
    credential: Any = getattr(service, "credential", None)
    await service.close()
    closer = getattr(credential, "close", None)
    if closer is not None and inspect.iscoroutinefunction(closer):
        await closer()  # DefaultAzureCredential holds its own HTTP session


def render_text(results: list[CaseResult]) -> str:
    blocks = []
    for result in results:
        blocks.append("\n".join([f"##### {result.letter} {result.title}", *result.lines]))
    return "\n\n".join(blocks) + "\n"


def render_json(results: list[CaseResult]) -> list[dict[str, Any]]:
    return [result.to_json() for result in results]
