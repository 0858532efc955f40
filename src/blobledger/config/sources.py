"""Where the settings are read from: pydantic-settings' own sources (the environment, a
``.env`` file, ``TomlConfigSettingsSource``, botocore's variables), ordered by
``settings_customise_sources``, highest priority first; only their merge is kept here, so
that a mistake names where its value came from (:mod:`.naming`)."""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, cast

from pydantic import create_model
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from blobledger.config.naming import ENV_PREFIX, NESTED, ORIGINS, Layer
from blobledger.config.settings import Settings
from blobledger.errors import ConfigError


# -- sources ------------------------------------------------------------------------------
# pydantic-settings reads the sources, in the order of ``settings_customise_sources``; what
# is kept by hand is the merge of their values (deep_update, in that order) apart from the
# validation, so that a mistake names where its value came from: the variable, or the TOML
# file and the key (validating inside BaseSettings would lose that).
class _Sources(BaseSettings):
    """Every setting as raw data (checked by :class:`Settings`, not here)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="_", env_nested_max_split=1,
        case_sensitive=False, extra="ignore", enable_decoding=False, env_ignore_empty=True)

    @classmethod
    def settings_customise_sources(
            cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Highest priority first: the overrides, the environment, ``.env``, the TOML file
        and botocore's own variables (``AWS_REGION``, ``AWS_PROFILE``)."""
        botocore = _Botocore(settings_cls, env_settings.env_vars
                             if isinstance(env_settings, EnvSettingsSource) else None)
        return (init_settings, env_settings, dotenv_settings, _TomlFile(settings_cls), botocore)


def _raw_field(name: str) -> Any:
    return dict[str, Any] if name in NESTED else Any


#: one raw field per setting, so that the sources know the names (and the nested tables)
_RawSources = create_model(  # type: ignore[call-overload]
    "_RawSources", __base__=_Sources,
    **{name: (_raw_field(name), None) for name in Settings.model_fields})


class _MappingEnv(EnvSettingsSource):
    """``BLOBLEDGER_*`` from a given mapping (``os.environ`` when none)."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str] | None) -> None:
        self._given = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        if self._given is None:
            return super()._load_env_vars()
        return {key.lower(): value for key, value in self._given.items() if value != ""}


class _Botocore(PydanticBaseSettingsSource):
    """What the S3 settings take from botocore's own variables (lowest priority)."""

    def __init__(self, settings_cls: type[BaseSettings],
                 env: Mapping[str, str | None] | None) -> None:
        super().__init__(settings_cls)
        self._env = os.environ if env is None else env

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # not read field by field: see __call__

    def __call__(self) -> dict[str, Any]:
        env = {k.lower(): v for k, v in self._env.items() if v}
        s3: dict[str, Any] = {}
        if region := env.get("aws_region") or env.get("aws_default_region"):
            s3["region"] = region
        if env.get("aws_profile"):
            s3["profile"] = env["aws_profile"]
        return {"s3": s3} if s3 else {}


class _TomlFile(TomlConfigSettingsSource):
    """The ``toml_file`` of the model's config: top-level keys are the field names
    (``upload_deadline = "1h"``), tables ``[azure]`` and ``[s3]`` the backends'; an optional
    ``[blobledger]`` table is read instead of the top level when present. A file that
    cannot be read or parsed is a ConfigError (pydantic-settings skips a missing one)."""

    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        try:
            with file_path.open("rb") as handle:
                data = tomllib.load(handle)
        except OSError as exc:
            raise ConfigError(f"cannot read {file_path}: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{file_path}: not valid TOML: {exc}") from None
        table = data.get("blobledger", data)
        if not isinstance(table, dict):
            raise ConfigError(f"{file_path}: [blobledger] must be a table")
        return table


def read_toml(path: Path) -> dict[str, Any]:
    """The settings of a TOML file (see :class:`_TomlFile`), unchecked."""
    return _TomlFile(_RawSources, toml_file=_existing(path))()


def _existing(path: Path) -> Path:
    if not path.is_file():
        reason = "is a directory" if path.is_dir() else "No such file or directory"
        raise ConfigError(f"cannot read {path}: {reason}")
    return path


def _layers(env: Mapping[str, str] | None, env_file: Path | None, config_file: Path | None,
            overrides: Mapping[str, Any]) -> list[Layer]:
    """Each source's values, highest priority first (``settings_customise_sources``)."""
    reader = _reader(env_file, config_file)
    sources = reader.settings_customise_sources(
        reader, init_settings=InitSettingsSource(reader, dict(overrides)),
        env_settings=_MappingEnv(reader, env), dotenv_settings=DotEnvSettingsSource(reader),
        file_secret_settings=SecretsSettingsSource(reader))
    return [Layer(source(),
                   config_file if isinstance(source, TomlConfigSettingsSource) else None)
            for source in sources]


@functools.lru_cache(maxsize=16)
def _reader(env_file: Path | None, toml_file: Path | None) -> type[_Sources]:
    """The sources' settings class for these files (their paths are its config)."""
    config = SettingsConfigDict(env_file=env_file, toml_file=toml_file)
    return cast(type[_Sources], type("_Reader", (_RawSources,), {"model_config": config}))


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def load_settings(env: Mapping[str, str] | None = None, *,
                  env_file: Path | str | None = ".env",
                  config_file: Path | str | None = None,
                  overrides: Mapping[str, Any] | None = None) -> Settings:
    """The settings from, highest priority first: ``overrides``, the environment (``env``,
    else ``os.environ``), ``env_file`` (when it exists) and ``config_file`` (TOML), over the
    defaults. ConfigError, one line per mistake, when any value is wrong: a variable's names
    the variable, a TOML file's the file and the key."""
    toml = _existing(Path(config_file)) if config_file is not None else None
    dotenv = Path(env_file) if env_file is not None and Path(env_file).is_file() else None
    layers = _layers(env, dotenv, toml, overrides or {})
    values: dict[str, Any] = {}
    for layer in reversed(layers):
        values = _merge(values, layer.values)
    token = ORIGINS.set(layers)
    try:
        return Settings(**values)
    finally:
        ORIGINS.reset(token)


def environment_with(values: Mapping[str, str]) -> dict[str, str]:
    """The process's environment with ``values`` over it (variables set elsewhere, such as
    Django's ``BLOBLEDGER_*`` settings), for :func:`load_settings`."""
    return {**os.environ, **values}


def from_env(env: Mapping[str, str] | None = None) -> Settings:
    """Settings from the environment alone (``os.environ`` unless given); no files read."""
    return load_settings(env, env_file=None)
