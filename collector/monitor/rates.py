"""Rates per second from the collectors' cumulative counters, and the last minutes of them for the charts.

Every collector writes its counters since its start (`sinceStart`, `process.cpuSeconds`) with the time it wrote
them (`statsAt`, its own clock) about every second. A rate is the difference between its latest write and the one
WINDOW seconds before, over the difference of their `statsAt`: cumulative counters make a missed read cost nothing
(the next difference covers it), one collector's clock is only ever compared with itself, and a fleet whose work
comes in bursts (every network scheduled at once) shows a steady figure rather than 40, 0, 0, 0, 0. A restart
(another `startedAt`) or a counter that went down starts the collector afresh. A collector that has not written
for `STALE_AFTER` seconds of the monitor's clock counts for nothing in the totals (it is dead, or its loop is
stuck).

Pure: the documents and the time come in, figures go out.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..ops import status
from ..sdk.redaction import clip

SERIES = ("runs", "newItems", "requests", "notModified", "errors", "rateLimited")
NOT_ERRORS = ("ok", "rateLimit")
HISTORY_SECONDS = 15 * 60.0  # what the charts hold
MAX_POINTS = 3600  # and never more points than this, however often the monitor refreshes
STALE_AFTER = 5.0  # seconds without a new write before a collector's rates stop counting
MAX_KINDS = 20  # error kinds followed per collector (a kind is any text a document holds)
WINDOW = 5.0  # seconds of a collector's own clock a rate is taken over: steady figures from bursty work
MAX_SAMPLES = 64  # writes kept per collector within the window, however often it writes
MAX_LINES = 12  # collectors with a line of their own in the history, the live ones first (all count in the totals)


def number(value: Any) -> float:
    """A finite, non-negative number from a document field, else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) and 0 <= value <= 1e15 else 0.0


def counters(doc: dict[str, Any]) -> dict[str, float]:
    """The cumulative counters one collector document holds, by series (errors also by kind, as `error:<kind>`)."""
    since = doc.get("sinceStart")
    since = since if isinstance(since, dict) else {}
    runs = since.get("runs")
    runs = runs if isinstance(runs, dict) else {}
    by_status = {clip(k, 40): number(v) for k, v in list(runs.items())[:MAX_KINDS]}
    out = {
        "runs": sum(by_status.values()),
        "newItems": number(since.get("newItems")),
        "requests": number(since.get("requests")),
        "notModified": number(since.get("notModified")),
        "rateLimited": by_status.get("rateLimit", 0.0),
        "errors": sum(n for status, n in by_status.items() if status not in NOT_ERRORS),
    }
    out.update({f"error:{k}": n for k, n in by_status.items() if k not in NOT_ERRORS})
    process = doc.get("process")
    out["cpuSeconds"] = number(process.get("cpuSeconds")) if isinstance(process, dict) else 0.0
    return out


@dataclass
class Seen:
    """What the monitor read of one collector: its writes of the last WINDOW seconds (the latest last)."""

    started: Any
    samples: deque[tuple[datetime, dict[str, float]]]
    rates: dict[str, float] = field(default_factory=dict)
    written: float = 0.0  # the monitor's clock (seconds) when the collector last wrote them

    @property
    def at(self) -> datetime:
        return self.samples[-1][0]

    @classmethod
    def first(cls, started: Any, at: datetime, counters: dict[str, float], now: float) -> Seen:
        return cls(started, deque([(at, counters)], maxlen=MAX_SAMPLES), written=now)


@dataclass
class Rates:
    """Per collector, the rates between its last two writes; and the history of the points the charts draw."""

    seen: dict[str, Seen] = field(default_factory=dict)
    points: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))

    def update(self, docs: list[dict[str, Any]], now: float) -> dict[str, Any]:
        """Take one read of the `collectors` documents at `now` (the monitor's Unix time); return the new point:
        {"t", "total": {series: per second}, "by": {instance: {series: per second}}, "kinds": {kind: per second},
        "cpu": {instance: percent}}."""
        present = set()
        for doc in docs:
            key, at = doc.get("_id"), doc.get("statsAt")
            if not isinstance(at, datetime):
                continue
            name = status.text(key)  # the collector's id as the page shows it (view.py): printable, cut
            present.add(name)
            self._follow(name, doc, at, now)
        for gone in set(self.seen) - present:
            del self.seen[gone]
        point = self._point(now)
        self.points.append(slim(point))
        while self.points and self.points[0]["t"] < now - HISTORY_SECONDS:
            self.points.popleft()
        return point

    def _follow(self, name: str, doc: dict[str, Any], at: datetime, now: float) -> None:
        """The collector's new write: its rates over the last WINDOW seconds of its own clock (or since the
        oldest write kept, when it has not written for that long)."""
        current = counters(doc)
        started = doc.get("startedAt")
        seen = self.seen.get(name)
        if seen is None or seen.started != started or at < seen.at:
            self.seen[name] = Seen.first(started, at, current, now)
            return
        if at == seen.at:
            return  # not written again since the last read: the last rates stand (until STALE_AFTER)
        if any(current.get(k, 0.0) < v for k, v in seen.samples[-1][1].items()):
            self.seen[name] = Seen.first(started, at, current, now)  # counters went back: start afresh
            return
        seen.samples.append((at, current))
        while len(seen.samples) > 2 and (at - seen.samples[1][0]).total_seconds() >= WINDOW:
            seen.samples.popleft()  # the oldest write kept is the last one at least WINDOW seconds back
        since, then = seen.samples[0]
        elapsed = (at - since).total_seconds()
        seen.rates = {k: (current[k] - then.get(k, 0.0)) / elapsed for k in current}
        seen.written = now

    def _point(self, now: float) -> dict[str, Any]:
        by: dict[str, dict[str, float]] = {}
        cpu: dict[str, float] = {}
        kinds: dict[str, float] = {}
        live_first = sorted(self.seen.items(), key=lambda item: (now - item[1].written > STALE_AFTER, item[0]))
        for name, seen in live_first:
            fresh = now - seen.written <= STALE_AFTER
            rates = seen.rates if fresh else {}
            by[name] = {s: round(rates.get(s, 0.0), 3) for s in SERIES}
            if fresh and "cpuSeconds" in rates:
                cpu[name] = round(100 * rates["cpuSeconds"], 1)
            for k, v in rates.items():
                if k.startswith("error:") and v > 0:
                    kinds[k[6:]] = kinds.get(k[6:], 0.0) + v
        total = {s: round(sum(r[s] for r in by.values()), 3) for s in SERIES}
        return {
            "t": round(now, 3),
            "total": total,
            "by": by,
            "kinds": dict(sorted(kinds.items())[:MAX_KINDS]),
            "cpu": cpu,
        }

    def history(self) -> list[dict[str, Any]]:
        return list(self.points)


def slim(point: dict[str, Any]) -> dict[str, Any]:
    """A point as the charts keep it: the totals, and the lines of at most MAX_LINES collectors (the live ones
    first, then by name), so the history stays small however many collector documents the database holds."""
    lines = dict(list(point["by"].items())[:MAX_LINES])
    return {"t": point["t"], "total": point["total"], "by": lines}
