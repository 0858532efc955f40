"""How a mistake in the settings is told: one readable line each, naming where its value
came from, the variable (``BLOBLEDGER_UPLOAD_DEADLINE: …``) or the TOML file and the key
(``blobledger.toml: upload_deadline: …``, ``blobledger.toml: bogus_key is not a setting``).

:func:`blobledger.config.load_settings` records the sources being read (:data:`ORIGINS`)
while the settings are checked; a check reads them to name a value as it was written.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from blobledger._base.durations import format_duration, unit_of

ENV_PREFIX = "BLOBLEDGER_"
#: the settings made of a table of their own (``[azure]``, ``BLOBLEDGER_AZURE_*``)
NESTED = ("azure", "s3")


@dataclass(frozen=True)
class Layer:
    """What one source holds, and how a mistake in it is named."""

    values: dict[str, Any]
    file: Path | None = None  # the TOML file; None: the environment's variables

    def holds(self, location: tuple[str, ...]) -> bool:
        value: Any = self.values
        for part in location:
            if not isinstance(value, Mapping) or part not in value:
                return False
            value = value[part]
        return True

    def describe(self, location: tuple[str, ...], message: str) -> str:
        if self.file is None:
            name = env_name(location)
            return f"{name} {message}" if message.startswith(("must", "is ")) \
                else f"{name}: {message}"
        key = ".".join(location)
        return f"{self.file}: {key} {message}" if message.startswith(("must", "is ")) \
            else f"{self.file}: {key}: {message}"


#: where the values being checked came from (:func:`load_settings`): named in the errors
ORIGINS: ContextVar[Sequence[Layer]] = ContextVar("blobledger_settings_origins", default=())


def env_name(location: tuple[int | str, ...]) -> str:
    """The environment variable of a field: ``("s3", "region")`` → BLOBLEDGER_S3_REGION."""
    return ENV_PREFIX + "_".join(str(part) for part in location).upper()


def describe_errors(exc: ValidationError, layers: Sequence[Layer] = (),
                    fields: Collection[str] = ()) -> list[str]:
    """One readable line per mistake, each naming where its value came from: the first of
    ``layers`` that holds it (a TOML file: the file and the key), else its variable.
    ``fields``: the settings' names, told as keys in a TOML file's check messages."""
    lines = []
    for error in exc.errors():
        message = str(error["msg"]).removeprefix("Value error, ")
        location = tuple(str(part) for part in error["loc"])
        if not location or message.startswith(ENV_PREFIX):
            lines.append(_named_as_given(message, layers, fields))
            continue
        if error["type"] == "extra_forbidden":
            message = "is not a setting"
        elif error["type"] == "literal_error":
            message = "must be " + message.removeprefix("Input should be ")
        key = location[:2] if location[0] in NESTED else location[:1]
        layer = next((layer for layer in layers if layer.holds(key)), Layer({}))
        lines.append(layer.describe(key, message))
    return lines


_VARIABLE = re.compile(ENV_PREFIX + r"([A-Z0-9_]+)")


def _named_as_given(message: str, layers: Sequence[Layer], fields: Collection[str]) -> str:
    """A message about several settings (a model check's, naming their variables), told
    as ``file: key ...`` with the keys' names when the first setting it names came from a
    TOML file."""
    first = _VARIABLE.search(message)
    field = first.group(1).lower() if first else ""
    layer = next((layer for layer in layers if layer.holds((field,))), None)
    if layer is None or layer.file is None:
        return message
    named = _VARIABLE.sub(lambda m: m.group(1).lower() if m.group(1).lower()
                          in fields else m.group(0), message)
    return f"{layer.file}: {named}"


def written_unit(field: str) -> str | None:
    """The unit the value of ``field`` being checked was written in (``90m``: ``m``)."""
    return next((unit_of(layer.values[field]) for layer in ORIGINS.get()
                 if layer.holds((field,))), None)


def shown(field: str, seconds: float) -> str:
    """A duration being checked, in the unit its value was written in (else a natural one)."""
    return format_duration(seconds, written_unit(field))
