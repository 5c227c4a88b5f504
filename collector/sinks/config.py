"""The configured sinks: one SinkConfig for each name in SINKS, from its SINK_<NAME>_<FIELD> settings — the
fields every sink takes (settings/sinkfields.py) and the Options of its kind (the kind's Sink class, found in the
registry). A bad one is a SettingsError naming the setting: a bad name, an unknown kind, a missing URL or required
option, a value its parser refuses, a setting the kind does not take. Values of secret options (and of options
named like secrets) are in `SinkConfig.secret_values`, for redaction, with the forms they take on the wire (a
server or a proxy may echo them: base64 of `user:password`, an API key decoded), and `secret_names` names them for
`--check-config`, whatever their names.

Every check of a sink's settings is made here, by `sink_configs`, and so wherever the settings are checked: by
every command at its start (`load_checked`, through the CLI), by `collector sink` before it registers anything, by
`--check-config`, and at a reload, which a bad one refuses (the old settings kept). Beyond each field's parser:
the URL and each option as the kind says (checks.py: `Option.check`, `Sink.check_config`)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..sdk.redaction import MIN_LENGTH, clip
from ..settings import SECRET_WORDS, Settings, SettingsError, load_settings, mask
from ..settings.parsers import SINK_NAME
from ..settings.sinkfields import BY_FIELD, SINK_FIELDS, SinkField, sink_keys, sink_prefix
from .checks import check_options, check_url, url_problem
from .registry import KindBroken, SinkRegistry, UnknownKind
from .sdk import Option, Sink, SinkConfig

COMMON = frozenset(BY_FIELD)


def sink_configs(settings: Settings, registry: SinkRegistry) -> list[SinkConfig]:
    """A SinkConfig for each sink in SINKS, in order; SettingsError naming the first bad setting."""
    keys = sink_keys(settings.raw, settings.sinks)
    allow = bool(settings.allow_private_hosts)
    return [sink_config(name, keys[name], registry, allow_private=allow) for name in settings.sinks]


def check_sinks(settings: Settings, registry: SinkRegistry | None = None) -> None:
    """Every configured sink's settings checked (nothing loaded, nothing connected to when SINKS is empty);
    SettingsError naming the first bad one."""
    if settings.sinks:
        from . import registry as kinds  # looked up when called: the registry of kinds as it is then

        sink_configs(settings, registry or kinds.SinkRegistry())


def load_checked(env_file: str | Path | None = None) -> Settings:
    """load_settings, the sinks' settings checked too: what every command starts with, and a reload reads."""
    settings = load_settings(env_file=env_file)
    check_sinks(settings)
    return settings


def sink_config(
    name: str, fields: Mapping[str, str], registry: SinkRegistry, *, allow_private: bool = False
) -> SinkConfig:
    """The sink `name` from its fields ({FIELD: text}, as sink_keys gives them), every check of its kind made
    (a kind that cannot be loaded: the common fields only)."""
    if not SINK_NAME.fullmatch(name):
        raise SettingsError("SINKS", f"{name[:60]!r} is not a sink name (a letter, then letters, digits and _)")
    prefix = sink_prefix(name)
    kind = _kind(name, fields, registry)
    if not fields.get("URL", "").strip():
        raise SettingsError(prefix + "URL", "is missing (every sink needs the URL it delivers to)")
    common = {f.field: _parse(prefix, f, fields.get(f.field, f.default)) for f in SINK_FIELDS if f.field != "KIND"}
    options, secrets = _options(prefix, kind, fields, registry)
    config = SinkConfig(
        name=name,
        kind=kind,
        url=common["URL"],
        batch=common["BATCH"],
        concurrency=common["CONCURRENCY"],
        timeout=common["TIMEOUT"],
        services=common["SERVICES"],
        backfill=common["BACKFILL"],
        pace=common["PACE"],
        options=options,
        secret_values=secrets,
    )
    cls = _class(kind, registry)
    check_url(config, cls is not None and cls.checks_addresses, allow_private)
    if cls is not None:
        check_options(config, cls)
    return config


def _class(kind: str, kinds: SinkRegistry) -> type[Sink] | None:
    """The kind's class; None when it cannot be loaded (the service reports the kind as broken)."""
    try:
        return kinds.get(kind)
    except KindBroken:
        return None


def secret_names(settings: Settings, registry: SinkRegistry) -> set[str]:
    """The settings of the configured sinks that hold a secret by their kind's declaration (Option.secret), for
    Settings.describe; an option of a kind that cannot be loaded counts as secret (nothing tells it is not)."""
    names = set()
    for name, fields in sink_keys(settings.raw, settings.sinks).items():
        kind = fields.get("KIND", "").strip().lower() or name
        try:
            secret = {o.name for o in registry.options(kind) if o.secret}
        except (UnknownKind, KindBroken):
            secret = set(fields) - COMMON
        names |= {sink_prefix(name) + field for field in fields if field in secret}
    return names


def secret_values(configs: Iterable[SinkConfig]) -> list[str]:
    """Every secret value of these sinks, for log redaction (collector.sdk.redaction.SECRETS)."""
    return [value for config in configs for value in config.secret_values]


def _kind(name: str, fields: Mapping[str, str], registry: SinkRegistry) -> str:
    prefix = sink_prefix(name)
    kind = _parse(prefix, BY_FIELD["KIND"], fields.get("KIND", ""))
    known = registry.kinds()
    if not kind:
        if name not in known:
            problem = f"is missing: {name!r} is not a kind of sink (known: {', '.join(known) or 'none'})"
            raise SettingsError(prefix + "KIND", problem)
        kind = name
    if kind not in known:
        raise SettingsError(prefix + "KIND", f"unknown kind of sink {kind!r} (known: {', '.join(known) or 'none'})")
    return str(kind)


def _options(
    prefix: str, kind: str, fields: Mapping[str, str], registry: SinkRegistry
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The kind's options ({name: value}, defaults filled in) and the secret values among them."""
    extra = {field: value for field, value in fields.items() if field not in COMMON}
    try:
        declared: tuple[Option, ...] | None = registry.options(kind)
    except KindBroken:  # the service reports the kind as broken; nothing here can be checked
        declared = None
    if declared is None:
        values = [v for v in extra.values() if v]
        return extra, tuple(dict.fromkeys([*values, *wire_forms({}, (), values)]))
    by_name = {option.name: option for option in declared}
    for field in extra:
        if field not in by_name:
            takes = ", ".join(sorted(COMMON | set(by_name)))
            raise SettingsError(prefix + field, f"is not a setting of a {kind} sink (it takes {takes})")
    options = {}
    for option in declared:
        value = fields.get(option.name, option.default)
        if option.required and not value.strip():
            raise SettingsError(prefix + option.name, f"is missing (a {kind} sink needs it: {option.help})")
        options[option.name] = value
    secret = [options[o.name] for o in declared if o.secret or any(w in o.name for w in SECRET_WORDS)]
    values = [v for v in secret if v]
    return options, tuple(dict.fromkeys([*values, *wire_forms(options, declared, values)]))


def wire_forms(options: Mapping[str, str], declared: Sequence[Option], secrets: Sequence[str]) -> list[str]:
    """The forms the sink's secrets take on the wire, which a server or a proxy may echo without the scheme word the
    redaction knows (`Basic`, `ApiKey`): base64 of `user:password` (basic authentication: each USER option of the
    kind with each PASSWORD), each secret in base64, and a secret that is base64 of `id:key` itself (an
    Elasticsearch or OpenSearch API key, sent as `ApiKey <it>`) decoded, and its key alone."""
    named = [(o.name, options.get(o.name, "")) for o in declared]
    users = [value for name, value in named if "USER" in name and value]
    passwords = [value for name, value in named if "PASSWORD" in name and value]
    forms = [_b64(f"{user}:{password}") for user in users for password in passwords]
    for secret in secrets:
        forms.append(_b64(secret))
        decoded = _unb64(secret)
        if decoded is not None:
            forms += [decoded, decoded.partition(":")[2]]
    forms += [form.rstrip("=") for form in forms]  # echoed without its padding
    return [form for form in dict.fromkeys(forms) if len(form) >= max(MIN_LENGTH, 8)]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(text: str) -> str | None:
    """`text` decoded from (standard or URL-safe) base64, when that gives printable `id:key` text; else None."""
    for alphabet in (None, b"-_"):
        try:
            decoded = base64.b64decode(text.encode(), altchars=alphabet, validate=True).decode()
        except (binascii.Error, ValueError):
            continue
        if ":" in decoded and decoded.isprintable():
            return decoded
    return None


def _parse(prefix: str, field: SinkField, text: str) -> Any:
    name = prefix + field.field
    try:
        return field.kind.parse(text.strip())
    except (TypeError, ValueError) as exc:
        if field.field == "URL":  # never quoted: it may hold credentials
            raise SettingsError(name, url_problem(text.strip(), False, True) or str(exc)) from None
        raise SettingsError(name, f"invalid value {clip(mask(name, text), 200)!r} ({exc})") from None
