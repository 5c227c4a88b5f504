"""Live reload (SIGHUP): which settings may change while the daemon runs, and which are kept until a restart.

Pure: `merge(old, new)` gives the settings to apply and the names of those kept. The daemon reads the new
settings, logs what it kept or refused, and hands the result to the Collector on the dispatch loop's thread.
"""

from __future__ import annotations

from dataclasses import fields

from ..settings import SCHEMA, Settings

# what a running process cannot change: its database connection, its metrics socket, its environment files, the
# monitor's socket and token, the certificate authorities its clients trust
FIXED = (
    "env",
    "mongodb_uri",
    "ca_bundle",
    "metrics_port",
    "metrics_addr",
    "monitor_host",
    "monitor_port",
    "monitor_token",
)
ENV_NAMES = {attr: env for env, attr, _ in SCHEMA} | {"env": "COLLECTOR_ENV"}
NOT_COMPARED = ("raw", "file_keys", "sources")


def changed(old: Settings, new: Settings) -> list[str]:
    """Names (as in the environment) of the settings that differ."""
    return [
        ENV_NAMES.get(f.name, f.name.upper())
        for f in fields(Settings)
        if f.name not in NOT_COMPARED and getattr(old, f.name) != getattr(new, f.name)
    ]


def merge(old: Settings, new: Settings) -> tuple[Settings, list[str]]:
    """The settings to apply, and the names of those that changed but are kept as they were until a restart."""
    kept = [name for name in FIXED if getattr(old, name) != getattr(new, name)]
    return new.with_(**{name: getattr(old, name) for name in kept}), [ENV_NAMES[name] for name in kept]
