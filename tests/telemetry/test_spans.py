"""The spans of a create and a replace, through the SDK's in-memory exporter: one span per
protocol step, under the operation's, with SQLAlchemy's statements underneath."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from blobledger import Ledger, telemetry
from blobledger.db import Database
from blobledger.stores.local import LocalStore


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.enable(provider)
    yield exporter
    telemetry.disable()


def tree(finished: tuple[ReadableSpan, ...], root: str) -> dict[str, Any]:
    """The root span named ``root`` and, under it, its children's names in start order."""
    top = next(s for s in finished if s.name == root and s.parent is None)
    assert top.context is not None

    def children(span_id: int, scope: str) -> list[ReadableSpan]:
        found = [s for s in finished if s.parent is not None and s.parent.span_id == span_id
                 and s.instrumentation_scope is not None
                 and s.instrumentation_scope.name == scope]
        return sorted(found, key=lambda s: s.start_time or 0)

    steps = children(top.context.span_id, "blobledger")
    return {"root": top, "steps": steps,
            "sql": {s.name: len(children(s.context.span_id,
                                         "opentelemetry.instrumentation.sqlalchemy"))
                    for s in steps if s.context is not None}}


async def test_the_span_tree_of_a_create_and_a_replace(
        spans: InMemorySpanExporter, tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/spans.db")
    telemetry.instrument_engine(db.engine)
    async with Ledger(db, LocalStore(str(tmp_path / "blobs"))) as ledger:
        spans.clear()
        doc = await ledger.create("traced.txt", b"first bytes")
        created = tree(spans.get_finished_spans(), "create")
        root = created["root"]
        assert root.attributes["blobledger.document_id"] == doc.id
        assert root.attributes["blobledger.blob_name"] == doc.blob
        assert root.attributes["blobledger.outcome"] == "ok"
        steps = created["steps"]
        assert [(s.name, s.attributes["blobledger.step"]) for s in steps] == [
            ("begin_create", "C1"), ("upload", "C2"), ("confirm", "C2-C3"),
            ("tag_committed", "C3"), ("commit_create", "C4")]
        for step in steps:
            assert step.attributes["blobledger.document_id"] == doc.id
            assert step.attributes["blobledger.blob_name"] == doc.blob
            assert step.attributes["blobledger.outcome"] == "ok"
        # the database steps have SQLAlchemy's statements under them; the store's none
        assert created["sql"]["begin_create"] >= 1 and created["sql"]["commit_create"] >= 1
        assert created["sql"]["upload"] == 0 and created["sql"]["tag_committed"] == 0

        spans.clear()
        new = await ledger.replace(doc.id, b"second bytes", expected_version=1)
        replaced = tree(spans.get_finished_spans(), "replace")
        assert replaced["root"].attributes["blobledger.document_id"] == doc.id
        assert replaced["root"].attributes["blobledger.blob_name"] == new.blob
        assert [(s.name, s.attributes["blobledger.step"]) for s in replaced["steps"]] == [
            ("begin_replace", "R1"), ("upload", "R2"), ("confirm", "R2-R3"),
            ("tag_committed", "R3"), ("commit_replace", "R4")]
        assert {s.attributes["blobledger.blob_name"] for s in replaced["steps"]} == {new.blob}

        spans.clear()
        from blobledger.errors import PreconditionFailed

        with pytest.raises(PreconditionFailed):
            await ledger.replace(doc.id, b"stale", expected_version=1)
        failed = tree(spans.get_finished_spans(), "replace")
        assert failed["root"].attributes["blobledger.outcome"] == "PreconditionFailed"
        assert failed["steps"] == []  # refused early in R1, before its row was written


@asynccontextmanager
async def traced_ledger(tmp_path: Path, pg_url: str
                        ) -> AsyncIterator[tuple[Database, Ledger, str]]:
    """A ledger on PostgreSQL (the deferred retag) whose engine is instrumented, its pool's
    first connection made: its database, itself, and a tag for names of this test's own (the
    database is the session's)."""
    from blobledger.config import Settings

    db = Database(pg_url)
    telemetry.instrument_engine(db.engine)
    tag = uuid.uuid4().hex[:8]
    async with Ledger(db, LocalStore(str(tmp_path / "blobs")),
                      Settings(retag="deferred")) as ledger:
        await ledger.create(f"warm-{tag}.txt", b"the pool's first connection")
        yield db, ledger, tag


async def test_the_one_statement_steps_on_postgresql_have_their_statements_spans(
        spans: InMemorySpanExporter, tmp_path: Path, pg_url: str) -> None:
    """On PostgreSQL an unkeyed create under the deferred retag runs C1 and C4 as one
    statement each (``protocol/single.py``): with the engine instrumented, each statement
    goes through SQLAlchemy, and its span is under its step's."""
    async with traced_ledger(tmp_path, pg_url) as (db, ledger, tag):
        spans.clear()
        doc = await ledger.create(f"traced-{tag}.txt", b"bytes")
        finished = spans.get_finished_spans()
        created = tree(finished, "create")
        steps = {s.name: s for s in created["steps"]}
        assert steps["begin_create"].attributes["blobledger.document_id"] == doc.id
        for step, opening in (("begin_create", "WITH c1_document"),
                              ("commit_create", "WITH c4_blob")):
            context = steps[step].context
            assert context is not None
            under = [s for s in finished if s.parent is not None
                     and s.parent.span_id == context.span_id]
            sql = [str(dict(s.attributes or {}).get("db.statement"))
                   for s in under if s.name != "connect"]  # a new pooled connection's own
            assert [" ".join(text.split()[:2]) for text in sql] == [opening], sql
        assert db.driver_runs == 0  # observed: nothing sent past SQLAlchemy


async def test_a_group_commits_batch_is_a_statement_span_of_its_own(
        spans: InMemorySpanExporter, tmp_path: Path, pg_url: str) -> None:
    """Concurrent creations on PostgreSQL, instrumented: the C1s and C4s sent together are
    one statement span per batch, a root span (the batch belongs to none of its steps in
    particular), and a step's span has at most its own statement under it (a run sent
    alone), never a batch's."""
    import asyncio

    async with traced_ledger(tmp_path, pg_url) as (_db, ledger, tag):
        groups = {"WITH c1_document": ledger.transitions._c1s,
                  "WITH c4_blob": ledger.transitions._c4s}
        for group in groups.values():
            group.sizes.clear()
        spans.clear()
        await asyncio.gather(*(ledger.create(f"at-once-{tag}-{n}.txt", b"bytes %d" % n)
                               for n in range(12)))
        finished = spans.get_finished_spans()
        steps = {s.context.span_id: s.name for s in finished
                 if s.context is not None and s.instrumentation_scope is not None
                 and s.instrumentation_scope.name == "blobledger"}
        for opening, group in groups.items():
            sent = [s for s in finished if s.name != "connect" and " ".join(str(
                dict(s.attributes or {}).get("db.statement")).split()[:2]) == opening]
            batches = sum(count for size, count in group.sizes.items() if size > 1)
            assert batches, group.sizes
            assert len([s for s in sent if s.parent is None]) == batches
            parents = [s.parent.span_id for s in sent if s.parent is not None]
            assert len(parents) == len(set(parents)) == group.sizes.get(1, 0)
            assert {steps[parent] for parent in parents} <= {"begin_create", "commit_create"}


async def test_sweep_batches_have_spans(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    from blobledger.config import Settings
    from blobledger.workers.sweeper import Sweeper

    settings = Settings(upload_deadline=60, sweep_after=120, delete_grace=0)
    db = Database(f"sqlite:///{tmp_path}/sweep.db")
    async with Ledger(db, LocalStore(str(tmp_path / "blobs")), settings) as ledger:
        doc = await ledger.create("gone.txt", b"x")
        await ledger.delete(doc.id)
        spans.clear()
        await Sweeper(ledger).run_once()
    names = [s.name for s in spans.get_finished_spans()]
    assert "deletion.batch" in names


def test_off_is_one_shared_object_and_no_import() -> None:
    import subprocess
    import sys

    code = ("import sys; from blobledger import Ledger, telemetry; "
            "assert telemetry.span('upload') is telemetry.OFF; "
            "print(any(m.startswith('opentelemetry') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "False"
