"""``blobledger completion SHELL``: the shell completion script, from Click.

Load it with ``eval "$(blobledger completion bash)"`` (or ``zsh``; for fish,
``blobledger completion fish | source``).
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class


@click.command(epilog="\b\nExamples:\n  eval \"$(blobledger completion bash)\"\n"
               "  blobledger completion fish > ~/.config/fish/completions/blobledger.fish")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def command(shell: str) -> int:
    """Print the completion script for SHELL."""
    from blobledger.cli import cli

    completion = get_completion_class(shell)
    if completion is None:  # pragma: no cover - every choice has a class
        raise click.UsageError(f"no completion for {shell}")
    print(completion(cli, {}, "blobledger", "_BLOBLEDGER_COMPLETE").source())
    return 0
