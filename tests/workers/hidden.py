"""Run a command as on a machine where some modules are not installed: a ``sitecustomize``
placed first on ``PYTHONPATH`` puts a finder before every other that refuses them (as an
absent package is refused: ``find_spec`` None, ``import`` ModuleNotFoundError). The shared
virtualenv keeps every package; only that process cannot see them."""

from __future__ import annotations

import os
from pathlib import Path

SITECUSTOMIZE = '''\
import sys


class _Hidden:
    names = {names!r}

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


for _name in list(sys.modules):
    if _name.split(".")[0] in _Hidden.names:
        del sys.modules[_name]
sys.meta_path.insert(0, _Hidden())
'''


def hiding(folder: Path, *modules: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: the process's) in which ``modules`` cannot be imported."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE.format(names=set(modules)))
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(folder), *filter(None, [env.get("PYTHONPATH", "")])])
    return env
