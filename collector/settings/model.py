"""The settings as the program uses them: the frozen Settings record, read by load_settings (loading.py) and
described, secrets masked, by `--check-config`; and SettingsError, the one line that names a bad setting or file.

The record's fields are written out for the type checker; each is declared once in declaration.py, and
tests/daemon/test_settings_declaration.py fails when the two disagree."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from ..textout import printable
from .declaration import ENVIRONMENT, FAMILIES, FIELDS
from .masking import SECRET_WORDS, mask, mask_uri, uri_secrets
from .sinkfields import sink_keys, sink_prefix
from .trust import Authorities, authorities


class SettingsError(ValueError):
    """An invalid or missing setting, or a settings file that cannot be read: one line naming it."""

    def __init__(self, name: str, problem: str):
        super().__init__(f"setting {name}: {problem}" if name else problem)  # no name: a file none names
        self.name = name


class Origin(NamedTuple):
    """Where a setting's value came from: `default` (config/defaults.env; with `where`, the config/<env>.env of
    that COLLECTOR_ENV), `environment`, `file` (`where`: its path, ./.env or the operator's settings file), or
    `given` (COLLECTOR_ENV passed to load_settings by its caller)."""

    kind: str
    where: str = ""

    @property
    def is_default(self) -> bool:
        return self.kind == "default"

    def __str__(self) -> str:
        if self.kind == "default":
            return f"the default for COLLECTOR_ENV={self.where}" if self.where else "the default"
        if self.kind == "environment":
            return "set in the environment"
        if self.kind == "file":
            return f"set in {printable(self.where)}"
        return self.kind  # "given": by the code that read the settings (the tests' settings)


DEFAULT = Origin("default")
ENVIRONMENT_ORIGIN = Origin("environment")


@dataclass(frozen=True)
class Settings:
    env: str
    mongodb_uri: str
    loop_idle_pause: float
    pass_limit: int
    normal_interval: float
    rate_limit_interval: float
    initial_interval: float
    backoff_base: float
    backoff_max: float
    max_errors: int
    http_timeout: float
    http_max_bytes: int
    rate_limit_min_wait: float
    rate_limit_max_wait: float
    concurrency: int
    service_concurrency: int
    lease_seconds: float
    user_agent: str
    github_api_url: str
    allow_private_hosts: bool
    log_level: str
    log_format: str
    heartbeat_seconds: float
    stats_seconds: float = 1.0  # the stats beat (daemon/heartbeat.py), what the monitor reads
    metrics_port: int = 0  # 0: no /metrics or /healthz
    metrics_addr: str = "127.0.0.1"
    monitor_host: str = "127.0.0.1"
    monitor_port: int = 8089
    monitor_token: str = field(default="", repr=False)  # secret; empty: the monitor is read-only
    inactive_days: int = 60  # 0: no sweep
    inactive_sweep_cron: str = "0 4 * * *"
    services: tuple[str, ...] = ()  # claim only these services' networks (empty: every service)
    services_exclude: tuple[str, ...] = ()  # never claim these
    sinks: tuple[str, ...] = ()  # the sinks the sink service delivers to (SINK_<NAME>_* each: sinks/config.py)
    sink_max_tries: int = 3  # rejects of one document before it is dead-lettered
    sink_retry_max: float = 600.0  # the longest back-off of a sink's retry
    sink_lag_warn: float = 900.0  # status --check warns past this lag
    token_key: str = field(default="", repr=False)  # secret: seals tokens at rest (TOKEN_KEY, or TOKEN_KEY_FILE's)
    token_key_file: str = ""  # where token_key was read from, if a file
    token_keys_old: str = field(default="", repr=False)  # secret: old keys, comma-separated
    ca_bundle: str = ""  # the authorities to trust, resolved (trust.py); empty: the default ones
    initial_intervals: Mapping[str, float] = field(default_factory=dict)
    service_concurrencies: Mapping[str, int] = field(default_factory=dict)
    raw: Mapping[str, str] = field(default_factory=dict, repr=False)
    file_keys: frozenset[str] = field(default=frozenset(), repr=False)
    sources: tuple[str, ...] = field(default=(), repr=False)  # what was read, lowest precedence first
    origins: Mapping[str, Origin] = field(default_factory=dict, repr=False)  # where each value came from

    def initial_interval_for(self, service: str) -> float:
        return self.initial_intervals.get(service.lower(), self.initial_interval)

    def service_concurrency_for(self, service: str) -> int:
        return self.service_concurrencies.get(service.lower(), self.service_concurrency)

    def get(self, name: str, default: str | None = None) -> str | None:
        """A raw setting by its environment name, for connectors' own settings (app keys, client ids)."""
        return self.raw.get(name, default)

    def origin(self, name: str) -> Origin:
        """Where the setting `name` (its environment name) came from."""
        return self.origins.get(name, DEFAULT)

    def by_origin(self, names: Iterable[str]) -> dict[Origin, list[str]]:
        """`names` grouped by where their values came from: what was set (the operator's settings file, the
        environment, ./.env) first, then the defaults of the COLLECTOR_ENV, then config/defaults.env's; each group
        in the order of `names`."""
        groups: dict[Origin, list[str]] = {}
        for name in names:
            groups.setdefault(self.origin(name), []).append(name)
        return dict(sorted(groups.items(), key=lambda group: (group[0].is_default, group[0] == DEFAULT)))

    def mongodb_shown(self) -> str:
        """The MongoDB URI as said to a person: secrets masked, escaped, and where it came from."""
        return f"{printable(mask_uri(self.mongodb_uri))} (MONGODB_URI: {self.origin('MONGODB_URI')})"

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    def secrets(self) -> list[str]:
        """Every secret value among the settings (app keys and secrets, the MongoDB password and secret URI
        options): what log redaction must hide. Values under 6 characters are not keys (flags, ports)."""
        values = uri_secrets(self.mongodb_uri)
        values += [
            v for k, v in self.raw.items() if any(w in k for w in SECRET_WORDS) and isinstance(v, str) and len(v) >= 6
        ]
        values += [self.token_key, *self.token_keys_old.split(",")]  # TOKEN_KEY_FILE's keys are in no raw value
        return [v for v in values if v]

    def trusted(self) -> Authorities:
        """The authorities to trust (trust.py) and what named them."""
        named = authorities(self.raw)
        return named if named.path == self.ca_bundle else Authorities(self.ca_bundle, "CA_BUNDLE")

    def describe(self, secret_names: Collection[str] = ()) -> dict[str, Any]:
        """The effective settings by environment name, secrets masked (for --check-config): the declared ones in
        their order, the per-service ones, the settings of each sink in SINKS, then any other setting the files
        hold. `secret_names` are masked too, whatever their names (a sink kind's secret options: sinks/config.py
        `secret_names`)."""
        out: dict[str, Any] = {ENVIRONMENT.name: getattr(self, ENVIRONMENT.field)}
        for setting in FIELDS:
            out[setting.name] = getattr(self, setting.field)
        out["CA_BUNDLE"] = self.trusted().shown()
        for family in FAMILIES:
            for service, value in sorted(getattr(self, family.field).items()):
                out[family.prefix + service.upper()] = value
        for name, fields_ in sink_keys(self.raw, self.sinks).items():
            out |= {sink_prefix(name) + key: value for key, value in sorted(fields_.items())}
        for name in sorted(self.raw):
            if name not in out and name in self.file_keys:
                out[name] = self.raw[name]
        hidden = set(secret_names)
        return {name: "***" if name in hidden and out[name] else mask(name, out[name]) for name in out}
