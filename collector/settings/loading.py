"""load_settings: the sources merged in their order and every declared setting parsed (declaration.py), or a
SettingsError naming the first bad setting or the first file that cannot be read."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..textout import printable
from . import tokenkeys
from .declaration import ENVIRONMENT, FAMILIES, SETTINGS
from .files import _working_dir, config_dir, read_env_file, read_settings_file
from .masking import mask, mask_text
from .model import DEFAULT, ENVIRONMENT_ORIGIN, Origin, Settings, SettingsError
from .parsers import DEFAULT_ENV, ENVIRONMENTS
from .trust import authorities, unusable


def load_settings(
    environ: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    env: str | None = None,
    read_dotenv: bool = True,
    env_file: str | Path | None = None,
) -> Settings:
    """Merge the sources and validate. Raises SettingsError naming the first bad setting or the first settings
    file that cannot be read: the two config/ files ship with the code and must be there, ./.env may be absent.
    `env_file` defaults to COLLECTOR_ENV_FILE from `environ`; none is read without either."""
    environ = os.environ if environ is None else environ
    env_file = env_file or environ.get("COLLECTOR_ENV_FILE") or None
    operator = read_env_file(env_file) if env_file else {}
    env, env_origin = _environment(env, operator, environ, env_file)
    base = config_dir()
    merged: dict[str, str] = {}
    origins: dict[str, Origin] = {}
    files = [(base / "defaults.env", DEFAULT), (base / f"{env}.env", Origin("default", env))]  # shipped with the code
    if read_dotenv:
        dotenv = _working_dir(cwd) / ".env"
        files.append((dotenv, Origin("file", str(dotenv))))  # may be absent
    read = []
    for path, origin in files:
        values = read_settings_file(path, required=origin.is_default)
        if values is not None:
            read.append(str(path))
            merged.update(values)
            origins.update(dict.fromkeys(values, origin))
    file_keys = frozenset(merged) | frozenset(operator)
    from_environ = {k: v for k, v in environ.items() if isinstance(v, str)}
    merged.update(from_environ)
    origins.update(dict.fromkeys(from_environ, ENVIRONMENT_ORIGIN))
    merged.update(operator)
    origins.update(dict.fromkeys(operator, Origin("file", str(env_file))))
    origins[ENVIRONMENT.name] = env_origin  # given by the caller: that, whatever the environment says
    read.append("the environment")
    if env_file:
        read.append(str(env_file))
    return _build(env, merged, file_keys).with_(sources=tuple(read), origins=origins)


def _environment(
    given: str | None, operator: Mapping[str, str], environ: Mapping[str, str], env_file: str | Path | None
) -> tuple[str, Origin]:
    """COLLECTOR_ENV and where it came from: given by the caller, the settings file, the environment, or the
    default."""
    if given:
        env, origin = given, Origin("given")
    elif operator.get("COLLECTOR_ENV"):
        env, origin = operator["COLLECTOR_ENV"], Origin("file", str(env_file))
    elif environ.get("COLLECTOR_ENV"):
        env, origin = environ["COLLECTOR_ENV"], ENVIRONMENT_ORIGIN
    else:
        env, origin = DEFAULT_ENV, DEFAULT
    if env not in ENVIRONMENTS:
        raise SettingsError("COLLECTOR_ENV", f"{env!r} is not one of {', '.join(ENVIRONMENTS)}")
    return env, origin


def _build(env: str, merged: Mapping[str, str], file_keys: frozenset[str]) -> Settings:
    values: dict[str, Any] = {ENVIRONMENT.field: env}
    for setting in SETTINGS:
        if not setting.field:
            continue  # read by the connectors that need it, with Settings.get
        if setting.name not in merged:
            raise SettingsError(setting.name, "is missing")
        values[setting.field] = _parse(setting.name, setting.kind.parse, merged[setting.name])
    for family in FAMILIES:
        values[family.field] = {
            match.group(1).lower(): _parse(key, family.kind.parse, value)
            for key, value in merged.items()
            if (match := family.pattern.match(key))
        }
    values["ca_bundle"] = _trusted(values["ca_bundle"], merged)
    tokenkeys.resolve(values)
    values["raw"] = dict(merged)
    values["file_keys"] = file_keys
    return Settings(**values)


def _trusted(ca_bundle: str, merged: Mapping[str, str]) -> str:
    """The path of the authorities to trust (trust.py: CA_BUNDLE, else a conventional variable), checked."""
    found = authorities({**merged, "CA_BUNDLE": ca_bundle})
    problem = unusable(found.path) if found.path else ""
    if problem:
        raise SettingsError(found.source, f"{printable(found.path)!r} {problem}")
    return found.path


def _parse(name: str, parse: Callable[[str], Any], text: str) -> Any:
    try:
        return parse(text.strip())
    except (TypeError, ValueError) as exc:
        problem = f"invalid value {mask(name, text)!r} ({exc})"
        if name == "MONGODB_URI":  # the parser's own words may quote the URI
            problem = mask_text(problem, text)
        raise SettingsError(name, problem) from None


def settings_for_tests(**changes: Any) -> Settings:
    """Settings of the test environment, ignoring the process environment and ./.env."""
    settings = load_settings(environ={}, env="test", read_dotenv=False)
    return settings.with_(**changes) if changes else settings
