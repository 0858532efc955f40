"""The docs' tables of settings are the ones written from the settings' models
(``blobledger.config.table``): a table edited by hand, or a setting added without its row,
fails here until ``scripts/settings-table`` writes them again."""

from __future__ import annotations

from pathlib import Path

import pytest

from blobledger.cli import main
from blobledger.config import Settings
from blobledger.config.table import AREAS, refresh, render, unplaced

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: path.name)
def test_each_documents_tables_are_the_generated_ones(path: Path) -> None:
    text = path.read_text()
    assert refresh(text) == text, f"{path.name}: run scripts/settings-table"


def test_the_readme_shows_every_area_and_the_pipeline_doc_its_own() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "<!-- settings-table -->\n\n" + render() in readme
    pipeline = (ROOT / "docs" / "pipeline.md").read_text()
    assert "<!-- settings-table: pipeline -->\n\n" + render("pipeline") in pipeline


def test_every_setting_has_an_area_and_a_meaning() -> None:
    assert unplaced() == set()
    table = render()
    for name, info in Settings.model_fields.items():
        if name not in ("azure", "s3"):
            assert f"`BLOBLEDGER_{name.upper()}`" in table
            assert info.description, name
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert all(line.split(" | ")[1].strip() for line in rows)


def test_a_row_edited_by_hand_or_missing_is_written_again() -> None:
    text = (ROOT / "README.md").read_text()
    edited = text.replace("| `1h` |", "| `2h` |", 1)
    assert edited != text
    assert refresh(edited) == text
    row = next(line for line in text.splitlines() if "`BLOBLEDGER_EVENT_BATCH`" in line)
    assert refresh(text.replace(row + "\n", "")) == text


def test_an_unclosed_table_is_refused() -> None:
    with pytest.raises(ValueError, match="not closed"):
        refresh("<!-- settings-table -->\n| a |\n")


def test_the_command_prints_the_same_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--table"]) == 0
    assert capsys.readouterr().out == render()
    assert main(["config", "--table", "--area", "pipeline"]) == 0
    assert capsys.readouterr().out == render("pipeline")
    assert {area.name for area in AREAS} >= {"storage", "service", "pipeline", "workers"}
