"""Configuration: one typed settings object for the library, the service and the workers.

:class:`Settings` is a frozen pydantic model: constructed in code with keyword arguments
(nothing read from anywhere), or by :func:`load_settings` from, highest priority first, the
environment, a ``.env`` file and a TOML file (``--config``), over the defaults. It is the
only reader of ``BLOBLEDGER_*``. Every mistake is reported at once, one readable line each
(:class:`~blobledger.errors.ConfigError`), naming where the value came from: the variable
(``BLOBLEDGER_UPLOAD_DEADLINE: …``), or the TOML file and the key
(``blobledger.toml: upload_deadline: …``, ``blobledger.toml: bogus_key is not a setting``).

The settings live by area, each a model of its own composed into :class:`Settings`:

- :mod:`.storage`: the database, the store, the blobs' prefix (and :mod:`.backends`, the
  remote stores' ``[azure]`` and ``[s3]``, the lowest room: the stores read it);
- :mod:`.embedded`: the ledger inside an application's database (Django's);
- :mod:`.protocol`: the uploads' limits and the protocol's timings, with their rules;
- :mod:`.service`: the HTTP service; :mod:`.s3api`: its S3-compatible endpoint;
  :mod:`.workers`: the background workers;
- :mod:`.pipeline`: held documents and processors; :mod:`.variants`: derived images;
- :mod:`.client`: the client commands, telemetry and the test hooks.

:mod:`.settings` composes them and holds every check across fields; :mod:`.sources` reads
the environment and the files; :mod:`.naming` tells a mistake; :mod:`.table` writes the
docs' table of settings from the models (``blobledger config --table``). Durations read
``90``, ``90s``, ``15m``, ``2h``, ``1d``; sizes ``1048576``, ``64MiB``, ``5GiB``.
"""

from __future__ import annotations

from blobledger.config.backends import AzureSettings, S3Settings, StoreLimits
from blobledger.config.client import DEFAULT_URL, ClientSettings, DiagnosticSettings
from blobledger.config.embedded import EmbeddedSettings, table_layout
from blobledger.config.fields import Count, Duration, Size
from blobledger.config.naming import ENV_PREFIX, describe_errors, env_name
from blobledger.config.pipeline import PROCESSORS, PipelineSettings, held_by_settings
from blobledger.config.protocol import (
    CLOCK_SKEW,
    SWEEP_MARGIN,
    ProtocolSettings,
    minimum_sweep_after,
    read_url_lifetime,
    sweep_margin,
    url_expiry_problem,
)
from blobledger.config.s3api import S3ApiSettings, parse_access_keys
from blobledger.config.service import SIGNING_KEY_MIN, ServiceSettings, parse_tokens
from blobledger.config.settings import SECRET_FIELDS, Settings
from blobledger.config.sources import environment_with, from_env, load_settings, read_toml
from blobledger.config.storage import (
    DEFAULT_DATABASE_URL,
    DEFAULT_STORE_URL,
    StorageSettings,
    default_var_dir,
)
from blobledger.config.variants import VariantSettings
from blobledger.config.workers import MAX_EVENT_BACKOFF, WEBHOOK_SECRET_PREFIX, WorkerSettings

__all__ = [
    "CLOCK_SKEW", "DEFAULT_DATABASE_URL", "DEFAULT_STORE_URL", "DEFAULT_URL", "ENV_PREFIX",
    "MAX_EVENT_BACKOFF", "PROCESSORS", "SECRET_FIELDS", "SIGNING_KEY_MIN", "SWEEP_MARGIN",
    "WEBHOOK_SECRET_PREFIX", "AzureSettings", "ClientSettings", "Count", "DiagnosticSettings",
    "Duration", "EmbeddedSettings", "PipelineSettings", "ProtocolSettings", "S3ApiSettings",
    "S3Settings", "ServiceSettings", "Settings", "Size", "StorageSettings", "StoreLimits",
    "VariantSettings", "WorkerSettings", "default_var_dir", "describe_errors", "env_name",
    "environment_with", "from_env", "held_by_settings", "load_settings", "minimum_sweep_after",
    "parse_access_keys", "parse_tokens", "read_toml", "read_url_lifetime", "sweep_margin",
    "table_layout", "url_expiry_problem",
]
