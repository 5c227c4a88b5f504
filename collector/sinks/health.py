"""What the operator is told about a sink that keeps failing, and about the service lease changing hands.

A sink's *failing streak* starts with the first batch that failed whole or in every document (refused, a redirect,
a 4xx, a TLS failure, a prepare that cannot start) and ends with the next batch that delivered anything. While it
lasts the sink's document holds `failing: {since, at, reason}` (the first failure of the streak, the last, and its
reason, masked with the sink's scrubber and clipped), which `collector sinks status`, `collector status --check`
and the monitor read; one WARNING line says it started (at most one per sink every FAILING_LOG_EVERY), one INFO
line that it recovered. No database here but `flush`, called on the service's thread; time is passed in (`now`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..engine.store import LEASE_SKEW, lease_state
from ..sdk.redaction import clip
from ..textout import printable
from .delivery import Fate, Verdict

log = logging.getLogger("collector.sinks")

FAILING_LOG_EVERY = 300.0  # seconds at least between two "failing" lines of one sink
FAILING_WRITE_EVERY = 30.0  # seconds at least between two writes of a failing sink's last reason
REASON_KEPT = 300  # characters of a reason written and logged
FAILED = (Fate.RETRY, Fate.REJECT, Fate.AUTH)


@dataclass
class Streak:
    since: datetime  # the first failed batch of the streak (as this process saw it)
    at: datetime  # the last
    reason: str
    batches: int = 1
    said: bool = False  # its WARNING was logged
    changed: bool = True  # its reason not yet written
    written: datetime | None = None  # when its document was last written


def judged(verdicts: Sequence[Verdict]) -> tuple[str, str]:
    """A finished batch as a streak sees it: ("done", "") when anything was delivered, ("failed", reason) when
    every document failed (the whole-batch failure's reason first), ("", "") otherwise (gone, cut, nothing)."""
    if any(v.outcome == Fate.DONE for v in verdicts):
        return "done", ""
    failed = [v for v in verdicts if v.outcome in FAILED]
    if not failed or len(failed) < len(verdicts):
        return "", ""
    first = next((v for v in failed if v.whole), failed[0])
    return "failed", first.reason or first.kind or "refused"


class Health:
    def __init__(self) -> None:
        self.streaks: dict[str, Streak] = {}
        self.said_at: dict[str, datetime] = {}  # the last WARNING of each sink
        self.clear: set[str] = set()  # sinks whose `failing` this process unset (or never saw set)
        self.to_clear: set[str] = set()  # recovered sinks whose `failing` is still to unset

    def note(self, sink: str, verdicts: Sequence[Verdict], now: datetime) -> None:
        """A finished batch of `sink` (the verdicts, already masked by its lane's scrubber)."""
        kind, reason = judged(verdicts)
        if kind == "done":
            self.recovered(sink, now)
        elif kind == "failed":
            self.failed(sink, reason, now)

    def failed(self, sink: str, reason: str, now: datetime) -> None:
        reason = clip(reason, REASON_KEPT)
        streak = self.streaks.get(sink)
        if streak is None:
            streak = self.streaks[sink] = Streak(since=now, at=now, reason=reason)
            self.clear.discard(sink)
            self.to_clear.discard(sink)
        else:
            streak.batches += 1
            streak.changed = streak.changed or streak.reason != reason
            streak.at, streak.reason = now, reason
        said = self.said_at.get(sink)
        if not streak.said and (said is None or (now - said).total_seconds() >= FAILING_LOG_EVERY):
            streak.said, self.said_at[sink] = True, now
            log.warning(
                "sink %s is failing: nothing delivered since %s: %s (said once; `collector sinks status` shows it)",
                sink,
                f"{streak.since:%Y-%m-%d %H:%M:%S} UTC",
                printable(reason),
            )

    def recovered(self, sink: str, now: datetime) -> None:
        streak = self.streaks.pop(sink, None)
        if streak is not None and streak.said:
            seconds = (now - streak.since).total_seconds()
            log.info(
                "sink %s recovered: delivering again after %d failed batches in %.0fs", sink, streak.batches, seconds
            )
        if sink not in self.clear:
            self.to_clear.add(sink)

    def flush(self, sinks: Any, now: datetime) -> None:
        """Write what changed into the sinks' documents (`sinks`: the collection), on the service's thread: a
        failing sink's `failing` (its `since` kept when the document holds one: a streak a service before this
        one saw start), at most every FAILING_WRITE_EVERY unless its reason changed; a recovered one's unset."""
        for sink in sorted(self.to_clear):
            sinks.update_one({"_id": sink}, {"$unset": {"failing": ""}})
            self.to_clear.discard(sink)
            self.clear.add(sink)
        for sink, streak in self.streaks.items():
            if not due(streak, now):
                continue
            fields = {"failing.at": streak.at, "failing.reason": streak.reason}
            kept = sinks.update_one({"_id": sink, "failing.since": {"$type": "date"}}, {"$set": fields})
            if not kept.matched_count:  # none yet, or a value a shell wrote: written whole
                failing = {"since": streak.since, "at": streak.at, "reason": streak.reason}
                sinks.update_one({"_id": sink}, {"$set": {"failing": failing}})
            streak.changed, streak.written = False, now


def due(streak: Streak, now: datetime) -> bool:
    """Whether a streak's document is written now: never written, its reason changed, or failures since the
    last write once FAILING_WRITE_EVERY passed."""
    if streak.written is None or streak.changed:
        return True
    return streak.at > streak.written and (now - streak.written).total_seconds() >= FAILING_WRITE_EVERY


def lease_line(before: Mapping[str, Any] | None, held: bool, owner: str, now: datetime, seconds: float) -> str:
    """The line a service logs when it starts holding the service lease (`taken_over`) or stops (stand by)."""
    return (
        taken_over(before, owner, now, seconds) if held else "sinks: stand by: another service holds the service lease"
    )


def taken_over(before: Mapping[str, Any] | None, owner: str, now: datetime, seconds: float) -> str:
    """The line a service logs when it takes the service lease: from whom, and why it was free (lapsed; ending
    further ahead than a lease of `seconds` reaches, so no holder that renews wrote it; no date)."""
    if not before or before.get("owner") in (None, owner):
        return "sinks: took the service lease"
    until = before.get("leaseUntil")
    state = lease_state(until, now, seconds)
    why = {
        "far": f"its end {until} lay further ahead than a lease reaches ({seconds:g}s + {LEASE_SKEW:g}s): a holder "
        "that no longer renews it",
        "junk": "its end was no date",
        "none": "it had no end",
    }.get(state, f"it lapsed at {until}")
    who = f"{clip(before.get('owner'), 80)} (host {clip(before.get('host'), 80)}, pid {clip(before.get('pid'), 20)})"
    return printable(f"sinks: took over the service lease from {who}: {why}")
