"""docs/crash-matrix.md's rendering: a run interleaves the groups' cases (the retag settings
alternate, the backends run in any order); the document has one table per group."""

from __future__ import annotations

from pathlib import Path

from tests.crash.matrix_doc import (
    DB_FAULTS,
    S3_GROUP,
    S3_PART,
    DbFaultRow,
    MatrixRows,
    PauseRow,
    Row,
    render,
    render_db_faults,
    write_matrix,
)


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


def test_a_run_replaces_only_the_parts_it_has_rows_of(tmp_path: Path) -> None:
    """A run of the S3 endpoint's writers alone keeps the other parts; a run of the kill
    matrix alone keeps the S3 endpoint's part and the database faults."""
    doc = tmp_path / "crash-matrix.md"
    main = Row("Create", "after C1", "create.after_insert", "sqlite-local", "L", "R", "E")
    fault = DbFaultRow("writers: create", "create", "C1", "before", "postgresql-local",
                       "a", "b", "c", "")
    write_matrix(doc, MatrixRows(rows=[main], db_faults=[fault]))
    s3 = Row(S3_GROUP + "DeleteObject", "after the commit", "delete.after_commit",
             "sqlite-local", "S3LEFT", "R", "E")
    write_matrix(doc, MatrixRows(rows=[s3], pauses=[PauseRow(
        s3.group, s3.title, s3.point, "sqlite-local", "S3PAUSED")]))
    text = doc.read_text()
    assert text.index("## Create") < text.index(S3_PART) < text.index(DB_FAULTS)
    assert "### DeleteObject" in text and "S3LEFT" in text and "S3PAUSED" in text
    write_matrix(doc, MatrixRows(rows=[Row("Create", "after C1", "create.after_insert",
                                           "sqlite-local", "AGAIN", "R", "E")]))
    again = doc.read_text()
    assert "AGAIN" in again and "S3LEFT" in again and DB_FAULTS in again
    assert again.count("# Crash matrix") == 1


def test_the_s3_part_keeps_what_a_run_has_no_rows_of(tmp_path: Path) -> None:
    doc = tmp_path / "crash-matrix.md"
    s3 = Row(S3_GROUP + "DeleteObject", "after the commit", "delete.after_commit",
             "sqlite-local", "S3LEFT", "R", "E")
    write_matrix(doc, MatrixRows(rows=[s3]))
    fault = DbFaultRow(S3_GROUP + "one connection cut", "DeleteObject", "(one transaction)",
                       "`COMMIT`", "postgresql-local", "FIRST", "RETRY", "AFTER", "")
    write_matrix(doc, MatrixRows(db_faults=[fault]))
    text = doc.read_text()
    assert "S3LEFT" in text and "FIRST" in text and DB_FAULTS not in text
    write_matrix(doc, MatrixRows(rows=[Row(s3.group, s3.title, s3.point, "sqlite-local",
                                           "AGAIN", "R", "E")]))
    again = doc.read_text()
    assert "AGAIN" in again and "S3LEFT" not in again and "FIRST" in again
    assert again.count(S3_PART) == 1
