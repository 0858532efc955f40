"""``blobledger config``: the effective settings (environment over ``.env`` over ``--config``
over the defaults), checked, with every secret masked."""

from __future__ import annotations

import json
from typing import Any

import click

from blobledger.cli import settings
from blobledger.config import env_name
from blobledger.config.table import AREAS, render
from blobledger.errors import ConfigError


@click.command(epilog="\b\nExamples:\n  blobledger config\n"
               "  blobledger --config blobledger.toml config --json\n"
               "  blobledger config --table --area pipeline")
@click.option("--json", "as_json", is_flag=True, help="print the settings as JSON")
@click.option("--table", "as_table", is_flag=True,
              help="print the table of every setting (markdown, as in the README) instead")
@click.option("--area", type=click.Choice([area.name for area in AREAS]),
              help="with --table: only this area's settings")
def command(as_json: bool, as_table: bool, area: str | None) -> int:
    """Print the effective settings, each with its environment variable; secrets (API
    tokens, the client's token, passwords and account keys) are masked. Exit 2 with one
    line per mistake when the configuration is wrong. --table prints what every setting
    means and its default instead, written from the settings' models."""
    if area is not None and not as_table:
        raise click.UsageError("--area goes with --table")
    if as_table:
        print(render(area), end="")
        return 0
    current = settings()
    check_urls(current.database_url, current.store_url)
    data = current.masked()
    if as_json:
        print(json.dumps(data, indent=2))
        return 0
    for name, value in flatten(data):
        print(f"{env_name(name)}={format_value(value)}")
    return 0


def check_urls(database_url: str, store_url: str) -> None:
    """The database and store URLs refused as every command that opens them refuses them
    (one line each), without opening nor creating anything."""
    from blobledger.db import normalise_url
    from blobledger.stores import check_store_url

    mistakes: list[str] = []
    for check, url in ((normalise_url, database_url), (check_store_url, store_url)):
        try:
            check(url)
        except ConfigError as exc:
            mistakes.append(str(exc))
    if mistakes:
        raise ConfigError("\n".join(mistakes))


def flatten(data: dict[str, Any], parent: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...],
                                                                            Any]]:
    rows: list[tuple[tuple[str, ...], Any]] = []
    for key, value in data.items():
        if isinstance(value, dict) and key in ("azure", "s3"):
            rows.extend(flatten(value, (*parent, key)))
        else:
            rows.append(((*parent, key), value))
    return rows


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
