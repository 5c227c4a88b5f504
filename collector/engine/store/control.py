"""Pauses: an operator's "stop claiming" for a scope — a mode, a service, or a service within a mode — kept in
MongoDB's `control` collection (one document per scope: who, when, why, until when), so one command steers
every collector at once. Each collector reads them at most every HEARTBEAT_SECONDS and honours them at its next
claim: a paused scope is not claimed; runs in flight finish and are saved (a drain), nothing is lost. A pause
past its `until` has expired: it no longer holds, and `status` says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...sdk.redaction import clip

ANY = "*"  # a pause's mode or service when it covers them all


@dataclass(frozen=True)
class Pause:
    mode: str  # initial, normal or *
    service: str  # a service name or *
    reason: str
    by: str
    at: datetime | None
    until: datetime | None

    @property
    def scope(self) -> str:
        return scope_id(self.mode, self.service)

    def expired(self, now: datetime) -> bool:
        return self.until is not None and self.until <= now

    def covers(self, mode: str) -> bool:
        return self.mode in (ANY, mode)


def scope_id(mode: str | None, service: str | None) -> str:
    return f"pause:{mode or ANY}:{service or ANY}"


def read(doc: Mapping[str, Any]) -> Pause | None:
    """A `control` document as a Pause, whatever another program wrote into it (None when it is none)."""
    if not str(doc.get("_id", "")).startswith("pause:"):
        return None

    def text(name: str, default: str) -> str:
        value = doc.get(name)
        return clip(value, 200) if isinstance(value, str) and value else default

    def when(name: str) -> datetime | None:
        value = doc.get(name)
        return value if isinstance(value, datetime) else None

    return Pause(
        text("mode", ANY), text("service", ANY), text("reason", ""), text("by", "?"), when("at"), when("until")
    )


def holding(pauses: Iterable[Pause], mode: str, now: datetime) -> tuple[bool, set[str]]:
    """What the pauses in force at `now` hold back for a collector of `mode`: the whole mode, and which services."""
    whole, services = False, set()
    for pause in pauses:
        if pause.expired(now) or not pause.covers(mode):
            continue
        if pause.service == ANY:
            whole = True
        else:
            services.add(pause.service)
    return whole, services
