"""Terminal output on rich: progress bars and tables on a terminal, plain stable text when
the stream is not one (a pipe, a file, a test).

Names and details from the database or the store go through :func:`display_name` and are
printed as :class:`rich.text.Text` (never parsed as markup): a control or bidirectional
character is shown escaped, never raw. Everything a client command prints that came from the
server goes through this module too: fields through :func:`display_name` (:func:`fields` for
a tab-separated line), JSON through :func:`print_json` (ASCII only: every control, C1,
bidirectional or zero-width character is a JSON escape), error lines through
:func:`one_line` (``blobledger.cli.fail``). A terminal never receives an escape sequence,
a title, a clipboard write or a reordered line from a server's answer.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Sequence
from typing import IO, Any

#: characters shown escaped: controls, format characters (bidirectional overrides,
#: zero-width characters), separators, surrogates, private-use and unassigned code points
_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def display_name(name: str) -> str:
    """The name with every invisible or direction-changing character as ``\\uXXXX``."""
    return "".join(
        (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
        if unicodedata.category(c) in _HIDDEN or c == "\\" else c
        for c in name)


def plain(text: str) -> str:
    """A report's plain text with hidden and direction-changing characters escaped in every
    line (backslashes kept: the report's own text may hold them)."""
    return "\n".join("".join(_escape(c) if unicodedata.category(c) in _HIDDEN else c
                              for c in line) for line in text.split("\n"))


def one_line(text: str) -> str:
    """An error line: hidden and direction-changing characters escaped, line breaks and tabs
    too (backslashes kept), so that it stays one line whatever a server put in it."""
    return "".join(_escape(c) if unicodedata.category(c) in _HIDDEN else c for c in text)


def fields(values: Sequence[object]) -> str:
    """One tab-separated line of values, each escaped (a tab or a line break inside a value
    cannot split it)."""
    return "\t".join(display_name(str(value)) for value in values)


def print_json(value: object, stream: IO[str] | None = None) -> None:
    """One line of JSON holding only printable ASCII (``ensure_ascii``: C0, DEL, C1,
    bidirectional and zero-width characters are all ``\\uXXXX`` escapes)."""
    print(json.dumps(value, ensure_ascii=True), file=stream or sys.stdout)


def _escape(c: str) -> str:
    return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def console(stream: IO[str] | None = None) -> Any:
    """A rich console on ``stream`` (stdout by default); rich loads only when drawing."""
    from rich.console import Console

    return Console(file=stream or sys.stdout, highlight=False, soft_wrap=False)


class Progress:
    """A rich progress bar (bytes or items, rate, ETA) on stderr when it is a terminal;
    nothing at all otherwise. ``add`` counts, ``finish`` ends the bar."""

    def __init__(self, label: str, total: int | None, *, unit: str = "bytes",
                 stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = is_terminal(self.stream)
        self.label = display_name(label)
        self.total = total
        self.unit = unit
        self.done = 0
        self._bar: Any = None
        self._task: Any = None

    def _start(self) -> None:
        from rich import progress as rp

        columns: list[Any] = [rp.TextColumn("{task.description}"), rp.BarColumn(),
                              rp.TaskProgressColumn()]
        if self.unit == "bytes":
            columns += [rp.DownloadColumn(binary_units=True), rp.TransferSpeedColumn()]
        else:
            columns += [rp.MofNCompleteColumn(), rp.TextColumn("{task.fields[rate]}")]
        columns.append(rp.TimeRemainingColumn())
        self._bar = rp.Progress(*columns, console=console(self.stream), transient=False,
                                refresh_per_second=10)
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=self.total, rate="")

    def add(self, count: int) -> None:
        self.done += count
        if not self.enabled:
            return
        if self._bar is None:
            self._start()
        fields: dict[str, Any] = {}
        if self.unit != "bytes":
            task = self._bar.tasks[0]
            speed = task.speed
            fields["rate"] = f"{speed:,.0f} {self.unit}/s" if speed else ""
        self._bar.update(self._task, completed=self.done, **fields)

    def scanned(self, rows: int, blobs: int) -> None:
        """For a scan (``reconcile``, ``check``): rows done of the total, blobs seen."""
        self.add(rows - self.done)
        if self._bar is not None:
            self._bar.update(self._task, description=f"{self.label} ({blobs:,} blobs)")

    def finish(self) -> None:
        if self._bar is not None:
            if self.total is None:
                self._bar.update(self._task, total=self.done, completed=self.done)
            self._bar.stop()
            self._bar = None


def table(title: str | None, headers: Sequence[str], rows: Sequence[Sequence[str]],
          *, stream: IO[str] | None = None, multiline: bool = True) -> None:
    """A rich table (for a terminal; callers print plain text otherwise). A cell may hold
    several lines, each escaped; with ``multiline`` False (values from a server) a line
    break is escaped too and every cell is one line."""
    from rich.table import Table
    from rich.text import Text

    grid = Table(title=title, title_justify="left", show_lines=False)
    for header in headers:
        grid.add_column(header)
    for row in rows:
        grid.add_row(*(Text("\n".join(display_name(line) for line in cell.split("\n"))
                            if multiline else display_name(cell)) for cell in row))
    console(stream).print(grid)
