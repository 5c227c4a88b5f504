"""Finds connectors by service name through the `likeastore.connectors` entry-point group.

Built-in connectors are declared in this project's pyproject.toml under that group, exactly as a third-party
package declares its own, and are loaded on first use.
"""

from __future__ import annotations

import inspect
from importlib.metadata import EntryPoint, entry_points

from ..sdk.connector import Connector
from ..sdk.errors import OutOfDescriptors, Retired, UnknownService, exhausted

GROUP = "likeastore.connectors"
# Services of the original collector whose APIs are gone: their networks are disabled, no request is made.
RETIRED = {
    "pocket": "the Pocket API was retired (Pocket shut down on 2025-07-08)",
    "instagram": "Instagram's API no longer exposes liked or saved posts (Basic Display API ended 2024-12-04)",
    "behance": "the Behance API was retired (no new API keys since 2019)",
}
DISTRIBUTION = "likeastore-collector"


class Registry:
    def __init__(self, entries: dict[str, type[Connector]] | None = None, discover: bool = True):
        self._points: dict[str, EntryPoint] = {}
        if discover:
            self._points = {ep.name: ep for ep in entry_points(group=GROUP)}
        for name, cls in (entries or {}).items():
            check_complete(name, cls)
        self._loaded: dict[str, type[Connector]] = dict(entries or {})

    def register(self, name: str, cls: type[Connector]) -> None:
        check_complete(name, cls)
        self._loaded[name] = cls

    def names(self) -> list[str]:
        return sorted(set(self._points) | set(self._loaded))

    def is_builtin(self, name: str) -> bool:
        point = self._points.get(name)
        return point is not None and point.dist is not None and point.dist.name == DISTRIBUTION

    def get(self, name: object) -> type[Connector]:
        if not isinstance(name, str) or not name:
            raise UnknownService(f"field 'service' must be a service name, got {name!r}")
        if name in self._loaded:
            return self._loaded[name]
        if name in RETIRED and name not in self._points:
            raise Retired(RETIRED[name])
        point = self._points.get(name)
        if point is None:
            raise UnknownService(f"unknown service {name!r} (no connector registered under '{GROUP}')")
        try:
            cls = point.load()
        except Exception as exc:  # a broken plugin is an error on its networks, not a crash
            if exhausted(exc):  # no descriptor to read the module with: the collector's trouble, not the plugin's
                raise OutOfDescriptors(f"collector out of file descriptors loading connector {name!r}") from None
            raise UnknownService(f"connector {name!r} failed to load: {type(exc).__name__}: {exc}") from None
        if not (isinstance(cls, type) and issubclass(cls, Connector)):
            raise UnknownService(f"connector {name!r} ({point.value}) is not a Connector subclass")
        check_complete(name, cls)
        self._loaded[name] = cls
        return cls


def check_complete(name: str, cls: type[Connector]) -> None:
    """A connector that leaves a hook abstract (`normal`, `map`, …) is refused when it is registered or loaded,
    not on its first run in that mode."""
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise UnknownService(f"connector {name!r} is incomplete: it does not implement {missing}")
