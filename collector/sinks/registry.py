"""Finds kinds of sink by name through the `likeastore.sinks` entry-point group, as engine/registry.py finds
connectors: the built-in ones (opensearch, typesense, webhook) are declared in this project's pyproject.toml
exactly as a third-party package declares its own, and each is loaded on first use. A plugin that fails to load
is an error on the sinks of that kind only."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points

from ..settings.sinkfields import BY_FIELD
from .sdk import Option, Sink

GROUP = "likeastore.sinks"
OPTION_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,39}")


class UnknownKind(LookupError):
    """No kind of sink is registered under that name."""


class KindBroken(RuntimeError):
    """The kind is registered but its class cannot be used: it failed to load, or is not a complete Sink."""


class SinkRegistry:
    def __init__(self, entries: Mapping[str, type[Sink]] | None = None, discover: bool = True):
        self._points: dict[str, EntryPoint] = {}
        if discover:
            self._points = {ep.name: ep for ep in entry_points(group=GROUP)}
        for kind, cls in (entries or {}).items():
            check_sink(kind, cls)
        self._loaded: dict[str, type[Sink]] = dict(entries or {})

    def register(self, kind: str, cls: type[Sink]) -> None:
        check_sink(kind, cls)
        self._loaded[kind] = cls

    def kinds(self) -> list[str]:
        return sorted(set(self._points) | set(self._loaded))

    def get(self, kind: str) -> type[Sink]:
        """The Sink class of `kind`; UnknownKind when none is registered, KindBroken when it cannot be used."""
        if kind in self._loaded:
            return self._loaded[kind]
        point = self._points.get(kind)
        if point is None:
            known = ", ".join(self.kinds()) or "none"
            raise UnknownKind(f"no kind of sink {kind!r} is registered under '{GROUP}' (known: {known})")
        try:
            cls = point.load()
        except Exception as exc:  # a broken plugin is an error on its sinks, not a crash
            raise KindBroken(f"the sink kind {kind!r} failed to load: {type(exc).__name__}: {exc}") from None
        if not (isinstance(cls, type) and issubclass(cls, Sink)):
            raise KindBroken(f"the sink kind {kind!r} ({point.value}) is not a Sink subclass")
        check_sink(kind, cls)
        self._loaded[kind] = cls
        return cls

    def options(self, kind: str) -> tuple[Option, ...]:
        return tuple(self.get(kind).options)


def check_sink(kind: str, cls: type[Sink]) -> None:
    """A Sink that leaves `deliver` abstract, or declares an option that is not an Option named in capitals
    (and not one of the fields every sink has) or with a check that cannot be called, is refused when registered
    or loaded, not at its first delivery."""
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise KindBroken(f"the sink kind {kind!r} is incomplete: it does not implement {missing}")
    for option in cls.options:
        if not isinstance(option, Option):
            raise KindBroken(f"the sink kind {kind!r} declares an option that is not an sdk.Option")
        if not OPTION_NAME.fullmatch(option.name) or option.name in BY_FIELD:
            problem = "a setting every sink has" if option.name in BY_FIELD else "not a NAME in capitals"
            raise KindBroken(f"the sink kind {kind!r} declares the option {option.name[:60]!r}: {problem}")
        if option.check is not None and not callable(option.check):
            raise KindBroken(f"the sink kind {kind!r} declares the option {option.name!r} with a check not callable")
