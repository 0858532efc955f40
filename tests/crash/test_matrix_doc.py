"""docs/crash-matrix.md's rendering: a run interleaves the groups' cases (the retag settings
alternate, the backends run in any order); the document has one table per group."""

from __future__ import annotations

from tests.crash.matrix_doc import DbFaultRow, MatrixRows, Row, render, render_db_faults


def test_each_group_is_one_table_in_the_order_first_seen() -> None:
    rows = MatrixRows(rows=[
        Row(group, f"step {n}", f"point.{n}", backend, "left", "resolved", "end")
        for n in range(3) for group in ("Create", "Create, deferred retag")
        for backend in ("sqlite-local", "postgresql-s3")])
    text = render(rows)
    headers = [line for line in text.splitlines() if line.startswith("## ")]
    assert headers == ["## Create", "## Create, deferred retag"]
    create, deferred = text.split("## Create, deferred retag")
    assert [f"(`point.{n}`)" in create for n in range(3)] == [True] * 3
    assert [f"(`point.{n}`)" in deferred for n in range(3)] == [True] * 3
    assert create.index("point.0") < create.index("point.1") < create.index("point.2")
    assert "| 2/2 |" in create


def test_each_database_fault_group_is_one_table() -> None:
    faults = [DbFaultRow(group, "create", f"C{n}", "before", "sqlite-local", "a", "b", "c", "")
              for n in range(2) for group in ("writers: create", "workers: retag")]
    headers = [line for line in render_db_faults(faults).splitlines()
               if line.startswith("### ")]
    assert headers == ["### Create", "### Retag"]
