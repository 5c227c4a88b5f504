"""Settings: declared once (declaration.py), read from config/, a .env file, the environment and the operator's
settings file, validated at start and at every reload.

Precedence, lowest first: config/defaults.env, config/<COLLECTOR_ENV>.env, ./.env, the process environment, then
the settings file named by `--env-file` or COLLECTOR_ENV_FILE. That file wins over the environment, as systemd's
EnvironmentFile= wins over Environment=: it is where an operator edits settings, and a reload (SIGHUP) reads it
again, while the environment of a running process cannot change.

Every file is read the same way (files.read_settings_file): UTF-8 text up to 1 MiB in a regular file, or one line
naming the file and what is wrong — at start (exit 2) as at a reload (every old setting kept). The config/ files
and the settings file must exist; ./.env may be absent.

The modules: declaration (every setting, once), parsers (the kinds of value and their bounds), model (Settings,
SettingsError), loading (load_settings), files (reading settings files), masking (secrets in output), reference
(config/defaults.env and docs/reference/settings.md, generated from the declaration).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .declaration import FAMILIES, SETTINGS, Family, Setting
from .files import KINDS, MAX_ENV_FILE, config_dir, read_env_file, read_settings_file
from .loading import load_settings, settings_for_tests
from .masking import SECRET_OPTION, SECRET_WORDS, mask, mask_text, mask_uri, split_credentials, uri_secrets
from .model import Settings, SettingsError
from .parsers import DEFAULT_ENV, ENVIRONMENTS, MAX_CONCURRENCY, MAX_DAYS, MAX_SECONDS
from .parsers import _names as _names  # the CLI parses --services with it

# (environment name, Settings field, parser) of each setting parsed into a field, as collector/lifecycle.py reads them
SCHEMA: tuple[tuple[str, str, Callable[[str], Any]], ...] = tuple(
    (s.name, s.field, s.kind.parse) for s in SETTINGS if s.field
)
PER_SERVICE_INITIAL, PER_SERVICE_CONCURRENCY = (family.pattern for family in FAMILIES)

__all__ = ["Settings", "SettingsError", "load_settings", "settings_for_tests"]
__all__ += [  # the names other modules and tests import from collector.settings
    "DEFAULT_ENV",
    "ENVIRONMENTS",
    "FAMILIES",
    "KINDS",
    "MAX_CONCURRENCY",
    "MAX_DAYS",
    "MAX_ENV_FILE",
    "MAX_SECONDS",
    "PER_SERVICE_CONCURRENCY",
    "PER_SERVICE_INITIAL",
    "SCHEMA",
    "SECRET_OPTION",
    "SECRET_WORDS",
    "SETTINGS",
    "Family",
    "Setting",
    "config_dir",
    "mask",
    "mask_text",
    "mask_uri",
    "read_env_file",
    "read_settings_file",
    "split_credentials",
    "uri_secrets",
]
