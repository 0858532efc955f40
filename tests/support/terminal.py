"""Running a command with one of its streams on a pseudo-terminal (rich draws only there)."""

from __future__ import annotations

import os
import pty
import subprocess
from collections.abc import Mapping, Sequence
from typing import Literal


def on_a_terminal(
    command: Sequence[str], env: Mapping[str, str], *,
    stream: Literal["stdout", "stderr"] = "stderr", timeout: float = 60,
) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """Run ``command`` with ``stream`` on a pseudo-terminal and the other piped; the result
    and every byte drawn on the terminal."""
    controller, terminal = pty.openpty()
    piped: int = subprocess.PIPE
    try:
        done = subprocess.run(
            list(command), env=dict(env), timeout=timeout, check=False,
            stdout=terminal if stream == "stdout" else piped,
            stderr=terminal if stream == "stderr" else piped)
        os.close(terminal)
        drawn = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO once the terminal side is closed and drained
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(controller)
    return done, drawn
