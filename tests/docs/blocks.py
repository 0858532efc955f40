"""The fenced code blocks of README.md and docs/*.md, and what each needs to run.

A block is run by the tests unless an HTML comment on the line before it says why not:
``<!-- not-run: output -->``. A runnable block (``python``, ``sh``) may name what it needs
there: ``<!-- run: server -->`` (a running ``blobledger serve``, as ``scripts/serve`` starts
it), ``run: example`` (the example application, as ``scripts/example`` starts it), ``run:
azure`` or ``run: s3`` (the emulators' credentials in the environment), ``run: pytest`` (a
test module, saved under the name its first line gives and run by pytest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = {"python", "sh"}
NEEDS = {"server", "example", "azure", "s3", "pytest"}
#: what each service-kind block talks to, as the documents write it
SERVICE_URLS = {"server": "http://127.0.0.1:8000", "example": "http://127.0.0.1:8001"}

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<info>\S*)")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not-run|run):(?P<value>.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    document: str  # relative to the repository's root
    line: int  # of the opening fence, from 1
    language: str
    text: str
    marker: str = ""  # "not-run" or "run", when a comment precedes the block
    value: str = ""  # the comment's reason or needs

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.marker != "not-run"

    @property
    def needs(self) -> frozenset[str]:
        return frozenset(n.strip() for n in self.value.split(",") if n.strip()) \
            if self.marker == "run" else frozenset()

    @property
    def service(self) -> str | None:
        """``server`` or ``example`` when the block talks to one, else None."""
        kinds = sorted(self.needs & set(SERVICE_URLS))
        return kinds[0] if kinds else None

    def problems(self) -> list[str]:
        """Why this block can be neither run nor left out; empty when it is fine."""
        if self.marker == "not-run":
            return [] if self.value.strip() else [f"{self.where}: not-run gives no reason"]
        found = []
        if self.language not in RUNNABLE:
            found.append(f"{self.where}: a `{self.language or 'plain'}` block the tests cannot "
                         "run: mark it <!-- not-run: why --> or make it python or sh")
        if unknown := self.needs - NEEDS:
            found.append(f"{self.where}: unknown needs {sorted(unknown)} (known: {sorted(NEEDS)})")
        if self.service and self.language != "sh":
            found.append(f"{self.where}: `{self.service}` is for sh blocks")
        if "pytest" in self.needs and not self.filename:
            found.append(f"{self.where}: a pytest block starts with `# test_<name>.py`")
        if len(self.needs & set(SERVICE_URLS)) > 1:
            found.append(f"{self.where}: one service per block")
        return found

    @property
    def filename(self) -> str | None:
        """The file a pytest block is saved as, from its first line (``# test_x.py``)."""
        first = self.text.splitlines()[0] if self.text else ""
        match = re.fullmatch(r"#\s*(test_\w+\.py)\s*", first)
        return match[1] if match else None


def read_blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        closing = re.compile(rf"^ *{re.escape(fence)}\s*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        body = [line[indent:] if not line[:indent].strip() else line
                for line in lines[index + 1:end]]
        before = index - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = MARKER.match(lines[before]) if before >= 0 else None
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        found.append(Block(name, index + 1, opening["info"],
                           "\n".join(body) + "\n",
                           marker["kind"] if marker else "",
                           marker["value"].strip() if marker else ""))
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in DOCUMENTS for block in read_blocks(path)]
