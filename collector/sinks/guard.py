"""One sink's part of a round (its walk, its deliveries, its counters), kept from stopping the others: an error in
it that is not the database being away (a value a shell wrote where the service expects another, a plugin's bug)
is logged once — escaped, clipped, secrets masked — and the round goes on with the other sinks. The database being
away is raised as ever: the service rides that out as a whole."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from ..engine.store import unavailable
from ..sdk.redaction import clip
from ..textout import printable

log = logging.getLogger("collector.sinks")
T = TypeVar("T")
MESSAGE_MAX = 300  # characters of an error in the log line


class Guard:
    def __init__(self) -> None:
        self.failing: dict[str, str] = {}  # scope -> the error last logged for it

    def run(self, scope: str, work: Callable[[], T]) -> T | None:
        """`work()`, or None after an error that is not the database being away (logged once per scope and
        error; a line again when the scope works again)."""
        try:
            result = work()
        except Exception as exc:
            if unavailable(exc):
                raise
            self._failed(scope, exc)
            return None
        if self.failing.pop(scope, None) is not None:
            log.info("sinks: %s works again", scope)
        return result

    def _failed(self, scope: str, exc: Exception) -> None:
        error = printable(clip(f"{type(exc).__name__}: {exc}", MESSAGE_MAX))
        if self.failing.get(scope) == error:
            return
        self.failing[scope] = error
        log.error("sinks: %s failed (%s); the other sinks go on, and it is tried again next round", scope, error)
