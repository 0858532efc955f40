"""The reader of the documents' code blocks: what it finds, and what it refuses to let by."""

from __future__ import annotations

from pathlib import Path

from tests.docs.blocks import ROOT, SERVICE_URLS, all_blocks, read_blocks

DOCUMENT = """\
# A document

<!-- not-run: output -->
```text
a result
```

```sh
echo plain
```

- an item:

  <!-- run: server -->
  ```sh
  curl http://127.0.0.1:8000/healthz
  ```

```toml
key = "a config fragment nobody marked"
```

<!-- not-run: -->
```sh
scripts/serve
```

<!-- run: pytest -->
```python
import pytest
```

<!-- run: server, azure -->
```python
print("a service is for sh blocks")
```
"""


def test_blocks_their_markers_and_their_problems(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text(DOCUMENT)
    text, plain, served, toml, unexplained, pytest_block, python_served = read_blocks(path)
    assert (text.marker, text.value, text.runs, text.problems()) == (
        "not-run", "output", False, [])
    assert (plain.language, plain.text, plain.needs, plain.problems()) == (
        "sh", "echo plain\n", frozenset(), [])
    # an indented block inside a list item, with its indented marker
    assert served.text == "curl http://127.0.0.1:8000/healthz\n"
    assert (served.service, served.line, served.problems()) == ("server", 15, [])
    # what would let an unrunnable block by is refused, naming the place
    assert toml.problems() == [f"{path}:19: a `toml` block the tests cannot run: mark it "
                               "<!-- not-run: why --> or make it python or sh"]
    assert unexplained.problems() == [f"{path}:24: not-run gives no reason"]
    assert pytest_block.problems() == [
        f"{path}:29: a pytest block starts with `# test_<name>.py`"]
    assert python_served.needs == {"server", "azure"}
    assert python_served.problems() == [f"{path}:34: `server` is for sh blocks"]


def test_blocks_after_the_first_reach_the_service_by_blobledger_url() -> None:
    """The README's first served block exports ``BLOBLEDGER_URL`` (what ``scripts/serve``
    printed, ``--port`` included); every later block uses it, never the default port."""
    served = [b for b in all_blocks() if b.document == "README.md" and b.service == "server"]
    first, *later = served
    assert f"export BLOBLEDGER_URL={SERVICE_URLS['server']}" in first.text
    assert later and (ROOT / "README.md").is_file()
    assert [b.where for b in later if SERVICE_URLS["server"].split("//")[1] in b.text] == []
