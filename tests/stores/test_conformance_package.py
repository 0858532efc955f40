"""The conformance suite runs from the installed package alone, as a third party's backend
tests would: a pytest run in a folder outside the source tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

THIRD_PARTY = '''
import pytest
from blobledger.stores.local import LocalStore
from blobledger.testing import StoreContract


class TestTheirStore(StoreContract):
    @pytest.fixture
    async def store(self, tmp_path):
        store = LocalStore(tmp_path / "theirs")
        async with store:
            yield store
'''


def test_a_backend_outside_the_project_runs_the_suite(tmp_path: Path) -> None:
    (tmp_path / "test_theirs.py").write_text(THIRD_PARTY)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--asyncio-mode=auto", "-W", "ignore::DeprecationWarning", "test_theirs.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout
